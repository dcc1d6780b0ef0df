"""What the operator and the sidecar share, kept below both so neither imports the other.

The operator and the sidecar are two ends of one conversation (the operator writes assignment
documents, the sidecar reads them and answers through commit metadata and assignor user_data);
whatever both ends must agree on byte for byte, or both must do the same way (masking secrets in
logs), lives here. It imports neither the operator, the sidecar nor any Kubernetes client.
"""
