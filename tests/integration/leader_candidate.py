"""One leader-election candidate as its own process, for test_leadership.py.

usage: python -m tests.integration.leader_candidate KUBECONFIG NAMESPACE IDENTITY STATE [SKEW_S]

Every round it appends `<unix time> <1 if leading else 0> <leaseTransitions>` to STATE_FILE.
SKEW_S shifts the wall clock this candidate writes into the Lease (a node with a skewed clock).
"""

from __future__ import annotations

import datetime
import sys
import time

from kafka_rebalance_operator.kube import leadership
from kubernetes import config


def main() -> None:
    kubeconfig, namespace, identity, state = sys.argv[1:5]
    skew = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    if skew:

        def skewed() -> str:
            moment = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=skew)
            return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

        leadership._now_micro = skewed
    api = config.new_client_from_config(config_file=kubeconfig)
    lease = leadership.LeaseConfig(
        namespace, "kafka-rebalance-operator", identity,
        lease_duration=4.0, renew_deadline=3.0, retry_period=0.5,
    )  # fmt: skip
    elector = leadership.LeaderElector(api, lease)
    while True:
        leading = elector.try_acquire_or_renew()
        with open(state, "a") as out:
            out.write(f"{time.time():.3f} {int(leading)} {elector.transitions}\n")
        time.sleep(lease.retry_period)


if __name__ == "__main__":
    main()
