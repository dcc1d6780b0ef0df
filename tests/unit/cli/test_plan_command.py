"""`kafka-rebalance plan` as users run it: the installed console command, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_rebalance_assignors.registry import STRATEGY_NAMES

COMMAND = Path(sys.executable).with_name("kafka-rebalance")

GROUP = {
    "strategy": "lag-aware",
    "topics": {"orders": 6, "payments": 2},
    "members": {
        "orders-0": {
            "topics": ["orders", "payments"],
            "weight": 1.0,
            "owned": {"orders": [0, 1, 2, 3]},
            "generation": 7,
        },
        "orders-1": {
            "topics": ["orders"],
            "weight": 2.0,
            "owned": {"orders": [4]},
            "generation": 7,
        },
        "orders-2": {"topics": ["payments"]},
        "idle": {"topics": []},
    },
    "lag": {"orders": [100000, 60000, 50000, 40000, 10, 0], "payments": [0, 12]},
    "rate": {"orders": [50.0, 10.0, 10.0, 5.0, 1.0, 1.0]},
    "options": {"max_moves": 10, "min_improvement": 0.1},
}


def run_plan(stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert COMMAND.exists(), f"{COMMAND} missing: run scripts/bootstrap"
    return subprocess.run(
        [str(COMMAND), "plan", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_plan_prints_a_complete_plan():
    done = run_plan(json.dumps(GROUP))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)
    assert set(result) == {"assignment", "members", "moves", "stats"}
    assignment = result["assignment"]
    assert set(assignment) == set(GROUP["members"])  # every member, even the idle one
    assert assignment["idle"] == {}
    owners: dict[tuple[str, int], str] = {}
    for member_id, owned in assignment.items():
        for topic, partitions in owned.items():
            assert partitions == sorted(partitions)
            assert topic in GROUP["members"][member_id]["topics"]
            for partition in partitions:
                assert (topic, partition) not in owners
                owners[topic, partition] = member_id
    assert len(owners) == 8
    stats = result["stats"]
    assert stats["load_model"] == "drain"
    assert stats["moves"] == len(result["moves"]) <= 10
    assert stats["max_load_ratio"] >= 1.0
    assert stats["max_load_ratio"] <= stats["max_load_ratio_before"]
    for move in result["moves"]:
        assert owners[move["topic"], move["partition"]] == move["to"] != move["from"]


def test_output_is_byte_identical_for_the_same_input(tmp_path):
    path = tmp_path / "group.json"
    path.write_text(json.dumps(GROUP))
    # Key order must not matter either: the same group, keys reversed.
    reordered = json.loads(json.dumps(GROUP), object_pairs_hook=lambda pairs: dict(reversed(pairs)))
    outputs = {
        run_plan("", "--input", str(path)).stdout,
        run_plan(json.dumps(GROUP)).stdout,
        run_plan(json.dumps(reordered)).stdout,
    }
    assert len(outputs) == 1
    assert outputs.pop().count("\n") == 1


@pytest.mark.parametrize("strategy", ["kip169", "weighted-sticky", "lag-aware"])
def test_strategy_override_and_table(strategy):
    done = run_plan(json.dumps(GROUP), "--strategy", strategy, "--format", "table")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("Members\n")
    for member_id in GROUP["members"]:
        assert member_id in text
    assert "Moves (" in text
    stat_lines = [line.split() for line in text.split("Stats\n", 1)[1].splitlines()]
    assert ["strategy", strategy] in stat_lines
    assert "max_load_ratio" in text
    # the member table carries weight, partition count, load and normalised load
    header = text.splitlines()[1].split()
    assert header[:5] == ["member", "weight", "partitions", "load", "normalised"]


def test_every_strategy_name_runs():
    for strategy in STRATEGY_NAMES:
        done = run_plan(json.dumps(GROUP), "--strategy", strategy)
        assert done.returncode == 0, f"{strategy}: {done.stderr}"
        assert json.loads(done.stdout)["stats"]["strategy"] == strategy


def _with(**changes):
    document = json.loads(json.dumps(GROUP))
    for dotted, value in changes.items():
        target = document
        *parents, last = dotted.split("__")
        for key in parents:
            target = target[key]
        target[last] = value
    return json.dumps(document)


@pytest.mark.parametrize(
    ("stdin", "args", "field"),
    [
        (_with(strategy="fastest"), (), "strategy"),
        (json.dumps(GROUP), ("--strategy", "fastest"), "strategy"),
        (_with(members__orders_1=None), (), "members.orders_1"),
        (_with(members__idle__weight=0), (), "members.idle.weight"),
        ('{"topics": {"orders": -3}, "members": {}}', (), "topics.orders"),
        (_with(lag__orders=[1, 2]), (), "lag.orders"),
        (_with(rate__orders=[1.0]), (), "rate.orders"),
        (_with(colour="red"), (), "colour"),
        (_with(options__surprise=True), (), "options.surprise"),
        ('{"topics": {"orders": 3}, "members": ', (), "input"),
        ("", (), "input"),
        ("[1, 2, 3]", (), "input"),
        ('"just a string"', (), "input"),
        ('{"topics": {"t": 1}, "members": {"a": {"topics": ["t"], "weight": NaN}}}', (), None),
        (
            '{"topics": {"t": 1}, "members": {"a": {"topics": ["t"], "weight": -Infinity}}}',
            (),
            None,
        ),
        ('{"topics": {"t": 1}, "members": {"a\\nb": {"topics": ["t"], "weight": 0}}}', (), None),
    ],
)
def test_bad_input_exits_2_with_one_line(stdin, args, field):
    done = run_plan(stdin, *args)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("kafka-rebalance plan: bad input: ")
    if field is not None:
        assert f": {field}: " in lines[0]
    else:
        assert ".weight: " in lines[0]


def test_unreadable_input_file(tmp_path):
    done = run_plan("", "--input", str(tmp_path / "missing.json"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert "--input: cannot read" in done.stderr


def test_stale_facts_are_counted_not_refused():
    document = {
        "topics": {"orders": 2},
        "members": {
            "a": {"topics": ["orders", "deleted"], "owned": {"orders": [0, 9], "deleted": [0]}},
            "b": {"topics": ["orders"]},
        },
    }
    done = run_plan(json.dumps(document))
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)["stats"]
    assert stats["stale_ownership_dropped"] == 2
    assert stats["unknown_subscriptions_ignored"] == 1


STREAMS_EXAMPLE = Path(__file__).parents[3] / "examples" / "plans" / "streams-tasks.json"


def test_a_streams_document_previews_a_task_plan_from_the_example():
    document = json.loads(STREAMS_EXAMPLE.read_text())
    done = run_plan(STREAMS_EXAMPLE.read_text())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["groupType"] == "streams"
    planned = sorted(
        (s, p) for tasks in result["assignment"].values() for s, ps in tasks.items() for p in ps
    )
    # every task once, on members of the input
    assert planned == sorted((s, p) for s, n in document["tasks"].items() for p in range(n))
    assert set(result["assignment"]) == {m["id"] for m in document["members"]}
    # the hot tasks 0_0 and 0_1 no longer share a member, and the peak falls
    owner = {
        (s, p): m for m, ts in result["assignment"].items() for s, ps in ts.items() for p in ps
    }
    assert owner[("0", 0)] != owner[("0", 1)]
    assert result["peakAfter"] < result["peakBefore"]
    assert result["moveCost"] <= document["maxMovesPerRound"] or len(result["moves"]) == 1


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"groupType": "streams", "members": [{"id": "a"}]}, "tasks"),
        ({"groupType": "streams", "tasks": {"0": 2}, "members": []}, "members"),
        (
            {"groupType": "streams", "tasks": {"0": 2}, "members": [{"id": "a"}, {"id": "a"}]},
            "members[1].id",
        ),
        (
            {
                "groupType": "streams",
                "tasks": {"0": 2},
                "members": [{"id": "a"}],
                "lag": {"0": [1]},
            },
            "lag.0",
        ),
        (
            {
                "groupType": "streams",
                "tasks": {"0": 2},
                "members": [{"id": "a", "standby": {"9": [0]}}],
            },
            "members[0].standby.9",
        ),
    ],
)
def test_a_bad_streams_document_exits_2_naming_the_field(document, field):
    done = run_plan(json.dumps(document))
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert f"bad input: {field}: " in line, line


def test_a_streams_document_refuses_the_table_format():
    done = run_plan(STREAMS_EXAMPLE.read_text(), "--format", "table")
    assert done.returncode == 2 and "--format: " in done.stderr
