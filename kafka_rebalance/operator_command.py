"""`kafka-rebalance operator`: run the ConsumerGroupPolicy operator (kopf) in the foreground.

This is the container's entrypoint and what the tests run, so tests exercise the real startup
path: logging with secret redaction, metrics on :9100, liveness on :8080, then kopf.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_rebalance_common import logformat
from kafka_rebalance_common.wire.telemetry import TELEMETRY_TOPIC

if TYPE_CHECKING:  # the operator's modules load only when it runs (the `operator` extra)
    from kafka_rebalance_operator.handlers import Operator
    from kafka_rebalance_operator.health import Liveness
    from kafka_rebalance_operator.settings import OperatorSettings
    from kafka_rebalance_operator.telemetry import Telemetry

# --log-level: the names the chart's logLevel value takes, and the levels they set
LOG_LEVELS = logformat.LEVELS


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "operator",
        help="run the ConsumerGroupPolicy operator",
        description="Watch ConsumerGroupPolicy resources and keep their consumer groups planned.",
    )
    _scope_arguments(parser)
    _endpoint_arguments(parser)
    _poll_arguments(parser)
    _replica_arguments(parser)
    _tenant_arguments(parser)
    _broker_mode_arguments(parser)
    parser.add_argument(
        "--pod-audit-interval",
        type=_flag_duration,
        default="60s",
        metavar="DURATION",
        help="list each watched namespace's pods at most this often to drop pods the watch "
        "index kept after missing their deletion (0s: never); default 60s",
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="the same as --log-level debug"
    )
    parser.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default="info",
        help="the operator's own log level (kafka-python never logs below info); default info",
    )
    logformat.add_argument(parser)  # --log-format text|json
    _webhook_arguments(parser)
    parser.set_defaults(handler=run)


def _scope_arguments(parser: argparse.ArgumentParser) -> None:
    """Which namespaces the operator watches (one flag or the other)."""
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="watch this namespace (repeatable); default: $WATCH_NAMESPACES (comma-separated)",
    )
    scope.add_argument("--all-namespaces", "-A", action="store_true", help="watch every namespace")


def _endpoint_arguments(parser: argparse.ArgumentParser) -> None:
    """The operator's HTTP endpoints, and where its telemetry rows go."""
    parser.add_argument("--metrics-port", type=int, default=9100, help="0 disables /metrics")
    parser.add_argument("--health-port", type=int, default=8080, help="0 disables /healthz")
    parser.add_argument(
        "--bind", default="0.0.0.0", help="address for the metrics and health ports"
    )
    parser.add_argument(
        "--liveness-max-age",
        type=_flag_duration,
        default="10m",
        metavar="DURATION",
        help="/healthz fails when a policy's timer has not woken, or one poll has not returned, "
        "for this long (a policy whose polls fail does not fail it); default 10m",
    )
    parser.add_argument(
        "--telemetry-file", metavar="PATH", help="append telemetry rows (JSON lines)"
    )
    parser.add_argument(
        "--telemetry-bootstrap",
        metavar="SERVERS",
        help="produce telemetry rows to this Kafka cluster (plaintext)",
    )
    parser.add_argument("--telemetry-topic", default=TELEMETRY_TOPIC)
    parser.add_argument(
        "--cluster-name",
        default=os.environ.get("CLUSTER_NAME", "default"),
        help="the `cluster` field of telemetry rows",
    )


def _poll_arguments(parser: argparse.ArgumentParser) -> None:
    """How often policies are polled, and the shortest pollInterval honoured."""
    parser.add_argument(
        "--min-poll-interval",
        type=_duration,
        default="5s",
        metavar="DURATION",
        help="the shortest spec.rebalance.pollInterval this operator honours (a duration as in "
        "a policy: 5s, 500ms, 1m); a policy below it is Stalled (PollIntervalTooShort) and "
        "polled no more often than this; default 5s",
    )
    parser.add_argument(
        "--tick",
        type=_flag_duration,
        default="1s",
        metavar="DURATION",
        help="how often each policy's timer checks whether a poll is due; default 1s",
    )


