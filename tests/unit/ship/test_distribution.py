"""What installing the project puts into an application's environment.

An application that installs the sidecar gets import packages named `kafka_rebalance*` only (no
generic `pipeline` or `sidecar` to collide with its own modules), a base install pulls in
neither kopf nor the Kubernetes client, and nothing of the development harness (devharness/, its
own distribution) reaches a wheel of the project or any of its extras.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from importlib import metadata
from pathlib import Path

from setuptools import find_packages

from kafka_rebalance.cli import missing_extra_message, not_shipped_message

REPO_ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
HARNESS_PYPROJECT = tomllib.loads((REPO_ROOT / "devharness" / "pyproject.toml").read_text())
OPERATOR_ONLY = ("kopf", "kubernetes")
# Module names (any dotted part) that belong to the development harness and to no shipped package.
HARNESS_PARTS = frozenset({"kafka_rebalance_dev", "devenv", "demo", "demo_command"})


def shipped_packages() -> list[str]:
    found = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    packages: list[str] = []
    for where in found["where"]:
        packages += find_packages(where=str(REPO_ROOT / where), include=found["include"])
    return packages


def test_every_shipped_import_package_carries_the_project_prefix() -> None:
    tops = {name.split(".", 1)[0] for name in shipped_packages()}
    assert tops == {
        "kafka_rebalance",
        "kafka_rebalance_assignors",
        "kafka_rebalance_common",
        "kafka_rebalance_operator",
        "kafka_rebalance_pipeline",
        "kafka_rebalance_sidecar",
    }


def test_no_folder_of_the_repository_is_a_generic_import_package() -> None:
    # A top-level folder with an __init__.py would be importable from the repo root under its
    # bare name (`import sidecar`), hiding a missing rename in tests that users then meet.
    generic = [p.name for p in REPO_ROOT.iterdir() if (p / "__init__.py").exists()]
    assert sorted(generic) in (["benchmarks", "kafka_rebalance"], ["kafka_rebalance"])


def test_the_base_install_requires_neither_kopf_nor_kubernetes() -> None:
    base = [r for r in PYPROJECT["project"]["dependencies"]]
    assert not [r for r in base if r.split(">")[0].split("=")[0].strip() in OPERATOR_ONLY]
    installed = metadata.requires("kafka-rebalance") or []
    unconditional = [r for r in installed if "extra ==" not in r]
    assert unconditional and not [r for r in unconditional if r.startswith(OPERATOR_ONLY)]
    assert any(r.startswith("crc32c") for r in unconditional)


BLOCKER = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = {"kopf", "kubernetes", "yaml", "pyspark", "cryptography"}
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".", 1)[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, Block())
    """
)


