"""The project's extensionless scripts (scripts/<name>) as modules, for unit tests of their
functions."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load(name: str) -> ModuleType:
    """scripts/`name` as module `name` with dashes as underscores (registered in sys.modules,
    where dataclasses look their module up)."""
    module_name = name.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(module_name, str(SCRIPTS / name))
    spec = importlib.util.spec_from_loader(module_name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    loader.exec_module(module)
    return module
