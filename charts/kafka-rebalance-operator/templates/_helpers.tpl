{{/* Names and labels shared by every template of the chart. */}}

{{- define "kro.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kro.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kro.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kro.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kro.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kro.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: operator
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The one registry every image of the chart comes from: image.registry, else
global.imageRegistry (the key umbrella charts set for all their subcharts), else none. */}}
{{- define "kro.registry" -}}
{{- $global := .Values.global | default dict -}}
{{- trimSuffix "/" (.Values.image.registry | default $global.imageRegistry | default "") -}}
{{- end -}}

{{/* `repository` under the chart's registry: <registry>/<repository>, or repository alone. */}}
{{- define "kro.inRegistry" -}}
{{- $registry := include "kro.registry" .root -}}
{{- if $registry -}}{{ printf "%s/%s" $registry .repository }}{{- else -}}{{ .repository }}{{- end -}}
{{- end -}}

{{/* The image reference: [registry/]repository (kro.registry), then @digest when set, else :tag (appVersion). */}}
{{- define "kro.image" -}}
{{- $repository := include "kro.inRegistry" (dict "root" . "repository" .Values.image.repository) -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
The pods' affinity: .Values.affinity when given; otherwise, with more than one replica, an
anti-affinity on the node (podAntiAffinityPreset soft or hard) so that one node's loss does
not take every replica. Rendered as YAML (empty for none).
*/}}
{{- define "kro.affinity" -}}
{{- if .Values.affinity -}}
{{- toYaml .Values.affinity -}}
{{- else if and (gt (int .Values.replicaCount) 1) (ne .Values.podAntiAffinityPreset "none") -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (include "kro.selectorLabels" . | fromYaml)) -}}
podAntiAffinity:
{{- if eq .Values.podAntiAffinityPreset "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    {{- toYaml (list $term) | nindent 4 }}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        {{- toYaml $term | nindent 8 }}
{{- end }}
{{- end -}}
{{- end -}}

{{- define "kro.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kro.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespaces the operator watches: watchNamespaces, or the release namespace. */}}
{{- define "kro.watchNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- join "," (uniq .Values.watchNamespaces) -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
The permissions the operator needs in a namespace it watches, and nothing more:
- its own resource: read and watch; patch for kopf's annotations and finalizer; patch status;
- the per-pod assignment ConfigMaps it owns: full lifecycle;
- the consumer pods: read only (membership, weights from CPU requests);
- Secrets named by spec.kafka.secretRef: get (narrowed with rbac.secretNames);
- Events about its policies: create and patch (kopf aggregates repeated events by patching).
*/}}
{{- define "kro.namespacedRules" -}}
- apiGroups: [kafka-rebalance.io]
  resources: [consumergrouppolicies]
  verbs: [get, list, watch, patch]
- apiGroups: [kafka-rebalance.io]
  resources: [consumergrouppolicies/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  {{- with .Values.rbac.secretNames }}
  resourceNames: {{ toJson (uniq .) }}
  {{- end }}
  verbs: [get]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- include "kro.webhookRules" . }}
{{- if and .Values.peering.enabled (not .Values.watchAllNamespaces) }}
- apiGroups: [kopf.dev]
  resources: [kopfpeerings]
  verbs: [get, list, watch, patch]
{{- end }}
{{- end -}}
