"""Handing batches to the application, and what happens when it refuses them.

The sidecar commits a record's offset only after this module says the record is done: delivered,
dead-lettered, or (by the operator's choice) skipped. Three kinds of answer are kept apart because
they call for different responses:

- "not now" (back-pressure): the application is busy or not there - HTTP 503, 429 or 408, a
  connection error or timeout, an in-process handler raising `AppUnavailable` - or the delivery is
  misconfigured (a 3xx redirect, a 401 for the shared token). Nothing about the records is wrong,
  so this never counts towards poison: `deliver()` raises `BackPressure` at once, saying how many
  leading records are already done and how long to wait (the application's `Retry-After` when it
  gave one, else a jittered exponential backoff). The caller (runner.py) holds the rest of the
  batch and offers it again, as often as it takes, while it keeps its group membership;
- a refusal (an exception, any other non-2xx answer): retried with exponential backoff up to
  `max_attempts`; if it still fails the batch is bisected, so the good records go through and
  only the record that keeps failing is treated as poison;
- a poison record is dead-lettered (the original coordinates and the error in headers) or skipped
  with a log line, so one record can never stall its partition forever.

Bisection finishes the left half before it starts the right half, so the records that are done
always form a prefix of the batch: that is what makes `BackPressure.done` a single number.
"""

from __future__ import annotations

import binascii
import email.utils
import http.client
import importlib
import json
import logging
import random
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

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


class AppUnavailable(Exception):
    """The application cannot take the batch now (unreachable, busy, misconfigured endpoint);
    says nothing about the records. `retry_after_s`: when the application said when to come
    back (HTTP `Retry-After`), in seconds from now."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class BackPressure(Exception):
    """`deliver()` gives the batch back: its first `done` records are finished (delivered,
    dead-lettered or skipped; they may be committed), the rest is to be offered again after
    `delay_s`. `tries` counts the consecutive "not now" answers, this one included."""

    def __init__(self, reason: str, delay_s: float, done: int, tries: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_s = delay_s
        self.done = done
        self.tries = tries


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
    return target


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
        except AppUnavailable:
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
# counts as "application unavailable".
_STALE_CONNECTION = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)

# Answers that mean "not now, the same batch later" (back-pressure), never a refusal of records.
RETRY_LATER_STATUSES = frozenset({408, 429, 503})
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

    The answer decides what happens to the batch (docs/sidecar.md, "Delivery over HTTP"):
    2xx delivered; 503, 429 and 408 (with `Retry-After` honoured) and connection errors are
    back-pressure (`AppUnavailable`); a 3xx is a configuration error (the URL redirects; it is
    never followed) and a 401 a token mismatch, both held like back-pressure rather than blamed
    on the records, the 3xx logged once; any other answer is a refusal (`DeliveryRefused`).

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
        connection = self._connection or self._connect()
        self._connection = connection
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
        except (TimeoutError, OSError, http.client.HTTPException) as error:
            raise AppUnavailable(f"{self.url}: {error or type(error).__name__}") from None
        if 200 <= status < 300:
            return
        text = data[:200].decode("utf-8", "replace").strip()
        said = f"HTTP {status}: {text}" if text else f"HTTP {status}"
        if status in RETRY_LATER_STATUSES:
            raise AppUnavailable(said, retry_after_seconds(answer.get("Retry-After")))
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


@dataclass(frozen=True)
class RetryPolicy:
    """Refusals: up to `max_attempts`, `initial_backoff_s` doubling up to `max_backoff_s`.
    Back-pressure ("not now"): tried without limit; the application's `Retry-After` is honoured
    between `initial_backoff_s` and `max_retry_after_s`, without one the same doubling backoff
    with jitter (a random point in its upper half)."""

    max_attempts: int = 5
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    multiplier: float = 2.0
    max_retry_after_s: float = 60.0

    def backoff(self, failures: int) -> float:
        """Sleep before the next attempt after `failures` consecutive failures (>= 1)."""
        return min(self.max_backoff_s, self.initial_backoff_s * self.multiplier ** (failures - 1))

    def pressure_delay(
        self, tries: int, retry_after_s: float | None, jitter: Callable[[], float] = random.random
    ) -> float:
        """The wait before offering a held batch again after `tries` consecutive "not now"
        answers (>= 1); `jitter()` returns a number in [0, 1)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, self.initial_backoff_s), self.max_retry_after_s)
        delay = self.backoff(tries)
        return delay / 2 + delay / 2 * jitter()


DeadLetterSend = Callable[[Record, str, str, list[tuple[str, bytes]]], None]
"""(record, topic, error, headers) -> returns once the broker acknowledged; raises otherwise."""


class DeliveryStats(Protocol):
    def delivered(self, count: int) -> None: ...
    def failed(self) -> None: ...
    def dead_lettered(self, count: int) -> None: ...
    def skipped(self, count: int) -> None: ...


class _NoStats:
    def delivered(self, count: int) -> None:
        pass

    def failed(self) -> None:
        pass

    def dead_lettered(self, count: int) -> None:
        pass

    def skipped(self, count: int) -> None:
        pass


@dataclass(frozen=True)
class Outcome:
    """What happened to a batch; every record is in exactly one of the three."""

    delivered: int
    dead_lettered: tuple[Record, ...] = ()
    skipped: tuple[Record, ...] = ()


