"""The sidecar-injection webhook: what it adds to a pod, its serving certificate, the access it
grants to documents and the events it posts."""
