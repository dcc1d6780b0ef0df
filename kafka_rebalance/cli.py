"""Entry point of the `kafka-rebalance` console command.

Each subcommand lives in its own module and registers itself on the shared parser, so the
dispatcher stays small and importing one subcommand never drags in another's dependencies
(the planner must start fast; the dev environment pulls in Kubernetes and Kafka clients).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand name -> module exposing `register(subparsers)`; imported lazily.
SUBCOMMANDS: dict[str, str] = {
    "plan": "kafka_rebalance.plan_command",
    "dev": "kafka_rebalance.devenv.command",
    "pipeline": "kafka_rebalance.pipeline_command",
    "operator": "kafka_rebalance.operator_command",
    "sidecar": "kafka_rebalance.sidecar_command",
    "demo": "kafka_rebalance.demo_command",
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-rebalance",
        description="Plan and operate Kafka consumer-group partition assignments on Kubernetes.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Import only the module of the requested subcommand (fast start-up for `plan`).
    first = args_list[0] if args_list else None
    parser = build_parser(first if first in SUBCOMMANDS else None)
    args = parser.parse_args(args_list)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
