"""The parallel reductions the `rows` pass emits: helpers placed once per translation unit.

A row's G lanes are an aligned group of G consecutive threads. For G <= 32 the group is
part of one warp and a butterfly of `__shfl_xor_sync` steps (log2 G of them) leaves the
combined value in every lane: the broadcast comes with the butterfly. The mask names only
the calling lane's own group, so a group whose row lies past the last row (its lanes have
returned) is never waited for. For G > 32 (one row per block) each warp combines its
lanes by the same butterfly, lane 0 of each warp stores its partial in shared memory, a
barrier makes the partials visible, every thread combines them in the same order (the
broadcast), and a second barrier keeps the next reduction from overwriting partials that
are still being read.
"""

from __future__ import annotations

from dataclasses import dataclass

from kxform.engine.helper_placement import Helper
from kxform.engine.reorder import combine_text

OPERATORS = ("+", "max", "min")
"""Operators with a known identity whose combination is associative and commutative."""
TYPES = {
    "float": "float",
    "double": "double",
    "int": "int",
    "unsigned": "unsigned",
    "unsigned int": "unsigned",
    "long long": "long long",
}
"""Element types the shuffle helpers are emitted for (what `__shfl_xor_sync` accepts)."""
WARP = 32
NAMES = {"+": "sum", "max": "max", "min": "min"}


@dataclass(frozen=True)
class Combine:
    """One operator on one element type: the helpers' names and how two values combine."""

    op: str
    ctype: str

    @property
    def suffix(self) -> str:
        return f"{NAMES[self.op]}_{TYPES[self.ctype].replace(' ', '_')}"

    @property
    def ctype_c(self) -> str:
        return TYPES[self.ctype]

    def expr(self, a: str, b: str) -> str:
        return combine_text(self.op, self.ctype_c, a, b)

    @property
    def warp_name(self) -> str:
        return f"kxform_rows_warp_{self.suffix}"

    @property
    def block_name(self) -> str:
        return f"kxform_rows_block_{self.suffix}"

    @property
    def partial_name(self) -> str:
        return f"rows_partial_{TYPES[self.ctype].replace(' ', '_')}"


def warp_helper(c: Combine) -> Helper:
    t = c.ctype_c
    text = f"""template <int G>
__device__ __forceinline__ {t} {c.warp_name}({t} v)
{{
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "lanes per row: a power of two up to a warp");
    // the row's lanes: the aligned group of G lanes holding the caller
    const unsigned mask = (0xffffffffu >> (32 - G)) << ((threadIdx.x & 31u) & ~(unsigned)(G - 1));
    for (int offset = G / 2; offset > 0; offset >>= 1)
        v = {c.expr("v", "__shfl_xor_sync(mask, v, offset)")};
    return v;
}}
"""
    return Helper(c.warp_name, text)


def block_helper(c: Combine) -> Helper:
    t = c.ctype_c
    text = f"""template <int G>
__device__ __forceinline__ {t} {c.block_name}({t} v, {t}* partial)
{{
    static_assert(G > 32 && G <= 1024 && (G & (G - 1)) == 0, "lanes per row: a power of two, several warps");
    for (int offset = 16; offset > 0; offset >>= 1)
        v = {c.expr("v", "__shfl_xor_sync(0xffffffffu, v, offset)")};
    if ((threadIdx.x & 31u) == 0)
        partial[(threadIdx.x % G) / 32] = v;
    __syncthreads();  // every warp's partial is stored before any is read
    v = partial[0];
    for (int w = 1; w < G / 32; ++w)
        v = {c.expr("v", "partial[w]")};
    __syncthreads();  // every thread has read the partials before a later reduction stores its own
    return v;
}}
"""
    return Helper(c.block_name, text)


def call(c: Combine, var: str, lanes: str, block: bool) -> str:
    """The statement that combines `var` over the row's lanes and leaves it in each of them."""
    if block:
        return f"{var} = {c.block_name}<{lanes}>({var}, {c.partial_name});"
    return f"{var} = {c.warp_name}<{lanes}>({var});"
