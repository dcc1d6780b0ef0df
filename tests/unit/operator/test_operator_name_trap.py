"""The `operator/` folder must not shadow Python's standard library `operator` module."""

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_stdlib_operator_is_not_shadowed_from_repo_root() -> None:
    # A fresh interpreter started in the repo root puts the root first on sys.path (-c adds '').
    probe = "import operator, sys; operator.itemgetter(0); print(operator.__file__)"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert not result.stdout.strip().startswith(str(REPO_ROOT))


def test_operator_package_imports_under_its_own_name() -> None:
    import kafka_rebalance_operator

    assert Path(kafka_rebalance_operator.__file__).parent.name == "kafka_rebalance_operator"
