"""Where the sidecar's assignment document comes from: a mounted file or the ConfigMap itself.

Both sources only read and offer; the tracker (sidecar.document) decides what is acted on, so a
source never needs to judge a document. Each runs a daemon thread and reads once synchronously in
`start()`, so the consumer can join with its document's claim from the first JoinGroup.

- `FileSource`: the ConfigMap mounted as a volume (no API access needed). The kubelet updates
  mounted ConfigMaps by writing a new timestamped directory and atomically swapping the `..data`
  symlink, so the file's own mtime and inode say little: the content is compared instead. The
  kubelet refreshes within its sync period plus its ConfigMap cache TTL (about a minute by
  default), which bounds how fast a mounted sidecar sees a new epoch.
- `ConfigMapSource`: a watch of the one ConfigMap through the API (seconds instead of a minute;
  needs `get`/`list`/`watch` on configmaps in its namespace, ideally limited by resourceNames).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_when_event_set,
    wait_exponential,
    wait_random,
)

from kafka_rebalance_sidecar.document import AssignmentTracker

log = logging.getLogger("kafka_rebalance_sidecar.source")

DATA_KEY = "assignment.json"
MAX_RELIST_BACKOFF_S = 30.0  # the longest wait between failed lists/watches of a ConfigMap


class FileSource:
    """Polls a mounted `assignment.json` and offers it whenever its content changes."""

    def __init__(self, path: str | Path, tracker: AssignmentTracker, interval_s: float = 1.0):
        self.path = Path(path)
        self.tracker = tracker
        self.interval_s = interval_s
        self._last: bytes | None = None
        self._missing_logged = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll_once(self) -> bool:
        """Read the file; offer it if it changed. True when something was offered."""
        try:
            content = self.path.read_bytes()
        except FileNotFoundError:
            if not self._missing_logged:
                log.warning("assignment file %s does not exist (yet); waiting", self.path)
                self._missing_logged = True
            return False
        except OSError as error:
            log.warning("cannot read assignment file %s: %s", self.path, error)
            return False
        self._missing_logged = False
        if content == self._last:
            return False
        self._last = content
        self.tracker.offer(content, str(self.path))
        return True

    def start(self) -> FileSource:
        self.poll_once()
        self._thread = threading.Thread(target=self._run, name="assignment-file", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll_once()
            except Exception:  # never let the source thread die silently
                log.exception("assignment file poll failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _api_client(kubeconfig: str | None) -> Any:
    from kubernetes import client, config

    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    configuration = client.Configuration()
    config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


class ConfigMapSource:
    """Watches one ConfigMap through the API and offers its `assignment.json` on every change.

    List first (the current content and a resourceVersion), then watch from that version; on a
    410 Gone (the version is too old) or an expired watch, list again at once; after any other
    error, after an exponential backoff with jitter (tenacity; 1 s growing to 30 s). A deleted
    ConfigMap, or one without the key, is logged and the last good document stays: the operator
    deletes ConfigMaps only with their policy.
    """

    def __init__(
        self,
        namespace: str,
        name: str,
        tracker: AssignmentTracker,
        kubeconfig: str | None = None,
        *,
        watch_timeout_s: int = 60,
        backoff_s: float = 1.0,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.tracker = tracker
        self.kubeconfig = kubeconfig
        self.watch_timeout_s = watch_timeout_s
        self.backoff_s = backoff_s
        self.source = f"configmap {namespace}/{name}"
        self._api: Any = None
        self._last: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._version: str | None = None  # where the next watch resumes; None: list first
        self.relists = 0

    def _core(self) -> Any:
        from kubernetes import client

        if self._api is None:
            self._api = _api_client(self.kubeconfig)
        return client.CoreV1Api(self._api)

    def _consider(self, configmap: Any, event: str) -> None:
        if event == "DELETED":
            log.warning("%s was deleted; keeping the last good assignment", self.source)
            return
        data = getattr(configmap, "data", None) or {}
        text = data.get(DATA_KEY)
        if text is None:
            log.warning("%s has no %s key; keeping the last good assignment", self.source, DATA_KEY)
            return
        if text == self._last:
            return
        self._last = text
        self.tracker.offer(text, self.source)

    def list_once(self) -> str | None:
        """Read the ConfigMap now; offer its document. Returns the list's resourceVersion."""
        core = self._core()
        result = core.list_namespaced_config_map(
            self.namespace, field_selector=f"metadata.name={self.name}"
        )
        if not result.items:
            log.warning("%s does not exist (yet); waiting", self.source)
        for item in result.items:
            self._consider(item, "ADDED")
        return result.metadata.resource_version

    def start(self) -> ConfigMapSource:
        try:
            version: str | None = self.list_once()
        except Exception as error:
            log.warning(
                "%s: first read failed (%s); retrying in the background", self.source, error
            )
            version = None
        self._thread = threading.Thread(
            target=self._run, args=(version,), name="assignment-configmap", daemon=True
        )
        self._thread.start()
        return self

    def _pause(self, seconds: float) -> None:
        """tenacity's sleep between relists: returns early when the source is stopped."""
        self._stop.wait(seconds)

    def _run(self, version: str | None) -> None:
        # Every sidecar of a cluster loses its watch at the same moment when the API server
        # restarts: the waits grow exponentially (up to MAX_RELIST_BACKOFF_S) with random jitter,
        # so they do not come back in lockstep. A cycle that ends normally resets the wait.
        self._version = version
        retrying = Retrying(
            retry=retry_if_exception_type(_WatchFailed),
            # (wait_exponential_jitter's `initial` is deprecated in tenacity 9.2 and its
            # `multiplier` missing before; this sum means the same in every supported version.)
            wait=wait_exponential(multiplier=self.backoff_s, max=MAX_RELIST_BACKOFF_S)
            + wait_random(0, self.backoff_s),
            stop=stop_when_event_set(self._stop),
            sleep=self._pause,
            reraise=True,
        )
        while not self._stop.is_set():
            try:
                retrying(self._cycle)
            except _WatchFailed:
                return  # stopped while waiting to retry

    def _cycle(self) -> None:
        """List if there is no version to resume from, then watch until the watch ends. Returns
        when it ends normally (timeout, 410 Gone, an ERROR event: resume or list again at once);
        raises _WatchFailed for an error worth a backoff (the next cycle lists again)."""
        from kubernetes import watch
        from kubernetes.client.rest import ApiException

        try:
            if self._version is None:
                self.relists += 1
                self._version = self.list_once()
            stream = watch.Watch()
            for event in stream.stream(
                self._core().list_namespaced_config_map,
                self.namespace,
                field_selector=f"metadata.name={self.name}",
                resource_version=self._version,
                timeout_seconds=self.watch_timeout_s,
                allow_watch_bookmarks=True,
            ):
                if self._stop.is_set():
                    stream.stop()
                    return
                kind = event["type"]
                obj = event["object"]
                if kind == "ERROR":
                    raise _Gone(str(getattr(obj, "message", obj)))
                if kind == "BOOKMARK":  # only a version to resume from, left as a dict
                    self._version = _bookmark_version(obj) or self._version
                    continue
                self._version = obj.metadata.resource_version or self._version
                self._consider(obj, kind)
        except ApiException as error:
            self._version = None
            if error.status == 410:
                log.info("%s: watch version expired; listing again", self.source)
                return
            log.warning("%s: watch failed (%s); listing again", self.source, error.status)
            raise _WatchFailed from None
        except _Gone as error:
            log.info("%s: watch ended (%s); listing again", self.source, error)
            self._version = None
        except Exception as error:
            log.warning("%s: watch failed (%s); listing again", self.source, error)
            self._version = None
            raise _WatchFailed from None

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._api is not None:
            with contextlib.suppress(Exception):
                self._api.close()


def _bookmark_version(obj: Any) -> str | None:
    """The resourceVersion of a BOOKMARK event's object, which the kubernetes client leaves
    undeserialized (a dict: the event carries nothing but metadata)."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
    if isinstance(metadata, dict):
        return metadata.get("resourceVersion")
    return getattr(metadata, "resource_version", None)


class _Gone(Exception):
    """The watch delivered an ERROR event (typically 410 Gone): list again."""


class _WatchFailed(Exception):
    """The list or watch failed with an error worth waiting before the next try."""
