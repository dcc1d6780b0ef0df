"""Benchmarks of the assignors: speed next to Kafka's own Java assignors, and plan quality.

Run `python -m benchmarks.run --help`. Not part of the test suite: it prints figures, it asserts
nothing. Results and the command that produced them are in docs/benchmarks.md.
"""
