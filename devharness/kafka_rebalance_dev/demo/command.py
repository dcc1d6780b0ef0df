"""`kafka-rebalance demo`: the product end to end on the embedded default, in one command.

Exit codes: 0 when the run completed and the ledger found nothing lost; 1 when something failed
(which part on stderr) or records were lost; 130 on Ctrl-C (everything started is stopped).
With `--json`, stdout carries exactly one JSON object (the summary) and nothing else.
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

DURATION_S = 100.0
KUBELET_DURATION_S = 180.0
STRATEGIES = (
    "range",
    "roundrobin",
    "sticky",
    "cooperative-sticky",
    "kip169",
    "weighted-sticky",
    "lag-aware",
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run the operator and sidecars end to end on a skewed workload and summarise",
        description="Start the local environment, install the CRD and the operator, run a "
        "StatefulSet of N pods under KWOK with one sidecar process per pod (one of them slow), "
        "produce a skewed workload, show the group converging on the plan, then prove with a "
        "ledger that nothing was lost. See docs/demo.md.",
    )
    _run_arguments(parser)
    _workload_arguments(parser)
    _environment_arguments(parser)
    parser.set_defaults(handler=_run)


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    """Which strategies run, and for how long."""
    parser.add_argument(
        "--strategy", choices=STRATEGIES, default="lag-aware", help="default: lag-aware"
    )
    parser.add_argument(
        "--compare",
        metavar="S1,S2,...",
        help="run the demo once per strategy on one environment and compare them "
        "(e.g. range,cooperative-sticky,lag-aware); --json then prints {duration_s, lost, runs}",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="SECONDS",
        help="seconds of production, observe and enforce phases together (default 100; 180 with "
        "--kubelet, where a plan reaches a pod when the kubelet refreshes its mounted ConfigMap)",
    )


def _workload_arguments(parser: argparse.ArgumentParser) -> None:
    """The group, its skewed workload and the policy's settings."""
    parser.add_argument("--members", type=int, default=3, help="pods in the group (default 3)")
    parser.add_argument("--partitions", type=int, default=6, help="topic partitions (default 6)")
    parser.add_argument(
        "--slow-ms",
        type=int,
        default=100,
        metavar="MS",
        help="delay per record on the slow member (default 100: about 10 records/s)",
    )
    parser.add_argument(
        "--hot-rate", type=float, default=30.0, help="records/s per hot partition (default 30)"
    )
    parser.add_argument(
        "--cold-rate", type=float, default=8.0, help="records/s per other partition (default 8)"
    )
    parser.add_argument(
        "--weight-from",
        choices=("adaptive", "resources", "none"),
        default="adaptive",
        help="the policy's members.weightFrom (default adaptive: measured throughput)",
    )
    parser.add_argument(
        "--poll-interval",
        type=_poll_interval,
        default="2s",
        metavar="DURATION",
        help="the policy's rebalance.pollInterval (default 2s; at least 1s, the CRD's floor: "
        "the demo's operator runs with --min-poll-interval 1s)",
    )


def _environment_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the sidecars run, what is printed, and which environment is used."""
    parser.add_argument(
        "--kubelet",
        action="store_true",
        help="run the sidecars as real pods (app and sidecar containers of the project's image, "
        "reading their mounted ConfigMaps) on a real node: `dev up --kubelet` and `dev image`; "
        "needs root and the system packages (docs/development.md)",
    )
    parser.add_argument("--json", action="store_true", help="print only the summary, as JSON")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="leave the environment running and the demo's namespace (pods, policy, ConfigMaps) "
        "in place for inspection; the operator and sidecars are stopped",
    )
    parser.add_argument(
        "--state-dir", help="the demo's own environment directory (default ./.dev-demo)"
    )
    parser.add_argument(
        "--reuse",
        nargs="?",
        const="",
        metavar="STATE_DIR",
        help="use an environment `kafka-rebalance dev up` already started (default dir: "
        "$KAFKA_REBALANCE_DEV_DIR or ./.dev) instead of starting one; it is left running",
    )


def _poll_interval(text: str) -> str:
    """A pollInterval the CRD admits (a duration of at least 1s), as written."""
    from kafka_rebalance_operator.durations import DurationError, parse_duration

    try:
        seconds = parse_duration(text)
    except DurationError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"at least 1s (the CRD's floor), got {text}")
    return text


def _interrupted(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _run(args: argparse.Namespace) -> int:
    from kafka_rebalance_dev.demo.run import DemoOptions, print_json, run_demo

    if args.duration is None:
        args.duration = KUBELET_DURATION_S if args.kubelet else DURATION_S
    if args.members < 1 or args.partitions < 1 or args.duration <= 0:
        print("demo: --members, --partitions and --duration must be positive", file=sys.stderr)
        return 2
    compare = [name.strip() for name in (args.compare or "").split(",") if name.strip()]
    unknown = [name for name in compare if name not in STRATEGIES]
    if unknown:
        print(
            f"demo: --compare: unknown strategy {unknown[0]!r} (one of {', '.join(STRATEGIES)})",
            file=sys.stderr,
        )
        return 2
    options = DemoOptions(
        strategy=args.strategy,
        compare=compare,
        duration=args.duration,
        members=args.members,
        partitions=args.partitions,
        slow_ms=args.slow_ms,
        hot_rate=args.hot_rate,
        cold_rate=args.cold_rate,
        weight_from=None if args.weight_from == "none" else args.weight_from,
        poll_interval=args.poll_interval,
        json=args.json,
        keep=args.keep,
        state_dir=args.state_dir,
        reuse=args.reuse,
        kubelet=args.kubelet,
    )
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGHUP, _interrupted)
    try:
        summary = run_demo(options)
    except KeyboardInterrupt:
        print("demo: interrupted; stopped everything it had started", file=sys.stderr)
        return 130
    except Exception as error:  # one line naming what failed, never a bare traceback
        print(f"demo failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    if args.json:
        print_json(summary)
    return 0 if summary["lost"] == 0 else 1
