"""Shell completion scripts for `kafka-rebalance` and `kubectl-cgp`, generated from their own
argparse parsers by shtab (static scripts: the shell never starts Python to complete a word).

shtab comes with the `completion` extra (and `kubectl`, the plugin's, and `dev`); the base
install (an application's sidecar) does not need it.
"""

from __future__ import annotations

import argparse

SHELLS = ("bash", "zsh", "fish", "tcsh")


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of `parser` (its `prog` is the command completed) for `shell`."""
    import shtab

    return shtab.complete(parser, shell=shell)


def add_subcommand(subparsers: argparse._SubParsersAction, command: str) -> argparse.ArgumentParser:
    """A `completion SHELL` subcommand of `command`; the caller sets its handler."""
    parser = subparsers.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, fish, tcsh)",
        description=(
            f"Print the completion script of {command} for SHELL. bash: "
            f"`source <({command} completion bash)`, or save it in "
            "~/.local/share/bash-completion/completions/; zsh: save it as "
            f"`_{command.replace(' ', '-')}` in a directory on $fpath; fish: save it as "
            f"~/.config/fish/completions/{command.replace(' ', '-')}.fish."
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


# Cobra's ShellCompDirectiveNoFileComp: kubectl offers no file names after these candidates.
NO_FILE_COMPLETION = 4


def candidates(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """What may come in place of the last of `words` (the arguments after the command, the last
    one partial): a subcommand, an option, or one of an option's choices."""
    current = parser
    expecting: argparse.Action | None = None
    for word in words[:-1]:
        expecting = None
        action = _option(current, word)
        if action is not None:
            expecting = action if action.nargs != 0 else None
            continue
        sub = _subcommands(current)
        if sub is not None and word in sub.choices:
            current = sub.choices[word]
    partial = words[-1] if words else ""
    if expecting is not None:
        return [str(c) for c in expecting.choices or () if str(c).startswith(partial)]
    if partial.startswith("-"):
        return sorted(
            s for a in current._actions for s in a.option_strings if s.startswith(partial)
        )
    sub = _subcommands(current)
    return [name for name in (sub.choices if sub else ()) if name.startswith(partial)]


def _option(parser: argparse.ArgumentParser, word: str) -> argparse.Action | None:
    return parser._option_string_actions.get(word)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
