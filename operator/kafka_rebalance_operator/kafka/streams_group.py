"""KIP-1071 streams groups through kafka-python 3.0: describe one (`StreamsGroupDescribe`, API
89) and switch its task assignor (`streams.assignor.name`, a GROUP config, through
IncrementalAlterConfigs).

kafka-python speaks no StreamsGroupDescribe; like `kip848`, the message is defined by schema
files in `kip848_messages/` (facts of Kafka's message schema, versions 0-1) and sent with the
admin client's own connection manager. Version 1 (Kafka 4.4) adds the group's task assignor
name; a broker that answers only version 0 leaves it None.

The trigger: a streams group's coordinator recomputes the target assignment when the group
epoch moves. Switching `streams.assignor.name` does not move it in Kafka 4.4 (its own doc: "the
new assignor takes effect on the next rebalance"; measured on the real broker), but a change of
the group's assignment configs does (KAFKA-19765: on each heartbeat the coordinator compares
`num.standby.replicas` and a non-empty `rack.aware.assignment.tags` with the configs of the last
assignment and bumps the epoch when they differ). So the trigger (`streams_trigger`) toggles
one reserved tag key in the group config `streams.rack.aware.assignment.tags` in and out
(`TRIGGER_TAG`, the key the plug-in reserves), keeping the user's own tags: one epoch bump per
plan. No member carries a
client tag of that key; the broker plug-in ignores the reserved keys, so the toggle changes
nothing but the epoch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import errors
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
from kafka.errors import GroupIdNotFoundError
from kafka.protocol.api_message import ApiMessage

from kafka_rebalance_operator.kafka import kip848_messages

ASSIGNOR_CONFIG = "streams.assignor.name"
PLAN_ASSIGNOR = "kafka-rebalance-plan"
PLAN_ASSIGNOR_ALT = "kafka-rebalance-plan-alt"
PLAN_ASSIGNORS = (PLAN_ASSIGNOR, PLAN_ASSIGNOR_ALT)
TRIGGER_CONFIG = "streams.rack.aware.assignment.tags"
TRIGGER_TAG = "kafka-rebalance-trigger"  # the plug-in strips it before Kafka's logic sees it

# A task: (subtopology id, partition). Task sets per subtopology: subtopology -> partitions.
Task = tuple[str, int]
TaskSets = dict[str, list[int]]


# kafka-python is untyped: mypy takes ApiMessage's class keyword for object.__init_subclass__.
class StreamsGroupDescribeRequest(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class StreamsGroupDescribeResponse(ApiMessage, load_json=kip848_messages):  # type: ignore[call-arg]
    pass


class StreamsGroupError(RuntimeError):
    """The coordinator refused a call: its error code and message, or why it could not be made."""


@dataclass(frozen=True)
class Subtopology:
    """One subtopology of the group's topology. Its tasks are its partitions 0..partitions-1
    (`partitions` is the largest partition count of its source topics; a topology Kafka
    initialised has them all equal)."""

    subtopology_id: str
    source_topics: tuple[str, ...]  # user topics and repartition source topics it reads
    repartition_source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]  # its state stores' changelogs: stateful when any

    @property
    def stateful(self) -> bool:
        return bool(self.changelog_topics)


@dataclass(frozen=True)
class StreamsMember:
    member_id: str
    member_epoch: int
    process_id: str
    client_id: str
    client_host: str
    instance_id: str | None
    rack_id: str | None
    active: TaskSets  # tasks the member runs now
    standby: TaskSets
    warmup: TaskSets
    target_active: TaskSets  # the coordinator's target for it


@dataclass(frozen=True)
class StreamsGroup:
    group_id: str
    state: str  # "Empty", "NotReady", "Assigning", "Reconciling", "Stable", "Dead"
    group_epoch: int
    assignment_epoch: int
    topology_epoch: int | None  # None: no topology initialised yet
    subtopologies: tuple[Subtopology, ...]
    members: tuple[StreamsMember, ...] = field(default_factory=tuple)
    assignor: str | None = None  # version 1 only: the assignor of the next computation
    # the group config streams.num.standby.replicas (None: not read; no standbys are planned)
    standby_replicas: int | None = None

    def active(self) -> dict[str, TaskSets]:
        """member id -> subtopology -> partitions it runs now (members without tasks kept)."""
        return {m.member_id: m.active for m in self.members}

    def targets(self) -> dict[str, TaskSets]:
        """member id -> the tasks the coordinator's target assignment gives it: where a group
        that is reconciling is heading (equal to `active` once it is Stable)."""
        return {m.member_id: m.target_active for m in self.members}

    def standbys(self) -> dict[str, TaskSets]:
        return {m.member_id: m.standby for m in self.members}

    def processes(self) -> dict[str, str]:
        """member id -> process id (the Kafka Streams instance; its members share state)."""
        return {m.member_id: m.process_id for m in self.members}

    def members_off_plan(self, plan: Mapping[str, Mapping[str, Sequence[int]]]) -> list[str]:
        """Member ids whose current active tasks differ from `plan` (member id -> subtopology
        -> partitions): empty when every planned member runs exactly its planned tasks."""
        held = self.active()
        differ = []
        for member, tasks in sorted(plan.items()):
            want = {s: sorted(p) for s, p in tasks.items() if p}
            have = {s: sorted(p) for s, p in (held.get(member) or {}).items() if p}
            if want != have:
                differ.append(member)
        return differ


def _error(answer: Any) -> str:
    """`NAME (code): message` of an error code in a response."""
    name = errors.for_code(answer.error_code).__name__
    message = f": {answer.error_message}" if answer.error_message else ""
    return f"{name} ({answer.error_code}){message}"


def _tasks(task_ids: Any) -> TaskSets:
    return {t.subtopology_id: sorted(t.partitions) for t in (task_ids or []) if t.partitions}


def _names(infos: Any) -> tuple[str, ...]:
    return tuple(sorted(i.name for i in (infos or [])))


def decode_group(group: Any) -> StreamsGroup | None:
    """A decoded DescribedGroup as a `StreamsGroup`; None when it is not a streams group (no
    such group, or a group of another type). Raises StreamsGroupError for other errors."""
    if group.error_code == GroupIdNotFoundError.errno:
        return None
    if group.error_code:
        raise StreamsGroupError(f"describing {group.group_id}: {_error(group)}")
    topology = group.topology
    subtopologies: list[Subtopology] = []
    for s in (topology.subtopologies if topology is not None else None) or []:
        repartition = _names(s.repartition_source_topics)
        subtopologies.append(
            Subtopology(
                subtopology_id=s.subtopology_id,
                source_topics=tuple(sorted(set(s.source_topics or []) | set(repartition))),
                repartition_source_topics=repartition,
                changelog_topics=_names(s.state_changelog_topics),
            )
        )
    return StreamsGroup(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        topology_epoch=topology.epoch if topology is not None else None,
        subtopologies=tuple(sorted(subtopologies, key=lambda s: s.subtopology_id)),
        members=tuple(
            StreamsMember(
                member_id=m.member_id,
                member_epoch=m.member_epoch,
                process_id=m.process_id,
                client_id=m.client_id,
                client_host=m.client_host,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                active=_tasks(m.assignment.active_tasks),
                standby=_tasks(m.assignment.standby_tasks),
                warmup=_tasks(m.assignment.warmup_tasks),
                target_active=_tasks(m.target_assignment.active_tasks),
            )
            for m in sorted(group.members or [], key=lambda m: m.member_id)
        ),
        assignor=getattr(group, "assignor_name", None),
    )


def describe(admin: Any, group_id: str) -> StreamsGroup | None:
    """The group as its coordinator describes it; None when it is not a streams group."""

    async def call() -> Any:
        coordinator = await admin._find_coordinator_id(group_id)
        request = StreamsGroupDescribeRequest(
            group_ids=[group_id],
            include_authorized_operations=False,
            include_topology_description=False,
        )
        return await admin._manager.send(request, node_id=coordinator)

    response = admin._manager.run(call)
    (group,) = response.groups
    return decode_group(group)


def tag_list(value: str | None) -> list[str]:
    """The tags of a `streams.rack.aware.assignment.tags` value, in order (None: none)."""
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def toggled_tags(current: str | None) -> str | None:
    """The next value of `streams.rack.aware.assignment.tags`: the user's tags in their order,
    with `TRIGGER_TAG` appended when `current` lacks it, removed when it has it (None: the
    config is deleted, the group having no tags of its own)."""
    tags = tag_list(current)
    if TRIGGER_TAG in tags:
        return without_trigger(current)
    return ",".join([*tags, TRIGGER_TAG])


def without_trigger(current: str | None) -> str | None:
    """`current` with `TRIGGER_TAG` taken out and the user's tags kept in their order (None:
    no tags remain, the config is deleted)."""
    return ",".join(t for t in tag_list(current) if t != TRIGGER_TAG) or None


def group_resource(group_id: str, configs: dict[str, Any] | None) -> ConfigResource:
    return ConfigResource(ConfigResourceType.GROUP, group_id, configs=configs)


def alter(admin: Any, group_id: str, key: str, value: str | None) -> None:
    """SET `key` of the group's own configs to `value`, or DELETE it when `value` is None (any
    kind's group config: `group_heartbeat` writes the heartbeat keys through it); a refusal
    raises StreamsGroupError with the brokers' reason."""
    change = (AlterConfigOp.DELETE, None) if value is None else (AlterConfigOp.SET, value)
    result = admin.alter_configs(
        [group_resource(group_id, {key: change})], raise_on_unknown=False, incremental=True
    )
    outcome = (result.get("group") or {}).get(group_id, "no answer for the group")
    if outcome != "OK":
        raise StreamsGroupError(f"setting {key}={value} on group {group_id}: {outcome}")
