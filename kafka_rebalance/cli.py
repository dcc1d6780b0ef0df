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
from importlib.metadata import entry_points

from kafka_rebalance.version import version

# subcommand name -> module exposing `register(subparsers)`; imported lazily.
SUBCOMMANDS: dict[str, str] = {
    "plan": "kafka_rebalance.plan_command",
    "pipeline": "kafka_rebalance.pipeline_command",
    "operator": "kafka_rebalance.operator_command",
    "sidecar": "kafka_rebalance.sidecar_command",
    "completion": "kafka_rebalance.completion",
}
# Other installed distributions add subcommands as entry points of this group (name -> module
# exposing `register(subparsers)`): the development harness adds `dev` and `demo` this way, so
# this distribution never names its modules.
PLUGIN_GROUP = "kafka_rebalance.commands"
# The harness's commands, named only so that an installation without it says where they come
# from instead of "invalid choice".
HARNESS_COMMANDS = ("dev", "demo")


def commands() -> dict[str, str]:
    """Every subcommand this installation has: this distribution's, then the plug-ins'."""
    found = dict(SUBCOMMANDS)
    for entry in entry_points(group=PLUGIN_GROUP):
        found.setdefault(entry.name, entry.value)
    return found


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kafka-rebalance",
        description="Plan and operate Kafka consumer-group partition assignments on Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    available = {only: SUBCOMMANDS[only]} if only in SUBCOMMANDS else commands()
    for name in HARNESS_COMMANDS:
        if name not in available and only in (None, name):
            register_unavailable(
                subparsers,
                name,
                f"kafka-rebalance {name}: not part of this installation; {HARNESS_HINT}",
            )
    for name, module_name in available.items():
        if only is not None and name != only:
            continue
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            hint = not_shipped_message(name, module_name, error) or missing_extra_message(
                name, error
            )
            if hint is None:
                raise
            register_unavailable(subparsers, name, hint)
            continue
        module.register(subparsers)
    return parser


def register_unavailable(subparsers: argparse._SubParsersAction, name: str, hint: str) -> None:
    """List a subcommand whose extra is not installed; running it prints the install hint."""

    def explain(_args: argparse.Namespace) -> int:
        print(hint, file=sys.stderr)
        return 2

    unavailable = subparsers.add_parser(name, help="(not installed: see --help)", add_help=False)
    unavailable.add_argument("rest", nargs=argparse.REMAINDER)
    unavailable.set_defaults(handler=explain)


# The optional dependencies each subcommand needs (pyproject's extras): a base install (the sidecar
# and `plan`) has none of them, and a missing one is a one-line hint, not a traceback. `dev` and
# `demo` come from the harness's own distribution instead (HARNESS_HINT below).
EXTRA_OF: dict[str, str] = {
    "operator": "operator",
    "pipeline": "pipeline",
    "completion": "completion",
}
# The development harness: its own distribution (devharness/, import package kafka_rebalance_dev),
# installed from a checkout by scripts/bootstrap and never by an extra of this one.
HARNESS_PACKAGE = "kafka_rebalance_dev"
HARNESS_HINT = (
    "it comes with the development harness (kafka-rebalance-dev): in a checkout of the repository "
    "run scripts/bootstrap (or pip install -e devharness/)"
)
EXTRA_MODULES = frozenset(
    {
        "kopf",
        "kubernetes",
        "yaml",
        "pyspark",
        "pandas",
        "pyarrow",
        "numpy",
        "matplotlib",
        "cryptography",
        "shtab",
    }
)


def not_shipped_message(command: str, module_name: str, error: ModuleNotFoundError) -> str | None:
    """The hint for a subcommand whose own module is absent (the development harness is not
    installed, or the container image, which carries the operator and the sidecar only, left it
    out), or None if `error` is about another module."""
    missing = error.name or ""
    if not missing.startswith("kafka_rebalance") or not module_name.startswith(missing):
        return None
    if module_name.split(".", 1)[0] == HARNESS_PACKAGE:
        return f"kafka-rebalance {command}: not part of this installation; {HARNESS_HINT}"
    return (
        f"kafka-rebalance {command}: not part of this installation (the container image carries "
        "the operator and the sidecar only); run it from a checkout of the repository "
        "(scripts/bootstrap)"
    )


def missing_extra_message(command: str | None, error: ModuleNotFoundError) -> str | None:
    """The install hint for an optional dependency that is not installed, or None if `error` is
    about anything else (a real bug must keep its traceback)."""
    root = (error.name or "").split(".", 1)[0]
    if root not in EXTRA_MODULES:
        return None
    if commands().get(command or "", "").startswith(HARNESS_PACKAGE + "."):
        return f"kafka-rebalance {command}: the Python package '{root}' is missing; {HARNESS_HINT}"
    extra = EXTRA_OF.get(command or "", "watch" if root == "kubernetes" else "operator")
    return (
        f"kafka-rebalance {command}: the Python package '{root}' is not installed; it comes with "
        f"the '{extra}' extra: pip install 'kafka-rebalance[{extra}]'"
    )


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Import only the module of the requested subcommand (fast start-up for `plan`).
    first = args_list[0] if args_list else None
    parser = build_parser(first if first in SUBCOMMANDS or first in HARNESS_COMMANDS else None)
    args = parser.parse_args(args_list)
    try:
        return int(args.handler(args) or 0)
    except ModuleNotFoundError as error:
        hint = missing_extra_message(args.command, error)
        if hint is None:
            raise
        print(hint, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
