"""The importable consumer: the sidecar's whole runtime inside a Python application.

    from kafka_rebalance_sidecar import PlanFollowingConsumer, SidecarConfig

    def handle(batch):            # sidecar.records.Batch; raise to refuse (it is retried)
        for record in batch.records:
            ...

    config = SidecarConfig(bootstrap_servers="kafka:9092", group="orders-processor",
                           topics=("orders",), member=os.environ["POD_NAME"])
    PlanFollowingConsumer(config, assignment_file="/etc/kafka-rebalance/orders-0/assignment.json"
                          ).run(handle)

`kafka-rebalance sidecar` is this class behind command-line flags, so the container sidecar and
an in-process consumer behave the same. `run()` blocks until `stop()` (or SIGTERM/SIGINT when
`install_signal_handlers=True`, which only works on the main thread).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kafka_rebalance_sidecar.credentials import CredentialWatch
from kafka_rebalance_sidecar.delivery import (
    Deliverer,
    HttpDelivery,
    InProcessDelivery,
    RetryPolicy,
    Sink,
    kafka_dead_letter_sender,
)
from kafka_rebalance_sidecar.document import AssignmentTracker
from kafka_rebalance_sidecar.health import Health, SidecarMetrics, serve
from kafka_rebalance_sidecar.records import Handler
from kafka_rebalance_sidecar.runner import Released, Runner, SidecarConfig
from kafka_rebalance_sidecar.source import ConfigMapSource, FileSource

log = logging.getLogger("kafka_rebalance_sidecar")


@dataclass(frozen=True)
class DocumentSource:
    """Where the assignment document comes from: a mounted file, or the ConfigMap by the API."""

    file: str | None = None
    configmap: str | None = None
    namespace: str | None = None
    kubeconfig: str | None = None
    file_interval_s: float = 1.0

    def __post_init__(self) -> None:
        if (self.file is None) == (self.configmap is None):
            raise ValueError("exactly one of an assignment file or an assignment ConfigMap")
        if self.configmap is not None and not self.namespace:
            raise ValueError(
                "an assignment ConfigMap needs a namespace (--namespace or $POD_NAMESPACE)"
            )

    def start(self, tracker: AssignmentTracker) -> FileSource | ConfigMapSource:
        if self.file is not None:
            return FileSource(self.file, tracker, self.file_interval_s).start()
        assert self.configmap is not None and self.namespace is not None
        return ConfigMapSource(self.namespace, self.configmap, tracker, self.kubeconfig).start()


class PlanFollowingConsumer:
    """A consumer that follows its assignment document, delivers, and commits after delivery."""

    def __init__(
        self,
        config: SidecarConfig,
        source: DocumentSource | None = None,
        *,
        assignment_file: str | None = None,
        max_attempts: int = 5,
        retry: RetryPolicy | None = None,
        on_poison: str = "dead-letter",
        dead_letter_topic: str | None = None,
        health_port: int = 0,
        metrics_port: int = 0,
        bind: str = "127.0.0.1",
        cooperative: bool = True,
        on_released: Released | None = None,
        install_signal_handlers: bool = False,
        credentials: CredentialWatch | None = None,
    ) -> None:
        if source is None:
            source = DocumentSource(file=assignment_file)
        self.config = config
        self.source = source
        self.retry = retry or RetryPolicy(max_attempts=max_attempts)
        self.on_poison = on_poison
        self.dead_letter_topic = dead_letter_topic or f"{config.group}.dead-letter"
        self.health_port = health_port
        self.metrics_port = metrics_port
        self.bind = bind
        self.cooperative = cooperative
        self.on_released = on_released
        self.install_signal_handlers = install_signal_handlers
        self.tracker = AssignmentTracker(group=config.group, member=config.member)
        self.metrics = SidecarMetrics(config.group, config.member)
        self.health = Health()
        self._stop = threading.Event()
        self.runner: Runner | None = None
        # rotated credentials (credentials.py): the runner stops, commits, and is rebuilt
        self.credentials = credentials
        self._rotated: Mapping[str, Any] | None = None
        self._stopping = False

    def stop(self) -> None:
        self._stopping = True
        self._stop.set()

    def _credentials_changed(self, options: Mapping[str, Any]) -> None:
        self._rotated = options
        self._stop.set()

    def _reopen(self) -> bool:
        """After a rotation: the config with the new credentials, and the stop flag cleared."""
        options, self._rotated = self._rotated, None
        if options is None or self._stopping:
            return False
        log.info("reconnecting to Kafka with the rotated credentials")
        merged = {**self.config.consumer_options, **options}
        self.config = replace(self.config, consumer_options=merged)
        self._stop.clear()
        self.health.resumed()
        return True

    def _sink(self, handler: Handler | str | Sink) -> Sink:
        if isinstance(handler, str):
            if handler.startswith(("http://", "https://")):
                return HttpDelivery(handler)
            return InProcessDelivery(handler)
        if isinstance(handler, (HttpDelivery, InProcessDelivery)):
            return handler
        return InProcessDelivery(handler)

    def _producer(self) -> Any:
        from kafka import KafkaProducer

        options = {
            k: v
            for k, v in self.config.consumer_options.items()
            if k.startswith(("security_", "ssl_", "sasl_"))
        }
        return KafkaProducer(
            bootstrap_servers=self.config.bootstrap_servers.split(","),
            client_id=f"kafka-rebalance-sidecar-{self.config.member}-dlq",
            acks="all",
            **options,
        )

    def run(self, handler: Handler | str | Sink) -> None:
        """Consume until stopped. `handler`: a callable, "module:function", or an http URL."""
        sink = self._sink(handler)
        servers = serve(
            self.health,
            self.metrics,
            health_port=self.health_port,
            metrics_port=self.metrics_port,
            address=self.bind,
        )
        source = self.source.start(self.tracker)
        watch = self.credentials.start(self._credentials_changed) if self.credentials else None
        if self.install_signal_handlers:
            self._install_signal_handlers()
        try:
            self._run_clients(sink)
            while self._reopen():  # rotated credentials: new clients, same document and servers
                self._run_clients(sink)
        finally:
            if watch is not None:
                watch.stop()
            source.stop()
            servers.close()

    def _install_signal_handlers(self) -> None:
        def handle(signum: int, _frame: Any) -> None:
            log.info(
                "received %s: finishing the batch in hand, committing, closing",
                signal.Signals(signum).name,
            )
            self.stop()

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, handle)

    def _run_clients(self, sink: Sink) -> None:
        """One incarnation of the Kafka clients (consumer, dead-letter producer) until stopped."""
        producer = self._producer() if self.on_poison == "dead-letter" else None
        deliverer = Deliverer(
            sink,
            retry=self.retry,
            on_poison=self.on_poison,
            dead_letter_topic=self.dead_letter_topic if producer is not None else None,
            dead_letter_send=kafka_dead_letter_sender(producer) if producer is not None else None,
            stats=self.metrics,
            stop=self._stop,
            # a body to bound only over HTTP; a handler in process takes the batch whole
            max_batch_bytes=(
                self.config.max_batch_bytes if isinstance(sink, HttpDelivery) else None
            ),
        )
        try:
            runner_class: type[Runner]
            kwargs: dict[str, Any] = {}
            if self.config.apply_mode == "group":
                from kafka_rebalance_sidecar.group_mode import GroupRunner

                runner_class = GroupRunner
                kwargs["cooperative"] = self.cooperative
            else:
                from kafka_rebalance_sidecar.assign_mode import AssignRunner

                runner_class = AssignRunner
            self.runner = runner_class(
                self.config,
                self.tracker,
                deliverer,
                metrics=self.metrics,
                health=self.health,
                stop=self._stop,
                on_released=self.on_released,
                **kwargs,
            )
            self.runner.run()
        finally:
            if producer is not None:
                producer.close(timeout=5)
