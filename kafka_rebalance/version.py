"""The installed distribution's version, as both console commands report it.

Read from the installed metadata (pyproject's `version`), so an editable checkout, a wheel and
the image all report what pip installed. The one-file krew bundle (scripts/release-krew) has no
metadata: it carries `kafka_rebalance/_bundled_version.py`, which wins when present. "unknown"
only from a source tree that was never installed.
"""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "kafka-rebalance"


def version() -> str:
    try:
        from kafka_rebalance._bundled_version import VERSION  # type: ignore[import-not-found]

        return str(VERSION)
    except ImportError:
        pass
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
