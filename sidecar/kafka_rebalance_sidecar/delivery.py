"""Handing batches to the application, and what happens when it refuses them.

The sidecar commits a record's offset only after this module says the record is done: delivered,
dead-lettered, or (by the operator's choice) skipped. Four classes of failure are kept apart
because they call for different responses (docs/sidecar.md, "Failure classes"):

- "not now" (back-pressure): the application is busy or not there - HTTP 503, 429 or 408, a
  refused connection, an in-process handler raising `AppUnavailable` - or the delivery is
  misconfigured (a 3xx redirect, a 401 for the shared token). Nothing about the records is wrong,
  so this never counts towards poison: `deliver()` raises `BackPressure` at once, saying how many
  leading records are already done and how long to wait (the application's `Retry-After` when it
  gave one, else a jittered exponential backoff). The caller (runner.py) holds the rest of the
  batch and offers it again, as often as it takes, while it keeps its group membership;
- a transient failure (HTTP 500, 502, 504, a timeout, a reset connection; `TransientFailure` in
  process): the batch is held and offered again the same way, for up to the transient budget
  (`RetryPolicy.transient_budget_s`) counted from the first such failure of the batch's first
  record; after that the batch is bisected;
- a refusal (an in-process exception, any other 4xx): retried with backoff up to `max_attempts`,
  then the batch is bisected;
- bisection tries halves once each, so the good records go through; a single record that still
  fails is poison only when that is about the record: a refusal always is; a transient failure
  is when the application then accepts other records (the rest of the batch, or else the last
  record it accepted, sent once more: a duplicate at-least-once allows). When it accepts nothing
  the failures are the application's, not the record's ("every batch failing alike"), and the
  rest of the batch is held as back-pressure: nothing is dead-lettered for an application that
  is down, however long, and no partition stalls on one record the application keeps failing
  while it takes others;
- a poison record is dead-lettered (the original coordinates and the error in headers) or skipped
  with a log line.

A batch whose HTTP body would exceed `max_batch_bytes` is delivered as consecutive pieces, each
under the bound (a single record larger than the bound goes alone).

Pieces are delivered in order and bisection finishes the left half before it starts the right
half, so the records that are done always form a prefix of the batch: that is what makes
`BackPressure.done` a single number. (The rest of a batch offered as evidence is the one
exception in appearance only: when it is accepted, the record before it is poison, so the whole
batch is done.)
"""

from __future__ import annotations

import binascii
import email.utils
import http.client
import importlib
import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kafka_rebalance_sidecar.backoff import Backoff
from kafka_rebalance_sidecar.records import Batch, Handler, Record
from kafka_rebalance_sidecar.token_file import TokenFile

log = logging.getLogger("kafka_rebalance_sidecar.delivery")

POISON_ACTIONS = ("dead-letter", "skip")

# Header names on a dead-lettered record (the record's own headers are kept before them).
HEADER_TOPIC = "kafka-rebalance.original.topic"
HEADER_PARTITION = "kafka-rebalance.original.partition"
HEADER_OFFSET = "kafka-rebalance.original.offset"
HEADER_TIMESTAMP = "kafka-rebalance.original.timestamp"
HEADER_ERROR = "kafka-rebalance.error"
HEADER_MEMBER = "kafka-rebalance.member"
HEADER_EPOCH = "kafka-rebalance.epoch"


class HandlerSpecError(ValueError):
    """`--handler` does not name an importable callable (`module:function`)."""


class DeliveryRefused(Exception):
    """The application saw the batch and refused it (counts as an attempt)."""


class TransientFailure(Exception):
    """The application failed the batch in a way that usually passes (HTTP 500, 502, 504, a
    timeout, a reset connection): retried within the transient budget before anything is
    blamed on a record. An in-process handler raises it for a dependency that is restarting."""


