"""z3 proofs that may run on several threads at once.

`kxform tune -j N` prepares candidates on worker threads, and each may ask for a proof.
z3's default context is shared by every thread and its reference counts are not
thread-safe: terms built or freed on two threads at once corrupt it (a segfault or an
`UNEXPECTED CODE WAS REACHED` abort of the whole process). So a proof builds its terms in
a context of its own, and one proof runs at a time (z3 itself is not the bottleneck: a
proof takes milliseconds, a candidate's build seconds).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PROOF_LOCK = threading.RLock()
"""Held by a proof while it runs (re-entrant: a caller may hold it around a cache check)."""
_LOCAL = threading.local()


@contextmanager
def proof_context() -> Iterator[Any]:
    """A fresh z3 context for one proof, held under the process's proof lock; `context()`
    returns it on this thread until the block ends."""
    import z3

    with PROOF_LOCK:
        previous = getattr(_LOCAL, "context", None)
        _LOCAL.context = z3.Context()
        try:
            yield _LOCAL.context
        finally:
            _LOCAL.context = previous


def context() -> Any:
    """The context of the proof running on this thread (inside `proof_context`)."""
    found = getattr(_LOCAL, "context", None)
    if found is None:
        raise RuntimeError("a z3 term was built outside kxform.analysis.solver.proof_context")
    return found
