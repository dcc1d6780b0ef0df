"""The `kafka-rebalance` command as a user first meets it: `--help` lists every subcommand."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_rebalance.cli import HARNESS_COMMANDS, PLUGIN_GROUP, SUBCOMMANDS, commands


def test_help_lists_every_subcommand() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kafka_rebalance.cli", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    listed = re.findall(r"^    ([a-z]+)(?: |$)", result.stdout, flags=re.MULTILINE)
    assert listed == list(commands())
    # the harness (installed by scripts/bootstrap) adds its commands through entry points
    assert set(HARNESS_COMMANDS) <= set(listed) - set(SUBCOMMANDS)


def test_the_product_command_names_no_harness_module() -> None:
    """`dev` and `demo` reach the command only as entry points of the harness's distribution."""
    from importlib.metadata import entry_points

    source = (Path(__file__).parents[3] / "kafka_rebalance" / "cli.py").read_text()
    assert "kafka_rebalance_dev." not in source
    plugins = {e.name: e.value for e in entry_points(group=PLUGIN_GROUP)}
    assert plugins == {
        "dev": "kafka_rebalance_dev.devenv.command",
        "demo": "kafka_rebalance_dev.demo.command",
    }


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, check=False, timeout=120
    )


def test_both_commands_report_the_installed_version() -> None:
    from importlib.metadata import version

    installed = version("kafka-rebalance")
    assert _run("kafka_rebalance.cli", "--version").stdout == f"kafka-rebalance {installed}\n"
    for args in (("version",), ("--version",)):
        result = _run("kafka_rebalance.kubectl_cgp", *args)
        assert result.returncode == 0, result.stderr
        assert result.stdout == f"kubectl-cgp {installed}\n"


def _complete(script: str, command: str, words: list[str]) -> list[str]:
    """Run a generated bash completion script in real bash; the candidates for the last word."""
    function = "_shtab_" + command.replace("-", "_")
    line = " ".join(words)
    program = (
        f"source /dev/stdin; COMP_WORDS=({' '.join(repr(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}; COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; "
        f'{function}; printf "%s\\n" "${{COMPREPLY[@]}}"'
    )
    result = subprocess.run(
        ["bash", "-c", program], input=script, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_bash_completion_completes_subcommands_and_choices() -> None:
    cgp = _run("kafka_rebalance.kubectl_cgp", "completion", "bash")
    assert cgp.returncode == 0, cgp.stderr
    assert _complete(cgp.stdout, "kubectl-cgp", ["kubectl-cgp", "st"]) == ["status"]
    outputs = _complete(cgp.stdout, "kubectl-cgp", ["kubectl-cgp", "status", "-o", ""])
    assert outputs == ["table", "wide", "json", "yaml", "name"]

    main = _run("kafka_rebalance.cli", "completion", "bash")
    assert main.returncode == 0, main.stderr
    assert set(_complete(main.stdout, "kafka-rebalance", ["kafka-rebalance", ""])) >= set(
        SUBCOMMANDS
    )
    zsh = _run("kafka_rebalance.cli", "completion", "zsh")
    assert zsh.returncode == 0 and zsh.stdout.startswith("#compdef kafka-rebalance")


def test_fish_completion_completes_subcommands_and_choices(tmp_path: Path) -> None:
    """The generated fish script, loaded into the real fish, answers `complete -C`."""
    fish = shutil.which("fish")
    if fish is None:
        pytest.skip("fish is not installed (apt-get install fish)")
    cgp = _run("kafka_rebalance.kubectl_cgp", "completion", "fish")
    assert cgp.returncode == 0, cgp.stderr
    script = tmp_path / "kubectl-cgp.fish"
    script.write_text(cgp.stdout)

    def complete(line: str) -> list[str]:
        result = subprocess.run(
            [fish, "--no-config", "-c", f"source {script}; complete -C {line!r}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return [row.split("\t")[0] for row in result.stdout.splitlines()]

    assert complete("kubectl-cgp st") == ["status"]
    assert complete("kubectl-cgp status -o ") == ["table", "wide", "json", "yaml", "name"]


def test_an_unknown_shell_is_refused_in_one_line() -> None:
    result = _run("kafka_rebalance.kubectl_cgp", "completion", "powershell")
    assert result.returncode == 2
    assert "invalid choice: 'powershell'" in result.stderr


def test_kubectl_completes_the_plugin_through_kubectl_complete_cgp() -> None:
    """The real kubectl's plugin completion (`kubectl __complete cgp ...`, what its shell scripts
    call) finds `kubectl_complete-cgp` on $PATH and reads its Cobra-style answer."""
    import os
    from pathlib import Path

    import pytest
    from kafka_rebalance_dev.devenv.toolchain import toolchain

    kubectl = toolchain().kubectl
    if not kubectl.is_file():
        pytest.fail("not provisioned: kubectl; run `scripts/bootstrap`", pytrace=False)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def complete(*words: str) -> list[str]:
        result = subprocess.run(
            [str(kubectl), "__complete", "cgp", *words],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    assert complete("st") == ["status", ":4"]
    assert complete("status", "-o", "") == ["table", "wide", "json", "yaml", "name", ":4"]
    assert complete("plan", "--ou") == ["--output", ":4"]
