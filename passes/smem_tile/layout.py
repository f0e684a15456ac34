"""The shape of a tiled kernel at one configuration: which thread computes which outputs,
how each operand's slice reaches shared memory, and how it is read back.

Warp tiling: the block's BM x BN outputs are split into warp tiles of WM x WN, one per
warp; inside a warp tile the lanes form a (WM/TM) x (WN/TN) grid, and a lane owns TM x TN
outputs in groups of G contiguous rows (columns), the groups WM/TM * G rows apart. With
G = 4 a lane reads each group's operand values with one 128-bit shared load, and the
lanes of a quarter warp read one 128-byte row of the slice or the same 16 bytes (no bank
conflicts); a warp's stores of one output row stay within a few sectors.

Staging: an operand's slice is stored `[stage][k][m]`. One whose index runs along m in
global memory (`B[k*N + j]`) keeps that layout, so on GPUs with asynchronous copies
(cp.async, NVIDIA sm_80 and later) it is copied without registers; one that runs along k
(`A[i*K + k]`) is transposed on the way: loaded into registers (VEC elements at a time),
then stored element by element.
"""

from __future__ import annotations

from dataclasses import dataclass

from kxform.engine.params import Config
from kxform.hw import HwProfile
from kxform.passes.smem_tile.nest import Nest, Operand

PARAMS = ("BM", "BN", "BK", "TM", "TN", "WM", "WN", "STAGES", "PAD", "VEC")
ELEMENT_BYTES = {"float": 4, "int": 4, "unsigned": 4, "unsigned int": 4, "double": 8, "long long": 8}
"""Sizes of the element types an asynchronous copy can move (4 or 8 bytes per element)."""
VECTORS = {("float", 4): "float4", ("float", 2): "float2", ("double", 2): "double2"}
"""Vector types of `group` elements, for the 128-bit (64-bit) shared loads of a fragment."""


@dataclass(frozen=True)
class Staged:
    """How operand `n` of the nest is staged and read at one configuration."""

    n: int
    operand: Operand
    along_k: bool
    """Its slice is loaded along k and transposed into `[k][m]` (else along m, as stored)."""
    vector: bool
    """VEC = 4 consecutive elements are loaded as one float4 where whole and aligned."""
    vector_rows: bool
    """The stage's rows (extent + PAD elements) keep a float4 aligned: four elements along m
    are stored (copied) into it as one."""
    route: str
    """"direct" (loaded and stored in one step: one stage), "registers" (loaded into
    registers before the current slice is computed, stored after it), "async" (cp.async)."""
    group: int
    """G: contiguous outputs a thread owns along this operand's axis, read together."""
    read_type: str | None
    """The vector type of a group's shared load (None: G scalar loads)."""

    @property
    def row(self) -> bool:
        return self.operand.axis == "row"


@dataclass(frozen=True)
class Shape:
    """One configuration of one nest, with everything the emitted text depends on."""

    nest: Nest
    config: dict[str, int]
    staged: tuple[Staged, ...]

    @property
    def stages(self) -> int:
        return self.config["STAGES"]

    @property
    def asynchronous(self) -> bool:
        return any(s.route == "async" for s in self.staged)

    def macro(self, name: str) -> str:
        return f"{self.nest.kernel.name.upper()}_{name}"

    def group(self, row: bool) -> int:
        size = self.config["TM" if row else "TN"]
        element = next((s.operand.access.element for s in self.staged if s.row == row), "float")
        return _group(element, size)


def shape_of(nest: Nest, config: Config, hw: HwProfile) -> Shape:
    values = {k: int(v) for k, v in config.items()}  # type: ignore[call-overload]
    staged = []
    for n, op in enumerate(nest.operands):
        along_k = op.k_contiguous or not op.m_contiguous
        contiguous = op.k_contiguous if along_k else op.m_contiguous
        element = op.access.element
        size, extent = values["TM" if op.axis == "row" else "TN"], values["BM" if op.axis == "row" else "BN"]
        group = _group(element, size)
        read = VECTORS.get((element, group)) if (extent + values["PAD"]) % group == 0 else None
        if values["STAGES"] == 1:
            route = "direct"
        elif hw.async_copies and not along_k and element in ELEMENT_BYTES:
            route = "async"
        else:
            route = "registers"
        vector = contiguous and element == "float" and values["VEC"] == 4
        rows = vector and not along_k and (extent + values["PAD"]) % 4 == 0
        staged.append(Staged(n, op, along_k, vector, rows, route, group, read))
    return Shape(nest, values, tuple(staged))


def _group(element: str, size: int) -> int:
    """Outputs per contiguous group: as many as one 128-bit load holds, at most TM (TN)."""
    width = {"float": 4, "double": 2}.get(element, 1)
    return min(size, width)


def warp_tile(config: Config, warp_size: int) -> tuple[int, int]:
    """The warp tile (WM, WN) the pass picks when none is given: lanes 4 x 8 (8 x 8 on 64-wide
    wavefronts) over the thread tile, narrowed where the block has fewer threads along an axis."""
    bm, bn, tm, tn = (int(config[k]) for k in ("BM", "BN", "TM", "TN"))  # type: ignore[call-overload]
    lanes_n = min(bn // tn, 8, warp_size)
    lanes_m = max(warp_size // lanes_n, 1)
    if lanes_m > bm // tm:
        lanes_m = max(bm // tm, 1)
        lanes_n = warp_size // lanes_m
    return lanes_m * tm, lanes_n * tn
