"""Java test programs compiled once and kept: `compiled(source, classpath, cache)`.

The integration tests run small Java programs (tests/integration/java/). Launched as single-file
source programs, each JVM compiles its source first, and javac costs seconds of CPU per start
(tens of seconds on a loaded two-core machine), paid again by every test run. Here a program is
compiled into a directory under the cache named by a digest of everything its classes depend
on: the source text, the classpath (the provisioned jars' paths carry their versions and source
digests) and the javac that compiled it. An unchanged program is compiled once per machine.

Invariants: a directory under the cache is either absent or complete (compiled into a private
temp directory, then renamed into place under the cache lock), so a concurrent session or a
killed run never sees half a compile; a changed source or classpath gets a new directory and
never reuses old classes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from kafka_rebalance_dev.devenv.kafka_broker import java_binary
from kafka_rebalance_dev.devenv.provision.frame import cache_lock

KEEP = 64  # compiles kept (the least recently used go when a new one is added; each is ~100 KB)


class JavaCompileError(RuntimeError):
    """javac refused the source; the message carries its output."""


def javac_binary() -> str:
    """javac beside the `java` the harness runs (a JDK, as the broker plug-in's build needs)."""
    java = Path(java_binary()).resolve()
    javac = java.parent / "javac"
    return str(javac) if javac.exists() else (shutil.which("javac") or "javac")


def classes_key(source: Path, classpath: str, javac: str) -> str:
    """The digest naming a compile: source text, classpath and the resolved javac."""
    digest = hashlib.sha256()
    for part in (source.read_bytes(), classpath.encode(), str(Path(javac).resolve()).encode()):
        digest.update(part + b"\0")
    return digest.hexdigest()[:16]


def compiled(source: Path, classpath: str, cache: Path, timeout: float = 600) -> Path:
    """The directory holding `source`'s classes compiled against `classpath` (compiling it
    into `cache` first unless an identical compile is already there)."""
    javac = javac_binary()
    target = cache / f"{source.stem}-{classes_key(source, classpath, javac)}"
    with cache_lock(cache):
        if target.is_dir():  # (maybe compiled by a concurrent session): mark it recently used
            os.utime(target)
            return target
        for stale in cache.glob(f".tmp-{source.stem}-*"):  # an interrupted compile's leftovers
            shutil.rmtree(stale, ignore_errors=True)
        temp = cache / f".tmp-{target.name}-{os.getpid()}"
        temp.mkdir()
        done = subprocess.run(
            [javac, "-nowarn", "-cp", classpath, "-d", str(temp), str(source)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(temp, ignore_errors=True)
            raise JavaCompileError(f"javac {source.name} failed:\n{done.stdout}{done.stderr}")
        os.replace(temp, target)
        _prune(cache)
    return target


def _prune(cache: Path, keep: int = KEEP) -> None:
    """Keep the `keep` most recently used compiles (callers hold the cache lock)."""
    built = sorted(
        (p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in built[keep:]:
        shutil.rmtree(old, ignore_errors=True)
