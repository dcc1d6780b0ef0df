"""The two health verdicts a GitOps tool gives a ConsumerGroupPolicy, for the tests.

- Argo CD: the repository's Lua health script (deploy/argocd/), run by a real Lua interpreter
  (lupa embeds the reference Lua implementations; Argo CD itself runs gopher-lua, a Lua 5.1, so
  the script is run under 5.1 and 5.4).
- kstatus (Flux, kpt, cli-utils): its documented generic rules, as `Compute` in
  sigs.k8s.io/cli-utils/pkg/kstatus/status applies them to a custom resource: deletionTimestamp
  -> Terminating; status.observedGeneration present and != metadata.generation -> InProgress;
  then the conditions in list order, the first of Reconciling=True (-> InProgress) or
  Stalled=True (-> Failed) decides; otherwise -> Current (kstatus has no type-specific rules for a
  custom resource and ignores Ready). Written out here rather than built from the Go module: those
  few rules are the whole of what kstatus does for a CRD, and a Go build of cli-utils would pull
  a large part of k8s.io into every CI run for them.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ARGOCD_SCRIPT = ROOT / "deploy" / "argocd" / "consumergrouppolicy-health.lua"
LUA_VERSIONS = ("lua51", "lua54")


def argocd_health(obj: dict[str, Any], lua: str = "lua54") -> dict[str, str]:
    """{status, message} as Argo CD's health assessment would get it from the script."""
    runtime = importlib.import_module(f"lupa.{lua}").LuaRuntime()
    runtime.globals().obj = runtime.table_from(obj, recursive=True)
    result = runtime.execute(ARGOCD_SCRIPT.read_text())
    return {"status": str(result["status"]), "message": str(result["message"] or "")}


def kstatus(obj: dict[str, Any]) -> str:
    """kstatus' status of a custom resource: Current, InProgress, Failed or Terminating."""
    metadata = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if metadata.get("deletionTimestamp"):
        return "Terminating"
    generation = metadata.get("generation")
    observed = status.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return "InProgress"
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Reconciling" and condition.get("status") == "True":
            return "InProgress"
        if condition.get("type") == "Stalled" and condition.get("status") == "True":
            return "Failed"
    return "Current"


# What each state the operator writes must look like to both tools.
EXPECTED = {
    "ready": ("Healthy", "Current"),
    "reconciling": ("Progressing", "InProgress"),
    "stalled": ("Degraded", "Failed"),
}
