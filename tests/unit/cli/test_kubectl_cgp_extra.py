"""`kubectl cgp` needs only the `kubectl` extra: what the operator extra alone brings (numpy,
kopf, re2, cryptography) cannot be imported in the child process these tests start, as in a
virtualenv with `pip install 'kafka_rebalance-<version>-py3-none-any.whl[kubectl]'`."""

from __future__ import annotations

import json
import subprocess
import sys

from kafka_rebalance_common import wire

BLOCKED = ("numpy", "kopf", "re2", "cryptography")
PRELUDE = f"""
import sys
class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
sys.meta_path.insert(0, Blocked())
"""


def _child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code], capture_output=True, text=True, timeout=120
    )


def test_the_block_holds() -> None:
    done = _child("import numpy")
    assert done.returncode == 1 and "No module named 'numpy'" in done.stderr, done.stderr


def test_plan_reads_the_applied_assignment_without_the_operator_extra() -> None:
    """`kubectl cgp plan` compares the proposal with what the policy's ConfigMaps hold; reading
    them once needed the operator's numpy (a fresh [kubectl] install failed with a traceback)."""
    documents = [
        wire.encode_document(
            wire.AssignmentDocument("g", member, 3, {"orders": parts}, plan_hash="h")
        )
        for member, parts in (("orders-0", [2, 0]), ("orders-1", [1]))
    ]
    configmaps = [{"data": {"assignment.json": text}} for text in documents]
    configmaps += [{"data": {"assignment.json": "not json"}}, {"data": {}}]
    done = _child(
        "import json; from kafka_rebalance.kubectl_cgp import owned_by_member\n"
        # the rest of `plan` and `approve --wait`: the moves, the timeout's duration
        "from kafka_rebalance.cgp_report import proposal_moves\n"
        "from kafka_rebalance_operator.durations import parse_duration\n"
        f"print(json.dumps(owned_by_member(json.loads({json.dumps(configmaps)!r})).to_dict()))"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"orders-0": {"orders": [0, 2]}, "orders-1": {"orders": [1]}}
