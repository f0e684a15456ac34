"""The structural barrier check of a kernel that stages data in shared memory.

Every read of a shared array must be separated from every store to it by a
`__syncthreads()` on each path from the store to the read: in program order when the
store comes first; when the read comes first inside a loop that holds both, the path runs
from the store to the end of the loop's body and round to the read, and the barrier must
lie on it. The same holds for a store after a read (the next slice must not overwrite
what another thread still reads). The CPU runtime may or may not expose a missing
barrier, depending on how it schedules a block's threads; this check does not depend on
that, and the pass rejects its own rewrite when it fails.
"""

from __future__ import annotations

from kxform.analysis import AccessAnalysis
from kxform.frontend.model import Span


def missing_barriers(analysis: AccessAnalysis) -> list[str]:
    """One sentence per store/read pair of a shared array that no barrier separates."""
    problems: list[str] = []
    shared = [a for a in analysis.accesses if a.space == "shared"]
    for store in (a for a in shared if a.write):
        for read in (a for a in shared if a.read and a.buffer == store.buffer):
            for first, second, what in ((store, read, "read after its store"), (read, store, "store after a read")):
                if not _separated(analysis, first.span, second.span, set(first.loops) & set(second.loops)):
                    problems.append(
                        f"line {second.line}: `{second.text}` ({what} at line {first.line}) has no "
                        "__syncthreads() between them"
                    )
    return sorted(set(problems))


def _separated(analysis: AccessAnalysis, first: Span, second: Span, common: set[int]) -> bool:
    barriers = analysis.barriers
    if first.end <= second.start:  # straight line: a barrier between them
        return any(first.end <= b.start and b.end <= second.start for b in barriers)
    if not common:  # the second comes first in the text and no loop brings the first round to it
        return True
    loop = max((analysis.loop(i) for i in common), key=lambda lp: lp.depth)
    body = loop.body
    return any(
        (first.end <= b.start and b.end <= body.end) or (body.start <= b.start and b.end <= second.start)
        for b in barriers
    )
