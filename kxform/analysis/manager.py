"""The analysis manager: each analysis computed once per kernel and source version.

An analysis is a frozen class with a `compute(ctx, kernel)` class method (the `Analysis`
protocol below). `AnalysisManager.get(kind, ctx, kernel)` returns the cached instance
for (kind, kernel, source version) or computes it; `PassContext.analysis(kind, kernel)`
is the spelling passes, the locality model, the proposers and the prompt builder use, so
they all read the same object. The version is a digest of the file's path and bytes: a
rewritten file is a new version, and its analyses are computed afresh, except those a
pass declares it preserves (`Pass.preserves`) and that hold no byte offsets
(`positional = False`), which `carry` moves to the new version. As in MLIR's analysis
manager, nothing is invalidated by hand and nothing is mutated: an analysis that
depends on another asks the context for it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Hashable, Iterable
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from kxform.frontend.model import Function, SourceModel, once

MAX_ENTRIES = 4096
"""Cached analyses kept at most (a long tuning run touches many versions of a file)."""


class AnalysisInput(Protocol):
    """What an analysis may read: the parsed file and the run's services (a PassContext)."""

    model: SourceModel
    toolchain: Any
    semantic: Any
    hw: Any

    def analysis(self, kind: type[A], kernel: Function) -> A: ...


@runtime_checkable
class Analysis(Protocol):
    """A frozen per-kernel analysis. `positional` analyses hold byte offsets into the file,
    so no edit preserves them."""

    positional: ClassVar[bool]

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> Analysis: ...


A = TypeVar("A")
T = TypeVar("T")


def source_version(model: SourceModel) -> str:
    """The version key of a parsed file: its path and a digest of its bytes (once per model:
    a digest of the whole file per lookup made lookups quadratic in a file's kernels)."""
    return once(
        model,
        "source_version",
        lambda: f"{model.source.path}@{hashlib.blake2b(model.source.data, digest_size=16).hexdigest()}",
    )


def kernel_key(kernel: Function) -> tuple[str, int]:
    """A kernel within one version: its name and where it starts (overloads differ)."""
    return kernel.name, kernel.span.start


class AnalysisManager:
    """The cache (thread-safe; one per run, shared by the contexts of its passes)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, Any, str], Any] = {}
        self._lock = threading.Lock()
        self.computed = 0
        """How many analyses were computed (not served from the cache): for tests and statistics."""

    def get(self, kind: type[A], ctx: AnalysisInput, kernel: Function) -> A:
        key = (kind, kernel_key(kernel), source_version(ctx.model))
        with self._lock:
            if key in self._entries:
                return self._entries[key]  # type: ignore[no-any-return]
        value = kind.compute(ctx, kernel)  # type: ignore[attr-defined]
        if not isinstance(value, kind):
            raise TypeError(f"{kind.__name__}.compute returned {type(value).__name__}")
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries.setdefault(key, value)
            self.computed += 1
            return self._entries[key]  # type: ignore[no-any-return]

    def memo(self, name: str, key: Hashable, model: SourceModel, compute: Callable[[], T]) -> T:
        """`compute()` for (`name`, `key`) in this version of the file, computed once: for
        what the run derives from a whole file rather than a kernel (a pass's rewritten
        file, kxform.engine.rewritten)."""
        entry = (name, key, source_version(model))
        with self._lock:
            if entry in self._entries:
                return self._entries[entry]  # type: ignore[no-any-return]
        value = compute()
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            return self._entries.setdefault(entry, value)  # type: ignore[no-any-return]

    def cached(self, kind: type[A], model: SourceModel, kernel: Function) -> A | None:
        """The analysis if it was computed for this version, without computing it."""
        with self._lock:
            return self._entries.get((kind, kernel_key(kernel), source_version(model)))  # type: ignore[no-any-return]

    def carry(self, old: SourceModel, new: SourceModel, preserved: Iterable[type]) -> int:
        """Move the analyses of `preserved` kinds (non-positional ones only) from `old` to
        `new` after a pass changed the file; a kernel is matched by name. Returns how many moved."""
        keep = tuple(k for k in preserved if not getattr(k, "positional", True))
        if not keep:
            return 0
        before, after = source_version(old), source_version(new)
        starts = {k.name: k.span.start for k in new.functions}
        moved = 0
        with self._lock:
            for (kind, where, version), value in list(self._entries.items()):
                if version == before and kind in keep and where[0] in starts:
                    self._entries.setdefault((kind, (where[0], starts[where[0]]), after), value)
                    moved += 1
        return moved

    def __len__(self) -> int:
        return len(self._entries)
