"""The docs keep up with what they describe: every CRD field is in docs/crd-reference.md, and
every alert's runbook_url names a heading of docs/troubleshooting.md."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CRD = ROOT / "crds" / "consumergrouppolicies.yaml"
REFERENCE = ROOT / "docs" / "crd-reference.md"
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"
RULES = ROOT / "charts" / "kafka-rebalance-operator" / "files" / "prometheus-rules.yaml"


def _is_label_selector(node: Mapping[str, Any]) -> bool:
    """A metav1.LabelSelector: documented as one field, not by its parts."""
    return {"matchLabels", "matchExpressions"} <= set(node.get("properties") or {})


def _fields(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, bool]]:
    """(dotted path, has documented children) of every field under `node`; list items as
    `path[]`. An object with properties is described by its children; a LabelSelector is a
    leaf."""
    properties = node.get("properties") or {}
    if node.get("type") == "object" and properties and not _is_label_selector(node):
        if path:
            yield path, True
        for name, child in properties.items():
            yield from _fields(child, f"{path}.{name}" if path else name)
    elif node.get("type") == "array" and (node.get("items") or {}).get("properties"):
        yield path, True
        yield from _fields(node["items"], f"{path}[]")
    elif path:
        yield path, False


def _section(text: str, start: str, end: str | None) -> str:
    begin = text.index(start)
    return text[begin : text.index(end, begin) if end else None]


def _undocumented(schema: Mapping[str, Any], text: str) -> list[str]:
    """The leaf fields of `schema` the text does not describe: a field is described when its
    path is in backticks (`a.b`, `a[]` or `a`), or its parent is and so is its own name
    (`streams` ... `groupEpoch`). Objects are described by their fields."""
    named = set(re.findall(r"`([^`]+)`", text))
    fields = list(_fields(schema))
    described: set[str] = set()
    for path, _ in fields:  # parents come before their children
        bare = path.removesuffix("[]")
        parent, _, last = bare.rpartition(".")
        if {path, bare, bare + "[]"} & named or (parent in described and last in named):
            described.update({path, bare})
    return [path for path, has_children in fields if not has_children and path not in described]


def _schema() -> Mapping[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]["properties"]


@pytest.mark.parametrize("part", ["spec", "status"])
def test_every_crd_field_is_in_the_reference(part: str) -> None:
    text = REFERENCE.read_text()
    section = (
        _section(text, "## spec", "## status")
        if part == "spec"
        else _section(text, "## status", "## kubectl output")
    )
    assert _undocumented(_schema()[part], section) == []


def test_the_field_check_finds_a_field_the_reference_leaves_out() -> None:
    schema = {"type": "object", "properties": {"kafka": {"type": "object", "properties": {
        "bootstrapServers": {"type": "string"}, "caSecretRef": {"type": "object", "properties": {
            "name": {"type": "string"}}}}}}}  # fmt: skip
    assert _undocumented(schema, "| `kafka.bootstrapServers` | string |") == [
        "kafka.caSecretRef.name"
    ]


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)}


def test_every_alert_has_a_runbook_that_troubleshooting_md_has() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    anchors = _anchors(TROUBLESHOOTING.read_text())
    for rule in rules:
        url = rule["annotations"].get("runbook_url", "")
        path, _, anchor = url.partition("#")
        assert path == "docs/troubleshooting.md", f"{rule['alert']}: runbook_url {url!r}"
        assert anchor in anchors, f"{rule['alert']}: no heading #{anchor} in troubleshooting.md"


def test_every_troubleshooting_link_within_the_file_resolves() -> None:
    text = TROUBLESHOOTING.read_text()
    anchors = _anchors(text)
    links = re.findall(r"\]\(#([^)]+)\)", text)
    assert links and [a for a in links if a not in anchors] == []


def test_the_slug_is_githubs() -> None:
    assert _slug("Stalled=True (Ready=False)") == "stalledtrue-readyfalse"
    assert _slug("KafkaRebalancePolicyStalled") == "kafkarebalancepolicystalled"


def test_the_unwatched_policy_log_line_points_at_an_existing_entry() -> None:
    from kafka_rebalance_operator.kube.namespace_scope import RUNBOOK

    path, _, anchor = RUNBOOK.partition("#")
    assert path == "docs/troubleshooting.md"
    assert anchor in _anchors(TROUBLESHOOTING.read_text())
