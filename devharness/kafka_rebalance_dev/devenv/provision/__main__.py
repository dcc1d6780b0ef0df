"""`python -m kafka_rebalance_dev.devenv.provision`: the same as `kafka-rebalance dev provision`."""

import sys

from kafka_rebalance_dev.devenv.provision import main

sys.exit(main())
