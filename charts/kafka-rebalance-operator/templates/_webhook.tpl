{{- /* The sidecar-injection webhook's pieces of the operator's Deployment (webhook.yaml holds
its own objects). Each renders nothing unless webhook.enabled. */}}

{{- define "kro.webhookService" -}}
{{ include "kro.fullname" . }}-webhook
{{- end -}}

{{- define "kro.webhookCertSecret" -}}
{{ include "kro.fullname" . }}-webhook-self-signed
{{- end -}}

{{- define "kro.webhookArgs" -}}
{{- if .Values.webhook.enabled }}
{{- $svc := include "kro.webhookService" . }}
{{- $sidecar := .Values.webhook.sidecar }}
- --webhook-port
- {{ .Values.webhook.port | quote }}
- --webhook-configuration
- {{ include "kro.fullname" . | quote }}
- --webhook-failure-policy
- {{ .Values.webhook.failurePolicy | quote }}
- --webhook-timeout
- {{ .Values.webhook.timeoutSeconds | quote }}
- --webhook-host
- {{ printf "%s.%s.svc" $svc .Release.Namespace | quote }}
- --webhook-host
- {{ printf "%s.%s.svc.cluster.local" $svc .Release.Namespace | quote }}
{{- if .Values.webhook.certManager.enabled }}
- --webhook-cert-dir
- /etc/kafka-rebalance-webhook
{{- else }}
- --webhook-cert-secret
- {{ printf "%s/%s" .Release.Namespace (include "kro.webhookCertSecret" .) | quote }}
{{- end }}
- --sidecar-image
{{- if $sidecar.image.repository }}
- {{ printf "%s:%s" (include "kro.inRegistry" (dict "root" . "repository" $sidecar.image.repository)) ($sidecar.image.tag | default .Values.image.tag | default .Chart.AppVersion) | quote }}
{{- else }}
- {{ include "kro.image" . | quote }}
{{- end }}
{{- with $sidecar.image.pullPolicy }}
- --sidecar-image-pull-policy
- {{ . | quote }}
{{- end }}
- --sidecar-source
- {{ $sidecar.source | quote }}
- --sidecar-health-port
- {{ $sidecar.healthPort | quote }}
- --sidecar-metrics-port
- {{ $sidecar.metricsPort | quote }}
- --sidecar-deliver-to
- {{ $sidecar.deliverTo | quote }}
- --sidecar-resources
- {{ toJson $sidecar.resources | quote }}
{{- with $sidecar.logLevel }}
- --sidecar-log-level
- {{ . | quote }}
{{- end }}
- --sidecar-arg=--transient-retry-budget={{ $sidecar.transientRetryBudget }}
- --sidecar-arg=--max-batch-bytes={{ $sidecar.maxBatchBytes }}
{{- range $sidecar.extraArgs }}
- --sidecar-arg={{ . }}
{{- end }}
{{- range $name, $value := $sidecar.extraEnv }}
- --sidecar-env={{ $name }}={{ $value }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "kro.webhookPorts" -}}
{{- if .Values.webhook.enabled }}
- name: webhook
  containerPort: {{ .Values.webhook.port }}
  protocol: TCP
{{- end }}
{{- end -}}

{{- define "kro.webhookVolumeMounts" -}}
{{- if and .Values.webhook.enabled .Values.webhook.certManager.enabled }}
- name: webhook-tls
  mountPath: /etc/kafka-rebalance-webhook
  readOnly: true
{{- end }}
{{- end -}}

{{- define "kro.webhookVolumes" -}}
{{- if and .Values.webhook.enabled .Values.webhook.certManager.enabled }}
- name: webhook-tls
  secret:
    secretName: {{ include "kro.webhookService" . }}-tls
{{- end }}
{{- end -}}

{{- /* What the operator needs in each watched namespace to grant injected sidecars read access
to their policy's ConfigMaps (webhook/document_access.py). */}}
{{- define "kro.webhookRules" -}}
{{- if .Values.webhook.enabled }}
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, update]
{{- end }}
{{- end -}}
