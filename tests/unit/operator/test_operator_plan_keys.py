"""Plan keys rotate with no restart (`plan_keys.PlanKeyRing`): a real key file, rewritten the way
a rotation rewrites it, and a clock the test moves past the check interval."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kafka_rebalance_common.wire import plan_record
from kafka_rebalance_operator.kafka.plan_keys import PlanKeyRing, signing_key
from kafka_rebalance_operator.settings import OperatorSettings

OLD, NEW = "old-key-0123456789", "new-key-0123456789"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def write(path: Path, text: str) -> None:
    """Replace the file as a Secret volume does (a new inode), whatever the mtime resolution."""
    fresh = path.with_suffix(".new")
    fresh.write_text(text, encoding="utf-8")
    os.replace(fresh, path)


def test_a_rotation_is_taken_at_the_next_check_and_the_first_key_signs(tmp_path: Path) -> None:
    path, clock, errors = tmp_path / "plan-keys", Clock(), []
    write(path, f"{OLD}\n")
    ring = PlanKeyRing(path, check_interval_s=1.0, clock=clock, on_error=lambda: errors.append(1))
    settings = OperatorSettings(plan_key_ring=ring)
    assert signing_key(settings) == OLD.encode()
    write(path, f"{OLD}\n{NEW}\n")  # step 1: the new key second, everywhere
    assert ring.keys() == (OLD.encode(),)  # not before the check interval has passed
    clock.now += 1.0
    assert ring.keys() == (OLD.encode(), NEW.encode())
    assert signing_key(settings) == OLD.encode()
    write(path, f"{NEW}\n{OLD}\n")  # step 2: the new key first: it signs
    clock.now += 1.0
    assert signing_key(settings) == NEW.encode()
    write(path, f"{NEW}\n")  # step 3: the old key gone
    clock.now += 1.0
    assert ring.keys() == (NEW.encode(),)
    assert (ring.reloads, ring.errors, errors) == (3, 0, [])


def test_a_bad_new_file_keeps_the_last_good_keys_and_is_counted_once(tmp_path: Path) -> None:
    path, clock, errors = tmp_path / "plan-keys", Clock(), []
    write(path, f"{OLD}\n")
    ring = PlanKeyRing(path, clock=clock, on_error=lambda: errors.append(1))
    write(path, "short\n")
    clock.now += 5
    assert ring.keys() == (OLD.encode(),)
    clock.now += 5
    assert ring.keys() == (OLD.encode(),)  # unchanged since: not read, not counted again
    assert (ring.errors, len(errors)) == (1, 1)
    path.unlink()
    clock.now += 5
    assert ring.keys() == (OLD.encode(),)
    write(path, f"{NEW}\n")  # fixed: taken
    clock.now += 5
    assert ring.keys() == (NEW.encode(),)
    assert (ring.errors, ring.reloads) == (2, 1)


def test_a_file_unusable_at_start_is_refused_at_once(tmp_path: Path) -> None:
    with pytest.raises(plan_record.PlanKeyError, match="cannot read"):
        PlanKeyRing(tmp_path / "missing")


def test_without_a_key_file_the_fixed_keys_sign_or_nothing_does() -> None:
    assert signing_key(OperatorSettings()) is None
    assert signing_key(OperatorSettings(plan_keys=(b"a" * 16, b"b" * 16))) == b"a" * 16
