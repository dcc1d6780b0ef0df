"""PodAudit: pods the watch index kept after missing their deletion leave membership (the real
watch gap, an API server restart while the operator was cut off, is
tests/integration/test_pod_audit.py)."""

from __future__ import annotations

from kafka_rebalance_operator.kube.members import PodSummary
from kafka_rebalance_operator.kube.pod_audit import PodAudit


def pod(name: str, uid: str) -> PodSummary:
    return PodSummary(name, {"app": "c"}, "Running", True, uid=uid)


class Lister:
    def __init__(self, present: dict[str, str]) -> None:
        self.present, self.calls, self.fail = present, 0, False

    def __call__(self, namespace: str) -> dict[str, str]:
        self.calls += 1
        if self.fail:
            raise RuntimeError("HTTP 503")
        return dict(self.present)


def test_an_indexed_pod_the_api_server_no_longer_has_is_left_out_until_it_leaves_the_index() -> (
    None
):
    lister = Lister({"c-0": "u0", "c-1": "u1"})
    audit = PodAudit(lister, interval_s=60)
    index = [pod("c-0", "u0"), pod("c-1", "u1"), pod("c-2", "u2")]
    assert [p.name for p in audit.current("ns", index, now=0)] == ["c-0", "c-1"]
    lister.present["c-2"] = "u2-new"  # a new pod under the ghost's name: listed, not indexed yet
    assert [p.name for p in audit.current("ns", index, now=10)] == ["c-0", "c-1"]
    assert lister.calls == 1  # within the interval the known ghosts are enough
    recreated = [*index[:2], pod("c-2", "u2-new")]
    assert [p.name for p in audit.current("ns", recreated, now=61)] == ["c-0", "c-1", "c-2"]
    assert lister.calls == 2


def test_a_failed_list_keeps_the_index_and_the_ghosts_known() -> None:
    lister = Lister({"c-0": "u0"})
    audit = PodAudit(lister, interval_s=5)
    index = [pod("c-0", "u0"), pod("c-1", "u1")]
    assert [p.name for p in audit.current("ns", index, now=0)] == ["c-0"]
    lister.fail = True
    assert [p.name for p in audit.current("ns", index, now=10)] == ["c-0"]
    assert [p.name for p in audit.current("other", index, now=10)] == ["c-0", "c-1"]


def test_interval_zero_never_lists() -> None:
    lister = Lister({})
    audit = PodAudit(lister, interval_s=0)
    index = [pod("c-0", "u0")]
    assert audit.current("ns", index, now=100) == index and lister.calls == 0
