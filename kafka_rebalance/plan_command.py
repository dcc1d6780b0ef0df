"""`kafka-rebalance plan`: preview the plan the operator would apply (the plan contract).

JSON in, JSON out. A document with `"groupType": "streams"` gets a task plan, one with
`"groupType": "share"` a share plan (KIP-932: `kafka_rebalance_assignors.share`,
docs/share-groups.md). Bad input exits 2 with
one line on stderr naming the field; never a traceback and never a partial plan on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kafka_rebalance_assignors import PlanInputError, plan
from kafka_rebalance_assignors.collector import collector_paused
from kafka_rebalance_assignors.registry import STRATEGY_NAMES
from kafka_rebalance_assignors.share import plan_share_document
from kafka_rebalance_assignors.streams_request import (
    is_task_document,
    parse_task_request,
    task_plan_document,
)
from kafka_rebalance_assignors.streams_tasks import plan_tasks

EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="compute a partition (or streams task) plan from a JSON group description",
        description="Read one plan-contract JSON object and print the plan; a document with "
        '"groupType": "streams" is planned as a streams group\'s tasks.',
    )
    parser.add_argument("--input", "-i", default="-", help="JSON file to read, or - for stdin")
    # No argparse `choices`: an unknown name must fail like any other bad input (exit 2, one
    # line naming the field), not with argparse's multi-line usage text.
    parser.add_argument(
        "--strategy",
        metavar="NAME",
        help=f"override the input's strategy ({', '.join(STRATEGY_NAMES)})",
    )
    parser.add_argument(
        "--format", choices=("json", "table"), default="json", help="json (default) or a table"
    )
    parser.set_defaults(handler=run)


def _read_document(source: str) -> Any:
    try:
        if source == "-":
            text = sys.stdin.read()
        else:
            with open(source, encoding="utf-8") as handle:
                text = handle.read()
    except OSError as error:
        raise PlanInputError("--input", f"cannot read {source}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise PlanInputError("input", f"not UTF-8 text (byte {error.start})") from error
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanInputError(
            "input", f"malformed JSON at line {error.lineno} column {error.colno}: {error.msg}"
        ) from error
    except RecursionError as error:
        raise PlanInputError("input", "JSON nested too deeply") from error


def run(args: argparse.Namespace) -> int:
    # Reading, planning and writing a large group allocate millions of acyclic objects: pausing
    # the cyclic collector for the whole short-lived command roughly halves its time.
    with collector_paused():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        document = _read_document(args.input)
        if is_task_document(document):  # a streams group: tasks, not partitions
            if args.format == "table":
                raise PlanInputError("--format", "table is for partition plans; use json")
            result = task_plan_document(plan_tasks(parse_task_request(document, args.strategy)))
        elif isinstance(document, dict) and document.get("groupType") == "share":
            if args.strategy is not None:
                raise PlanInputError("--strategy", "a share plan has no strategy to choose")
            if args.format == "table":
                raise PlanInputError("--format", "share plans are printed as JSON only")
            result = plan_share_document(document)
        else:
            result = plan(document, args.strategy)
    except PlanInputError as error:
        # One line, whatever the input: names taken from it may hold line breaks.
        message = str(error).replace("\r", "\\r").replace("\n", "\\n")
        print(f"kafka-rebalance plan: bad input: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.format == "table":
        from kafka_rebalance.plan_table import render_table

        sys.stdout.write(render_table(result))
    else:
        # One write of the whole text: json.dump would write each of its ~350,000 chunks (a
        # 100k-partition plan) separately, one system call each when stdout is unbuffered
        # (PYTHONUNBUFFERED=1, common in container images).
        sys.stdout.write(json.dumps(result, sort_keys=True, separators=(",", ":")) + "\n")
    return 0
