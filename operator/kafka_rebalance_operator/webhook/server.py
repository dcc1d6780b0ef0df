"""The sidecar-injection webhook, served by kopf's own admission support.

`start(config, ...)` runs the webhook in a kopf operator of its own, on a thread of its own,
beside the reconciling one; every replica starts it before it campaigns for leadership. So
every replica behind the webhook's Service answers admissions (a standby too: the webhook
only reads policies and grants read access, it plans nothing), and the Service selects them
all. Its registry (`registry(config)`) holds:

- a policy index (`injection_policies`: the spec of every policy, per namespace and name);
- the mutating handler `inject` on pods (CREATE) annotated `kafka-rebalance.io/policy`,
  building each sidecar from the chart's defaults and the pod's own annotations
  (sidecar_annotations.py) and counting each pod once (outcomes.py);
- a startup handler that points `settings.admission.server` at a `kopf.WebhookServer` wrapped
  in `ChartConfiguredServer`.

The MutatingWebhookConfiguration is the chart's (it scopes the webhook to the watched
namespaces and sets the failure policy); kopf's own managed configuration is not used, because
it cannot scope by namespace. The server keeps the chart's configuration's `caBundle` (and, for
development, its URL) in step with the certificate it serves: the self-signed one every
replica shares through a Secret (shared_cert.py; without `cert_secret`, one generated at start
by certs.py), or cert-manager's files from `--webhook-cert-dir`.

A sidecar that watches its ConfigMap needs read access to it: `document_access.py` keeps, per
policy, a Role whose `resourceNames` are the documents of that policy's injected pods that
exist (added at admission and when a pod is seen, removed when it is deleted: the Role is as
large as the policy's pods) and a RoleBinding for their ServiceAccounts; one replica changes a
policy's Role one change at a time, a burst of changes in one write (`role_changes.py`).

Invariants: the webhook never writes during a dry run (sideEffects NoneOnDryRun); a refusal
names the policy and the field; a policy missing from the index (a replica that has just
started) is read from the API before a pod is refused; every API call has a request timeout
and the admission a deadline a second under the configuration's timeoutSeconds; with
failurePolicy Ignore an internal error admits the pod unchanged (no sidecar), with a Warning
event on the policy, an admission warning and a metric; a bad per-pod annotation never refuses
a pod: its default is used, with an admission warning and a `SidecarAnnotationInvalid` Warning
event on the pod's owner (or the pod), at most one per owner, annotation and value every ten
minutes.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import kopf

from kafka_rebalance_operator import metrics, names
from kafka_rebalance_operator.webhook import document_access, role_changes, sidecar_annotations
from kafka_rebalance_operator.webhook import events as webhook_events
from kafka_rebalance_operator.webhook import outcomes as webhook_outcomes
from kafka_rebalance_operator.webhook.injection import (
    ANNOTATION_POLICY,
    SIDECAR_CONTAINER,
    Injected,
    InjectionError,
    SidecarDefaults,
    already_injected,
    inject,
)

log = logging.getLogger(__name__)

HANDLER_ID = "inject"
BAD_ANNOTATION = "SidecarAnnotationInvalid"  # the Warning event's reason


class Refused(kopf.AdmissionError):
    """A pod that cannot get a working sidecar (400); `reason` is one of
    webhook_outcomes.REFUSALS."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message, code=400)
        self.reason = reason


@dataclass(frozen=True)
class Admitted:
    """What an admission gives the pod and the annotations it ignored."""

    injected: Injected
    problems: list[sidecar_annotations.Problem]
    unchanged: bool  # the pod had its sidecar already


