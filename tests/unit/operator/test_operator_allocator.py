"""`allocator.cap_arenas`: glibc's arenas capped unless MALLOC_ARENA_MAX already says."""

from __future__ import annotations

import platform

import pytest
from kafka_rebalance_operator import allocator


def test_an_explicit_malloc_arena_max_is_left_to_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert allocator.cap_arenas() is False


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's arena cap is glibc's")
def test_glibc_takes_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert allocator.cap_arenas() is True
