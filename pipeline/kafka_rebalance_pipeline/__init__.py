"""The fleet data pipeline: synthetic telemetry, rates and capacities, backtests, recommendations.

Pure parts (simulation, scoring, the candidate grid, recommendation, patches, the report) never
import Spark, so they can be unit-tested and reused; the `*_job` modules are the Spark side
(IO, grouping, aggregation). The pipeline imports only `assignors` and the telemetry schema,
never the operator.
"""