def _replica_arguments(parser: argparse.ArgumentParser) -> None:
    """Several replicas: kopf peering or leader election on a Lease."""
    parser.add_argument(
        "--peering",
        metavar="NAME",
        help="join kopf peering NAME (a KopfPeering object must exist); default: standalone",
    )
    parser.add_argument("--priority", type=int, default=0, help="kopf peering priority")
    election = parser.add_argument_group(
        "leader election (several replicas, one active: docs/install.md, High availability)"
    )
    election.add_argument(
        "--leader-election",
        action="store_true",
        help="reconcile only while holding a coordination.k8s.io Lease; exit when it is lost",
    )
    election.add_argument(
        "--leader-election-namespace",
        metavar="NS",
        help="the Lease's namespace (default: $POD_NAMESPACE, else default)",
    )
    election.add_argument(
        "--leader-election-name", default="kafka-rebalance-operator", metavar="NAME"
    )
    election.add_argument(
        "--leader-election-lease",
        type=_flag_duration,
        default="15s",
        metavar="DURATION",
        help="a standby takes over after this long without a renewal; default 15s",
    )
    election.add_argument(
        "--leader-election-renew-deadline",
        type=_flag_duration,
        default="10s",
        metavar="DURATION",
        help="the leader exits when it could not renew for this long; default 10s",
    )
    election.add_argument(
        "--leader-election-retry",
        type=_flag_duration,
        default="2s",
        metavar="DURATION",
        help="how often candidates try and the leader renews; default 2s",
    )


def _tenant_arguments(parser: argparse.ArgumentParser) -> None:
    """Kafka requests, and what one policy may use (servers, series, partitions)."""
    parser.add_argument(
        "--kafka-timeout",
        type=_flag_duration,
        default="10s",
        metavar="DURATION",
        help="each Kafka request's timeout; default 10s",
    )
    parser.add_argument(
        "--allowed-bootstrap-servers",
        action="append",
        default=[],
        metavar="SERVERS",
        help="only these Kafka servers may be a policy's bootstrapServers (host:port, host, "
        "*.domain[:port]; comma-separated, repeatable); others are Stalled BootstrapNotAllowed. "
        "Default: any",
    )
    parser.add_argument(
        "--max-partition-series",
        type=_non_negative,
        default=10_000,
        metavar="N",
        help="per-partition metric series per policy at most (the rest are counted in "
        "kafka_rebalance_partition_series_dropped_total); default 10000",
    )
    parser.add_argument(
        "--max-partitions-per-policy",
        type=_non_negative,
        default=20_000,
        metavar="N",
        help="a policy whose topics hold more partitions is Stalled (TooManyPartitions) before "
        "any per-partition state is kept for it (0: no cap); default 20000",
    )


def _broker_mode_arguments(parser: argparse.ArgumentParser) -> None:
    """apply.mode broker: the plan topic and the operator's own credentials for it."""
    parser.add_argument(
        "--plan-topic",
        default="kafka-rebalance-plans",
        help="apply.mode broker: the compacted topic the brokers' kafka-rebalance-plan "
        "assignor reads plans from (its kafka.rebalance.plans.topic); default %(default)s",
    )
    parser.add_argument(
        "--plan-key-file",
        metavar="PATH",
        help="apply.mode broker: file of shared keys (one per line; the first signs) that sign "
        "plan records; the brokers' kafka.rebalance.plans.keys.file holds the same keys. "
        "Default: records are unsigned",
    )
    parser.add_argument(
        "--plan-client-config",
        metavar="PATH",
        help="apply.mode broker and streams groups: JSON object of kafka-python settings "
        "(bootstrap_servers, security_protocol, sasl_*, ssl_*) with which the operator writes "
        "the plan topic: its own principal, never a policy's Secret, sent only to the plan "
        "cluster's bootstrap_servers (required, here or by --plan-bootstrap-servers)",
    )
    parser.add_argument(
        "--plan-bootstrap-servers",
        metavar="HOST:PORT[,...]",
        help="apply.mode broker and streams groups: the plan cluster the plan topic is written "
        "to (overrides bootstrap_servers in --plan-client-config). Without it or that, "
        "broker-mode and streams-group policies are Stalled (PlanClusterNotConfigured)",
    )
    parser.add_argument(
        "--plan-refresh",
        type=_flag_duration,
        default="5m",
        metavar="DURATION",
        help="apply.mode broker: write each plan again this often so it never reaches the "
        "brokers' kafka.rebalance.plans.max.age.ms (default 15 min) while its policy lives; "
        "default %(default)s",
    )


