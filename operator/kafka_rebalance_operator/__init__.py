"""The kopf operator for ConsumerGroupPolicy resources (built in a later issue).

The folder is `operator/` but the import package is `kafka_rebalance_operator`: a top-level
package named `operator` would shadow the standard library module of that name.
"""
