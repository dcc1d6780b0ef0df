"""numpy for the planner's whole-array passes, when it is installed.

The assignors belong to the base install (the sidecar's fallback, `kafka-rebalance plan`), which
does not depend on numpy; the operator's and the pipeline's installs do. So every caller of this
module keeps its pure path and takes this one only when `ENABLED` (numpy importable): the two
paths give the same result for every input, which the unit tests check by running both.
"""

from __future__ import annotations

from collections.abc import Sequence

try:
    import numpy
except ImportError:  # the base install: the callers' pure paths
    numpy = None  # type: ignore[assignment]

# Whether the numpy paths are taken (tests set it False to run the pure paths).
ENABLED = numpy is not None


def claim_numbers(claims: bytes, bases: Sequence[int], counts: Sequence[int]) -> bytes | None:
    """The global partition numbers of a block of one-partition claims, or None when some claim
    is not clean. `claims` holds rows of C ints (`array('i')`'s bytes), one row per member and
    one column per topic; topic j's partition 0 is global number `bases[j]` and it has
    `counts[j]` partitions. Clean: every claim in 0 <= p < counts[j]; the result is then row by
    row `bases[j] + p`, as C ints (the sums stay below the group's partition count, < 2**31).
    Three passes at C speed over the block, no Python object per claim."""
    width = len(bases)
    if not width or len(counts) != width or len(claims) % (width * numpy.intc(0).itemsize):
        raise ValueError("claims must be whole rows of one C int per topic")
    block = numpy.frombuffer(claims, dtype=numpy.intc).reshape(-1, width)
    if not block.size:
        return b""
    if block.min() < 0 or (block.max(axis=0) >= numpy.asarray(counts)).any():
        return None
    return (block + numpy.asarray(bases, dtype=numpy.intc)).tobytes()
