"""`kafka-rebalance sidecar`: the consumer sidecar that follows its pod's assignment document.

Flags are a contract (docs/sidecar.md, the demo and the example StatefulSet use them). A usage
mistake - a bad flag value, a missing member name, a handler that does not import - exits 2 with
one line on stderr, so a crash-looping pod shows the reason in `kubectl logs` at a glance.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import sys
import types
from typing import Any, NoReturn

from kafka_rebalance_common import logformat

PROG = "kafka-rebalance sidecar"


def _one_line_error(self: argparse.ArgumentParser, message: str) -> NoReturn:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    raise SystemExit(2)


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0 disables)")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} must be at least 0")
    return value


# Go-style durations as the operator's flags and a policy's fields take them ("60s", "1m30s",
# "500ms"): one or more <number><unit> parts, no sign, no spaces.
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_DURATION_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration(text: str) -> float:
    """Seconds in a duration such as 60s, 1m30s or 500ms."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (use e.g. 60s, 1m30s, 500ms)")
    return sum(float(n) * _DURATION_UNIT_S[u] for n, u in parts)


def _positive_duration(text: str) -> float:
    value = _duration(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


_SIZE = re.compile(r"([0-9]+)(Ki|Mi|Gi)?")
_SIZE_UNIT = {None: 1, "": 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def _bytes(text: str) -> int:
    """A size in bytes, as a number or with a Kubernetes binary suffix: 8Mi, 512Ki."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (use e.g. 8Mi, 512Ki, 1048576)")
    value = int(match.group(1)) * _SIZE_UNIT[match.group(2)]
    if value < 1024:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1Ki")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sidecar",
        help="consume a group's partitions as the operator's plan says, deliver to the app",
        description="Read this pod's assignment document, consume its partitions (group mode: "
        "static membership with the plan-following assignor; assign mode: assign() and two-step "
        "hand-over), deliver records to the application and commit after delivery.",
    )
    parser.error = types.MethodType(_one_line_error, parser)  # type: ignore[method-assign]
    parser.add_argument("--bootstrap-servers", required=True, metavar="B")
    parser.add_argument("--group", required=True, metavar="G", help="consumer group id")
    parser.add_argument("--topics", required=True, metavar="T1,T2", help="comma-separated")
    parser.add_argument(
        "--member",
        default=os.environ.get("POD_NAME"),
        metavar="NAME",
        help="member name: group.instance.id and the document's `member` (default $POD_NAME)",
    )
    parser.add_argument("--apply-mode", choices=("group", "assign"), default="group")
    parser.add_argument(
        "--engine",
        choices=("kafka-python", "librdkafka"),
        default="kafka-python",
        help="the Kafka client; librdkafka (confluent-kafka, assign mode only) reads several "
        "times faster (docs/sidecar.md, Throughput)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--assignment", metavar="FILE", help="the mounted assignment.json")
    source.add_argument(
        "--assignment-configmap", metavar="NAME", help="watch this ConfigMap through the API"
    )
    parser.add_argument(
        "--namespace",
        default=os.environ.get("POD_NAMESPACE"),
        metavar="NS",
        help="the ConfigMap's namespace (default $POD_NAMESPACE)",
    )
    parser.add_argument(
        "--kubeconfig", metavar="PATH", help="default: the pod's in-cluster service account"
    )
    sink = parser.add_mutually_exclusive_group(required=True)
    sink.add_argument("--deliver-to", metavar="URL", help="POST JSON batches to this URL")
    # dest differs from the flag: `args.handler` is the subcommand dispatch (kafka_rebalance.cli).
    sink.add_argument(
        "--handler",
        dest="handler_spec",
        metavar="MODULE:FUNCTION",
        help="call this with each sidecar.records.Batch",
    )
    parser.add_argument(
        "--deliver-token-file",
        metavar="FILE",
        help="with --deliver-to: send the token in FILE (a mounted Secret) as "
        "`Authorization: Bearer <token>` so the app can check its caller; re-read on change",
    )
    parser.add_argument(
        "--deliver-timeout",
        type=_positive_duration,
        default=30.0,
        metavar="DURATION",
        help="with --deliver-to: how long to wait for the app's answer; past it the try is a "
        "transient failure (default 30s)",
    )
    parser.add_argument(
        "--transient-retry-budget",
        type=_duration,
        default=60.0,
        metavar="DURATION",
        help="how long a batch failing transiently (HTTP 500/502/504, timeout, reset) is retried "
        "before it is bisected to find a poison record (default 60s; 0s: bisect at once)",
    )
    parser.add_argument(
        "--max-batch-bytes",
        type=_bytes,
        default=8 * 1024 * 1024,
        metavar="SIZE",
        help="bound of one HTTP body; a larger batch goes in pieces, and the fetch is sized to "
        "match (default 8Mi)",
    )
    parser.add_argument("--max-attempts", type=_positive, default=5, metavar="N")
    parser.add_argument("--on-poison", choices=("dead-letter", "skip"), default="dead-letter")
    parser.add_argument(
        "--dead-letter-topic", metavar="T", help="default: <group>.dead-letter (must exist)"
    )
    parser.add_argument("--health-port", type=_port, default=0, metavar="P", help="0 disables")
    parser.add_argument("--metrics-port", type=_port, default=0, metavar="P", help="0 disables")
    parser.add_argument(
        "--bind", default="127.0.0.1", help="address of the health and metrics ports"
    )
    parser.add_argument("--session-timeout-ms", type=_positive, default=10_000, metavar="MS")
    parser.add_argument("--auto-offset-reset", choices=("earliest", "latest"), default="earliest")
    parser.add_argument("--max-poll-records", type=_positive, default=500, metavar="N")
    parser.add_argument(
        "--commit-interval-ms",
        type=_non_negative,
        default=200,
        metavar="MS",
        help="while behind (full batches), commit at most this often; 0: every batch (default 200)",
    )
    _register_security(parser)
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="the same as --log-level debug"
    )
    parser.add_argument(
        "--log-level",
        choices=logformat.LEVELS,
        default="info",
        help="the sidecar's own log level (kafka-python and the Kubernetes client log warnings "
        "and above unless debug); default info",
    )
    logformat.add_argument(parser)  # --log-format text|json
    parser.set_defaults(handler=run)


def _register_security(parser: argparse.ArgumentParser) -> None:
    """kafka-python's setting names as flags; secrets only from files or the environment."""
    from kafka_rebalance.sidecar_security import MECHANISMS, PASSWORD_ENV, PROTOCOLS

    group = parser.add_argument_group(
        "Kafka security",
        "files are usually a mounted Secret; the SASL password is read from "
        f"--sasl-password-file or ${PASSWORD_ENV}, never from a flag value",
    )
    group.add_argument("--security-protocol", choices=PROTOCOLS, default="PLAINTEXT")
    group.add_argument(
        "--sasl-mechanism", choices=MECHANISMS, help="default PLAIN with a SASL protocol"
    )
    group.add_argument("--sasl-username", metavar="USER")
    group.add_argument("--sasl-password-file", metavar="FILE")
    group.add_argument("--ssl-cafile", metavar="FILE", help="CA bundle (PEM) to verify brokers")
    group.add_argument("--ssl-certfile", metavar="FILE", help="client certificate (PEM)")
    group.add_argument("--ssl-keyfile", metavar="FILE", help="client private key (PEM)")
    group.add_argument("--ssl-key-password-file", metavar="FILE", help="if the key is encrypted")


def _security_flags(args: argparse.Namespace) -> Any:
    from kafka_rebalance.sidecar_security import SecurityFlags

    # each flag's dest is the field of the same name
    return SecurityFlags(
        **{f.name: getattr(args, f.name) for f in dataclasses.fields(SecurityFlags)}
    )


def _security_options(args: argparse.Namespace) -> dict[str, object]:
    from kafka_rebalance.sidecar_security import client_options

    return client_options(_security_flags(args), os.environ)


def _fail(message: str) -> int:
    sys.stderr.write(f"{PROG}: error: {message}\n")
    return 2


def run(args: argparse.Namespace) -> int:
    _configure_logging(args)
    from kafka_rebalance_sidecar.consumer import PlanFollowingConsumer
    from kafka_rebalance_sidecar.delivery import HandlerSpecError, RetryPolicy

    from kafka_rebalance.sidecar_security import (
        SecurityFlagError,
        credential_watch,
        describe,
        install_redaction,
    )

    if not args.member:
        return _fail("--member is required (or set $POD_NAME)")
    topics = tuple(t.strip() for t in args.topics.split(",") if t.strip())
    if not topics:
        return _fail("--topics lists no topic")
    try:
        security = _security_options(args)
    except SecurityFlagError as error:
        return _fail(str(error))
    if args.deliver_token_file and not args.deliver_to:
        return _fail("--deliver-token-file needs --deliver-to (a token is sent over HTTP)")
    try:
        sink = _sink(args)
        config = _config(args, topics, security)
        if config.engine == "librdkafka":
            _check_librdkafka(security)
        source = _source(args)
    except (HandlerSpecError, ValueError, ImportError) as error:
        return _fail(str(error))
    install_redaction(security)
    logging.getLogger("kafka_rebalance_sidecar").info("kafka security: %s", describe(security))
    consumer = PlanFollowingConsumer(
        config,
        source,
        retry=RetryPolicy(
            max_attempts=args.max_attempts, transient_budget_s=args.transient_retry_budget
        ),
        on_poison=args.on_poison,
        dead_letter_topic=args.dead_letter_topic,
        health_port=args.health_port,
        metrics_port=args.metrics_port,
        bind=args.bind,
        install_signal_handlers=True,
        credentials=credential_watch(_security_flags(args), os.environ, security),
    )
    try:
        consumer.run(sink)
    except Exception as error:
        logging.getLogger("kafka_rebalance_sidecar").error(
            "sidecar failed: %s", error, exc_info=True
        )
        return 1
    return 0


def _configure_logging(args: argparse.Namespace) -> None:
    level = logging.DEBUG if args.verbose else logformat.LEVELS[args.log_level]
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logformat.apply(args.log_format, group=args.group, member=args.member)
    if level > logging.DEBUG:
        logging.getLogger("kafka").setLevel(max(level, logging.WARNING))
        logging.getLogger("kubernetes").setLevel(max(level, logging.WARNING))


def _sink(args: argparse.Namespace) -> Any:
    """Where records go: HTTP to --deliver-to (with the token file's bearer token), else the
    --handler function in this process; raises HandlerSpecError for a handler that does not
    import."""
    from kafka_rebalance_sidecar.delivery import HttpDelivery, InProcessDelivery
    from kafka_rebalance_sidecar.token_file import TokenFile

    if args.deliver_to:
        token = TokenFile(args.deliver_token_file) if args.deliver_token_file else None
        return HttpDelivery(args.deliver_to, timeout_s=args.deliver_timeout, token=token)
    return InProcessDelivery(args.handler_spec)


def _config(args: argparse.Namespace, topics: tuple[str, ...], security: dict[str, object]) -> Any:
    """The consumer's settings (SidecarConfig); raises ValueError for an inconsistent one."""
    from kafka_rebalance_sidecar.runner import SidecarConfig

    return SidecarConfig(
        bootstrap_servers=args.bootstrap_servers,
        group=args.group,
        topics=topics,
        member=args.member,
        apply_mode=args.apply_mode,
        session_timeout_ms=args.session_timeout_ms,
        auto_offset_reset=args.auto_offset_reset,
        max_poll_records=args.max_poll_records,
        commit_interval_ms=args.commit_interval_ms,
        max_batch_bytes=args.max_batch_bytes,
        consumer_options=security,
        engine=args.engine,
    )


def _source(args: argparse.Namespace) -> Any:
    """Where the member's assignment document comes from: a file or its ConfigMap (watched)."""
    from kafka_rebalance_sidecar.consumer import DocumentSource

    return DocumentSource(
        file=args.assignment,
        configmap=args.assignment_configmap,
        namespace=args.namespace,
        kubeconfig=args.kubeconfig,
    )


def _check_librdkafka(security: dict[str, Any]) -> None:
    """Refuse `--engine librdkafka` up front when confluent-kafka is missing or a security
    setting has no librdkafka translation (ImportError / ValueError naming it)."""
    from kafka_rebalance_sidecar.librdkafka_engine import librdkafka_config

    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise ImportError(
            "--engine librdkafka needs confluent-kafka: pip install 'kafka-rebalance[librdkafka]'"
        ) from None
    librdkafka_config(security)
