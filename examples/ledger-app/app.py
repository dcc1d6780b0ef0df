"""An application behind the kafka-rebalance sidecar: takes its batches over HTTP, keeps a ledger.

It is the smallest complete example of the application side of the sidecar's HTTP contract
(docs/sidecar.md, "Delivery"), and the application the real-pod tests and `demo --kubelet` run in
the consumer pods' `app` container:

- the sidecar POSTs `{"member", "epoch", "records": [{"topic", "partition", "offset",
  "timestamp_ms", "key", "value", "headers"}, ...]}` (keys, values and header values base64) on
  one kept-alive connection;
- any 2xx answer means "done": the sidecar may commit those offsets. So the answer is sent only
  after the batch's effect is durable (here: its ledger lines written and flushed). 503 (with
  `Retry-After`) means "not now": the sidecar holds the batch and offers it again later, without
  ever dead-lettering it; here the answer when the ledger volume cannot be written. 400 is a
  refusal of the records (a malformed batch): retried, then bisected to the poison record.
  Duplicates are possible (at-least-once), gaps are not;
- with `TOKEN_FILE` set (the same Secret the sidecar reads with `--deliver-token-file`), a POST
  without `Authorization: Bearer <that token>` gets 401: only the pod's own sidecar is served.
  The file is re-read when it changes, so a rotated Secret is followed.

Each record becomes one line of `$LEDGER_DIR/<member>.jsonl`, `{"t": topic, "p": partition,
"o": offset, "m": member, "e": epoch, "ts": wall ms}`, the format the project's ledger
reconciliation reads (kafka_rebalance_dev.demo.ledger).

Standard library only, one file: it runs on any Python 3.9+, here on the project image's Python
with this file mounted from a ConfigMap (`python /app/app.py`).

Environment: `LEDGER_DIR` (required), `BIND` (127.0.0.1: only the pod's own sidecar needs to
reach it; 0.0.0.0 for a kubelet probe), `PORT` (8000), `SLOW_MS` (milliseconds of stand-in work per
record, 0), `SLOW_MEMBERS` (comma-separated members that are slow; empty: all), `DRAIN_S` (5),
`TOKEN_FILE` (unset: no token check), `RETRY_AFTER_S` (the `Retry-After` of a 503, 1).
The kubelet sends SIGTERM to every container of a pod at once, while the sidecar still finishes
the batch in hand and commits it; the application keeps answering for `DRAIN_S` seconds so that
batch lands. `GET /healthz` answers 200.
"""

from __future__ import annotations

import hmac
import json
import os
import re
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def ledger_lines(body: dict, now_ms: int) -> str:
    """The ledger lines of one delivered batch (raises KeyError/TypeError on a malformed one)."""
    member, epoch = str(body["member"]), int(body["epoch"])
    return "".join(
        json.dumps(
            {
                "t": r["topic"],
                "p": int(r["partition"]),
                "o": int(r["offset"]),
                "m": member,
                "e": epoch,
                "ts": now_ms,
            },
            separators=(",", ":"),
        )
        + "\n"
        for r in body["records"]
    )


class Ledger:
    """Appends each member's lines to its own file; one write per batch, flushed before the
    answer, so a crash leaves at worst a truncated last line the reconciliation skips."""

    def __init__(self, directory: Path, slow_ms: float, slow_members: set[str]) -> None:
        self.directory = directory
        self.slow_ms = slow_ms
        self.slow_members = slow_members

    def take(self, body: dict) -> None:
        member = str(body["member"])
        if self.slow_ms > 0 and (not self.slow_members or member in self.slow_members):
            time.sleep(self.slow_ms * len(body["records"]) / 1000)
        lines = ledger_lines(body, int(time.time() * 1000))
        path = self.directory / f"{UNSAFE.sub('_', member) or '_'}.jsonl"
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())


class Token:
    """The token a caller must show, from a file; re-read when the file's stat changes, at most
    once a second. A file that turns unreadable keeps the last token (a rotation in progress)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.stamp: tuple = ()
        self.checked = 0.0
        self.token = b""
        self.refresh(force=True)
        if not self.token:
            raise ValueError(f"TOKEN_FILE {path}: empty or unreadable")

    def refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        with self.lock:
            if not force and now - self.checked < 1.0:
                return
            self.checked = now
            try:
                stat = os.stat(self.path)
                stamp = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
                if stamp != self.stamp:
                    token = Path(self.path).read_text(encoding="ascii").strip().encode()
                    if token:
                        self.token, self.stamp = token, stamp
            except (OSError, UnicodeDecodeError):
                pass

    def accepts(self, authorization: str | None) -> bool:
        self.refresh()
        scheme, _, given = (authorization or "").partition(" ")
        # compare_digest: the time taken does not tell how much of a guess was right
        return scheme.lower() == "bearer" and hmac.compare_digest(
            given.strip().encode("ascii", "replace"), self.token
        )


def handler_for(
    ledger: Ledger, token: Token | None = None, retry_after_s: int = 1
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep the sidecar's connection alive

        def do_GET(self) -> None:
            self.answer(200 if self.path == "/healthz" else 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)  # read even when refused: the connection stays usable
            if token is not None and not token.accepts(self.headers.get("Authorization")):
                self.answer(401, "missing or wrong token", {"WWW-Authenticate": "Bearer"})
                return
            try:
                ledger.take(json.loads(body))
            except (ValueError, KeyError, TypeError) as error:
                self.answer(400, f"malformed batch: {error}")
                return
            except OSError as error:  # the ledger volume: not now, the same batch comes again
                self.answer(
                    503, f"ledger not writable: {error}", {"Retry-After": str(retry_after_s)}
                )
                return
            self.answer(204)

        def answer(self, status: int, text: str = "", headers: dict | None = None) -> None:
            data = text.encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if status != 204:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data:
                self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            if not str(args[1] if len(args) > 1 else "").startswith("2"):
                sys.stderr.write(f"{self.address_string()} {format % args}\n")

    return Handler


def main() -> int:
    directory = os.environ.get("LEDGER_DIR")
    if not directory:
        print("app: LEDGER_DIR is not set: nowhere to keep the ledger", file=sys.stderr)
        return 2
    slow = {m for m in (os.environ.get("SLOW_MEMBERS") or "").split(",") if m}
    ledger = Ledger(Path(directory), float(os.environ.get("SLOW_MS") or 0), slow)
    ledger.directory.mkdir(parents=True, exist_ok=True)
    token = None
    if os.environ.get("TOKEN_FILE"):
        try:
            token = Token(os.environ["TOKEN_FILE"])
        except ValueError as error:
            print(f"app: {error}", file=sys.stderr)
            return 2
    retry_after_s = int(os.environ.get("RETRY_AFTER_S") or 1)
    address = (os.environ.get("BIND") or "127.0.0.1", int(os.environ.get("PORT") or 8000))
    server = ThreadingHTTPServer(address, handler_for(ledger, token, retry_after_s))
    server.daemon_threads = True
    drain_s = float(os.environ.get("DRAIN_S") or 5)

    def on_term(_signum: int, _frame: object) -> None:
        threading.Timer(drain_s, server.shutdown).start()

    signal.signal(signal.SIGTERM, on_term)
    checked = "checking the caller's token" if token is not None else "no token check"
    print(
        f"app: ledger in {directory}, listening on {server.server_address} ({checked})",
        flush=True,
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
