"""Replay one group's history under a candidate policy, with the real `assignors` planner.

A candidate is what a ConsumerGroupPolicy would say (strategy, weights from measured capacity or
not, minImprovement, maxMovesPerRound, cooldown). The replay does what the operator would have
done at every poll, knowing only what it would have known then (the lag at that poll, the rate
of the interval before it), and lets the fluid model of `pipeline.simulate` play out the next
interval with the production that really happened.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kafka_rebalance_assignors as assignors
from kafka_rebalance_common import replanning

from kafka_rebalance_pipeline.poll_grid import carry_forward, log_end_rates
from kafka_rebalance_pipeline.simulate import Score, drain_step, score, time_lag

# Strategies whose plan depends on load: the operator replans them every poll (subject to the
# cooldown). The others depend only on membership and ownership, so replanning with unchanged
# membership gives the same assignment; the replay skips those calls.
LOAD_DRIVEN = frozenset({"kip169", "lag-aware"})
DEFAULT_COOLDOWN_S = 300.0
# (poll, candidate's document key, owners, integer lags) -> the planner's answer; per group.
PlanCache = dict[tuple[Any, ...], assignors.Plan]


@dataclass(frozen=True)
class Candidate:
    """One point of the backtest grid, in the CRD's terms."""

    strategy: str
    weights: str = "none"  # "none" | "capacity"
    min_improvement: float = 0.0
    max_moves: str | None = None  # as spec.rebalance.maxMovesPerRound: "25%" or "10"
    cooldown_s: float = DEFAULT_COOLDOWN_S

    @property
    def id(self) -> str:
        parts = [self.strategy]
        if self.weights != "none":
            parts.append(f"weights={self.weights}")
        if self.min_improvement:
            parts.append(f"minImprovement={self.min_improvement:g}")
        if self.max_moves is not None:
            parts.append(f"maxMoves={self.max_moves}")
        if self.strategy in LOAD_DRIVEN:
            parts.append(f"cooldown={self.cooldown_s:g}s")
        return " ".join(parts)

    @property
    def document_key(self) -> tuple[Any, ...]:
        """What of the candidate reaches the planner's document (not the cooldown, which only
        decides whether the planner is called)."""
        return (self.strategy, self.weights, self.min_improvement, self.max_moves)

    def plan_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.min_improvement:
            options["min_improvement"] = self.min_improvement
        if self.max_moves is not None:
            options["max_moves"] = (
                self.max_moves if self.max_moves.endswith("%") else int(self.max_moves)
            )
        return options


def default_grid(current_strategy: str) -> list[Candidate]:
    """Every strategy, and the option grid where the options matter. The current policy (the
    current strategy with default options) comes first."""
    grid = [Candidate(current_strategy)]
    for strategy in assignors.STRATEGY_NAMES:
        if strategy == "weighted-sticky":
            grid += [Candidate(strategy, weights=w) for w in ("none", "capacity")]
        elif strategy == "kip169":
            grid += [Candidate(strategy, cooldown_s=c) for c in (0.0, DEFAULT_COOLDOWN_S)]
        elif strategy == "lag-aware":
            grid += [
                Candidate(strategy, weights=w, min_improvement=mi, max_moves=mm, cooldown_s=c)
                for w in ("none", "capacity")
                for mi in (0.0, 0.1, 0.25)
                for mm in (None, "25%")
                for c in (0.0, DEFAULT_COOLDOWN_S)
            ]
        else:
            grid.append(Candidate(strategy))
    unique: dict[str, Candidate] = {}
    for candidate in grid:
        unique.setdefault(candidate.id, candidate)
    return list(unique.values())


def strategies_grid(current_strategy: str) -> list[Candidate]:
    """One candidate per strategy with default options, plus capacity weights where a strategy
    reads weights: the quick grid (about a third of the full one's planner calls)."""
    grid = [Candidate(current_strategy)]
    for strategy in assignors.STRATEGY_NAMES:
        grid.append(Candidate(strategy))
        if strategy in ("weighted-sticky", "lag-aware"):
            grid.append(Candidate(strategy, weights="capacity"))
    unique: dict[str, Candidate] = {}
    for candidate in grid:
        unique.setdefault(candidate.id, candidate)
    return list(unique.values())


GRIDS = {"full": default_grid, "strategies": strategies_grid}


@dataclass
class GroupHistory:
    """One group's telemetry as aligned matrices: poll t, partition index p."""

    cluster: str
    namespace: str
    policy: str
    group: str
    ts_s: list[float]
    topics: dict[str, int]
    partitions: list[tuple[str, int]]
    rates: list[list[float]]  # production (records/s) in the interval ending at poll t
    initial_lag: list[float]
    initial_owner: list[str | None]
    members: list[tuple[str, ...]]  # members present at poll t (owners seen then)
    capacity: dict[str, float]
    current_strategy: str = "range"

    @property
    def polls(self) -> int:
        return len(self.ts_s)


