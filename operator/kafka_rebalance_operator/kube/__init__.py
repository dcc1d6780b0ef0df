"""Kubernetes: the poll's reads and writes beyond kopf, per-pod documents, label selectors, members,
leader election and the namespaces watched."""
