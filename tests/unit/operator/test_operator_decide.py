"""The replanning rules (kafka_rebalance_common.replanning), as the operator's decide phase
builds them from a policy: unchanged plans, observe mode, cooldown, minImprovement, approval.

The same rules decide the pipeline's replay (tests/unit/pipeline/test_pipeline_backtest.py)."""

from __future__ import annotations

import pytest
from kafka_rebalance_common.replanning import Action, Rules, cooldown_left, decide
from kafka_rebalance_operator.phases.decide import rules
from kafka_rebalance_operator.policy import parse_spec


def policy(approved: str | None = None, **rebalance):
    spec = {
        "groupId": "g",
        "kafka": {"bootstrapServers": "k:9092"},
        "topics": ["t"],
        "members": {"selector": {"matchLabels": {"app": "x"}}},
        "rebalance": {"mode": "enforce", **rebalance},
    }
    if approved is not None:
        spec["approvedPlan"] = approved
    return rules(parse_spec(spec))


def decision(policy_rules: Rules, **kw):
    base = dict(
        now=1000.0,
        new_hash="new",
        applied_hash="old",
        current_epoch=4,
        writes_needed=False,
        structural=False,
        last_applied_at=None,
        ratio_before=2.0,
        ratio_after=1.0,
        moves=3,
    )
    base.update(kw)
    return decide(policy_rules, **base)


class TestUnchangedPlan:
    def test_is_noop_or_repair_never_a_new_epoch(self) -> None:
        assert decision(policy(), new_hash="old").action is Action.NOOP
        repaired = decision(policy(), new_hash="old", writes_needed=True)
        assert repaired.action is Action.REPAIR and repaired.epoch == 4

    def test_the_action_is_an_enum_that_reads_as_its_word(self) -> None:
        result = decision(policy(), new_hash="old")
        assert result.action == "noop" and str(result.action) == "noop"


class TestApply:
    def test_bumps_the_epoch_by_one(self) -> None:
        result = decision(policy(cooldown="0s"))
        assert result.action is Action.APPLY and result.epoch == 5

    def test_force_finishes_a_hand_over_whatever_cooldown_and_approval_say(self) -> None:
        spec = policy(cooldown="5m", approval="Manual")
        result = decision(spec, last_applied_at=990.0, ratio_after=2.0, force=True)
        assert result.action is Action.APPLY and result.epoch == 5


class TestCooldown:
    def test_holds_a_rebalance_but_not_a_placement(self) -> None:
        spec = policy(cooldown="5m")
        held = decision(spec, last_applied_at=900.0)
        assert held.action is Action.HOLD and held.reason == "CoolingDown"
        assert "200s left" in held.message
        assert decision(spec, last_applied_at=600.0).action is Action.APPLY
        assert decision(spec, last_applied_at=900.0, structural=True).action is Action.APPLY

    def test_is_the_policys_own_duration(self) -> None:
        spec = parse_spec(
            {
                "groupId": "g",
                "kafka": {"bootstrapServers": "k:9092"},
                "topics": ["t"],
                "members": {"selector": {"matchLabels": {"app": "x"}}},
                "rebalance": {"mode": "enforce", "cooldown": "100s"},
            }
        )
        assert rules(spec).cooldown_s == 100

    def test_left_is_never_negative(self) -> None:
        spec = policy(cooldown="60s")
        assert cooldown_left(spec, 100.0, None) == 0.0
        assert cooldown_left(spec, 100.0, 70.0) == 30.0
        assert cooldown_left(spec, 1000.0, 70.0) == 0.0


class TestMinImprovement:
    def test_holds_small_gains(self) -> None:
        spec = policy(minImprovement=0.2)
        held = decision(spec, ratio_before=1.5, ratio_after=1.3)
        assert held.action is Action.HOLD and "minImprovement" in held.message
        assert decision(spec, ratio_before=1.5, ratio_after=1.1).action is Action.APPLY
        assert decision(spec, ratio_before=1.5, ratio_after=1.6).action is Action.HOLD
        assert (
            decision(spec, ratio_before=1.5, ratio_after=1.6, structural=True).action
            is Action.APPLY
        )

    def test_unknown_ratios_do_not_hold(self) -> None:
        assert decision(policy(minImprovement=0.5), ratio_before=None).action is Action.APPLY


class TestObserveMode:
    def test_never_writes(self) -> None:
        spec = policy(mode="observe")
        assert decision(spec).action is Action.OBSERVE
        assert decision(spec, structural=True).action is Action.OBSERVE
        assert decision(spec, new_hash="old", writes_needed=True).action is Action.NOOP


class TestApproval:
    @pytest.mark.parametrize("rebalance", [{"mode": "propose"}, {"approval": "Manual"}])
    def test_gates_apply(self, rebalance) -> None:
        spec = policy(**rebalance)
        assert decision(spec).action is Action.PROPOSE
        assert decision(spec, structural=True).action is Action.PROPOSE
        approved = policy(approved="new", **rebalance)
        assert decision(approved).action is Action.APPLY
        assert decision(approved, new_hash="other").action is Action.PROPOSE