class Deliverer:
    """Delivers one batch completely (or raises BackPressure or Stopped): retries, bisection,
    poison handling. Never waits for back-pressure itself: the caller holds the batch and keeps
    its consumer alive meanwhile (runner.py)."""

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
    ) -> None:
        if on_poison not in POISON_ACTIONS:
            raise ValueError(f"--on-poison {on_poison!r}: expected one of {POISON_ACTIONS}")
        if on_poison == "dead-letter" and (dead_letter_send is None or dead_letter_topic is None):
            raise ValueError("dead-letter needs a topic and a producer")
        self.sink = sink
        self.retry = retry or RetryPolicy()
        if self.retry.max_attempts < 1:
            raise ValueError("--max-attempts must be at least 1")
        self.on_poison = on_poison
        self.dead_letter_topic = dead_letter_topic
        self.dead_letter_send = dead_letter_send
        self.stats = stats or _NoStats()
        self.stop = stop or threading.Event()
        self._sleep = sleep or self._interruptible_sleep
        # Called on every try: waiting for the application is the loop being alive, not stuck.
        self.heartbeat = heartbeat or (lambda: None)
        self._done = 0  # records of the batch in hand that are finished (a prefix)
        self._pressure_tries = 0  # consecutive "not now" answers, across batches
        self._pressure_since = 0.0

    def _interruptible_sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)

    def deliver(self, batch: Batch) -> Outcome:
        """Deliver every record (or dead-letter/skip poison). Raises `BackPressure` when the
        application says "not now" (the leading records already done are counted in it), and
        `Stopped` on shutdown during refusal retries."""
        if not batch.records:
            return Outcome(0)
        self._done = 0
        try:
            return self._deliver(batch)
        except AppUnavailable as error:
            raise self._back_pressure(batch, error) from None

    def _deliver(self, batch: Batch) -> Outcome:
        error = self._attempts(batch, self.retry.max_attempts)
        if error is None:
            return Outcome(len(batch.records))
        if len(batch.records) == 1:
            return self._poison(batch, batch.records[0], error)
        log.warning(
            "batch of %d records refused %d times (%s); bisecting to find the poison record",
            len(batch.records),
            self.retry.max_attempts,
            error,
        )
        return self._bisect(batch)

    def _back_pressure(self, batch: Batch, error: AppUnavailable) -> BackPressure:
        self._pressure_tries += 1
        tries = self._pressure_tries
        now = time.monotonic()
        if tries == 1:
            self._pressure_since = now
        delay = self.retry.pressure_delay(tries, error.retry_after_s)
        held = len(batch.records) - self._done
        if tries == 1 or tries % 10 == 0:
            hint = (
                "" if error.retry_after_s is None else f" (Retry-After {error.retry_after_s:g} s)"
            )
            log.warning(
                "application not taking records (%s): holding %d records, next try in %.1f s%s "
                "(try %d, %.0f s so far); nothing is dead-lettered or skipped for this",
                error,
                held,
                delay,
                hint,
                tries,
                now - self._pressure_since,
            )
        return BackPressure(str(error), delay, self._done, tries)

    def _bisect(self, batch: Batch) -> Outcome:
        """Halves are tried once each; a refused half is halved again, and a single record that
        is refused gets the full `max_attempts` before it is declared poison. Order within the
        batch is kept: the left half is finished before the right half starts (so what is done
        is always a prefix, `self._done` records long)."""
        records = batch.records
        if len(records) == 1:
            error = self._attempts(batch, self.retry.max_attempts)
            outcome = Outcome(1) if error is None else self._poison(batch, records[0], error)
            self._done += 1
            return outcome
        middle = len(records) // 2
        outcomes = []
        for half in (records[:middle], records[middle:]):
            part = Batch(batch.member, batch.epoch, half)
            if len(half) > 1 and self._attempts(part, 1) is None:
                outcomes.append(Outcome(len(half)))
                self._done += len(half)
            else:
                outcomes.append(self._bisect(part))
        return Outcome(
            sum(o.delivered for o in outcomes),
            tuple(r for o in outcomes for r in o.dead_lettered),
            tuple(r for o in outcomes for r in o.skipped),
        )

    def _attempts(self, batch: Batch, attempts: int) -> str | None:
        """Deliver with up to `attempts` refusals; None on success, else the last error. A "not
        now" answer (`AppUnavailable`) propagates at once; shutdown during refusal retries
        raises Stopped."""
        refused = 0
        while True:
            if self.stop.is_set() and refused:
                raise Stopped("shutting down with an undelivered batch")
            self.heartbeat()
            try:
                self.sink(batch)
            except AppUnavailable:
                self.stats.failed()
                raise
            except DeliveryRefused as error:
                refused += 1
                self.stats.failed()
                log.info(
                    "batch of %d records refused (attempt %d/%d): %s",
                    len(batch.records),
                    refused,
                    attempts,
                    error,
                )
                if refused >= attempts:
                    return str(error)
                self._sleep(self.retry.backoff(refused))
                continue
            if self._pressure_tries:
                log.info(
                    "application taking records again after %d tries over %.1f s",
                    self._pressure_tries,
                    time.monotonic() - self._pressure_since,
                )
                self._pressure_tries = 0
            self.stats.delivered(len(batch.records))
            return None

    def _poison(self, batch: Batch, record: Record, error: str) -> Outcome:
        where = f"{record.topic}[{record.partition}]@{record.offset}"
        if self.on_poison == "skip":
            log.error(
                "skipping poison record %s after %d attempts: %s",
                where,
                self.retry.max_attempts,
                error,
            )
            self.stats.skipped(1)
            return Outcome(0, skipped=(record,))
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
        log.error(
            "dead-lettered poison record %s to %s after %d attempts: %s",
            where,
            topic,
            self.retry.max_attempts,
            error,
        )
        self.stats.dead_lettered(1)
        return Outcome(0, dead_lettered=(record,))


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
