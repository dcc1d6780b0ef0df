"""The consumer side of the product: a sidecar that follows the operator's plan.

The operator writes one assignment document per pod (a ConfigMap); the sidecar reads it, joins the
consumer group with the plan-following assignor (or assigns partitions itself), consumes, and
hands records to the application. Planning stays in `assignors`; this package never imports the
operator, so a consumer pod carries no Kubernetes controller code.
"""