@dataclass(frozen=True)
class WebhookConfig:
    """`--webhook-*` flags of `kafka-rebalance operator`."""

    port: int
    configuration: str  # the chart's MutatingWebhookConfiguration (its caBundle is kept here)
    sidecar: SidecarDefaults
    bind: str = "0.0.0.0"
    service_hosts: tuple[str, ...] = ()  # DNS names for the self-signed certificate
    cert_dir: str | None = None  # tls.crt, tls.key (and ca.crt) from cert-manager
    cert_secret: tuple[str, str] | None = None  # (namespace, name): shared_cert.py
    url_host: str | None = None  # development: the API server calls https://HOST:PORT
    failure_policy: str = "Ignore"  # the configuration's: Ignore admits on internal errors
    timeout_s: float = 10.0  # the configuration's timeoutSeconds
    cert_refresh_s: float = 3600.0  # how often the Secret's certificate is checked (cert_secret)
    cert_check_s: float = 60.0  # how often the served files are compared (kopf reloads them)

    @property
    def deadline_s(self) -> float:
        """How long an admission may spend on the API: a second under the webhook's own
        timeout (at least half of it), so the webhook always answers before the API server
        gives up on it."""
        return max(self.timeout_s / 2, self.timeout_s - 1.0)

    @property
    def request_timeout_s(self) -> float:
        """Each API call's own timeout: a third of the deadline (a read, a write and a
        retry fit in it)."""
        return self.deadline_s / 3


class WebhookThread:
    """The webhook's kopf operator on a daemon thread (see the module docstring)."""

    def __init__(
        self,
        config: WebhookConfig,
        clusterwide: bool,
        namespaces: list[str],
        serving: threading.Event,
    ) -> None:
        self.config, self.clusterwide, self.namespaces = config, clusterwide, namespaces
        self.serving = serving  # set once the server listens and the configuration is pointed
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, name="injection-webhook", daemon=True)

    def _run(self) -> None:
        logging.getLogger("kopf._core.reactor.running").addFilter(_ThreadSignals())
        try:
            asyncio.run(
                kopf.operator(
                    registry=registry(self.config, self.serving),
                    standalone=True,  # it only reads and grants: no peering, no leadership
                    clusterwide=self.clusterwide,
                    namespaces=[] if self.clusterwide else self.namespaces,
                    stop_flag=self.stop_flag,
                )
            )
        except BaseException:
            log.exception("injection webhook: stopped by an error")
        self.serving.clear()
        if not self.stop_flag.is_set():
            # A replica that cannot serve the webhook must not look healthy behind its Service:
            # end the process so the pod restarts.
            log.critical("injection webhook: not serving any more; exiting")
            os.kill(os.getpid(), signal.SIGTERM)

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(10)


def start(
    config: WebhookConfig,
    clusterwide: bool,
    namespaces: list[str],
    serving: threading.Event | None = None,
) -> WebhookThread:
    """Serve the webhook on a thread of its own (stop it with `.stop()`); `serving` is set once
    it listens (the replica's readiness)."""
    thread = WebhookThread(config, clusterwide, namespaces, serving or threading.Event())
    thread.thread.start()
    return thread


def registry(
    config: WebhookConfig, serving: threading.Event | None = None
) -> kopf.OperatorRegistry:
    """The webhook operator's handlers on a fresh registry."""
    handlers = kopf.OperatorRegistry()
    kopf.on.login(registry=handlers)(_login)
    kopf.on.startup(registry=handlers)(_settings)
    register(handlers, config, serving)
    return handlers


def _login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


def _settings(settings: kopf.OperatorSettings, **_: Any) -> None:
    # As the reconciling operator: namespaces are named, CRDs installed first (the chart's
    # least-privilege Role lists neither); only explicit events are posted.
    settings.scanning.disabled = True
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 30


def register(
    handlers: kopf.OperatorRegistry,
    config: WebhookConfig,
    serving: threading.Event | None = None,
) -> None:
    policies = (names.GROUP, names.VERSION, names.PLURAL)
    changes = role_changes.RoleChanges(config.request_timeout_s)
    throttle = webhook_events.Throttle()
    # kopf's callback protocols type `namespace` as `str | None` (cluster-scoped resources);
    # policies and ConfigMaps are namespaced.
    kopf.index(*policies, id="injection_policies", registry=handlers)(injection_policies)  # type: ignore[arg-type]
    kopf.on.mutate(
        "",
        "v1",
        "pods",
        id=HANDLER_ID,
        operations=["CREATE"],
        side_effects=True,  # the Role and RoleBinding; never during a dry run
        ignore_failures=True,  # the chart's configuration decides; kopf's is not used
        annotations={ANNOTATION_POLICY: kopf.PRESENT},
        registry=handlers,
    )(_mutate(config, changes, throttle))
    kopf.on.event(
        "",
        "v1",
        "pods",
        id="injection_members",
        annotations={ANNOTATION_POLICY: kopf.PRESENT},
        registry=handlers,
    )(_track_members(changes))
    kopf.on.startup(registry=handlers)(_serve(config, serving or threading.Event()))
    logging.getLogger("kopf.objects").addFilter(_QuietSuccess())