def history_from_rows(
    key: Mapping[str, str],
    rows: Any,
    capacity: Mapping[str, float],
    current_strategy: str,
) -> GroupHistory:
    """Build a history from a pandas frame of one group's partition rows (columns ts_ms, topic,
    partition, log_end, lag, owner). Gaps (a partition missing at a poll) carry the last value
    forward; partitions never seen but below a seen number get zero rate and lag."""
    frame = rows.sort_values(["ts_ms", "topic", "partition"])
    ts_ms = sorted(frame["ts_ms"].unique().tolist())
    topics: dict[str, int] = {}
    for topic, part in zip(frame["topic"], frame["partition"], strict=True):
        topics[topic] = max(topics.get(topic, 0), int(part) + 1)
    topics = dict(sorted(topics.items()))
    partitions = [(t, p) for t, n in topics.items() for p in range(n)]
    index = {tp: i for i, tp in enumerate(partitions)}
    poll = {ts: i for i, ts in enumerate(ts_ms)}
    count, polls = len(partitions), len(ts_ms)
    log_end: list[list[float | None]] = [[None] * count for _ in range(polls)]
    lag: list[list[float | None]] = [[None] * count for _ in range(polls)]
    owner: list[list[str | None]] = [[None] * count for _ in range(polls)]
    for ts, topic, part, end, lg, own in zip(
        frame["ts_ms"],
        frame["topic"],
        frame["partition"],
        frame["log_end"],
        frame["lag"],
        frame["owner"],
        strict=True,
    ):
        t, p = poll[ts], index[(topic, int(part))]
        log_end[t][p] = float(end) if end == end and end is not None else None
        lag[t][p] = float(lg) if lg == lg and lg is not None else None
        owner[t][p] = own if isinstance(own, str) and own else None
    carry_forward(log_end)
    carry_forward(lag)
    carry_forward(owner)
    ts_s = [ts / 1000.0 for ts in ts_ms]
    rates = [[r or 0.0 for r in row] for row in log_end_rates(log_end, ts_s)]
    if polls > 1:
        rates[0] = list(rates[1])
    members = [tuple(sorted({o for o in owner[t] if o is not None})) for t in range(polls)]
    return GroupHistory(
        cluster=str(key.get("cluster", "")),
        namespace=str(key.get("namespace", "")),
        policy=str(key.get("policy", "")),
        group=str(key.get("group", "")),
        ts_s=ts_s,
        topics=topics,
        partitions=partitions,
        rates=rates,
        initial_lag=[v or 0.0 for v in lag[0]] if polls else [],
        initial_owner=owner[0] if polls else [],
        members=members,
        capacity=dict(capacity),
        current_strategy=current_strategy,
    )


def capacity_weights(capacity: Mapping[str, float], members: Sequence[str]) -> dict[str, float]:
    """Weights proportional to measured capacity, the fastest present member at 1 (3 significant
    digits, never below 0.001: the CRD needs > 0). Members of unknown capacity get 1."""
    known = [capacity[m] for m in members if capacity.get(m, 0) > 0]
    top = max(known, default=0.0)
    weights = {}
    for member in members:
        value = capacity.get(member, 0.0)
        if top <= 0 or value <= 0:
            weights[member] = 1.0
        else:
            weights[member] = max(0.001, float(f"{value / top:.3g}"))
    return weights


@dataclass
class ReplayResult:
    candidate: Candidate
    score: Score
    utilisation: dict[str, float]  # member -> mean assigned production / capacity
    weights: dict[str, float]
    lag_series: list[float]  # group total lag, downsampled
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _plan_request(
    history: GroupHistory,
    candidate: Candidate,
    owners: Sequence[str | None],
    present: Sequence[str],
    lag: Sequence[float],
    rate: Sequence[float],
    weights: Mapping[str, float],
) -> assignors.PlanRequest:
    """The request the operator would build at this poll (`assignors.group_request`, as the
    operator's `planning.build_request`): every present member subscribes to every topic."""
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in present}
    for (topic, part), owner in zip(history.partitions, owners, strict=True):
        if owner in owned:
            owned[owner].setdefault(topic, []).append(part)
    return assignors.group_request(
        strategy=candidate.strategy,
        topics=history.topics,
        members=present,
        owned=owned,
        lag={tp: max(0, int(value)) for tp, value in zip(history.partitions, lag, strict=True)},
        rate={tp: round(max(0.0, r), 6) for tp, r in zip(history.partitions, rate, strict=True)},
        weights=weights if candidate.weights == "capacity" else None,
        options=assignors.PlanOptions(**candidate.plan_options()),
    )


def _ratio(value: Any) -> float | None:
    """As the operator reads the planner's maxLoadRatio (6 decimals)."""
    return round(float(value), 6) if isinstance(value, int | float) else None


