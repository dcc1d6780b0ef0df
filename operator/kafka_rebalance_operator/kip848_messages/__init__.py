"""The KIP-848 group messages kafka-python 3.0 does not define, as schema files its message
classes load (`kafka_rebalance_operator.kip848`)."""
