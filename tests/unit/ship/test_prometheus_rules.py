"""The alert rules under Prometheus' own rule engine: `promtool check rules` and `promtool test
rules` (tests/prometheus/rules_test.yaml: each alert fires on its fault, and not on the
neighbouring healthy or too-short states).

promtool is built by scripts/provision-promtool (scripts/bootstrap runs it) into the project's
cache; `$KAFKA_REBALANCE_PROMTOOL` or a `promtool` on $PATH (Debian's `prometheus` package) is
used instead when set or present. Not provisioned is a failure, as for every other tool.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv.toolchain import cache_root

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "charts" / "kafka-rebalance-operator" / "files" / "prometheus-rules.yaml"
UNIT_TESTS = ROOT / "tests" / "prometheus" / "rules_test.yaml"
CHART_TESTS = ROOT / "tests" / "prometheus" / "chart_rules_test.yaml"
CHART = ROOT / "charts" / "kafka-rebalance-operator"


@pytest.fixture(scope="module")
def promtool() -> str:
    version = tomllib.loads((ROOT / "versions.toml").read_text())["promtool"]["version"]
    candidates = [
        os.environ.get("KAFKA_REBALANCE_PROMTOOL"),
        str(cache_root() / "promtool" / version / "bin" / "promtool"),
        shutil.which("promtool"),
    ]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail(
        f"not provisioned: promtool {version}; run `scripts/bootstrap` "
        "(or scripts/provision-promtool)",
        pytrace=False,
    )


def run(
    promtool: str, *args: str, cwd: Path = UNIT_TESTS.parent
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


def test_the_rules_file_is_valid(promtool: str) -> None:
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_every_alert_fires_on_its_fault_and_only_then(promtool: str) -> None:
    result = run(promtool, "test", "rules", UNIT_TESTS.name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_unit_test() -> None:
    import yaml

    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    tested = {
        t["alertname"]
        for case in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
        for t in case.get("alert_rule_test", [])
        if t.get("exp_alerts")
    }
    assert alerts == tested


def test_a_broken_expectation_fails(promtool: str, tmp_path: Path) -> None:
    """The harness can fail: the same tests with one expected label changed do not pass."""
    text = UNIT_TESTS.read_text().replace("policy: frozen", "policy: alive")
    broken = UNIT_TESTS.parent / f".broken-{os.getpid()}.yaml"
    broken.write_text(text)
    try:
        result = run(promtool, "test", "rules", broken.name)
    finally:
        broken.unlink()
    assert result.returncode != 0
    assert "KafkaRebalanceOperatorNotPolling" in result.stdout + result.stderr


def _chart_rules(*sets: str) -> dict:
    """The chart's PrometheusRule groups as helm renders them (release kro, namespace ops)."""
    import yaml
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    helm = toolchain().helm
    if not helm.is_file():
        pytest.fail("not provisioned: helm; run `scripts/bootstrap`", pytrace=False)
    args = [str(helm), "template", "kro", str(CHART), "--namespace", "ops"]
    for value in ("metrics.prometheusRule.enabled=true", *sets):
        args += ["--set", value]
    out = subprocess.run(args, capture_output=True, text=True, check=True, timeout=120).stdout
    (rule,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "PrometheusRule"]
    return {"groups": rule["spec"]["groups"]}


def test_the_chart_rules_find_their_own_release_under_fullname_override(
    promtool: str, tmp_path: Path
) -> None:
    """The operator-down and absent() alerts of the rendered chart match the labels its monitors
    put on this release's targets, whatever fullnameOverride says, and not another release's."""
    import yaml

    (tmp_path / "chart-rules.yaml").write_text(yaml.safe_dump(_chart_rules("fullnameOverride=ko")))
    shutil.copy(CHART_TESTS, tmp_path / CHART_TESTS.name)
    checked = run(promtool, "check", "rules", "chart-rules.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    result = run(promtool, "test", "rules", CHART_TESTS.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    # The same expectations against another release's rules fail: the matcher is the release's.
    (tmp_path / "chart-rules.yaml").write_text(
        yaml.safe_dump(_chart_rules("fullnameOverride=ko", "nameOverride=renamed"))
    )
    assert run(promtool, "test", "rules", CHART_TESTS.name, cwd=tmp_path).returncode != 0


def test_the_chart_makes_every_runbook_url_absolute_under_runbook_base_url() -> None:
    base = "https://git.example.com/kro/blob/v0.1.0/docs"
    groups = _chart_rules(f"metrics.prometheusRule.runbookBaseURL={base}/")["groups"]
    urls = [r["annotations"]["runbook_url"] for g in groups for r in g["rules"]]
    assert urls and all(u.startswith(f"{base}/troubleshooting.md#kafkarebalance") for u in urls)
    relative = _chart_rules()["groups"]
    assert all(
        r["annotations"]["runbook_url"].startswith("docs/troubleshooting.md#")
        for g in relative
        for r in g["rules"]
    )