def _downsample(values: Sequence[float], points: int) -> list[float]:
    if len(values) <= points:
        return [round(v, 1) for v in values]
    step = len(values) / points
    return [round(max(values[int(i * step) : int((i + 1) * step)]), 1) for i in range(points)]


@dataclass
class _Replay:
    """The simulated group between polls: who owns each partition, its lag and hand-over pause,
    the epochs applied, and the per-interval figures the score is computed from."""

    owners: list[str | None]
    lag: list[float]
    paused: list[float]
    moves: int = 0
    epochs: int = 0
    plans: int = 0
    last_applied: float | None = None
    totals: list[float] = field(default_factory=list)
    worst: list[float] = field(default_factory=list)
    dts: list[float] = field(default_factory=list)
    load_sum: dict[str, float] = field(default_factory=dict)
    samples: int = 0

    def advance(self, history: GroupHistory, t: int) -> None:
        """Drain from poll t-1 to poll t under the current owners; record the interval."""
        dt = history.ts_s[t] - history.ts_s[t - 1]
        rates_now = history.rates[t]
        self.lag, _ = drain_step(
            self.lag, rates_now, self.owners, history.capacity, dt, self.paused
        )
        self.paused = [max(0.0, x - dt) for x in self.paused]
        self.dts.append(dt)
        self.totals.append(sum(self.lag))
        self.worst.append(
            max((time_lag(v, r) for v, r in zip(self.lag, rates_now, strict=True)), default=0)
        )
        for p, owner in enumerate(self.owners):
            if owner is not None:
                self.load_sum[owner] = self.load_sum.get(owner, 0.0) + rates_now[p]
        self.samples += 1

    def apply(self, target: list[str | None], moves: int, now: float, handoff_s: float) -> None:
        """A new epoch: moved partitions pause for the hand-over."""
        self.epochs += 1
        self.moves += moves
        self.last_applied = now
        for p in range(len(target)):
            if target[p] != self.owners[p]:
                self.paused[p] = handoff_s
        self.owners = target


def replay(
    history: GroupHistory,
    candidate: Candidate,
    *,
    handoff_s: float = 10.0,
    slo_s: float = 60.0,
    series_points: int = 120,
    plans_cache: PlanCache | None = None,
) -> ReplayResult:
    """Replay the history under `candidate`; see the module docstring for the rules.

    `plans_cache` (one per group, shared by its candidates) answers a planner call whose
    document this group's replays already produced, which is common: candidates that differ only
    in cooldown, or whose options have not yet changed a decision, reach a poll in the same state.
    The planner is a pure function of the document, so the answer is the one it would give."""
    count = len(history.partitions)
    state = _Replay(list(history.initial_owner), list(history.initial_lag), [0.0] * count)
    previous_members: tuple[str, ...] | None = None
    weights: dict[str, float] = {}
    position = {tp: i for i, tp in enumerate(history.partitions)}
    # the operator's own replanning rules (cooldown, minImprovement), as the candidate sets them
    rules = replanning.Rules(
        cooldown_s=candidate.cooldown_s, min_improvement=candidate.min_improvement
    )
    for t in range(history.polls):
        now = history.ts_s[t]
        if t > 0:
            state.advance(history, t)
        # Plan at poll t with what the operator knows then; the result governs (t, t+1].
        present = history.members[t]
        if not present:
            continue
        membership_changed = present != previous_members
        previous_members = present
        if membership_changed:
            state.owners = [o if o in present else None for o in state.owners]
            weights = capacity_weights(history.capacity, present)
        # The first poll and a membership change need a placement (the operator's `structural`);
        # otherwise only a load-driven strategy can change its plan, and a plan decide() would
        # hold for the cooldown whatever it is need not be computed.
        structural = t == 0 or membership_changed
        cooled = replanning.cooldown_left(rules, now, state.last_applied) == 0
        if not (structural or (candidate.strategy in LOAD_DRIVEN and cooled)):
            continue
        try:
            result = _planned(history, candidate, state, present, t, weights, plans_cache)
        except Exception as exc:  # a planner bug must not kill the other groups' backtests
            return ReplayResult(
                candidate,
                score([0.0], [0.0], [0.0], slo_s, 0, 0, 0),
                {},
                weights,
                [],
                error=f"{type(exc).__name__}: {exc}",
            )
        state.plans += 1
        target: list[str | None] = [None] * count
        for member, owned in result.assignment.items():
            for topic, parts in owned.items():
                for part in parts:
                    target[position[(topic, part)]] = member
        decision = _decision(rules, state, result, target, now, structural)
        if decision.action is replanning.Action.APPLY:
            state.apply(target, len(result.moves), now, handoff_s)
    return _result(history, candidate, state, weights, slo_s, series_points)