class AppUnavailable(Exception):
    """The application cannot take the batch now (unreachable, busy, misconfigured endpoint);
    says nothing about the records. `retry_after_s`: when the application said when to come
    back (HTTP `Retry-After`), in seconds from now."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


# Why a batch is given back (BackPressure.kind, the `class` label of the failure metric):
UNAVAILABLE = "unavailable"  # the application said "not now" or could not be reached
TRANSIENT = "transient"  # a transient failure, within the budget
FAILING_ALIKE = "failing-alike"  # beyond the budget, yet the application takes no record at all
REFUSED = "refused"  # a refusal (the records' fault); never a reason to give a batch back
FAILURE_CLASSES = (UNAVAILABLE, TRANSIENT, REFUSED)


class BackPressure(Exception):
    """`deliver()` gives the batch back: its first `done` records are finished (delivered,
    dead-lettered or skipped; they may be committed), the rest is to be offered again after
    `delay_s`. `tries` counts the consecutive answers that gave a batch back, this one
    included; `kind` says why (UNAVAILABLE, TRANSIENT or FAILING_ALIKE)."""

    def __init__(
        self, reason: str, delay_s: float, done: int, tries: int, kind: str = UNAVAILABLE
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_s = delay_s
        self.done = done
        self.tries = tries
        self.kind = kind


class Stopped(Exception):
    """The sidecar is shutting down while a batch could not be delivered; commit nothing."""


class Sink(Protocol):
    def __call__(self, batch: Batch) -> None: ...


def load_handler(spec: str) -> Handler:
    """Resolve `package.module:function` (dotted attribute paths allowed after the colon)."""
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise HandlerSpecError(f"--handler {spec!r}: expected module:function")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or the module failed while importing
        raise HandlerSpecError(
            f"--handler {spec!r}: cannot import {module_name!r}: {error}"
        ) from None
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise HandlerSpecError(
                f"--handler {spec!r}: {module_name} has no {attr_path}"
            ) from None
    if not callable(target):
        raise HandlerSpecError(f"--handler {spec!r}: {attr_path} is not callable")
    handler: Callable[[Batch], None] = target
    return handler


class InProcessDelivery:
    """Calls a Python handler with the batch; an exception means "refused", except
    `AppUnavailable`, which a handler raises when something it depends on is down (waited out,
    never counted towards poison)."""

    def __init__(self, handler: str | Handler) -> None:
        self.handler = load_handler(handler) if isinstance(handler, str) else handler
        self.description = handler if isinstance(handler, str) else repr(handler)

    def __call__(self, batch: Batch) -> None:
        try:
            self.handler(batch)
        except (AppUnavailable, TransientFailure):
            raise  # the handler says "not me, not the records" (a database is down): wait
        except Exception as error:
            raise DeliveryRefused(f"{type(error).__name__}: {error}") from error


def _b64(data: bytes | None, _encode: Callable[..., bytes] = binascii.b2a_base64) -> str | None:
    return None if data is None else _encode(data, newline=False).decode("ascii")


def batch_json(batch: Batch) -> bytes:
    """The HTTP body: keys, values and header values base64 (records are bytes, not text).

    Byte for byte what `json.dumps({"member", "epoch", "records": [{"topic", "partition",
    "offset", "timestamp_ms", "key", "value", "headers"}, ...]}, separators=(",", ":"))` writes,
    built directly as ASCII bytes: the part every record of a partition shares is escaped once
    per partition (json.dumps escapes to ASCII), the rest of a record is numbers and base64,
    which need no escaping, and base64 is bytes already, so nothing is decoded and encoded again.
    That is about four times faster than encoding a dict per record (and a quarter faster than
    the same built as text), on the path every record takes."""
    dumps = json.dumps
    encode = binascii.b2a_base64
    prefixes: dict[tuple[str, int], bytes] = {}
    parts: list[bytes] = []
    add = parts.append
    for r in batch.records:
        prefix = prefixes.get((r.topic, r.partition))
        if prefix is None:
            prefix = f'{{"topic":{dumps(r.topic)},"partition":{int(r.partition)},"offset":'.encode()
            prefixes[(r.topic, r.partition)] = prefix
        headers = (
            dumps([[k, _b64(v)] for k, v in r.headers], separators=(",", ":")).encode()
            if r.headers
            else b"[]"
        )
        key, value = r.key, r.value  # quoted base64, or null; inline (a call per value cost 5%)
        add(
            b'%s%d,"timestamp_ms":%d,"key":%s,"value":%s,"headers":%s}'
            % (
                prefix,
                r.offset,
                r.timestamp_ms,
                b"null" if key is None else b'"' + encode(key, newline=False) + b'"',
                b"null" if value is None else b'"' + encode(value, newline=False) + b'"',
                headers,
            )
        )
    head = f'{{"member":{dumps(batch.member)},"epoch":{int(batch.epoch)},"records":['.encode()
    return head + b",".join(parts) + b"]}"


# A request on a kept-alive connection can fail because the application closed that connection
# while it was idle; such a request is sent once more on a new connection before the failure
# counts (as a transient failure).
_STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

# Answers that mean "not now, the same batch later" (back-pressure), never a refusal of records.
RETRY_LATER_STATUSES = frozenset({408, 429, 503})
# Answers of an application (or a proxy in front of it) whose own dependency failed: usually
# gone in seconds, so retried within the transient budget before a record is suspected.
TRANSIENT_STATUSES = frozenset({500, 502, 504})
# The most of an answer's body the sidecar reads (only its start is logged); a longer body is
# left unread and its connection closed, so a misbehaving endpoint cannot fill the memory.
MAX_RESPONSE_BYTES = 64 * 1024


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """An HTTP `Retry-After` value in seconds from `now` (epoch seconds): delta-seconds or an
    HTTP-date (RFC 9110 10.2.3). None when absent or unreadable; a date in the past is 0."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT; a zone-less date is read as such
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HttpDelivery:
    """POSTs the batch as JSON to the application on localhost; any 2xx means delivered.

    The answer decides what happens to the batch (docs/sidecar.md, "Failure classes"): 2xx
    delivered; 503, 429 and 408 (with `Retry-After` honoured) and a connection that cannot be
    made are back-pressure (`AppUnavailable`); 500, 502, 504, a timeout and a connection reset
    or closed mid-request are transient (`TransientFailure`); a 3xx is a configuration error
    (the URL redirects; it is never followed) and a 401 a token mismatch, both held like
    back-pressure rather than blamed on the records, the 3xx logged once; any other answer is
    a refusal (`DeliveryRefused`).

    One persistent HTTP/1.1 connection (`http.client`, kept alive while the application allows):
    a new TCP connection per batch cost more than the request itself. Deliveries come from one
    thread, one at a time, so one connection is all there is to keep; no pool library is needed.
    The connection goes straight to the URL's host (no proxy from the environment: the
    application is the pod's own). Sending a batch again after a dropped connection is within
    the at-least-once contract: the application may see it twice, never lose it.

    `token`: a shared secret sent as `Authorization: Bearer <token>` so the application can
    check its caller. At most `max_response_bytes` of an answer's body are read."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 30.0,
        *,
        token: TokenFile | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"--deliver-to {url!r}: expected an http:// or https:// URL")
        parts = urllib.parse.urlsplit(url)
        if not parts.hostname:
            raise ValueError(f"--deliver-to {url!r}: no host")
        self.url = url
        self.timeout_s = timeout_s
        self.token = token
        self.max_response_bytes = max_response_bytes
        self.description = url
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._connection: http.client.HTTPConnection | None = None
        self._redirect_logged = False

    def _connect(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection
        if self._https:
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout_s, context=ssl.create_default_context()
            )
        else:
            connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        connection.connect()
        # http.client sends the headers and the body in two writes; with Nagle's algorithm the
        # body's last segment would wait for the application's delayed ACK of the headers.
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _post(
        self, body: bytes, headers: dict[str, str]
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        reused = self._connection is not None
        if self._connection is None:
            try:
                self._connection = self._connect()
            except (OSError, http.client.HTTPException) as error:  # refused, unreachable
                raise AppUnavailable(f"{self.url}: {error or type(error).__name__}") from None
        connection = self._connection
        try:
            connection.request("POST", self._target, body, headers)
            response = connection.getresponse()
            data = response.read(self.max_response_bytes + 1)
        except _STALE_CONNECTION:
            self.close()
            if not reused:
                raise
            return self._post(body, headers)
        except BaseException:
            self.close()
            raise
        # A body longer than the cap is left unread: the connection cannot carry another request.
        if response.will_close or not response.isclosed() or len(data) > self.max_response_bytes:
            self.close()
        return response.status, response.msg, data[: self.max_response_bytes]

    def __call__(self, batch: Batch) -> None:
        headers = {
            "Content-Type": "application/json",
            "X-Kafka-Rebalance-Member": batch.member,
            "X-Kafka-Rebalance-Epoch": str(batch.epoch),
        }
        if self.token is not None:
            name, value = self.token.header()
            headers[name] = value
        try:
            status, answer, data = self._post(batch_json(batch), headers)
        except TimeoutError:
            raise TransientFailure(
                f"{self.url}: no answer within {self.timeout_s:g} s (timeout)"
            ) from None
        except (OSError, http.client.HTTPException) as error:  # reset, closed mid-request
            raise TransientFailure(f"{self.url}: {error or type(error).__name__}") from None
        if 200 <= status < 300:
            return
        text = data[:200].decode("utf-8", "replace").strip()
        said = f"HTTP {status}: {text}" if text else f"HTTP {status}"
        if status in RETRY_LATER_STATUSES:
            raise AppUnavailable(said, retry_after_seconds(answer.get("Retry-After")))
        if status in TRANSIENT_STATUSES:
            raise TransientFailure(said)
        if 300 <= status < 400:
            location = answer.get("Location") or "no Location"
            if not self._redirect_logged:
                self._redirect_logged = True
                log.error(
                    "configuration error: --deliver-to %s answers HTTP %d (redirect to %s); "
                    "redirects are not followed: set --deliver-to to the URL that takes the "
                    "batches. Records are held, not dropped, until it answers 2xx",
                    self.url,
                    status,
                    location,
                )
            raise AppUnavailable(f"HTTP {status} redirect to {location}: configuration error")
        if status == 401:
            raise AppUnavailable(
                f"{said} (the application refused the sidecar's token: --deliver-token-file)"
            )
        raise DeliveryRefused(said)


# The default bound of one HTTP body (`--max-batch-bytes`): a fetch of large records must not
# become one JSON body the size of the fetch (kafka-python fetches up to 50 MiB by default) in a
# sidecar whose memory limit is a few hundred MiB.
DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class RetryPolicy:
    """How failures are retried; every wait is a jittered exponential backoff (backoff.py) from
    `initial_backoff_s` doubling up to `max_backoff_s`, so a fleet never retries in lockstep.

    Refusals: up to `max_attempts`, then bisection. Back-pressure ("not now"): without limit;
    the application's `Retry-After` is honoured between `initial_backoff_s` and
    `max_retry_after_s`. Transient failures: like back-pressure for `transient_budget_s` from
    the first failure of the batch's first record, then bisection."""

    max_attempts: int = 5
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    max_retry_after_s: float = 60.0
    transient_budget_s: float = 60.0

    def backoff(self, failures: int) -> float:
        """Sleep before the next attempt after `failures` consecutive failures (>= 1)."""
        return Backoff(self.initial_backoff_s, self.max_backoff_s).wait(failures)

    def pressure_delay(self, tries: int, retry_after_s: float | None) -> float:
        """The wait before offering a held batch again after `tries` consecutive answers that
        gave it back (>= 1)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, self.initial_backoff_s), self.max_retry_after_s)
        return self.backoff(tries)


DeadLetterSend = Callable[[Record, str, str, list[tuple[str, bytes]]], None]
"""(record, topic, error, headers) -> returns once the broker acknowledged; raises otherwise."""


class DeliveryStats(Protocol):
    def delivered(self, count: int) -> None: ...
    def failed(self, kind: str) -> None: ...
    def dead_lettered(self, count: int) -> None: ...
    def skipped(self, count: int) -> None: ...
    def bisected(self) -> None: ...


class _NoStats:
    def delivered(self, count: int) -> None:
        pass

    def failed(self, kind: str) -> None:
        pass

    def dead_lettered(self, count: int) -> None:
        pass

    def skipped(self, count: int) -> None:
        pass

    def bisected(self) -> None:
        pass


@dataclass(frozen=True)
class Outcome:
    """What happened to a batch; every record is in exactly one of the three."""

    delivered: int
    dead_lettered: tuple[Record, ...] = ()
    skipped: tuple[Record, ...] = ()


@dataclass(frozen=True)
class _Failure:
    message: str
    kind: str  # TRANSIENT or REFUSED


class _GiveBack(Exception):
    """Internal: hand the undone rest of the batch back to the caller (BackPressure)."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


