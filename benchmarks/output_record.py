"""A pytest plugin recording every plan the test suites compute: the before/after check of the
test inputs for speed-only changes (`benchmarks.digests` covers the benchmark inputs).

    OUTPUT_RECORD=before.txt .venv/bin/python -m pytest -p benchmarks.output_record \
        --hypothesis-seed=0 tests/unit/assignors/test_model.py ...
    OUTPUT_RECORD=after.txt  ... (same command)
    .venv/bin/python -m benchmarks.output_record before.txt after.txt [--ignore STRATEGY ...]

Each line is a digest of the input (the parsed group, options and strategy) and of the output of
`plan_group` (the whole plan) or of a strategy's `assign` / `sticky_assignment` (the raw target,
compared in its own order). The input digest is taken over the parsed group and options whatever
the call's shape (`assign(group, options)` or `assign(context)`, `sticky_assignment(group)` or
`sticky_assignment(context)`), so records of code before and after a change of the strategy
interface still match. The comparison matches lines by input digest, so only inputs that both runs
saw count; it reports how many those were. `--ignore` leaves out the lines of a strategy another
change is deliberately altering.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any

_lines: list[str] = []
STICKY_MODULES = (
    "kafka_rebalance_assignors.sticky_core",
    "kafka_rebalance_assignors.sticky",
    "kafka_rebalance_assignors.cooperative_sticky",
)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _input(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The parsed input of a recorded call, whatever its shape."""
    if len(args) == 1 and hasattr(args[0], "strategy"):  # plan_group(request)
        return (args[0].strategy, args[0].group, args[0].options)
    if len(args) == 1 and hasattr(args[0], "options"):  # assign(context)
        return (args[0].group, args[0].options)
    return args


def _wrap(kind: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def recorded(*args: Any) -> Any:
        parsed = _input(args)
        if kind == "sticky_assignment" and len(parsed) == 2:  # sticky_assignment(context)
            parsed = (parsed[0],)
        key = _sha(kind + repr(parsed))  # taken before the call: a strategy must not mutate input
        label = f"{kind}:{parsed[0]}" if kind == "plan_group" else kind
        result = function(*args)
        shown = result.to_document() if hasattr(result, "to_document") else result  # a Plan
        _lines.append(f"{key} {_sha(json.dumps(shown, separators=(',', ':')))} {label}")
        return result

    recorded.__wrapped__ = function  # type: ignore[attr-defined]
    return recorded


def pytest_configure(config: Any) -> None:
    from kafka_rebalance_assignors.registry import STRATEGY_MODULES

    plan_module = import_module("kafka_rebalance_assignors.planner")
    plan_module.plan_group = _wrap("plan_group", plan_module.plan_group)
    for name, module_name in STRATEGY_MODULES.items():
        module = import_module(module_name)
        module.assign = _wrap(name, module.assign)
    for module_name in STICKY_MODULES:
        module = import_module(module_name)
        module.sticky_assignment = _wrap("sticky_assignment", module.sticky_assignment)


def pytest_unconfigure(config: Any) -> None:
    path = os.environ.get("OUTPUT_RECORD")
    if path:
        with open(path, "w") as handle:
            handle.write("\n".join(_lines) + "\n")


def compare(before_path: str, after_path: str, ignore: tuple[str, ...] = ()) -> int:
    def read(path: str) -> dict[str, set[str]]:
        table: dict[str, set[str]] = {}
        with open(path) as handle:
            for line in handle:
                if line.strip():
                    key, out, kind = line.split()
                    if kind.removeprefix("plan_group:") not in ignore:
                        table.setdefault(key, set()).add(f"{out} {kind}")
        return table

    before, after = read(before_path), read(after_path)
    common = before.keys() & after.keys()
    changed = [key for key in common if before[key] != after[key]]
    print(
        f"{len(before)} inputs before, {len(after)} after, {len(common)} in both, "
        f"{len(changed)} with a different output"
    )
    for key in changed[:20]:
        print(f"CHANGED {key}: {sorted(before[key])} -> {sorted(after[key])}")
    return 1 if changed else 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    ignored = tuple(arguments[arguments.index("--ignore") + 1 :]) if "--ignore" in arguments else ()
    sys.exit(compare(arguments[0], arguments[1], ignored))