def _webhook_arguments(parser: argparse.ArgumentParser) -> None:
    hook = parser.add_argument_group(
        "sidecar injection webhook (docs/sidecar.md, Injection by annotation)"
    )
    hook.add_argument(
        "--webhook-port", type=_non_negative, default=0, metavar="P", help="0 (default): off"
    )
    hook.add_argument(
        "--webhook-configuration",
        default="kafka-rebalance-operator",
        metavar="NAME",
        help="the MutatingWebhookConfiguration whose caBundle (and dev URL) the operator keeps",
    )
    hook.add_argument(
        "--webhook-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a DNS name of the webhook Service for the self-signed certificate (repeatable)",
    )
    hook.add_argument(
        "--webhook-cert-dir",
        metavar="DIR",
        help="serve tls.crt/tls.key/ca.crt from DIR (cert-manager) instead of a self-signed one",
    )
    hook.add_argument(
        "--webhook-cert-secret",
        metavar="NAMESPACE/NAME",
        help="the Secret holding the self-signed certificate every replica serves (the first "
        "one fills it); unset: each start makes its own",
    )
    hook.add_argument(
        "--webhook-url-host",
        metavar="HOST",
        help="DEV ONLY: point the configuration at https://HOST:PORT instead of its Service",
    )
    hook.add_argument(
        "--webhook-failure-policy",
        choices=("Ignore", "Fail"),
        default="Ignore",
        help="the configuration's failurePolicy: with Ignore an internal error (the Kubernetes "
        "API failing or slow) admits the pod without the sidecar, with an event and a metric "
        "(default: Ignore)",
    )
    hook.add_argument(
        "--webhook-timeout",
        type=_flag_duration,
        default=10.0,
        metavar="DURATION",
        help="the configuration's timeoutSeconds: the webhook answers a second before it, "
        "each API call timing out after a third of that (default: 10s)",
    )
    hook.add_argument("--sidecar-image", metavar="IMAGE", help="the injected sidecar's image")
    hook.add_argument("--sidecar-image-pull-policy", choices=("Always", "IfNotPresent", "Never"))
    hook.add_argument(
        "--sidecar-source",
        choices=("watch", "file"),
        default="watch",
        help="watch: the sidecar watches its ConfigMap through the API (seconds); file: a "
        "mounted ConfigMap volume where the pod name is known (the kubelet's sync, ~1 min)",
    )
    hook.add_argument("--sidecar-health-port", type=int, default=8081, metavar="P")
    hook.add_argument("--sidecar-metrics-port", type=int, default=9101, metavar="P")
    hook.add_argument(
        "--sidecar-deliver-to", default="http://127.0.0.1:8000/records", metavar="URL"
    )
    hook.add_argument(
        "--sidecar-resources",
        metavar="JSON",
        help='the sidecar\'s resources, e.g. {"requests": {"cpu": "100m"}}',
    )
    hook.add_argument(
        "--sidecar-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="an extra sidecar flag, e.g. --session-timeout-ms=30000 (repeatable)",
    )
    hook.add_argument(
        "--sidecar-log-level",
        choices=LOG_LEVELS,
        help="the injected sidecar's --log-level (a pod's kafka-rebalance.io/sidecar-log-level "
        "annotation overrides it); default: the sidecar's own, info",
    )
    hook.add_argument(
        "--sidecar-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the sidecar, e.g. HTTPS_PROXY=... (repeatable)",
    )


