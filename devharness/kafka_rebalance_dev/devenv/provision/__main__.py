"""`python -m kafka_rebalance.devenv.provision`: the same as `kafka-rebalance dev provision`."""

import sys

from kafka_rebalance.devenv.provision import main

sys.exit(main())
