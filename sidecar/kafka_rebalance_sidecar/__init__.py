"""The consumer side of the product: a sidecar that follows the operator's plan.

The operator writes one assignment document per pod (a ConfigMap); the sidecar reads it, joins the
consumer group with the plan-following assignor (or assigns partitions itself), consumes, and
hands records to the application. Planning stays in `assignors`; this package never imports the
operator, so a consumer pod carries no Kubernetes controller code.
"""

from typing import Any

# The consumer API, imported lazily: `import kafka_rebalance_sidecar.records` (the ledger, a
# handler module) must not pull in the Kafka client and prometheus.
_EXPORTS = {
    "PlanFollowingConsumer": "kafka_rebalance_sidecar.consumer",
    "DocumentSource": "kafka_rebalance_sidecar.consumer",
    "SidecarConfig": "kafka_rebalance_sidecar.runner",
    "Batch": "kafka_rebalance_sidecar.records",
    "Record": "kafka_rebalance_sidecar.records",
    "RetryPolicy": "kafka_rebalance_sidecar.delivery",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sidecar' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