def _webhook_config(args: argparse.Namespace) -> object | None:
    """The webhook's settings, None when it is off; raises ValueError naming a bad flag."""
    if not args.webhook_port:
        return None
    import json

    from kafka_rebalance_operator.webhook.injection import SidecarDefaults
    from kafka_rebalance_operator.webhook.server import WebhookConfig

    if not args.sidecar_image:
        raise ValueError("--webhook-port needs --sidecar-image")
    extra = {}
    if args.sidecar_resources:
        try:
            extra["resources"] = json.loads(args.sidecar_resources)
        except json.JSONDecodeError as error:
            raise ValueError(f"--sidecar-resources: not JSON ({error.msg})") from None
        if not isinstance(extra["resources"], dict):
            raise ValueError('--sidecar-resources: a JSON object, like {"requests": {...}}')
    env = []
    for item in args.sidecar_env:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise ValueError(f"--sidecar-env: {item!r} is not NAME=VALUE")
        env.append((name, value))
    sidecar = SidecarDefaults(
        image=args.sidecar_image,
        source=args.sidecar_source,
        health_port=args.sidecar_health_port,
        metrics_port=args.sidecar_metrics_port,
        deliver_to=args.sidecar_deliver_to,
        image_pull_policy=args.sidecar_image_pull_policy,
        extra_args=tuple(args.sidecar_arg),
        extra_env=tuple(env),
        log_level=args.sidecar_log_level,
        **extra,
    )
    secret = None
    if args.webhook_cert_secret:
        namespace, slash, name = args.webhook_cert_secret.partition("/")
        if not (slash and namespace and name) or "/" in name:
            raise ValueError(
                f"--webhook-cert-secret: {args.webhook_cert_secret!r} is not NAMESPACE/NAME"
            )
        secret = (namespace, name)
    if not 1 <= args.webhook_timeout <= 30:
        raise ValueError(
            f"--webhook-timeout: {args.webhook_timeout} is outside 1-30 s (the API server's "
            "range for timeoutSeconds)"
        )
    if secret and args.webhook_cert_dir:
        raise ValueError("--webhook-cert-secret and --webhook-cert-dir exclude each other")
    return WebhookConfig(
        port=args.webhook_port,
        cert_secret=secret,
        configuration=args.webhook_configuration,
        sidecar=sidecar,
        bind=args.bind,
        service_hosts=tuple(args.webhook_host) or ("localhost",),
        cert_dir=args.webhook_cert_dir,
        url_host=args.webhook_url_host,
        failure_policy=args.webhook_failure_policy,
        timeout_s=args.webhook_timeout,
    )


def _lead(args: argparse.Namespace) -> Any:
    """Block until this replica holds the Lease. A leader that cannot renew exits (status 3) by
    its renew deadline, which is shorter than the lease a standby waits out, so two replicas
    never reconcile at the same time; its pod restarts as a standby. A new leader starts from
    what the API server holds (status, ConfigMaps), so its epochs continue from the highest one
    written. Health and metrics are served while it waits: a standby is alive and exports no
    policy series."""
    import socket

    from kafka_rebalance_operator.kube import kube_io, leadership

    log = logging.getLogger(__name__)
    identity = os.environ.get("POD_NAME") or f"{socket.gethostname()}-{os.getpid()}"
    config = leadership.LeaseConfig(
        namespace=args.leader_election_namespace or os.environ.get("POD_NAMESPACE") or "default",
        name=args.leader_election_name,
        identity=identity,
        lease_duration=args.leader_election_lease,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry,
    )

    def lost() -> None:
        log.critical("leader election: %s lost the Lease; exiting for a standby", identity)
        logging.shutdown()
        os._exit(3)

    log.info("leader election: %s waiting for Lease %s/%s", identity, config.namespace, config.name)
    elector = leadership.wait_for_leadership(kube_io.connect(), config, lost)
    log.info(
        "leader election: %s leads (Lease %s/%s, transitions %d)",
        identity,
        config.namespace,
        config.name,
        elector.transitions,
    )
    return elector


