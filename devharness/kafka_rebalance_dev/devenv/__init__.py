"""The local development environment: provisioning and running real Kafka and Kubernetes."""
