"""Footprints of every block from the traces of a few: the affine-shift fit.

In a tiled kernel the sectors block (bx, by, bz) touches in one buffer are those of a
neighbouring block moved by a fixed number of sectors per step along each axis: the
tile's row stride, the tile width, a batch stride. Edge blocks differ (halos clipped at
the border, ragged last tiles), so along each grid axis blocks fall in three classes:
the first position, the middle positions and the last one. One representative block is
traced per class combination, one more block per axis gives the shift along that axis
(measured on the middle class), and held-out blocks, among them the second and the
second-to-last position of every axis where edge effects would show, are traced and
compared with the extrapolation sector for sector. Any difference refuses the fit.

When the fit is refused and the grid is small enough, every block is traced instead
(exact); otherwise the model cannot judge the kernel (data-dependent addressing such as
a sparse gather is the usual cause) and says so.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from kxform.locality.trace import Block, BlockSectors, BlockTracer, ModelRefused

FIRST, MIDDLE, LAST = 0, 1, 2
FULL_TRACE_LIMIT = 1024
"""Grids of at most this many blocks are traced whole when the fit is refused."""


def _axis_classes(g: int) -> list[tuple[int, int]]:
    """(class, representative position) along an axis of extent `g`."""
    if g == 1:
        return [(FIRST, 0)]
    if g == 2:
        return [(FIRST, 0), (LAST, 1)]
    return [(FIRST, 0), (MIDDLE, (g - 1) // 2), (LAST, g - 1)]


@dataclass(frozen=True)
class Footprints:
    """Every block's sectors: representative traces plus per-stream shifts.

    Streams are (reads of buffer 0, ..., reads of buffer n-1, writes of buffer 0, ...).
    `sectors(block, stream) = reps[class_of(block)].streams()[stream] + offset` where the
    offset is `sum_a (block_a - rep_a) * shifts[stream][a]`.
    """

    grid: tuple[int, int, int]
    reps: dict[tuple[int, int, int], BlockSectors]
    shifts: np.ndarray
    """(streams, 3) int64 sector shift per unit step along x, y, z."""
    exact: bool = False
    """Every block was traced (reps are keyed by the block itself)."""
    traced: int = 0
    verified: int = 0

    @property
    def streams(self) -> int:
        return int(self.shifts.shape[0])

    def class_keys(self, blocks: np.ndarray) -> np.ndarray:
        """(n, 3) class key of each block of an (n, 3) array of logical block indices."""
        if self.exact:
            return blocks.copy()
        out = np.full_like(blocks, MIDDLE)
        for axis, g in enumerate(self.grid):
            col = blocks[:, axis]
            out[:, axis] = np.where(col == 0, FIRST, np.where(col == g - 1, LAST, MIDDLE))
        return out

    def class_index(self, blocks: np.ndarray, order: list[tuple[int, int, int]]) -> np.ndarray:
        """Index into `order` (a list of the keys of `reps`) of each block's class."""
        keys = self.class_keys(blocks)
        if self.exact:
            gx, gy, _ = self.grid
            table = np.full(self.grid[0] * self.grid[1] * self.grid[2], -1, dtype=np.int64)
            code = [k[0] + gx * (k[1] + gy * k[2]) for k in order]
            table[code] = np.arange(len(order))
            return table[keys[:, 0] + gx * (keys[:, 1] + gy * keys[:, 2])]
        table = np.full(27, -1, dtype=np.int64)
        table[[k[0] * 9 + k[1] * 3 + k[2] for k in order]] = np.arange(len(order))
        return table[keys[:, 0] * 9 + keys[:, 1] * 3 + keys[:, 2]]

    def rep_position(self, keys: np.ndarray) -> np.ndarray:
        """(n, 3) position of the representative of each class key."""
        if self.exact:
            return keys.copy()
        out = np.empty_like(keys)
        for axis, g in enumerate(self.grid):
            middle = (g - 1) // 2
            col = keys[:, axis]
            out[:, axis] = np.where(col == FIRST, 0, np.where(col == LAST, g - 1, middle))
        return out

    def offsets(self, blocks: np.ndarray) -> np.ndarray:
        """(n, streams) sector offset of each block from its class representative."""
        steps = blocks - self.rep_position(self.class_keys(blocks))
        return steps @ self.shifts.T

    def block_streams(self, block: Block) -> tuple[np.ndarray, ...]:
        """The extrapolated sectors of one block, per stream (for verification and tests)."""
        arr = np.array([block], dtype=np.int64)
        key = tuple(int(v) for v in self.class_keys(arr)[0])
        offs = self.offsets(arr)[0]
        return tuple(s + o for s, o in zip(self.reps[key].streams(), offs))


def _shift(a: np.ndarray, b: np.ndarray) -> int | None:
    """The constant that moves sector set `a` onto `b`, or None when there is none."""
    if len(a) != len(b):
        return None
    if len(a) == 0:
        return 0
    delta = int(b[0] - a[0])
    return delta if np.array_equal(a + delta, b) else None