def _plan_credentials(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The plan key file, re-read when it changes (`plan_keys.PlanKeyRing`; None: records go
    unsigned), and the plan-topic client settings (ValueError: one line)."""
    import json

    from kafka_rebalance_operator.kafka.plan_keys import PlanKeyRing

    keys = PlanKeyRing(args.plan_key_file) if args.plan_key_file else None
    client: dict[str, Any] = {}
    if args.plan_client_config:
        try:
            client = json.loads(Path(args.plan_client_config).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValueError(f"--plan-client-config {args.plan_client_config}: {error}") from None
        if not isinstance(client, dict):
            raise ValueError(f"--plan-client-config {args.plan_client_config}: not a JSON object")
    if args.plan_bootstrap_servers:
        client["bootstrap_servers"] = args.plan_bootstrap_servers
    servers = client.get("bootstrap_servers")
    if servers is not None and not _server_list(servers):
        raise ValueError(
            "--plan-client-config bootstrap_servers: a non-empty host:port string or list, got "
            f"{servers!r}"
        )
    if (keys is not None or args.plan_client_config) and not servers:
        raise ValueError(
            "broker mode: --plan-key-file/--plan-client-config are set but name no plan "
            "cluster: set --plan-bootstrap-servers or bootstrap_servers in --plan-client-config "
            "(the operator's plan credentials never go to a policy's servers)"
        )
    return keys, client


def _server_list(servers: Any) -> bool:
    """A usable bootstrap_servers value: a non-empty string, or a list of them."""
    if isinstance(servers, str):
        return bool(servers.strip())
    return (
        isinstance(servers, list)
        and bool(servers)
        and all(isinstance(s, str) and s.strip() for s in servers)
    )


def _duration(text: str) -> float:
    """Seconds in a Go-style duration, the grammar of a policy's durations ("5s", "1m30s")."""
    from kafka_rebalance_operator.durations import DurationError, parse_duration

    try:
        return parse_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _flag_duration(text: str) -> float:
    """Seconds in a duration flag: "15s", "1m30s", or bare seconds ("15") as before."""
    from kafka_rebalance_operator.durations import DurationError, parse_flag_duration

    try:
        return parse_flag_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    _configure_logging(args)
    from kafka_rebalance_common import redaction
    from kafka_rebalance_operator import health, metrics

    redaction.install()
    try:
        webhook_config = _webhook_config(args)
        settings = _settings(args)
    except ValueError as error:
        logging.getLogger(__name__).error("%s", error)
        return 2
    telemetry = _telemetry(args)
    liveness = health.Liveness(args.liveness_max_age)
    if args.metrics_port:
        metrics.serve(args.metrics_port, args.bind)
    webhook_serving = threading.Event()  # set once the webhook listens (if there is one)
    if args.health_port:
        health.serve(
            liveness,
            args.health_port,
            args.bind,
            ready=lambda: {"webhook": webhook_serving.is_set()} if webhook_config else {},
        )

    namespaces = args.namespace or [
        n for n in os.environ.get("WATCH_NAMESPACES", "").split(",") if n
    ]
    clusterwide = args.all_namespaces or not namespaces
    served = None
    if webhook_config is not None:
        from kafka_rebalance_operator.webhook import server as webhook

        # Before the campaign: every replica, a standby too, answers admissions.
        served = webhook.start(
            webhook_config,  # type: ignore[arg-type]
            clusterwide,
            namespaces,
            webhook_serving,
        )
    try:
        elector = _elector(args)
    except ValueError as error:
        logging.getLogger(__name__).error("%s", error)
        return 2
    operator = _operator(args, settings, telemetry, liveness, elector)

    import kopf
    from kafka_rebalance_operator.kube import kube_io, namespace_scope

    # say which namespaces are watched, and name each policy outside them once (with the fix)
    listing = kube_io.connect()
    try:
        namespace_scope.report_at_start(listing, None if clusterwide else namespaces)
    finally:
        listing.close()
    registry = _registry(args, operator, clusterwide, namespaces)
    try:
        kopf.run(
            registry=registry,
            memo=operator.memo(),
            standalone=not args.peering,
            peering_name=args.peering,
            priority=args.priority,
            clusterwide=clusterwide,
            namespaces=[] if clusterwide else namespaces,
        )
    finally:
        if served is not None:
            served.stop()
        telemetry.close()
    return 0


def _configure_logging(args: argparse.Namespace) -> None:
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else LOG_LEVELS[args.log_level],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logformat.apply(args.log_format)
    # kafka-python logs its configuration (credentials included) at DEBUG: never below INFO.
    debug = args.verbose or args.log_level == "debug"
    logging.getLogger("kafka").setLevel(logging.INFO if debug else logging.WARNING)
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def _settings(args: argparse.Namespace) -> OperatorSettings:
    """The operator-wide settings from the flags; raises ValueError naming a bad flag."""
    from kafka_rebalance_operator.kafka import admission
    from kafka_rebalance_operator.settings import OperatorSettings

    allowlist = admission.parse_allowlist(args.allowed_bootstrap_servers)
    plan_keys, plan_client = _plan_credentials(args)
    if not allowlist:
        logging.getLogger(__name__).warning(
            "--allowed-bootstrap-servers is empty: any tenant may name any server in "
            "spec.kafka.bootstrapServers, and the operator connects there with that tenant's "
            "Secret (docs/security.md)"
        )
    if plan_keys is None:
        logging.getLogger(__name__).warning(
            "--plan-key-file is not set: broker-mode plan records go unsigned; brokers that "
            "require signatures (kafka.rebalance.plans.keys.file) ignore them (docs/kip848.md)"
        )
    return OperatorSettings(
        min_poll_interval_s=args.min_poll_interval,
        tick_s=args.tick,
        kafka_timeout_s=args.kafka_timeout,
        cluster=args.cluster_name,
        allowed_bootstrap_servers=allowlist,
        plan_topic=args.plan_topic,
        max_partitions_per_policy=args.max_partitions_per_policy,
        plan_key_ring=plan_keys,
        plan_client=plan_client,
        plan_refresh_s=args.plan_refresh,
    )


def _telemetry(args: argparse.Namespace) -> Telemetry:
    """Telemetry rows to the file and/or the Kafka topic the flags name (none: rows dropped)."""
    from kafka_rebalance_operator.telemetry import JsonLinesSink, KafkaSink, Telemetry

    sinks: list[JsonLinesSink | KafkaSink] = []
    if args.telemetry_file:
        sinks.append(JsonLinesSink(args.telemetry_file))
    if args.telemetry_bootstrap:
        sinks.append(KafkaSink(args.telemetry_bootstrap, args.telemetry_topic))
    return Telemetry(sinks)


def _elector(args: argparse.Namespace) -> Any:
    """With --leader-election, the Lease elector once this replica leads (`_lead`), else None;
    raises ValueError naming conflicting flags."""
    if not args.leader_election:
        return None
    if args.peering:
        raise ValueError("--leader-election and --peering exclude each other: choose one")
    try:
        return _lead(args)
    except ValueError as error:  # inconsistent durations
        raise ValueError(f"--leader-election-*: {error}") from None


def _operator(
    args: argparse.Namespace,
    settings: OperatorSettings,
    telemetry: Telemetry,
    liveness: Liveness,
    elector: Any,
) -> Operator:
    """What every handler is given: the settings and the real ports on one API client."""
    from kafka_rebalance_operator import adapters, handlers
    from kafka_rebalance_operator.kube import kube_io
    from kafka_rebalance_operator.kube.pod_audit import PodAudit

    api_client = kube_io.connect()
    return handlers.Operator(
        settings=settings,
        # the elector fences every write: none once this replica may have lost the Lease
        ports=adapters.real_ports(
            api_client, telemetry, args.max_partition_series, leadership=elector
        ),
        liveness=liveness,
        pod_audit=PodAudit(
            functools.partial(kube_io.list_pod_uids, api_client=api_client),
            args.pod_audit_interval,
        ),
    )


def _registry(
    args: argparse.Namespace, operator: Operator, clusterwide: bool, namespaces: list[str]
) -> Any:
    """The handlers for this run (logged with what is watched and how often policies poll)."""
    from kafka_rebalance_operator import handlers

    logging.getLogger(__name__).info(
        "kafka-rebalance operator: %s, poll tick %.2fs, shortest pollInterval honoured %gs",
        "all namespaces" if clusterwide else f"namespaces {', '.join(namespaces)}",
        args.tick,
        args.min_poll_interval,
    )
    return handlers.registry(operator.settings)
