"""Standalone Kubernetes JSON schemas for kubeconform, from the kubernetes-validate wheel."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

from kafka_rebalance_dev.devenv.provision.frame import ProvisionError, run
from kafka_rebalance_dev.devenv.toolchain import Toolchain

SCHEMA_DEFS_PREFIXES = ("/api/_definitions.json#/$defs/", "#/$defs/")


def inline_schema_refs(node: object, defs: dict, seen: tuple[str, ...] = ()) -> object:
    """Replace every reference into the shared definitions by the definition itself.

    kubernetes-validate's schemas point into one `_definitions.json` with absolute-path refs
    that kubeconform's loader cannot follow (it reports "could not find schema"); kubeconform
    wants standalone files. A type that contains itself (only JSONSchemaProps does) is cut to
    `{}` at the second level, accepting anything there, as the usual standalone schemas do.
    """
    if isinstance(node, list):
        return [inline_schema_refs(v, defs, seen) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(SCHEMA_DEFS_PREFIXES):
        name = ref.split("/$defs/", 1)[1]
        if name in seen:
            return {}
        target = inline_schema_refs(defs[name], defs, (*seen, name))
        rest = {k: inline_schema_refs(v, defs, seen) for k, v in node.items() if k != "$ref"}
        return {**target, **rest}
    return {k: inline_schema_refs(v, defs, seen) for k, v in node.items()}


def build_kube_schemas(tc: Toolchain) -> Callable[[Path, Path], dict]:
    """Strict standalone JSON schemas of our Kubernetes minor, from a PyPI package.

    kubeconform downloads schemas from GitHub at run time, which this project cannot reach;
    the `kubernetes-validate` package on PyPI ships them per Kubernetes minor (the `.0` patch
    stands for the whole minor: the API does not change within one).
    """
    package = tc.versions.get("kubeconform", {}).get("schemas_package", "")
    major, minor, _ = tc.kubernetes_version.split(".")
    flavour = f"v{major}.{minor}.0-local-strict"

    def build(tmp: Path, log: Path) -> dict:
        tool = f"kube-schemas {tc.kubernetes_version}"
        if not package:
            raise ProvisionError(f"{tool}: versions.toml lacks [kubeconform].schemas_package")
        download = tmp / "download"
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--quiet", "-d", str(download), package]  # fmt: skip
        run(tool, cmd, cwd=tmp, log=log)
        wheels = list(download.glob("*.whl"))
        if len(wheels) != 1:
            raise ProvisionError(f"{tool}: expected one wheel from `{shlex.join(cmd)}`")
        prefix = f"kubernetes_validate/kubernetes-json-schema/{flavour}/"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = {n[len(prefix) :]: n for n in wheel.namelist() if n.startswith(prefix)}
            if "_definitions.json" not in members:
                raise ProvisionError(f"{tool}: {wheels[0].name} has no {flavour} schemas")
            defs = json.loads(wheel.read(members.pop("_definitions.json")))["$defs"]
            members.pop("all.json", None)
            for name, member in members.items():
                schema = inline_schema_refs(json.loads(wheel.read(member)), defs)
                (tmp / name).write_text(json.dumps(schema, separators=(",", ":")))
        shutil.rmtree(download)
        return {"package": package, "flavour": flavour, "schemas": len(members)}

    return build


def check_kube_schemas(tc: Toolchain) -> Callable[[Path], None]:
    """kubeconform must accept a valid Deployment and reject a misspelt field with them."""

    def check(built: Path) -> None:
        kubeconform = tc.kubeconform
        if not kubeconform.exists():
            return  # kubeconform itself failed or was skipped; the schemas stand on their own
        location = str(built / "{{ .ResourceKind }}{{ .KindSuffix }}.json")
        good = (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: probe}\nspec:\n"
            "  selector: {matchLabels: {app: probe}}\n  template:\n"
            "    metadata: {labels: {app: probe}}\n"
            "    spec: {containers: [{name: c, image: busybox}]}\n"
        )
        bad = good.replace("  selector:", "  replicaz: 2\n  selector:")
        for text, expect_ok in ((good, True), (bad, False)):
            proc = subprocess.run(
                [str(kubeconform), "-strict", "-summary", "-schema-location", location, "-"],
                input=text, capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            if (proc.returncode == 0) != expect_ok:
                raise ProvisionError(
                    f"kube-schemas {tc.kubernetes_version}: kubeconform "
                    f"{'rejected a valid' if expect_ok else 'accepted an invalid'} Deployment "
                    f"with these schemas:\n{proc.stdout}{proc.stderr}"
                )

    return check
