"""`--log-format json`: one JSON object per line, with the policy's identity as fields."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_rebalance_common import logformat, redaction

from kafka_rebalance.cli import build_parser


def _event(record: logging.LogRecord, **fields: object) -> dict:
    text = logformat.JsonFormatter(dict(fields)).format(record)
    assert "\n" not in text
    return json.loads(text)


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "kafka_rebalance_operator.reconcile", logging.INFO, "f", 1, message, args, None
    )
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_an_event_is_one_line_with_the_policy_fields_from_extra() -> None:
    event = _event(
        _record("epoch %d:\nplan %s", 3, "abc", namespace="orders", policy="p", group="g")
    )
    assert event.pop("time").endswith("+00:00")
    assert event == {
        "level": "INFO",
        "logger": "kafka_rebalance_operator.reconcile",
        "message": "epoch 3:\nplan abc",
        "namespace": "orders",
        "policy": "p",
        "group": "g",
    }


def test_kopf_object_records_name_their_policy_and_constant_fields_apply() -> None:
    record = _record(
        "Timer 'poll_policy' failed",
        k8s_ref={"kind": "ConsumerGroupPolicy", "name": "orders", "namespace": "team-a"},
    )
    event = _event(record, member="pod-0", group=None)
    assert (event["namespace"], event["policy"], event["member"]) == ("team-a", "orders", "pod-0")
    assert "group" not in event


def test_a_traceback_is_a_field_and_secrets_stay_masked() -> None:
    redaction.register("s3cr3t-value-for-the-test")
    try:
        raise RuntimeError("login with s3cr3t-value-for-the-test refused")
    except RuntimeError:
        record = logging.LogRecord(
            "x", logging.ERROR, "f", 1, "failed: %s", ("s3cr3t-value-for-the-test",), sys.exc_info()
        )
    assert redaction.RedactingFilter().filter(record)
    event = _event(record)
    assert "s3cr3t" not in json.dumps(event)
    assert event["exception"].startswith("Traceback") and "RuntimeError" in event["exception"]


@pytest.mark.parametrize("command", ["operator", "sidecar"])
def test_both_commands_take_the_flag(command: str) -> None:
    parser = build_parser(command)
    assert parser.get_default("handler") is None  # sanity: subcommand defaults live below
    option = next(
        a
        for sub in parser._subparsers._group_actions  # type: ignore[union-attr]
        for a in sub.choices[command]._actions
        if "--log-format" in a.option_strings
    )
    assert (option.choices, option.default) == (("text", "json"), "text")


def test_the_sidecar_logs_json_lines_with_group_and_member(tmp_path: Path) -> None:
    """The real command: every stderr line is a JSON event carrying the sidecar's identity."""
    document = tmp_path / "assignment.json"
    document.write_text("{}")
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "kafka-rebalance"),
            "sidecar",
            "--bootstrap-servers=127.0.0.1:1",  # nothing listens: it logs its retries
            "--group=orders",
            "--topics=t",
            "--member=orders-0",
            f"--assignment={document}",
            "--handler=json:dumps",
            "--health-port=0",
            "--metrics-port=0",
            "--log-format=json",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines = []
    assert process.stderr is not None
    for line in process.stderr:
        lines.append(line)
        if len(lines) >= 4:
            break
    process.kill()  # it would retry the bootstrap for a minute; its lines so far are enough
    rest, _ = process.communicate(timeout=20)
    lines += (rest or "").splitlines(keepends=True)
    events = [json.loads(line) for line in lines if line.strip()]
    assert len(events) >= 4
    assert all(e["group"] == "orders" and e["member"] == "orders-0" for e in events)
    assert events[0]["message"] == "kafka security: PLAINTEXT"
