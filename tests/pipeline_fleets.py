"""Small synthetic fleets whose right answers are known, shared by the pipeline's unit and Spark
tests."""

from kafka_rebalance_pipeline.generate import FleetSpec


def uniform_fleet(polls: int) -> FleetSpec:
    """One group, uniform rates, equal capacities, 12 partitions over 4 members: `range` is
    already perfect, so no recommendation may change it."""
    return FleetSpec(
        groups=1,
        polls=polls,
        partitions=(12, 12),
        members=(4, 4),
        topics=1,
        pareto_shape=1000.0,
        diurnal_amplitude=0.0,
        bursts_per_group=0,
        slow_fraction=0.0,
        capacity_jitter=0.0,
        initial_backlog_s=90.0,
    )


def slow_member_fleet(polls: int) -> FleetSpec:
    """The uniform fleet with one member draining at a quarter of the others' capacity."""
    return FleetSpec(**{**uniform_fleet(polls).__dict__, "slow_fraction": 1.0, "slow_factor": 0.25})