def run_without_extras(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_sidecar_and_the_planner_run_without_the_operator_extras() -> None:
    result = run_without_extras(
        """
        import kafka_rebalance_sidecar
        from kafka_rebalance_sidecar import PlanFollowingConsumer, SidecarConfig
        from kafka_rebalance_sidecar.source import FileSource
        from kafka_rebalance_assignors import plan
        from kafka_rebalance.cli import build_parser, main
        build_parser()  # every subcommand registers without its extra
        assert main(["plan", "--input", "-"]) in (0, 2)
        """
    )
    assert result.returncode == 0, result.stderr


def test_a_subcommand_without_its_extra_says_which_extra_to_install() -> None:
    result = run_without_extras(
        """
        import sys
        from kafka_rebalance.cli import main
        sys.exit(main(["operator"]))
        """
    )
    assert result.returncode == 2, result.stderr
    assert "pip install 'kafka-rebalance[operator]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_missing_module_that_no_extra_provides_keeps_its_traceback() -> None:
    unrelated = ModuleNotFoundError("No module named 'typo_module'", name="typo_module")
    assert missing_extra_message("operator", unrelated) is None
    pipeline = ModuleNotFoundError("No module named 'pyspark'", name="pyspark.sql")
    assert "kafka-rebalance[pipeline]" in (missing_extra_message("pipeline", pipeline) or "")


def test_a_harness_command_missing_a_dependency_points_at_the_harness() -> None:
    crypto = ModuleNotFoundError("No module named 'cryptography'", name="cryptography")
    hint = missing_extra_message("dev", crypto) or ""
    assert "'cryptography' is missing" in hint and "kafka-rebalance-dev" in hint
    assert "kafka-rebalance[" not in hint  # no extra of the base distribution brings it


def test_a_subcommand_left_out_of_the_image_says_so_and_only_then() -> None:
    absent = ModuleNotFoundError("No module named 'kafka_rebalance.pipeline_command'",
                                 name="kafka_rebalance.pipeline_command")  # fmt: skip
    assert "not part of this installation" in (
        not_shipped_message("pipeline", "kafka_rebalance.pipeline_command", absent) or ""
    )
    no_harness = ModuleNotFoundError("No module named 'kafka_rebalance_dev'",
                                     name="kafka_rebalance_dev")  # fmt: skip
    hint = not_shipped_message("dev", "kafka_rebalance_dev.devenv.command", no_harness) or ""
    assert "not part of this installation" in hint and "scripts/bootstrap" in hint
    inner = ModuleNotFoundError(
        "No module named 'kafka_rebalance_dev.gone'", name="kafka_rebalance_dev.gone"
    )
    assert not_shipped_message("dev", "kafka_rebalance_dev.devenv.command", inner) is None
    dependency = ModuleNotFoundError("No module named 'yaml'", name="yaml")
    assert not_shipped_message("dev", "kafka_rebalance_dev.devenv.command", dependency) is None


def test_dev_and_demo_without_the_harness_say_in_one_line_how_to_get_it() -> None:
    without_harness = BLOCKER.replace('"cryptography"}', '"cryptography", "kafka_rebalance_dev"}')
    for command in ("dev", "demo"):
        result = subprocess.run(
            [sys.executable, "-c", without_harness
             + f"from kafka_rebalance.cli import main\nsys.exit(main([{command!r}, 'up']))"],
            cwd="/", capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and "pip install -e devharness/" in lines[0], result.stderr
        assert lines[0].startswith(f"kafka-rebalance {command}: not part of this installation")


def test_no_extra_of_the_project_pulls_in_the_dev_harness() -> None:
    declared = [
        *PYPROJECT["project"]["dependencies"],
        *(r for rs in PYPROJECT["project"]["optional-dependencies"].values() for r in rs),
    ]
    assert not [r for r in declared if r.startswith("kafka-rebalance-dev")]
    installed = metadata.requires("kafka-rebalance") or []
    assert not [r for r in installed if r.startswith("kafka-rebalance-dev")]


def test_the_harness_is_its_own_distribution_on_top_of_every_role() -> None:
    project = HARNESS_PYPROJECT["project"]
    assert project["name"] == "kafka-rebalance-dev"
    assert "kafka-rebalance[operator,watch,pipeline,librdkafka]" in project["dependencies"]
    found = HARNESS_PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(where=str(REPO_ROOT / "devharness"), include=found["include"])
    assert {"kafka_rebalance_dev.devenv", "kafka_rebalance_dev.demo"} <= set(packages)
    assert {name.split(".", 1)[0] for name in packages} == {"kafka_rebalance_dev"}
    assert metadata.version("kafka-rebalance-dev")  # scripts/bootstrap installed it


def copy_source(dest: Path) -> Path:
    """The checkout without its virtualenv, VCS data, caches and build outputs (a stale build/lib
    would leak old modules into a wheel built in place)."""
    skipped = shutil.ignore_patterns(
        ".git", ".venv", ".dev", ".dev-demo", "build", "dist", "target", "__pycache__",
        "*.egg-info", ".pytest_cache", ".ruff_cache", ".hypothesis",
    )  # fmt: skip
    return Path(shutil.copytree(REPO_ROOT, dest, ignore=skipped))


def test_a_wheel_of_the_project_contains_no_module_of_the_dev_harness(tmp_path: Path) -> None:
    # Built offline from a copy of the checkout, as the Dockerfile builds it (`pip wheel .`), with
    # the virtualenv's setuptools (the dev extra pins one new enough for pyproject's license).
    source = copy_source(tmp_path / "src")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--quiet", "--wheel-dir", str(tmp_path / "wheels"), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (wheel,) = (tmp_path / "wheels").glob("kafka_rebalance-*.whl")
    modules = [
        name.removesuffix(".py").replace("/", ".")
        for name in zipfile.ZipFile(wheel).namelist()
        if name.endswith(".py")
    ]
    assert "kafka_rebalance.cli" in modules and "kafka_rebalance_operator.reconcile" in modules
    harness = [m for m in modules if HARNESS_PARTS & set(m.split("."))]
    assert harness == [], harness


def _requirement(extra: str, name: str) -> str:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    (found,) = [r for r in project["optional-dependencies"][extra] if re.match(rf"{name}\b", r)]
    return found[len(name) :].split("#")[0].strip()


def test_the_tests_run_the_spark_versions_toml_pins_within_the_pipeline_range() -> None:
    from packaging.specifiers import SpecifierSet

    spark = tomllib.loads((REPO_ROOT / "versions.toml").read_text())["spark"]["version"]
    assert _requirement("dev", "pyspark") == f"=={spark}"
    pipeline = _requirement("pipeline", "pyspark")
    assert not pipeline.startswith("=="), "the pipeline extra takes a range, not one release"
    assert spark in SpecifierSet(pipeline)


def test_each_extra_means_one_thing() -> None:
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    names = {e: {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0] for r in extras[e]} for e in extras}
    assert names["watch"] == {"kubernetes"}
    assert names["completion"] == {"shtab"}
    assert names["kubectl"] == {"kubernetes", "shtab"}
