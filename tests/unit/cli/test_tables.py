"""The one table printer: kubectl's alignment, numbers to the right, widths kept for a watch."""

from __future__ import annotations

from kafka_rebalance.tables import grid


def test_columns_two_spaces_apart_numbers_right_no_trailing_spaces() -> None:
    lines, widths = grid(["name", "n", ""], [["a", "10", ""], ["bbb", "2", "<-"]], right={1})
    assert lines == ["name   n", "a     10", "bbb    2  <-"]
    assert widths == [4, 2, 2]


def test_rule_and_kept_widths() -> None:
    lines, widths = grid(["K", "V"], [["x", "y"]], rule=True, widths=[3, 1])
    assert lines == ["K    V", "---  -", "x    y"]
    wider, kept = grid(["K", "V"], [["long", "y"]], widths=widths)
    assert (wider[1], kept) == ("long  y", [4, 1])
