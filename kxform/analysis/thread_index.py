"""The thread-index shape of a kernel: the global thread indices its body starts with.

    int i = blockIdx.x * blockDim.x + threadIdx.x;     // axis x, var i
    int j = threadIdx.y + blockDim.y * blockIdx.y;     // axis y (any order of terms and factors)

`IndexShape` (an analysis, kxform.analysis.manager) holds the leading declarations of
such indices, one per axis, in the order written, and the statements that follow them:
the part of the body a pass rewrites per index point (vectorize: one element per
thread; coarsen: several outputs per thread).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from kxform.analysis.manager import AnalysisInput
from kxform.analysis.statements import Statement, body_statements
from kxform.frontend.model import Function, SourceModel

INDEX_DECL_RE = re.compile(
    r"^(?P<type>(?:const\s+)?(?:unsigned\s+int|int|unsigned|size_t|long|long\s+long|int64_t))\s+"
    r"(?P<var>[A-Za-z_]\w*)\s*=\s*(?P<init>[^;]+);$",
    re.S,
)
"""An integer declaration with an initialiser (`const int i = ...;`), as one statement."""


def index_axis(init: str) -> str | None:
    """The axis of a global thread index `blockIdx.A * blockDim.A + threadIdx.A` (any
    order of the terms and factors, parentheses ignored); None for anything else."""
    flat = re.sub(r"\s+|[()]", "", init)
    for axis in "xyz":
        block, dim, thread = f"blockIdx.{axis}", f"blockDim.{axis}", f"threadIdx.{axis}"
        products = (f"{block}*{dim}", f"{dim}*{block}")
        if flat in {f"{p}+{thread}" for p in products} | {f"{thread}+{p}" for p in products}:
            return axis
    return None


@dataclass(frozen=True)
class IndexDecl:
    """One leading index declaration: its statement, axis, variable and type."""

    text: str
    axis: str
    var: str
    ctype: str
    offset: int


def index_decl(statement: Statement) -> IndexDecl | None:
    """`statement` as a global thread-index declaration, or None."""
    match = INDEX_DECL_RE.match(statement.text)
    axis = index_axis(match.group("init")) if match else None
    if match is None or axis is None:
        return None
    return IndexDecl(statement.text, axis, match.group("var"), match.group("type"), statement.offset)


@dataclass(frozen=True)
class IndexShape:
    """A kernel body's leading thread indices (one per axis, as written) and the statements
    after them."""

    positional: ClassVar[bool] = True

    indices: tuple[IndexDecl, ...]
    statements: tuple[Statement, ...]
    """Every top-level statement of the body, the indices included."""
    rest_at: int
    """Where the statements after the indices start (a byte offset; the body's closing
    brace when nothing follows)."""

    @property
    def rest(self) -> tuple[Statement, ...]:
        return self.statements[len(self.indices) :]

    @property
    def axes(self) -> tuple[str, ...]:
        return tuple(d.axis for d in self.indices)

    def index(self, axis: str) -> IndexDecl | None:
        return next((d for d in self.indices if d.axis == axis), None)

    def rest_text(self, model: SourceModel, kernel: Function) -> str:
        """The body after the indices, as written (up to the body's closing brace)."""
        return model.source.data[self.rest_at : kernel.body.end - 1].decode("utf-8")

    @classmethod
    def compute(cls, ctx: AnalysisInput, kernel: Function) -> IndexShape:
        return index_shape(ctx.model, kernel)


def index_shape(model: SourceModel, kernel: Function) -> IndexShape:
    stmts = body_statements(model, kernel)
    indices: list[IndexDecl] = []
    for statement in stmts:
        decl = index_decl(statement)
        if decl is None or any(d.axis == decl.axis for d in indices):
            break
        indices.append(decl)
    rest_at = stmts[len(indices)].offset if len(stmts) > len(indices) else kernel.body.end - 1
    return IndexShape(tuple(indices), stmts, rest_at)