class _PieceDone(Exception):
    """Internal: the rest of the piece was accepted as evidence; nothing of it is left to do."""


# A record's share of the HTTP body beyond its key, value, header names and values and topic: 76
# bytes of field names and punctuation, 8 of quotes and the empty header list, at most 49 of
# three numbers (a partition is an int32, an offset and a timestamp int64) and the comma before
# it; `record_bytes_bound` adds the rest.
_RECORD_OVERHEAD = 76 + 8 + 49 + 1
# {"member":,"epoch":,"records":[]} with the member's quotes, and an int64 epoch.
_BATCH_OVERHEAD = 35 + 20


def _b64_len(data: bytes | None) -> int:
    return 0 if data is None else 4 * ((len(data) + 2) // 3)


def record_bytes_bound(record: Record) -> int:
    """An upper bound of `record`'s share of `batch_json`'s body (json.dumps escapes a character
    to at most 12 bytes; base64 writes 4 bytes per 3)."""
    size = _RECORD_OVERHEAD + 12 * len(record.topic) + _b64_len(record.key)
    size += _b64_len(record.value)
    for name, value in record.headers:
        size += 12 * len(name) + _b64_len(value) + 8
    return size


def pieces(batch: Batch, max_bytes: int) -> list[Batch]:
    """`batch` as consecutive batches whose `batch_json` bodies are at most `max_bytes` (a
    record that alone exceeds it goes alone); in order, every record exactly once.

    This runs for every batch on the HTTP path, so it first bounds the whole body in one cheap
    pass (about 60 ns a record: payload and topic lengths only, valid for records without
    headers) and cuts record by record only when that bound does not fit."""
    head = _BATCH_OVERHEAD + 12 * len(batch.member)
    records = batch.records
    payload = topics = 0
    for r in records:
        if r.headers:
            break
        k, v = r.key, r.value
        payload += (len(k) if k is not None else 0) + (len(v) if v is not None else 0)
        topics += len(r.topic)
    else:  # base64 writes 4 bytes per 3, rounded up: at most 4 more per key and per value
        bound = head + len(records) * (_RECORD_OVERHEAD + 8) + 12 * topics + 4 * payload // 3 + 1
        if bound <= max_bytes:
            return [batch]
    out: list[Batch] = []
    start, size = 0, head
    for i, record in enumerate(records):
        share = record_bytes_bound(record)
        if i > start and size + share > max_bytes:
            out.append(Batch(batch.member, batch.epoch, records[start:i]))
            start, size = i, head
        size += share
    if start == 0:
        return [batch]
    out.append(Batch(batch.member, batch.epoch, records[start:]))
    return out


class Deliverer:
    """Delivers one batch completely (or raises BackPressure or Stopped): pieces bounded in
    bytes, retries by failure class, bisection, poison handling. Never waits for back-pressure
    or transient failures itself: the caller holds the batch and keeps its consumer alive
    meanwhile (runner.py); it sleeps only between refusal retries of one batch (short)."""

    def __init__(
        self,
        sink: Sink,
        *,
        retry: RetryPolicy | None = None,
        on_poison: str = "dead-letter",
        dead_letter_topic: str | Callable[[Record], str] | None = None,
        dead_letter_send: DeadLetterSend | None = None,
        stats: DeliveryStats | None = None,
        stop: threading.Event | None = None,
        sleep: Callable[[float], None] | None = None,
        heartbeat: Callable[[], None] | None = None,
        max_batch_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if on_poison not in POISON_ACTIONS:
            raise ValueError(f"--on-poison {on_poison!r}: expected one of {POISON_ACTIONS}")
        if on_poison == "dead-letter" and (dead_letter_send is None or dead_letter_topic is None):
            raise ValueError("dead-letter needs a topic and a producer")
        self.sink = sink
        self.retry = retry or RetryPolicy()
        if self.retry.max_attempts < 1:
            raise ValueError("--max-attempts must be at least 1")
        if self.retry.transient_budget_s < 0:
            raise ValueError("--transient-retry-budget must be at least 0")
        if max_batch_bytes is not None and max_batch_bytes < 1:
            raise ValueError("--max-batch-bytes must be at least 1")
        self.on_poison = on_poison
        self.dead_letter_topic = dead_letter_topic
        self.dead_letter_send = dead_letter_send
        self.stats = stats or _NoStats()
        self.stop = stop or threading.Event()
        self._sleep = sleep or self._interruptible_sleep
        # Called on every try: waiting for the application is the loop being alive, not stuck.
        self.heartbeat = heartbeat or (lambda: None)
        # The bound of one HTTP body; None: batches go whole (a handler in process has no body).
        self.max_batch_bytes = max_batch_bytes
        self._clock = clock
        self._done = 0  # records of the batch in hand that are finished (a prefix)
        self._delivered = 0
        self._dead: list[Record] = []
        self._skipped: list[Record] = []
        self._piece: Batch | None = None  # the piece in hand and where it starts in the batch
        self._piece_start = 0
        self._pressure_tries = 0  # consecutive answers that gave a batch back, across batches
        self._pressure_since = 0.0
        # The transient budget runs from the first transient failure of a batch starting with
        # this record; any acceptance ends it.
        self._episode: tuple[str, int, int] | None = None
        self._episode_since = 0.0
        self._canary: Record | None = None  # the last record the application accepted

    def _interruptible_sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)

    def deliver(self, batch: Batch) -> Outcome:
        """Deliver every record (or dead-letter/skip poison). Raises `BackPressure` when the
        application says "not now", fails transiently within the budget, or fails every record
        alike (the leading records already done are counted in it), and `Stopped` on shutdown
        during refusal retries."""
        if not batch.records:
            return Outcome(0)
        self._done = self._delivered = 0
        self._dead, self._skipped = [], []
        try:
            bound = self.max_batch_bytes
            for piece in [batch] if bound is None else pieces(batch, bound):
                self._piece, self._piece_start = piece, self._done
                try:
                    self._deliver(piece)
                except _PieceDone:
                    self._done = self._piece_start + len(piece.records)
        except AppUnavailable as error:
            raise self._give_back(batch, str(error), UNAVAILABLE, error.retry_after_s) from None
        except _GiveBack as back:
            raise self._give_back(batch, back.reason, back.kind, None) from None
        finally:
            self._piece = None
        return Outcome(self._delivered, tuple(self._dead), tuple(self._skipped))

    def _deliver(self, piece: Batch) -> None:
        failure = self._attempts(piece, self.retry.max_attempts, whole=True)
        if failure is None:
            self._done += len(piece.records)
            return
        if len(piece.records) > 1:
            # An application that is down fails a record it took before as well: one request
            # says so, where bisecting would take one per level, each up to the timeout.
            if (
                failure.kind == TRANSIENT
                and self._canary is not None
                and not self._canary_taken(piece, piece.records[0])
            ):
                raise _GiveBack(f"every record failing alike ({failure.message})", FAILING_ALIKE)
            self.stats.bisected()
            log.warning(
                "batch of %d records failed (%s: %s); bisecting to find a poison record",
                len(piece.records),
                failure.kind,
                failure.message,
            )
        self._bisect(piece, failure)

    def _give_back(
        self, batch: Batch, reason: str, kind: str, retry_after_s: float | None
    ) -> BackPressure:
        self._pressure_tries += 1
        tries = self._pressure_tries
        now = self._clock()
        if tries == 1:
            self._pressure_since = now
        delay = self.retry.pressure_delay(tries, retry_after_s)
        held = len(batch.records) - self._done
        if tries == 1 or tries % 10 == 0:
            hint = "" if retry_after_s is None else f" (Retry-After {retry_after_s:g} s)"
            if kind == TRANSIENT and self._episode is not None:
                left = self.retry.transient_budget_s - (now - self._episode_since)
                hint += f" ({left:.0f} s of the transient budget left)"
            log.warning(
                "application not taking records (%s: %s): holding %d records, next try in "
                "%.1f s%s (try %d, %.0f s so far); nothing is dead-lettered or skipped for this",
                kind,
                reason,
                held,
                delay,
                hint,
                tries,
                now - self._pressure_since,
            )
        return BackPressure(reason, delay, self._done, tries, kind)

    def _bisect(self, batch: Batch, failure: _Failure) -> None:
        """Halves are tried once each; a failed half is halved again, and a single record is
        judged by `_single`. Order within the batch is kept: the left half is finished before
        the right half starts (so what is done is always a prefix, `self._done` records)."""
        records = batch.records
        if len(records) == 1:
            self._single(batch, failure)
            return
        middle = len(records) // 2
        for half in (records[:middle], records[middle:]):
            part = Batch(batch.member, batch.epoch, half)
            if len(half) == 1:
                self._single(part, None)
                continue
            half_failure = self._attempts(part, 1, whole=False)
            if half_failure is None:
                self._done += len(half)
            else:
                self._bisect(part, half_failure)

    def _single(self, batch: Batch, failure: _Failure | None) -> None:
        """One record, unless `failure` says how it already failed alone: tried (refusals up to
        `max_attempts`, a transient failure once: the budget was spent on its batch), then
        poison if that is about the record (`_evidence`)."""
        record = batch.records[0]
        if failure is None:  # not tried alone yet
            failure = self._attempts(batch, self.retry.max_attempts, whole=False)
        if failure is None:
            self._done += 1
            return
        rest_taken = 0
        if failure.kind == TRANSIENT:
            rest_taken = self._evidence(batch, record, failure)
        self._poison(batch, record, failure.message)
        self._done += 1
        if rest_taken:
            raise _PieceDone

    def _evidence(self, batch: Batch, record: Record, failure: _Failure) -> int:
        """Whether the application fails only `record`: it must accept other records now. Offers
        the rest of the piece after `record` once (returns how many records that delivered),
        and when that fails too (the rest may hold another such record) the last record the
        application accepted (a duplicate, allowed by at-least-once; returns 0: the rest is
        bisected as usual). Raises _GiveBack (FAILING_ALIKE) when it accepts nothing."""
        assert self._piece is not None
        position = self._done - self._piece_start
        rest = self._piece.records[position + 1 :]
        if rest and self._offer(batch, rest):
            self._accepted(rest)  # the piece is done: deliver() counts it (_PieceDone)
            return len(rest)
        if self._canary_taken(batch, record):
            return 0
        raise _GiveBack(
            f"every record failing alike ({failure.message}) since {_where(record)}", FAILING_ALIKE
        )

    def _canary_taken(self, batch: Batch, failing: Record) -> bool:
        """Offer the last record the application accepted once more (a duplicate): whether it
        is taken. Without one, False."""
        canary = self._canary
        if canary is None or not self._offer(batch, (canary,)):
            return False
        self._episode = None
        log.info(
            "the application accepted %s again (a duplicate) while failing %s: it fails that "
            "batch, not every record",
            _where(canary),
            _where(failing),
        )
        return True

    def _offer(self, batch: Batch, records: tuple[Record, ...]) -> bool:
        """One try of `records` (no retry, no bookkeeping): whether the application took them."""
        self.heartbeat()
        try:
            self.sink(Batch(batch.member, batch.epoch, records))
        except (AppUnavailable, TransientFailure, DeliveryRefused) as error:
            self.stats.failed(_kind(error))
            return False
        return True

    def _in_budget(self, batch: Batch) -> bool:
        """Whether a transient failure of `batch` is still within the budget (and starts the
        budget at the first one of a batch starting with this record)."""
        first = batch.records[0]
        key = (first.topic, first.partition, first.offset)
        now = self._clock()
        if self._episode != key:
            self._episode, self._episode_since = key, now
        return now - self._episode_since < self.retry.transient_budget_s

    def _accepted(self, records: tuple[Record, ...]) -> None:
        if self._pressure_tries:
            log.info(
                "application taking records again after %d tries over %.1f s",
                self._pressure_tries,
                self._clock() - self._pressure_since,
            )
            self._pressure_tries = 0
        self._episode = None
        self._canary = records[-1]
        self._delivered += len(records)
        self.stats.delivered(len(records))

    def _attempts(self, batch: Batch, attempts: int, *, whole: bool) -> _Failure | None:
        """Deliver with up to `attempts` refusals; None on success, else the last failure. A
        "not now" answer (`AppUnavailable`) propagates at once; a transient failure of a whole
        piece within the budget gives the batch back (_GiveBack), otherwise it is returned at
        once (the budget did the retrying); shutdown during refusal retries raises Stopped."""
        refused = 0
        while True:
            if self.stop.is_set() and refused:
                raise Stopped("shutting down with an undelivered batch")
            self.heartbeat()
            try:
                self.sink(batch)
            except AppUnavailable:
                self.stats.failed(UNAVAILABLE)
                raise
            except TransientFailure as error:
                self.stats.failed(TRANSIENT)
                if whole and self._in_budget(batch):
                    raise _GiveBack(str(error), TRANSIENT) from None
                return _Failure(str(error), TRANSIENT)
            except DeliveryRefused as error:
                refused += 1
                self.stats.failed(REFUSED)
                log.info(
                    "batch of %d records refused (attempt %d/%d): %s",
                    len(batch.records),
                    refused,
                    attempts,
                    error,
                )
                if refused >= attempts:
                    return _Failure(str(error), REFUSED)
                self._sleep(self.retry.backoff(refused))
                continue
            self._accepted(batch.records)
            return None

    def _poison(self, batch: Batch, record: Record, error: str) -> None:
        where = _where(record)
        if self.on_poison == "skip":
            log.error("skipping poison record %s: %s", where, error)
            self.stats.skipped(1)
            self._skipped.append(record)
            return
        assert self.dead_letter_send is not None and self.dead_letter_topic is not None
        topic = (
            self.dead_letter_topic(record)
            if callable(self.dead_letter_topic)
            else self.dead_letter_topic
        )
        headers = dead_letter_headers(record, error, batch.member, batch.epoch)
        failures = 0
        while True:
            try:
                self.dead_letter_send(record, topic, error, headers)
                break
            except Exception as send_error:
                failures += 1
                if self.stop.is_set():
                    raise Stopped("shutting down while dead-lettering") from send_error
                log.warning("dead-letter send of %s to %s failed: %s", where, topic, send_error)
                self._sleep(self.retry.backoff(failures))
        log.error("dead-lettered poison record %s to %s: %s", where, topic, error)
        self.stats.dead_lettered(1)
        self._dead.append(record)


def _where(record: Record) -> str:
    return f"{record.topic}[{record.partition}]@{record.offset}"


def _kind(error: Exception) -> str:
    if isinstance(error, AppUnavailable):
        return UNAVAILABLE
    return TRANSIENT if isinstance(error, TransientFailure) else REFUSED


def dead_letter_headers(
    record: Record, error: str, member: str, epoch: int
) -> list[tuple[str, bytes]]:
    """The record's own headers, then where it came from and why it was dead-lettered."""
    return [
        *record.headers,
        (HEADER_TOPIC, record.topic.encode()),
        (HEADER_PARTITION, str(record.partition).encode()),
        (HEADER_OFFSET, str(record.offset).encode()),
        (HEADER_TIMESTAMP, str(record.timestamp_ms).encode()),
        (HEADER_ERROR, error.encode("utf-8", "replace")[:1000]),
        (HEADER_MEMBER, member.encode()),
        (HEADER_EPOCH, str(epoch).encode()),
    ]


def kafka_dead_letter_sender(producer: Any, timeout_s: float = 30.0) -> DeadLetterSend:
    """A DeadLetterSend over a kafka-python KafkaProducer; returns after the broker's ack."""

    def send(record: Record, topic: str, error: str, headers: list[tuple[str, bytes]]) -> None:
        value = record.value if record.value is not None or record.key is not None else b""
        future = producer.send(topic, key=record.key, value=value, headers=headers)
        future.get(timeout=timeout_s)

    return send
