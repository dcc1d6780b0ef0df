"""The development harness (distribution `kafka-rebalance-dev`, folder devharness/).

- `devenv`: the local environment: provisioning the pinned toolchain, running a real Kafka broker
  and Kubernetes control plane (and, on request, a real node), building the image;
- `demo`: `kafka-rebalance demo` and the end-to-end harness the tests share with it.

Only the `kafka-rebalance` command (its `dev` and `demo` subcommands, and `pipeline` looking for
the provisioned Spark jars when the harness is there), the tests, the benchmarks and scripts/
import it; neither the base wheel nor the image contains it.
"""
