"""The KIP-848 group messages kafka-python 3.0 does not define, as schema files its message
classes load (`kafka_rebalance_operator.kafka.kip848`, `streams_group`, and `share_group` for the
KIP-932 share-group messages)."""
