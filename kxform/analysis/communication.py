"""Whether a kernel's threads communicate: one definition for every pass.

A rewrite that changes which thread computes which output (a new block size, several
outputs per thread, vector lanes, a row shared by several threads) keeps each output's
arithmetic only when no thread reads what another wrote or waits for another. The
forms that make threads of a kernel depend on each other, in the kernel or in any
device function it reaches:

* shared memory (`__shared__`, `extern __shared__`);
* barriers and fences: `__syncthreads` (and its `_count`/`_and`/`_or` forms),
  `__syncwarp`, `__threadfence*`, inline PTX `bar.`/`barrier.`/`fence.`/`membar.`;
* warp intrinsics: `__shfl*`, `__ballot*`, `__any_sync`, `__all_sync`, the legacy
  `__any(`/`__all(`, `__match_*`, `__reduce_*_sync`, `__activemask`, inline PTX
  `shfl.`/`vote.`/`redux.`/`match.` (PTX forms are looked for inside string literals:
  `atom.x` in C is a field);
* atomics: `atomic*(` (CUDA and HIP), inline PTX `atom.`/`red.`;
* cooperative groups: `this_thread_block`, `this_grid`, `this_cluster`,
  `tiled_partition`, `thread_block_tile`, `coalesced_threads`, `grid_group`,
  `cluster_group`, `memcpy_async`.

The search is over the bodies' text, comments included: a form named in a comment
refuses too (a false refusal is safe; a missed form is not).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis.access import closure_functions
from kxform.analysis.manager import AnalysisInput
from kxform.frontend.model import Function, SourceModel

COMMUNICATES_RE = re.compile(
    r"__shared__|__syncthreads\w*|__syncwarp|__threadfence\w*|"
    r"__shfl\w*|__ballot\w*|__any_sync|__all_sync|\b__any\s*\(|\b__all\s*\(|__match_\w+|__reduce_\w+_sync|"
    r"__activemask|\batomic\w+\s*\(|"
    r"\bthis_thread_block\b|\bthis_grid\b|\bthis_cluster\b|\btiled_partition\b|\bthread_block_tile\b|"
    r"\bcoalesced_threads\b|\bgrid_group\b|\bcluster_group\b|\bmemcpy_async\b|"
    r"\"[^\"\n]*?\b(?P<ptx>(?:bar|barrier|fence|membar|shfl|vote|redux|match|atom|red)\.[a-z]\w*)"
)
"""Every form by which threads of a kernel communicate (the module's docstring lists them)."""


@dataclass(frozen=True)
class Found:
    """The first form found: its text (`__shfl_xor_sync`), where it is, and its line."""

    what: str
    offset: int
    line: int

    @property
    def how(self) -> str:
        """`what (line N)`: how messages name it."""
        return f"{self.what} (line {self.line})"


def first_communication(model: SourceModel, functions: Iterable[Function]) -> Found | None:
    """The first form of communication in the bodies of `functions` (in their order), or None.
    `Communication` asks it over a kernel's closure in file order."""
    data = model.source.data
    for function in functions:
        text = data[function.body.start : function.body.end].decode("utf-8", "replace")
        match = COMMUNICATES_RE.search(text)
        if match:
            start = match.start("ptx") if match.group("ptx") else match.start()
            offset = function.body.start + len(text[:start].encode("utf-8"))
            what = (match.group("ptx") or match.group(0)).rstrip("( \t\n")
            return Found(what, offset, model.source.line_col(offset)[0])
    return None


@dataclass(frozen=True)
class Communication:
    """Whether the threads of a kernel communicate, over the kernel and every device
    function it reaches (kxform.analysis.access.closure_functions): an analysis
    (kxform.analysis.manager), computed once per kernel and source version."""

    positional: ClassVar[bool] = True

    found: Found | None

    @property
    def communicates(self) -> bool:
        return self.found is not None

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> Communication:
        functions = sorted(closure_functions(ctx.model, kernel), key=lambda f: f.span.start)
        return cls(first_communication(ctx.model, functions))
