"""How the injection webhook counts the pods it answers.

Every admission is counted once in `kafka_rebalance_webhook_pods_total{outcome, reason}`:

- `mutated`: the pod got the sidecar; reason `injected`, or `defaults_used` when one or more
  of its annotations were ignored (bad values);
- `admitted`: unchanged, it has a `kafka-rebalance` container already (`already_injected`);
- `skipped`: admitted without the sidecar after an internal error, failurePolicy Ignore
  (`api_timeout`, `api_error`, `internal`);
- `failed`: refused, the pod cannot get a working sidecar (`policy_not_found`,
  `policy_unusable`), or an internal error with failurePolicy Fail (the three above).

Invariant: both labels take only the values above (`reason_of` maps any error onto three), so
the series stay few whatever the pods and errors; the older per-policy
`kafka_rebalance_webhook_admissions_total` is kept in step for existing dashboards.
"""

from __future__ import annotations

from typing import Final

from kafka_rebalance_operator import metrics

OUTCOMES: Final = ("mutated", "admitted", "skipped", "failed")
REFUSALS: Final = ("policy_not_found", "policy_unusable")
ERRORS: Final = ("api_timeout", "api_error", "internal")
REASONS: Final = ("injected", "defaults_used", "already_injected", *REFUSALS, *ERRORS)
# outcome -> the older metric's outcome
_ADMISSIONS: Final = {
    "mutated": "injected",
    "admitted": "injected",
    "skipped": "admitted_unchanged",
    "failed": "refused",
}


def reason_of(error: BaseException) -> str:
    """One of ERRORS for an internal error: the API's deadline passed, the API failed or was
    unreachable, or anything else."""
    if isinstance(error, TimeoutError):
        return "api_timeout"
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    if isinstance(error, (ApiException, HTTPError, OSError)):
        return "api_error"
    return "internal"


def count(namespace: str, policy: str, outcome: str, reason: str) -> None:
    """Count one admission (both metrics); ValueError for an outcome or reason not listed."""
    if outcome not in OUTCOMES or reason not in REASONS:
        raise ValueError(f"webhook outcome {outcome!r}/{reason!r} is not one of the listed")
    metrics.WEBHOOK_PODS.labels(outcome, reason).inc()
    metrics.WEBHOOK_ADMISSIONS.labels(namespace, policy or "-", _ADMISSIONS[outcome]).inc()
