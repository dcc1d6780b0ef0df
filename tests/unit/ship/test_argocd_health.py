"""The Argo CD health script (deploy/argocd/) and kstatus on recorded operator status.

tests/data/health/*.json are ConsumerGroupPolicies as a real operator wrote them on a real API
server, recorded by tests/integration/test_health_checks_live.py with
KAFKA_REBALANCE_RECORD_HEALTH=1 (which checks the same verdicts live). Variants derived from them
cover what a GitOps tool sees between polls: a spec not yet processed, no status yet.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.health_checks import EXPECTED, LUA_VERSIONS, argocd_health, kstatus

VECTORS = Path(__file__).resolve().parents[2] / "data" / "health"


def _load(state: str) -> dict[str, Any]:
    return json.loads((VECTORS / f"{state}.json").read_text())


@pytest.mark.parametrize("lua", LUA_VERSIONS)
@pytest.mark.parametrize("state", sorted(EXPECTED))
def test_recorded_states(state: str, lua: str) -> None:
    obj = _load(state)
    argocd, flux = EXPECTED[state]
    health = argocd_health(obj, lua)
    assert health["status"] == argocd
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    if state != "ready":
        # the reason the operator gave is what the UI shows
        assert health["message"].startswith(
            next(
                c["reason"]
                for c in obj["status"]["conditions"]
                if c["type"] in ("Reconciling", "Stalled") and c["status"] == "True"
            )
        )
    else:
        assert health["message"].startswith(ready["reason"] + ": ")
    assert kstatus(obj) == flux


@pytest.mark.parametrize("lua", LUA_VERSIONS)
@pytest.mark.parametrize("state", sorted(EXPECTED))
def test_a_spec_not_yet_processed_is_progressing(state: str, lua: str) -> None:
    obj = _load(state)
    obj["metadata"]["generation"] += 1
    assert argocd_health(obj, lua)["status"] == "Progressing"
    assert kstatus(obj) == "InProgress"


@pytest.mark.parametrize("lua", LUA_VERSIONS)
def test_no_status_yet_is_progressing(lua: str) -> None:
    obj = copy.deepcopy(_load("ready"))
    del obj["status"]
    assert argocd_health(obj, lua) == {
        "status": "Progressing",
        "message": "waiting for the operator",
    }
    assert kstatus(obj) == "Current"  # kstatus: no conditions at all reads as Current


def test_kstatus_terminating_wins() -> None:
    obj = _load("stalled")
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert kstatus(obj) == "Terminating"
