"""The kopf operator for ConsumerGroupPolicy resources (docs/operator.md).

The folder is `operator/` but the import package is `kafka_rebalance_operator`: a top-level
package named `operator` would shadow the standard library module of that name.

Pure decision modules (no I/O): durations, policy, selectors, members, lag, history, planning,
handoff, conditions, assignment_doc, verify, names. Thin I/O modules: kafka_io, kafka_security,
kube_io, metrics, health, telemetry; ports wraps them for a poll. reconcile runs one poll as the
phases/ (observe, plan, decide, apply, report); memory is what a policy remembers between polls;
handlers wires it into kopf.
"""
