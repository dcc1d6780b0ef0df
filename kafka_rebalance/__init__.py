"""The `kafka-rebalance` command and its subcommands (plan, dev, ...)."""
