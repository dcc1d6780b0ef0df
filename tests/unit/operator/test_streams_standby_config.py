"""Reading `streams.num.standby.replicas` from a decoded DescribeConfigs answer: a count only
when the brokers report one for the group, else a one-line error."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from kafka.admin import ConfigResourceType
from kafka_rebalance_operator.kafka.streams_standby_config import (
    StandbyConfigUnknown,
    standby_replicas_in,
)

GROUP = ConfigResourceType.GROUP.value


def _answer(*configs: tuple[str, str | None], error: int = 0, name: str = "app") -> NS:
    entries = [NS(name=k, value=v) for k, v in configs]
    return NS(
        results=[NS(resource_type=GROUP, resource_name=name, error_code=error, configs=entries)]
    )


def test_the_groups_count_is_read() -> None:
    answer = _answer(("streams.num.standby.replicas", "2"), ("other", "x"))
    assert standby_replicas_in(answer, "app") == 2


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (_answer(error=29), "reading streams.num.standby.replicas of group app: "),
        (_answer(("other", "1")), "the brokers do not report it"),
        (_answer(("streams.num.standby.replicas", "-1")), "'-1' is not a count"),
        (_answer(name="other"), "the answer has no entry for the group"),
    ],
)
def test_anything_else_is_one_line_naming_the_problem(answer: NS, message: str) -> None:
    with pytest.raises(StandbyConfigUnknown, match=message) as raised:
        standby_replicas_in(answer, "app")
    assert "\n" not in str(raised.value)