class _ThreadSignals(logging.Filter):
    """kopf warns that a thread gets no OS signals; this one is stopped by its flag."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "running not in the main thread" not in str(record.msg)


class _QuietSuccess(logging.Filter):
    """kopf logs "... succeeded." at INFO for every admission and every ConfigMap event."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        return not (
            record.levelno == logging.INFO
            and ("'inject'" in message or "'injection_members'" in message)
            and message.endswith("succeeded.")
        )


def injection_policies(
    namespace: str, name: str, uid: str, spec: kopf.Spec, **_: Any
) -> dict[tuple[str, str], dict[str, Any]]:
    """The spec and uid of every policy (the uid owns the Role the webhook makes for it)."""
    return {(namespace, name): {"spec": _plain(dict(spec)), "uid": uid}}


def _mutate(
    config: WebhookConfig, changes: role_changes.RoleChanges, throttle: webhook_events.Throttle
) -> Any:
    async def mutate(
        body: kopf.Body,
        patch: kopf.Patch,
        dryrun: bool,
        warnings: list[str],
        injection_policies: kopf.Index[tuple[str, str], dict[str, Any]],
        **_: Any,
    ) -> None:
        namespace = str(body.metadata.get("namespace") or "")
        policy = str(body.metadata.annotations.get(ANNOTATION_POLICY) or "").strip()
        try:
            found = list(injection_policies.get((namespace, policy), []))
            admitted = await asyncio.wait_for(
                _admit(config, changes, body, dryrun, warnings, found),
                config.deadline_s,
            )
        except Refused as refusal:
            webhook_outcomes.count(namespace, policy, "failed", refusal.reason)
            raise
        except Exception as error:
            reason = _short(error)
            if config.failure_policy != "Ignore":
                log.warning("injection webhook: %s/%s refused: %s", namespace, policy, reason)
                webhook_outcomes.count(
                    namespace, policy, "failed", webhook_outcomes.reason_of(error)
                )
                raise kopf.AdmissionError(
                    f"kafka-rebalance sidecar injection failed: {reason}", code=500
                ) from None
            webhook_outcomes.count(namespace, policy, "skipped", webhook_outcomes.reason_of(error))
            log.warning(
                "injection webhook: pod admitted without the sidecar for policy %s/%s "
                "(failurePolicy Ignore): %s",
                namespace,
                policy,
                reason,
            )
            _event(config, injection_policies, namespace, policy, reason)
            warnings.append(f"admitted without the kafka-rebalance sidecar: {reason}")
            return
        if admitted.unchanged:
            webhook_outcomes.count(namespace, policy, "admitted", "already_injected")
            return
        patch.spec["containers"] = admitted.injected.containers
        patch.spec["volumes"] = admitted.injected.volumes
        if admitted.problems:
            _report(config, throttle, body, admitted.problems, dryrun, warnings)
        reason = "defaults_used" if admitted.problems else "injected"
        webhook_outcomes.count(namespace, policy, "mutated", reason)

    return mutate


def _report(
    config: WebhookConfig,
    throttle: webhook_events.Throttle,
    body: kopf.Body,
    problems: list[sidecar_annotations.Problem],
    dryrun: bool,
    warnings: list[str],
) -> None:
    """Each ignored annotation: counted and an admission warning; not on a dry run, a log line
    and a Warning event on the pod's owner or the pod, both at most once per owner (or pod),
    annotation and value within the throttle's window."""
    pod = _plain(dict(body))
    metadata = pod.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    name = metadata.get("name") or f"{metadata.get('generateName') or ''}<generated>"
    involved = webhook_events.pod_reference(pod)
    about = involved or {"namespace": namespace, "name": name}
    for problem in problems:
        metrics.WEBHOOK_BAD_ANNOTATIONS.labels(problem.annotation).inc()
        warnings.append(f"kafka-rebalance sidecar: {problem.message()}")
        if dryrun or not throttle.due((*about.values(), problem.annotation, problem.value)):
            continue
        text = f"pod {name}: {problem.message()}"
        log.warning("injection webhook: %s/%s", namespace, text)
        if involved is not None:
            webhook_events.post_warning(
                involved, BAD_ANNOTATION, text, timeout_s=config.request_timeout_s
            )