def _verification_blocks(grid: tuple[int, int, int], seed: int) -> list[Block]:
    """Held-out blocks: the second and second-to-last position along every axis (where
    edge effects would leak past the first/last class), one random interior block, and
    one random member of every edge class that has more than one."""
    rng = random.Random(seed)
    middle = [(g - 1) // 2 for g in grid]
    picks: set[Block] = set()
    for axis, g in enumerate(grid):
        if g < 4:
            continue
        for pos in (1, g - 2):
            block = list(middle)
            block[axis] = pos
            picks.add((block[0], block[1], block[2]))
    picks.add(tuple(rng.randrange(1, g - 1) if g >= 3 else rng.randrange(g) for g in grid))  # type: ignore[arg-type]
    for key in _class_keys(grid):
        block = [pos for _, pos in (_pos(grid, axis, c) for axis, c in enumerate(key))]
        varied = False
        for axis, c in enumerate(key):
            if c == MIDDLE and grid[axis] >= 4:
                block[axis] = rng.randrange(1, grid[axis] - 1)
                varied = True
        if varied and any(c != MIDDLE for c in key):
            picks.add((block[0], block[1], block[2]))
    return sorted(picks)


def _pos(grid: tuple[int, int, int], axis: int, cls: int) -> tuple[int, int]:
    return next((c, p) for c, p in _axis_classes(grid[axis]) if c == cls)


def _class_keys(grid: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    keys = [
        (cx, cy, cz)
        for cx, _ in _axis_classes(grid[0])
        for cy, _ in _axis_classes(grid[1])
        for cz, _ in _axis_classes(grid[2])
    ]
    return keys


def fit(tracer: BlockTracer, grid: tuple[int, int, int], seed: int = 12) -> Footprints:
    """Trace representatives, fit the shifts, verify on held-out blocks; ModelRefused when
    the traces do not follow the fit and the grid is too large to trace whole."""
    keys = _class_keys(grid)
    reps_at = {k: tuple(_pos(grid, a, c)[1] for a, c in enumerate(k)) for k in keys}
    middle = tuple((g - 1) // 2 for g in grid)
    partners = []
    for axis, g in enumerate(grid):
        if g >= 4:
            p = list(middle)
            p[axis] += 1
            partners.append((axis, (p[0], p[1], p[2])))
    checks = _verification_blocks(grid, seed)
    wanted = [reps_at[k] for k in keys] + [p for _, p in partners] + checks
    traces = dict(zip(wanted, tracer.trace(wanted)))  # one launch for all of them
    reps = {k: traces[reps_at[k]] for k in keys}  # type: ignore[index]
    base = traces[middle]  # type: ignore[index]
    n_streams = len(base.streams())
    shifts = np.zeros((n_streams, 3), dtype=np.int64)
    problem = None
    for axis, partner in partners:
        for s, (a, b) in enumerate(zip(base.streams(), traces[partner].streams())):
            delta = _shift(a, b)
            if delta is None:
                problem = (
                    problem
                    or f"{_stream_name(tracer, s)} in block {partner} are not those of block "
                    f"{middle} moved by a constant"
                )
                continue
            shifts[s, axis] = delta
    footprints = Footprints(grid, reps, shifts, traced=tracer.traced, verified=len(checks))
    if problem is None:
        problem = _first_mismatch(footprints, [traces[c] for c in checks], tracer)
    if problem is None:
        return footprints
    if grid[0] * grid[1] * grid[2] <= FULL_TRACE_LIMIT:
        return _trace_all(tracer, grid)
    raise ModelRefused(
        f"the traces of sampled blocks do not follow an affine tiling ({problem}); "
        f"the grid ({grid[0]}x{grid[1]}x{grid[2]}) is too large to trace whole"
    )


def _first_mismatch(footprints: Footprints, checks: list[BlockSectors], tracer: BlockTracer) -> str | None:
    for trace in checks:
        predicted = footprints.block_streams(trace.block)
        for s, (want, got) in enumerate(zip(predicted, trace.streams())):
            if len(want) != len(got) or not np.array_equal(want, got):
                return f"block {trace.block}: {_stream_name(tracer, s)} differ from the extrapolation"
    return None


def _stream_name(tracer: BlockTracer, stream: int) -> str:
    kind = "reads" if stream < len(tracer.buffers) else "writes"
    return f"{kind} of '{tracer.buffers[stream % len(tracer.buffers)]}'"


def _trace_all(tracer: BlockTracer, grid: tuple[int, int, int]) -> Footprints:
    blocks = [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]
    traces = tracer.trace(blocks)
    n_streams = len(traces[0].streams())
    return Footprints(
        grid,
        {t.block: t for t in traces},
        np.zeros((n_streams, 3), dtype=np.int64),
        exact=True,
        traced=tracer.traced,
        verified=0,
    )


def trace_footprints(tracer: BlockTracer, grid: tuple[int, int, int]) -> Footprints:
    """`fit`, with a clear refusal when the CPU runtime cannot run the kernel."""
    if any(g < 1 for g in grid):
        raise ModelRefused(f"empty grid {grid}")
    return fit(tracer, grid)
