"""Probes and metrics of one sidecar: /healthz, /readyz and /metrics.

- /healthz: the consume loop is alive (it beat within `max_age_s`). A loop stuck in a broker call
  or a hung handler stops beating, and the kubelet restarts the container.
- both say `"degraded"`: null, or why delivery is held (the application answers "not now",
  fails transiently within its budget, or fails every record alike; delivery.py).
  Back-pressure changes neither answer's status: the loop is alive, and an unready pod would
  lose its partitions (assign mode plans only Ready pods), the opposite of waiting for the app;
  `kafka_rebalance_sidecar_holding` is the metric to alert on.
- /readyz: the sidecar owns what its document plans for it (every planned partition is in its
  current assignment). Before the first document it is ready once the consumer runs: in assign
  mode the operator takes membership from Ready pods, so a pod that waited for a document to get
  ready would never be given one.
- /metrics: `kafka_rebalance_sidecar_*` in its own registry (several sidecars can live in one
  test process without clashing), labelled `group` and `member`.

Ports are separate so /metrics can stay cluster-visible while probes stay on localhost; port 0
disables an endpoint. Served from daemon threads so a stuck loop still gets an honest answer.
The standard library's ThreadingHTTPServer rather than a web framework: three GET routes, no
dependency in the sidecar's base install, and prometheus_client's own server cannot add probes.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from kafka_rebalance_sidecar.delivery import FAILURE_CLASSES

PREFIX = "kafka_rebalance_sidecar"

Route = Callable[[], tuple[int, str, bytes]]
Check = Callable[[], tuple[bool, dict[str, object]]]


class SidecarMetrics:
    """The sidecar's counters and gauges; also the delivery stats sink (sidecar.delivery)."""

    def __init__(self, group: str, member: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        labels = ("group", "member")
        values = (group, member)

        def counter(name: str, text: str) -> Counter:
            return Counter(f"{PREFIX}_{name}", text, labels, registry=self.registry).labels(*values)

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(f"{PREFIX}_{name}", text, labels, registry=self.registry).labels(*values)

        self.records_delivered = counter("records_delivered", "Records the application accepted")
        self.delivery_failures = counter(
            "delivery_failures", "Delivery attempts that failed (refused or app unreachable)"
        )
        by_class = Counter(
            f"{PREFIX}_delivery_failures_by_class",
            "Delivery attempts that failed, by class: unavailable (503, 429, 408, 401, 3xx, "
            "refused connection), transient (500, 502, 504, timeout, reset), refused (other 4xx, "
            "handler exceptions)",
            (*labels, "class"),
            registry=self.registry,
        )
        self.failures_by_class = {k: by_class.labels(*values, k) for k in FAILURE_CLASSES}
        self.bisections = counter(
            "bisections",
            "Batches bisected to find a poison record (refused, or transient beyond the budget)",
        )
        self.failing_alike = counter(
            "failing_alike",
            "Batches held because the application failed every record alike beyond the "
            "transient budget (back-pressure, never poison)",
        )
        self.records_dead_lettered = counter(
            "records_dead_lettered", "Poison records sent to the dead-letter topic"
        )
        self.records_skipped = counter(
            "records_skipped", "Poison records skipped (--on-poison skip)"
        )
        self.rebalances = counter("rebalances", "Assignments received (group) or applied (assign)")
        self.rejoins = counter(
            "rejoins", "Rejoins the sidecar requested (new epoch, stale assignment)"
        )
        self.acknowledgements = counter(
            "acknowledgements", "Revoked partitions acknowledged with a commit (assign mode)"
        )
        self.rejected_documents = counter(
            "rejected_documents", "Assignment documents refused (malformed, lower epoch, foreign)"
        )
        self.backpressure = counter(
            "backpressure",
            "Delivery answers meaning 'not now' (503, 429, 408, unreachable, misconfigured)",
        )
        self.holding = gauge(
            "holding", "1 while a batch is held because the application is not taking records"
        )
        self.kafka_errors = counter(
            "kafka_errors",
            "Retriable Kafka errors a turn of the loop survived (broker down, coordinator moving)",
        )
        self.commits = counter("commits", "Successful offset commits")
        self.commit_failures = counter("commit_failures", "Failed offset commits")
        self.document_epoch = gauge("document_epoch", "Epoch of the assignment document acted on")
        self.composed_epoch = gauge(
            "composed_epoch", "Epoch the current group assignment was composed from (group mode)"
        )
        self.generation = gauge(
            "generation", "Group generation of the current assignment (group mode)"
        )
        self.owned_partitions = gauge("owned_partitions", "Partitions currently assigned")
        self.planned_partitions = gauge("planned_partitions", "Partitions the document plans")
        self.commit_latency = Histogram(
            f"{PREFIX}_commit_latency_seconds",
            "Time of a synchronous offset commit",
            labels,
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        ).labels(*values)
        self.document_epoch.set(-1)
        self.composed_epoch.set(-1)
        self.generation.set(-1)
        self._rejected_seen = 0

    # DeliveryStats
    def delivered(self, count: int) -> None:
        self.records_delivered.inc(count)

    def failed(self, kind: str) -> None:
        self.delivery_failures.inc()
        self.failures_by_class[kind].inc()

    def bisected(self) -> None:
        self.bisections.inc()

    def dead_lettered(self, count: int) -> None:
        self.records_dead_lettered.inc(count)

    def skipped(self, count: int) -> None:
        self.records_skipped.inc(count)

    def sync_rejected(self, total: int) -> None:
        """Bring the counter up to the tracker's running count of refusals."""
        if total > self._rejected_seen:
            self.rejected_documents.inc(total - self._rejected_seen)
            self._rejected_seen = total

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class Health:
    """Liveness (loop beats) and readiness (planned partitions owned), updated by the runner."""

    def __init__(self, max_age_s: float = 120.0) -> None:
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._beat = time.monotonic()
        self._running = False
        self._planned: frozenset[tuple[str, int]] | None = None
        self._owned: frozenset[tuple[str, int]] = frozenset()
        self._epoch: int | None = None
        self._stopping = False
        self._degraded: str | None = None

    def beat(self) -> None:
        with self._lock:
            self._beat = time.monotonic()

    def update(
        self,
        *,
        running: bool,
        planned: Iterable[tuple[str, int]] | None,
        owned: Iterable[tuple[str, int]],
        epoch: int | None,
    ) -> None:
        with self._lock:
            self._beat = time.monotonic()
            self._running = running
            self._planned = None if planned is None else frozenset(planned)
            self._owned = frozenset(owned)
            self._epoch = epoch

    def degraded(self, reason: str | None) -> None:
        """Why delivery is held (None: it is not); shown by both probes, status unchanged."""
        with self._lock:
            self._degraded = reason

    def stopping(self) -> None:
        with self._lock:
            self._stopping = True

    def resumed(self) -> None:
        """Running again after a stop that was not the end (new clients for rotated credentials)."""
        with self._lock:
            self._stopping = False

    def live(self) -> tuple[bool, dict[str, object]]:
        with self._lock:
            age = time.monotonic() - self._beat
            degraded = self._degraded
        return age <= self.max_age_s, {
            "loopAgeSeconds": round(age, 1),
            "maxAge": self.max_age_s,
            "degraded": degraded,
        }

    def ready(self) -> tuple[bool, dict[str, object]]:
        with self._lock:
            planned, owned = self._planned, self._owned
            missing = sorted(planned - owned) if planned is not None else []
            ok = self._running and not self._stopping and not missing
            detail: dict[str, object] = {
                "running": self._running,
                "stopping": self._stopping,
                "epoch": self._epoch,
                "owned": len(owned),
                "planned": None if planned is None else len(planned),
                "missing": [f"{t}-{p}" for t, p in missing[:20]],
                "degraded": self._degraded,
            }
        return ok, detail


def _handler(routes: dict[str, Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            route = routes.get(self.path.split("?")[0])
            if route is None:
                self.send_error(404)
                return
            status, content_type, body = route()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet probes
            return

    return Handler


def _probe(check: Check) -> Route:
    def route() -> tuple[int, str, bytes]:
        ok, detail = check()
        body = json.dumps({"ok": ok, **detail}).encode()
        return (200 if ok else 503), "application/json", body

    return route


class Servers:
    """The HTTP endpoints; `close()` stops them."""

    def __init__(self) -> None:
        self.servers: list[ThreadingHTTPServer] = []

    def start(
        self, routes: dict[str, Route], port: int, address: str
    ) -> ThreadingHTTPServer | None:
        if port == 0:
            return None
        server = ThreadingHTTPServer((address, port), _handler(routes))
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, name=f"http-{port}", daemon=True).start()
        self.servers.append(server)
        return server

    def close(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()
        self.servers.clear()


def serve(
    health: Health,
    metrics: SidecarMetrics,
    *,
    health_port: int,
    metrics_port: int,
    address: str = "127.0.0.1",
) -> Servers:
    """/healthz and /readyz on `health_port`, /metrics on `metrics_port` (the same port is fine:
    then all three are served there)."""
    servers = Servers()

    def metrics_route() -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, metrics.exposition()

    probes: dict[str, Route] = {"/healthz": _probe(health.live), "/readyz": _probe(health.ready)}
    if health_port and health_port == metrics_port:
        servers.start({**probes, "/metrics": metrics_route}, health_port, address)
        return servers
    servers.start(probes, health_port, address)
    servers.start({"/metrics": metrics_route}, metrics_port, address)
    return servers
