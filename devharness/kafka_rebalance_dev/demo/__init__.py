"""`kafka-rebalance demo` and the end-to-end harness the tests share with it.

One consumer group, end to end, on real parts: the local broker and control plane, the operator
as a subprocess, a StatefulSet of pods under KWOK and one sidecar process per pod as its stand-in.
Split by job so the tests can drive the same pieces in other orders:

- `environment`: bring the local environment up (or reuse one) and hand back its endpoints;
- `cluster`: the Kubernetes objects (CRD, namespace, StatefulSet, policy, ConfigMaps);
- `operator_process`, `fleet`: the operator and the sidecar subprocesses;
- `workload`: the producer, which records every acknowledged offset for the ledger;
- `observe`: lag, assignment and processed-record sampling;
- `table`, `summary`: pure formatting and maths (unit-tested);
- `harness`: all of the above for one group; `run`: the demo's phases.
"""
