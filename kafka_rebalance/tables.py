"""The one text-table printer of the command line (`plan --format table`, `kubectl cgp`).

Cells are strings already (each caller formats its numbers its own way); this only aligns them.
Invariants: columns are two spaces apart and no line ends in spaces, so output diffs cleanly and
`split()` recovers the cells; a column is at least as wide as `widths` says, so rows printed one at
a time (a watch) stay under the header the first rows were printed with. Rich or tabulate would
add a dependency for these twenty lines, and neither prints kubectl's exact style.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


def grid(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    right: Collection[int] = (),
    rule: bool = False,
    widths: Sequence[int] | None = None,
) -> tuple[list[str], list[int]]:
    """(lines, widths): the header, a dashed rule under it when `rule`, then the rows; columns in
    `right` are right-aligned (numbers), the rest left-aligned."""
    used = [max(len(header[c]), *(len(row[c]) for row in rows)) for c in range(len(header))]
    if widths is not None:
        used = [max(a, b) for a, b in zip(used, widths, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(used[c]) if c in right else cell.ljust(used[c])
            for c, cell in enumerate(cells)
        ).rstrip()

    rules = [line(["-" * w for w in used])] if rule else []
    return [line(header), *rules, *(line(row) for row in rows)], used
