"""examples/consumer-statefulset-secured.yaml passes the real API server's validation (a
server-side dry run, as `test_crd_validation` does for the plaintext example)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_secured_consumer_example_passes_server_side_validation(k8s: Any) -> None:
    namespace = f"secured-{uuid.uuid4().hex[:6]}"
    k8s.kubectl("create", "namespace", namespace)
    for name in ("kafka-client-secret.yaml", "consumer-statefulset-secured.yaml"):
        result = k8s.kubectl(
            "-n", namespace, "apply", "--dry-run=server", "-f", str(EXAMPLES / name), check=False
        )
        assert result.returncode == 0, f"{name}: {result.stderr}"
        assert "(server dry run)" in result.stdout, result.stdout