async def _admit(
    config: WebhookConfig,
    changes: role_changes.RoleChanges,
    body: kopf.Body,
    dryrun: bool,
    warnings: list[str],
    found: list[dict[str, Any]],
) -> Admitted:
    """The pod's sidecar, after granting its ServiceAccount its document (not on a dry run).
    Raises Refused for a pod that cannot get one (400), anything else for an internal error;
    every API call times out after `config.request_timeout_s`."""
    namespace = str(body.metadata.get("namespace") or "")
    policy = str(body.metadata.annotations.get(ANNOTATION_POLICY) or "").strip()
    if not found and policy:
        # The index fills in the first moments of a replica's start: ask the API.
        found = await asyncio.to_thread(_read_policy, namespace, policy, config.request_timeout_s)
    if not found:
        raise Refused(
            f"{ANNOTATION_POLICY}: no ConsumerGroupPolicy {policy!r} in namespace "
            f"{namespace!r} (the sidecar is injected from its policy)",
            "policy_not_found",
        )
    pod = _plain(dict(body))
    unchanged = already_injected(pod)
    settings, problems = config.sidecar, list[sidecar_annotations.Problem]()
    if not unchanged:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        settings, problems = sidecar_annotations.read(annotations, config.sidecar)
    try:
        injected = inject(pod, policy, found[0]["spec"], settings)
    except InjectionError as error:
        raise Refused(str(error), "policy_unusable") from None
    if injected.watches and not dryrun:
        account = str(body.spec.get("serviceAccountName") or "default")
        if body.spec.get("automountServiceAccountToken") is False:
            warnings.append(
                "automountServiceAccountToken is false: the kafka-rebalance sidecar reads "
                "its assignment through the API and needs the token"
            )
        # The pod's own document; a pod named only at creation adds it when it is seen.
        documents = [injected.configmap] if injected.configmap else []
        await changes.grant(namespace, policy, found[0]["uid"], account, documents)
    return Admitted(injected, problems, unchanged)


def _short(error: BaseException) -> str:
    """One line naming an internal error (a timeout says so)."""
    if isinstance(error, TimeoutError):
        return "the Kubernetes API did not answer within the webhook's deadline"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def _event(
    config: WebhookConfig,
    injection_policies: kopf.Index[tuple[str, str], dict[str, Any]],
    namespace: str,
    policy: str,
    reason: str,
) -> None:
    """A Warning event on the policy, posted in the background (events.py): the API may
    be what failed, so the admission never waits for it."""
    for entry in injection_policies.get((namespace, policy), []):
        webhook_events.post_warning(
            webhook_events.policy_reference(namespace, policy, entry["uid"]),
            "SidecarNotInjected",
            f"a pod was admitted without the sidecar (failurePolicy Ignore): {reason}",
            timeout_s=config.request_timeout_s,
        )
        return


