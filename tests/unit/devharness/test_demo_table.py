"""The live table: rows per member from owners, lag and processed counts."""

from __future__ import annotations

from kafka_rebalance_dev.demo.table import member_rows, render


def test_rows_sum_lag_per_owner_and_show_unowned_partitions() -> None:
    rows = member_rows(
        members=["c-0", "c-1"],
        owners={0: "c-0", 1: "c-1", 2: "c-1", 3: "c-9"},
        lag={0: 5, 1: 100, 2: 1, 3: 7, 4: 30},
        processed_now={"c-0": 110, "c-1": 60},
        processed_before={"c-0": 100, "c-1": 20},
        dt=2.0,
        slow={"c-1"},
    )
    by_name = {r.member: r for r in rows}
    assert by_name["c-0"].partitions == (0,) and by_name["c-0"].lag == 5
    assert by_name["c-0"].rate == 5.0
    assert by_name["c-1"].partitions == (1, 2) and by_name["c-1"].lag == 101
    assert by_name["c-1"].rate == 20.0 and by_name["c-1"].slow
    # a member that owns a partition but whose process is gone is still shown
    assert by_name["c-9"].partitions == (3,) and not by_name["c-9"].alive
    # a partition nobody owns is its own row, so a gap is visible
    assert by_name["-"].partitions == (4,) and by_name["-"].lag == 30
    assert sum(r.lag for r in rows) == 143


def test_render_marks_hot_partitions_and_slow_members() -> None:
    rows = member_rows(["a", "b"], {0: "a", 1: "b"}, {0: 10, 1: 0}, {}, {}, 0.0, {"a"})
    text = render(rows, t=12.0, phase="enforce", epoch=3, group_state="Stable", hot={0})
    lines = text.splitlines()
    assert "epoch=3" in lines[0] and "total lag=10" in lines[0]
    assert lines[2].split()[:3] == ["a", "[slow]", "0*"]
    assert lines[3].split()[:2] == ["b", "1"]


def test_comparison_of_demo_runs_has_one_row_per_strategy() -> None:
    from kafka_rebalance_dev.demo.run import render_comparison

    runs = [
        {
            "strategy": s,
            "max_lag_before": 1700,
            "max_lag_after": after,
            "lag_trend_after": trend,
            "throughput_after": 90.0,
            "epochs": epochs,
            "lost": 0,
            "duplicates": 0,
        }
        for s, after, trend, epochs in (("range", 413, 5.8, 1), ("lag-aware", 195, -5.9, 5))
    ]
    lines = render_comparison(runs).splitlines()
    assert len(lines) == 4
    assert lines[2] == "| range | 1700 | 413 | +5.8 | 90.0 | 1 | 0 | 0 |"
    assert lines[3] == "| lag-aware | 1700 | 195 | -5.9 | 90.0 | 5 | 0 | 0 |"
