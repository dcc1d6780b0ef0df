"""Compiled Java test programs are kept by digest: compiled once, recompiled on any change,
never left half-written (devenv/java_classes.py), with the real javac."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka_rebalance_dev.devenv import java_classes

HELLO = "public class Hello { public static void main(String[] a) { System.out.println(%s); } }\n"


def test_a_program_is_compiled_once_and_again_only_when_its_source_changes(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src" / "Hello.java"
    source.parent.mkdir()
    source.write_text(HELLO % '"one"')
    cache = tmp_path / "cache"

    first = java_classes.compiled(source, "", cache)
    built = (first / "Hello.class").stat()
    assert first.name.startswith("Hello-")
    again = java_classes.compiled(source, "", cache)
    assert again == first
    assert (again / "Hello.class").stat().st_mtime_ns == built.st_mtime_ns  # not recompiled

    source.write_text(HELLO % '"two"')
    changed = java_classes.compiled(source, "", cache)
    assert changed != first and (changed / "Hello.class").is_file()
    other_classpath = java_classes.compiled(source, str(tmp_path), cache)
    assert other_classpath not in (first, changed)


def test_a_failed_compile_names_the_error_and_leaves_nothing_behind(tmp_path: Path) -> None:
    source = tmp_path / "Broken.java"
    source.write_text("public class Broken { void f() { undefined(); } }\n")
    cache = tmp_path / "cache"
    with pytest.raises(
        java_classes.JavaCompileError, match=r"(?s)javac Broken.java failed.*cannot find symbol"
    ):
        java_classes.compiled(source, "", cache)
    assert sorted(p.name for p in cache.iterdir()) == [".provision.lock"]
