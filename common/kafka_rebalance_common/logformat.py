"""`--log-format json|text` for the operator and the sidecar: one event per line either way.

JSON is what most clusters' log pipelines (Fluent Bit, Vector, Loki, Elasticsearch) ingest
without a parser: each record is one object on one line with `time`, `level`, `logger` and
`message`, the traceback (if any) as `exception`, and the policy's identity as fields when the
record carries it: `namespace`, `policy`, `group`, `member` from the record's `extra`, or from the
object reference kopf attaches to its per-object records. The redaction filter
(kafka_rebalance_common.redaction) sits on the same handlers, so what is serialised is already
masked.

Standard library only: it runs in the sidecar's base install. python-json-logger (which kopf
brings into the operator) is not used: it writes every `extra` attribute of a record, so kopf's
internal extras (`k8s_ref`, `k8s_skip`) would leak into every event, and the sidecar would gain
a dependency for the thirty lines below that pick exactly these fields.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
from typing import Any

FORMATS = ("text", "json")
# --log-level of the operator and the sidecar: the names (the chart's values and the webhook's
# sidecar-log-level annotation take the same) and the levels they set
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FIELDS = ("namespace", "policy", "group", "member")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in messages stay escaped).

    `fields`: constant fields of every event of this process (a sidecar's group and member); a
    record's own extra overrides them."""

    def __init__(self, fields: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.fields = {k: v for k, v in (fields or {}).items() if v is not None}

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        event.update(self.fields)
        reference = getattr(record, "k8s_ref", None)  # kopf's per-object records
        if isinstance(reference, dict):
            if reference.get("namespace"):
                event["namespace"] = reference["namespace"]
            if reference.get("name"):
                event["policy"] = reference["name"]
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                event[name] = value
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            event["exception"] = record.exc_text
        if record.stack_info:
            event["stack"] = record.stack_info
        return json.dumps(event, default=str, ensure_ascii=False)


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-format",
        choices=FORMATS,
        default="text",
        help="log lines as text or as one JSON object per line (default: text)",
    )


def apply(log_format: str, **fields: Any) -> None:
    """Give every root handler the chosen formatter (call after logging.basicConfig). `fields`
    go into every JSON event (None values are left out); text lines stay as they were."""
    formatter = JsonFormatter(fields) if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
