"""One poll in five phases, each a module with one job and a typed result:

    observe -> Observed   (Kafka offsets, members, the ConfigMaps in place, a hand-over in flight)
    plan    -> Planned    (the planner's assignment, or the proposal on offer, or a settled
                           timed-out hand-over)
    decide  -> Decision   (replanning rules from kafka_rebalance_common.replanning, plus the
                           operator's own: protocol mismatch, hand-over timeout)
    apply   -> Applied    (ConfigMaps written, the proposal offered)
    report  -> PollOutcome (the one status builder, events, metrics, telemetry)

`reconcile.poll` runs them in this order. Observe, plan, apply and report reach the world only
through the `ports.Ports` they are given; decide is pure. A phase that cannot go on raises
`PollFailure`, which the report turns into Stalled conditions without changing anything else.
"""
