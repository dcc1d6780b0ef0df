"""The shape of Kafka's default streams task assignor (`sticky`, the broker-side
`org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor` of KIP-1071): where a
streams group's active tasks go without a plan. Pure: no I/O, deterministic.

The rules, as that assignor applies them to active tasks (standbys are left out: they do not
drain a backlog):

- stateful tasks are placed first, then stateless ones, each flavour balanced on its own: a
  member's quota is `ceil(tasks / members)` of the flavour (for stateless tasks, of all active
  tasks), recomputed over the members still below it each time one reaches it;
- sticky: a task goes back to the member that ran it (tasks in (partition, subtopology) order)
  while that member is below its quota; then to a member that held it as a standby, the one
  whose process and own task counts are lowest;
- the rest (in (subtopology, partition) order) go to the least loaded process (tasks over its
  members; ties: fewer stateless tasks), and there to its member with the fewest tasks.

It counts tasks and never reads a lag or a rate: a hot task or a slow instance is invisible to
it. Ties are broken by name here, where Kafka's hash-map order decides; the shape (counts per
member, who keeps what) is Kafka's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

Task = tuple[str, int]


class _Quota:
    """A per-member quota over `total` tasks and `members` members, lowered as members fill
    up (the Kafka assignor's `computeTasksPerMember` and `maybeUpdate...PerMember`)."""

    def __init__(self, total: int, members: int) -> None:
        self.total, self.members = total, members
        self.per = self._per()

    def _per(self) -> int:
        return math.ceil(self.total / self.members) if self.members > 0 else 0

    def reached(self, count: int) -> None:
        """A member now has `count` tasks: at the quota, it leaves the pool."""
        if count == self.per:
            self.members -= 1
            self.total -= count
            self.per = self._per()


def sticky_tasks(
    members: Sequence[str],
    stateful: Iterable[Task],
    stateless: Iterable[Task],
    previous: Mapping[Task, str],
    standbys: Mapping[Task, Sequence[str]] | None = None,
    processes: Mapping[str, str] | None = None,
) -> dict[Task, str]:
    """task -> member for every task, as the sticky assignor places them (module docstring).
    `previous`: the task's active member before; `standbys`: the members holding its standby;
    `processes`: member -> process id (absent: the member is its own process). Members not in
    `members` are ignored wherever they appear.

    Invariants: every task is placed once (none when there is no member); a member below its
    quota keeps every task it ran; counts differ by at most one within a flavour when nothing
    sticks."""
    present = sorted(set(members))
    if not present:
        return {}
    process = {m: (processes or {}).get(m, m) for m in present}
    by_process: dict[str, list[str]] = {}
    for m in present:
        by_process.setdefault(process[m], []).append(m)
    count = dict.fromkeys(present, 0)
    stateless_count = dict.fromkeys(present, 0)
    placed: dict[Task, str] = {}
    stateful_tasks, stateless_tasks = sorted(set(stateful)), sorted(set(stateless))
    active_quota = _Quota(len(stateful_tasks) + len(stateless_tasks), len(present))

    def load(p: str) -> tuple[float, float]:
        ms = by_process[p]
        return (
            sum(count[m] for m in ms) / len(ms),
            sum(stateless_count[m] for m in ms) / len(ms),
        )

    def add(task: Task, member: str, is_stateful: bool) -> None:
        placed[task] = member
        count[member] += 1
        if not is_stateful:
            stateless_count[member] += 1
        active_quota.reached(count[member])

    for tasks, is_stateful in ((stateful_tasks, True), (stateless_tasks, False)):
        quota = _Quota(len(stateful_tasks), len(present)) if is_stateful else active_quota
        left = sorted(tasks, key=lambda t: (t[1], t[0]))
        for pick in (
            lambda t: [previous[t]] if previous.get(t) in count else [],
            lambda t: [m for m in (standbys or {}).get(t, ()) if m in count],
        ):
            rest = []
            for task in left:
                holders = sorted(pick(task), key=lambda m: (load(process[m])[0], count[m], m))
                member = holders[0] if holders else None
                if member is not None and count[member] < quota.per:
                    add(task, member, is_stateful)
                    if is_stateful:
                        quota.reached(count[member])
                else:
                    rest.append(task)
            left = rest
        for task in sorted(left):
            target = min(by_process, key=lambda p: (*load(p), p))
            member = min(by_process[target], key=lambda m: (count[m], m))
            add(task, member, is_stateful)
    return placed
