"""Shell completion scripts for `kafka-rebalance` and `kubectl-cgp`, generated from their own
argparse parsers by shtab (static scripts: the shell never starts Python to complete a word).

shtab comes with the `watch` extra (the one that installs `kubectl cgp`) and with `dev`; the
base install (an application's sidecar) does not need it.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "tcsh")


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` (its `prog` is the command completed) for `shell`."""
    import shtab

    return shtab.complete(parser, shell=shell)


def add_subcommand(subparsers: argparse._SubParsersAction, command: str) -> argparse.ArgumentParser:
    """A `completion SHELL` subcommand of `command`; the caller sets its handler."""
    parser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, tcsh)",
        description=(
            f"Print the completion script of {command} for SHELL. bash: "
            f"`source <({command} completion bash)`, or save it in "
            "~/.local/share/bash-completion/completions/; zsh: save it as "
            f"`_{command.replace(' ', '-')}` in a directory on $fpath."
        ),
    )
    parser.add_argument("shell", choices=SHELLS)
    return parser


def register(subparsers: argparse._SubParsersAction) -> None:
    """`kafka-rebalance completion SHELL` (cli.SUBCOMMANDS)."""
    parser = add_subcommand(subparsers, "kafka-rebalance")
    parser.set_defaults(handler=_kafka_rebalance_completion)


def _kafka_rebalance_completion(args: argparse.Namespace) -> int:
    from kafka_rebalance.cli import build_parser

    print(script(build_parser(), args.shell))
    return 0