def _planned(
    history: GroupHistory,
    candidate: Candidate,
    state: _Replay,
    present: tuple[str, ...],
    t: int,
    weights: Mapping[str, float],
    plans_cache: PlanCache | None,
) -> assignors.Plan:
    """The planner's answer at poll t, from `plans_cache` when this group's replays already
    asked the same question."""
    # Everything else in the document (members, weights, rates) is fixed by the poll.
    key = (
        t,
        *candidate.document_key,
        tuple(state.owners),
        tuple(max(0, int(v)) for v in state.lag),
    )
    result = plans_cache.get(key) if plans_cache is not None else None
    if result is None:
        request = _plan_request(
            history, candidate, state.owners, present, state.lag, history.rates[t], weights
        )
        result = assignors.plan_request(request)
        if plans_cache is not None:
            plans_cache[key] = result
    return result


def _decision(
    rules: replanning.Rules,
    state: _Replay,
    result: assignors.Plan,
    target: list[str | None],
    now: float,
    structural: bool,
) -> replanning.Decision:
    """What the operator's decide() makes of the plan at this poll."""
    in_place = f"epoch {state.epochs}"  # decide() compares plan identities, nothing else
    stats = result.stats
    return replanning.decide(
        rules,
        now=now,
        new_hash=in_place if target == state.owners else f"epoch {state.epochs + 1}",
        applied_hash=in_place,
        current_epoch=state.epochs,
        writes_needed=False,
        structural=structural,
        last_applied_at=state.last_applied,
        ratio_before=_ratio(stats.max_load_ratio_before),
        ratio_after=_ratio(stats.max_load_ratio),
        moves=len(result.moves),
    )


def _result(
    history: GroupHistory,
    candidate: Candidate,
    state: _Replay,
    weights: Mapping[str, float],
    slo_s: float,
    series_points: int,
) -> ReplayResult:
    """The score, each member's utilisation and the lag series of a finished replay."""
    samples, load_sum = state.samples, state.load_sum
    utilisation = {
        m: round(load_sum[m] / samples / history.capacity[m], 4)
        for m in sorted(load_sum)
        if samples and history.capacity.get(m, 0) > 0
    }
    return ReplayResult(
        candidate=candidate,
        score=score(
            state.totals, state.worst, state.dts, slo_s, state.moves, state.epochs, state.plans
        ),
        utilisation=utilisation,
        weights=dict(weights) if candidate.weights == "capacity" else {},
        lag_series=_downsample(state.totals, series_points),
    )


def result_row(history: GroupHistory, result: ReplayResult, is_current: bool) -> dict[str, Any]:
    """One backtest output row (the Parquet schema of `pipeline.backtest_job`)."""
    c = result.candidate
    row: dict[str, Any] = {
        "cluster": history.cluster,
        "namespace": history.namespace,
        "policy": history.policy,
        "group": history.group,
        "candidate": c.id,
        "strategy": c.strategy,
        "weights": c.weights,
        "min_improvement": float(c.min_improvement),
        "max_moves": c.max_moves,
        "cooldown_s": float(c.cooldown_s),
        "is_current": is_current,
        "current_strategy": history.current_strategy,
        "partitions": len(history.partitions),
        "polls": history.polls,
        "error": result.error,
        "utilisation_json": json.dumps(result.utilisation, sort_keys=True),
        "weights_json": json.dumps(result.weights, sort_keys=True),
        "capacity_json": json.dumps(
            {m: round(v, 3) for m, v in sorted(history.capacity.items())}, sort_keys=True
        ),
        "lag_series_json": json.dumps(result.lag_series),
        "group_type": "consumer",
        "drain_s": None,
        "members_per_partition_json": None,
    }
    for name, value in result.score.as_dict().items():
        row[name] = float(value) if isinstance(value, float) else int(value)
    for name in ("max_lag", "p99_lag", "mean_lag", "time_over_slo_s", "duration_s"):
        row[name] = float(row[name]) if math.isfinite(row[name]) else None
    return row


def backtest_group(
    history: GroupHistory,
    grid: Sequence[Candidate] | str = "full",
    *,
    handoff_s: float = 10.0,
    slo_s: float = 60.0,
    share_plans: bool = True,
) -> list[dict[str, Any]]:
    """All candidates of the grid (a list, or a name in GRIDS) for one group, as output rows.
    `share_plans`: one planner answer per distinct document across the candidates (the output
    is the same either way; False is for the test that proves it)."""
    candidates = GRIDS[grid](history.current_strategy) if isinstance(grid, str) else list(grid)
    current_id = Candidate(history.current_strategy).id
    cache: PlanCache | None = {} if share_plans else None
    return [
        result_row(
            history,
            replay(history, c, handoff_s=handoff_s, slo_s=slo_s, plans_cache=cache),
            c.id == current_id,
        )
        for c in candidates
    ]
