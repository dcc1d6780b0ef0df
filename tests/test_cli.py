"""The `kafka-rebalance` command as a user first meets it: `--help` lists every subcommand."""

import subprocess
import sys

from kafka_rebalance.cli import SUBCOMMANDS


def test_help_lists_every_subcommand() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for name in SUBCOMMANDS:
        assert f"    {name} " in result.stdout
