"""Kafka: the Admin API calls, group describes and triggers of every kind, offsets, security
settings, shared clients and cluster identity."""