def _read_policy(namespace: str, name: str, timeout_s: float) -> list[dict[str, Any]]:
    """The policy as the index holds it, read from the API ([] when there is none)."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    from kafka_rebalance_operator.kube import kube_io

    try:
        body = client.CustomObjectsApi(kube_io.api()).get_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL, name, _request_timeout=timeout_s
        )
    except ApiException as error:
        if error.status == 404:
            return []
        raise
    assert isinstance(body, dict)  # a custom object comes back as a dict
    return [{"spec": dict(body.get("spec") or {}), "uid": body["metadata"]["uid"]}]


def _track_members(changes: role_changes.RoleChanges) -> Any:
    async def track(type: str | None, namespace: str, name: str, body: kopf.Body, **_: Any) -> None:
        """Keep the policy's Role to the documents of its pods that exist: an injected pod
        that watches its document adds its name when seen (listing at start, or created), and
        a deleted one takes it out (`role_changes`: a burst of either in a few writes)."""
        policy = str(body.metadata.annotations.get(ANNOTATION_POLICY) or "").strip()
        if not policy or not _watches_document(body):
            return
        if type == "DELETED":
            await changes.deleted(namespace, policy, name)
        elif type in ("ADDED", None):
            await changes.seen(namespace, policy, names.configmap_name(policy, name))

    return track


def _watches_document(body: kopf.Body) -> bool:
    """The pod has an injected sidecar that reads its document through the API."""
    for container in body.spec.get("containers") or []:
        if container.get("name") == SIDECAR_CONTAINER:
            return any(
                str(a).startswith("--assignment-configmap=") for a in container.get("args") or []
            )
    return False


def _serve(config: WebhookConfig, serving: threading.Event) -> Any:
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        import tempfile
        from pathlib import Path

        from kafka_rebalance_operator.webhook import certs
        from kafka_rebalance_operator.webhook import serving_cert as webhook_cert

        refresher = None
        if config.cert_dir:
            server = kopf.WebhookServer(
                addr=config.bind,
                port=config.port,
                host=config.url_host,
                certfile=f"{config.cert_dir}/tls.crt",
                pkeyfile=f"{config.cert_dir}/tls.key",
                cafile=f"{config.cert_dir}/ca.crt",
                file_check_interval=config.cert_check_s,
            )
        else:
            hosts = [*config.service_hosts, *([config.url_host] if config.url_host else [])]
            if config.cert_secret:
                path = Path(tempfile.mkdtemp(prefix="kafka-rebalance-webhook-")) / "tls.pem"
                refresher = webhook_cert.SharedCertFile(
                    config.cert_secret, hosts, path, lambda bundle: _point(config, bundle)
                )
                certfile = pkeyfile = str(path)
                bundle = refresher.bundle
            else:
                files = certs.self_signed(hosts)
                certfile, pkeyfile = str(files.cert), str(files.key)
                bundle = files.cert.read_bytes()
            server = kopf.WebhookServer(
                addr=config.bind,
                port=config.port,
                host=config.url_host,
                certfile=certfile,
                pkeyfile=pkeyfile,
                cadata=bundle,
                file_check_interval=config.cert_check_s,
            )
        settings.admission.server = ChartConfiguredServer(server, config, serving, refresher)
        settings.admission.managed = None

    return configure


def _point(config: WebhookConfig, bundle: str) -> None:
    """The configuration's caBundle set to `bundle` (base64), its URL kept as configured."""
    url = f"https://{config.url_host}:{config.port}/{HANDLER_ID}" if config.url_host else None
    document_access.point_configuration(config.configuration, bundle, url, config.request_timeout_s)


class ChartConfiguredServer:
    """kopf's webhook server, keeping the chart's MutatingWebhookConfiguration in step with the
    certificate it serves (caBundle) and, with `url_host`, pointing it at that URL; with a
    shared certificate (`refresher`), refreshing it from its Secret while serving
    (serving_cert.py). Every (re)start exports the served certificate's expiry."""

    def __init__(
        self,
        inner: kopf.WebhookServer,
        config: WebhookConfig,
        serving: threading.Event,
        refresher: Any = None,  # webhook_cert.SharedCertFile | None
    ) -> None:
        self.inner, self.config, self.serving = inner, config, serving
        self.refresher = refresher

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        from pathlib import Path

        from kafka_rebalance_operator.webhook import serving_cert as webhook_cert

        task = None
        if self.refresher is not None:
            task = asyncio.create_task(self.refresher.run(self.config.cert_refresh_s))
        try:
            async for client_config in self.inner(fn):
                if self.refresher is not None:
                    # kopf rebuilds from the bundle it was given: keep it the refreshed one
                    self.inner.cadata = self.refresher.bundle
                    client_config["caBundle"] = base64.b64encode(self.refresher.bundle).decode()
                await asyncio.to_thread(
                    document_access.point_configuration,
                    self.config.configuration,
                    client_config.get("caBundle"),
                    f"{client_config['url']}/{HANDLER_ID}" if self.config.url_host else None,
                    self.config.request_timeout_s,
                )
                if self.inner.certfile is not None:
                    webhook_cert.record_expiry(Path(self.inner.certfile).read_bytes())
                self.serving.set()
                log.info(
                    "injection webhook: serving on port %d; %s updated",
                    self.config.port,
                    self.config.configuration,
                )
                yield client_config
        finally:
            if task is not None:
                task.cancel()


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
