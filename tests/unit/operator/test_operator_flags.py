"""The operator's time flags take durations as policies do, and bare seconds as they used to."""

from __future__ import annotations

import pytest
from kafka_rebalance_operator.durations import DurationError, parse_flag_duration

from kafka_rebalance.cli import build_parser

TIME_FLAGS = {
    "--leader-election-lease": "leader_election_lease",
    "--leader-election-renew-deadline": "leader_election_renew_deadline",
    "--leader-election-retry": "leader_election_retry",
    "--liveness-max-age": "liveness_max_age",
    "--kafka-timeout": "kafka_timeout",
    "--tick": "tick",
    "--plan-refresh": "plan_refresh",
    "--pod-audit-interval": "pod_audit_interval",
}


def _parse(*argv: str):
    return build_parser("operator").parse_args(["operator", *argv])


@pytest.mark.parametrize(("text", "seconds"), [("15", 15), ("2.5", 2.5), ("0", 0), ("1m30s", 90)])
def test_a_flag_duration_is_a_duration_or_bare_seconds(text: str, seconds: float) -> None:
    assert parse_flag_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-5", "5 s", "fifteen", "1d", "15s5"])
def test_a_flag_duration_refuses_what_is_neither(text: str) -> None:
    with pytest.raises(DurationError):
        parse_flag_duration(text)


@pytest.mark.parametrize("flag", sorted(TIME_FLAGS))
def test_every_time_flag_takes_a_duration_and_bare_seconds_alike(flag: str) -> None:
    attribute = TIME_FLAGS[flag]
    assert getattr(_parse(flag, "1m30s"), attribute) == 90
    assert getattr(_parse(flag, "90"), attribute) == 90


def test_the_defaults_are_what_the_help_says() -> None:
    args = _parse()
    assert (
        args.leader_election_lease,
        args.leader_election_renew_deadline,
        args.leader_election_retry,
    ) == (15, 10, 2)
    assert (args.liveness_max_age, args.kafka_timeout, args.tick) == (600, 10, 1)
    assert (args.plan_refresh, args.pod_audit_interval) == (300, 60)
    assert args.log_level == "info"


def test_a_bad_duration_flag_exits_2_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _parse("--leader-election-lease", "soon")
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--leader-election-lease: not a duration: 'soon'" in error
