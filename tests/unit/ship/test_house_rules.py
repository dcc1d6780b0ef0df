"""The house rules that tools check: import contracts, types, lint and format.

Each test runs the pinned tool (the `dev` extra) from this interpreter's environment over the
repository, with the configuration in pyproject.toml, and fails with the tool's own report: the
broken import contract by name, the file and line of a type or lint error. The source roots are
put on the tools' path explicitly: an editable install is finder-based, which static analysers do
not follow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv.toolchain import cache_root

REPO_ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
SOURCE_ROOTS = ("assignors", "common", "operator", "sidecar", "pipeline", "devharness", ".")

# Packages at mypy's strict level (pyproject.toml, the strict flags in [[tool.mypy.overrides]]:
# assignors, common, operator, sidecar) and at its default level (pipeline). Every package
# named here checks at 0 errors.
TYPED_PACKAGES = (
    "kafka_rebalance_assignors",
    "kafka_rebalance_common",
    "kafka_rebalance_operator",
    "kafka_rebalance_sidecar",
    "kafka_rebalance_pipeline",
)


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    environment["PYTHONPATH"] = os.pathsep.join(str(REPO_ROOT / root) for root in SOURCE_ROOTS)
    return subprocess.run(
        command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=600
    )


def _report(result: subprocess.CompletedProcess[str]) -> str:
    """The tool's report, cut to the lines that say what broke."""
    lines = (result.stdout + result.stderr).splitlines()
    return "\n".join(line for line in lines if line.strip())[-6000:]


def test_import_contracts_of_the_architecture_are_kept() -> None:
    """docs/architecture.md's direction of dependency, as import-linter contracts."""
    result = _run([str(BIN / "lint-imports"), "--no-cache"])
    if result.returncode != 0:
        broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
        pytest.fail(f"import contracts broken: {broken}\n{_report(result)}", pytrace=False)
    assert "0 broken" in result.stdout


def _mypy_cache() -> Path:
    """mypy's cache, kept beside the provisioned toolchain (`cache_root()`) rather than in the
    clone: mypy keys each module's entry by its source's hash, so a fresh clone of the same code
    reuses it and rechecks only what changed. Entries are written by atomic rename, so runs in
    several clones may share it."""
    return cache_root() / "mypy" / f"py{sys.version_info.major}.{sys.version_info.minor}"


def test_types_check() -> None:
    """mypy at 0 errors, strict where pyproject.toml says so. Without a cache (a fresh
    machine) the check takes about a minute on two cores; with one, a few seconds."""
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(_mypy_cache())]
    for package in TYPED_PACKAGES:
        command += ["-p", package]
    result = _run(command)
    if result.returncode != 0:
        pytest.fail(f"mypy found errors:\n{_report(result)}", pytrace=False)


def test_ruff_check_passes() -> None:
    result = _run([str(BIN / "ruff"), "check", "--no-cache", "."])
    if result.returncode != 0:
        pytest.fail(f"ruff check:\n{_report(result)}", pytrace=False)


def test_ruff_format_is_applied() -> None:
    result = _run([str(BIN / "ruff"), "format", "--check", "--no-cache", "."])
    if result.returncode != 0:
        pytest.fail(f"ruff format --check:\n{_report(result)}", pytrace=False)
