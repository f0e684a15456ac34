"""What the L2 sees in one unit of time: the lines a wave of blocks touches in one phase.

Blocks of a wave run together and progress through their footprints at the same pace
(the lockstep assumption, docs/locality-model.md). A block's footprint per stream is
taken in address order and cut into `bins` equal parts: part b is what it touches in
the b-th phase. A unit is (wave, phase): the union of the blocks' parts, as 128-byte
lines with a read and a write mask of their 32-byte sectors.

Sampling: only DRAM pages whose hash falls below `rate` are generated, every line of
them (spatially hashed sampling, as in SHARDS, Waldspurger et al., FAST 2015; whole
pages so that DRAM page visits are counted exactly on the sample). The hash is
additive, h(p) = p * M mod P, so the sampled members of a shifted footprint are one or
two contiguous runs of the representative's lines sorted by page hash: generation costs
only what is sampled. Each sampled page falls in one of REPLICATES hash ranges, and the
spread between them estimates the sampling error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kxform.locality.footprint import Footprints

PRIME = (1 << 31) - 1
MULTIPLIER = 1_103_515_245 % PRIME
REPLICATES = 4
_PAGE_BIAS = 1 << 35
"""Page offsets are stored biased into 36 bits of a packed key (blocks may sit left of
their class representative)."""
BUFFER_ALIGN_BYTES = 2 << 20
"""Buffers are laid out at 2 MiB boundaries (large allocations of the CUDA allocator)."""


@dataclass(frozen=True)
class Layout:
    """Buffers placed in one line-address space."""

    sector_bytes: int
    sectors_per_line: int
    lines_per_page: int
    base_sectors: tuple[int, ...]
    total_lines: int

    @property
    def sectors_per_page(self) -> int:
        return self.sectors_per_line * self.lines_per_page

    @classmethod
    def of(cls, sizes: tuple[int, ...], sector_bytes: int, line_bytes: int, page_bytes: int) -> Layout:
        bases, at = [], 0
        for size in sizes:
            bases.append(at // sector_bytes)
            at += -(-max(size, 1) // BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES
        return cls(
            sector_bytes, line_bytes // sector_bytes, max(1, page_bytes // line_bytes), tuple(bases), at // line_bytes
        )


def line_hash(lines: np.ndarray) -> np.ndarray:
    return (lines % PRIME) * MULTIPLIER % PRIME


@dataclass(frozen=True)
class Unit:
    """Unique sampled lines of one unit with their masks, and exact request counts."""

    lines: np.ndarray
    rmask: np.ndarray
    wmask: np.ndarray
    read_requests: int
    write_requests: int


@dataclass(frozen=True)
class Wave:
    """The blocks of one sub-wave as (part, page offset, side) pairs with block counts."""

    base: np.ndarray
    offset: np.ndarray
    write: np.ndarray
    side: np.ndarray
    count: np.ndarray


class UnitBuilder:
    """Generates units for any set of blocks from the footprints, sampled at `rate`.

    Every part (class, stream, sub-page remainder, phase) of the representatives lives in
    one array sorted by (part, page hash), so the sampled lines of any number of shifted
    parts come out of one vectorised search. A shift is split into whole DRAM pages plus
    a remainder in sectors; the representative is pre-shifted by each remainder the
    shifts can produce (a 16-float tile moves by 2 sectors: 16 remainders of a 1 KiB
    page)."""

    def __init__(self, footprints: Footprints, layout: Layout, bins: int, rate: float, sides: int = 1) -> None:
        self.fp = footprints
        self.layout = layout
        self.bins = bins
        self.rate = rate
        self.sides = sides
        self.threshold = int(rate * PRIME) if rate < 1 else PRIME
        self.n_streams = footprints.streams
        n_buf = len(layout.base_sectors)
        self.keys = sorted(footprints.reps)
        spl = layout.sectors_per_line
        spp = self.spp = layout.sectors_per_page
        self.lpp = layout.lines_per_page
        self.base_index = np.full((len(self.keys), self.n_streams, spp), -1, dtype=np.int64)
        keys, lines, masks, sectors, writes = [], [], [], [], []
        for s in range(self.n_streams):
            step = math.gcd(spp, *(int(v) % spp for v in footprints.shifts[s]))
            for k, key in enumerate(self.keys):
                moved = footprints.reps[key].streams()[s] + layout.base_sectors[s % n_buf]
                for r in range(0, spp, step):
                    base = len(sectors) // bins
                    self.base_index[k, s, r] = base
                    writes.append(s >= n_buf)
                    all_lines, all_masks = _lines(moved + r, spl)
                    for b in range(bins):
                        lo, hi = b * len(all_lines) // bins, (b + 1) * len(all_lines) // bins
                        ln, mk = all_lines[lo:hi], all_masks[lo:hi]
                        keys.append(((base * bins + b) << 31) + line_hash(ln // self.lpp))
                        lines.append(ln)
                        masks.append(mk)
                        sectors.append(int(popcount(mk).sum()))
        self.sectors = np.array(sectors, dtype=np.int64)
        self.base_write = np.array(writes, dtype=bool)
        self.empty_base = self.sectors.reshape(-1, bins).sum(axis=1) == 0
        allkeys = np.concatenate(keys)
        order = np.argsort(allkeys, kind="stable")
        self.part_keys = allkeys[order]
        self.part_lines = np.concatenate(lines)[order]
        self.part_masks = np.concatenate(masks)[order]
        ids = np.arange(len(sectors), dtype=np.int64)
        self.part_start = np.searchsorted(self.part_keys, ids << 31)
        self.part_stop = np.searchsorted(self.part_keys, (ids + 1) << 31)

    def wave(self, blocks: np.ndarray, side: np.ndarray) -> Wave:
        """Group the logical `blocks` ((n, 3) array; `side`: the L2 partition each runs
        next to) into (part, page offset, side) pairs with block counts."""
        key_ids = self.fp.class_index(blocks, self.keys)
        offsets = self.fp.offsets(blocks)
        bases = np.stack([self.base_index[key_ids, s, offsets[:, s] % self.spp] for s in range(self.n_streams)], 1)
        pages = offsets // self.spp + _PAGE_BIAS
        key = (side.astype(np.int64)[:, None] << 60) | (bases << 36) | pages
        unique, counts = np.unique(key.ravel(), return_counts=True)
        base = (unique >> 36) & ((1 << 24) - 1)
        keep = ~self.empty_base[base]
        unique, counts, base = unique[keep], counts[keep], base[keep]
        return Wave(base, (unique & ((1 << 36) - 1)) - _PAGE_BIAS, self.base_write[base], unique >> 60, counts)

    def units(self, active: list[tuple[Wave, int]]) -> list[Unit]:
        """One unit per side: the union of the sub-waves in `active`, each at its phase."""
        if not active:
            return [_empty_unit() for _ in range(self.sides)]
        pid = np.concatenate([w.base * self.bins + phase for w, phase in active])
        offset = np.concatenate([w.offset for w, _ in active])
        write = np.concatenate([w.write for w, _ in active])
        side = np.concatenate([w.side for w, _ in active])
        count = np.concatenate([w.count for w, _ in active])
        weighted = count * self.sectors[pid]
        lines, masks, which = self._sample(pid, offset)
        out = []
        for sd in range(self.sides):
            on = side == sd
            reads = int(weighted[on & ~write].sum())
            writes = int(weighted[on & write].sum())
            sel = side[which] == sd
            out.append(_union(lines[sel], masks[sel], write[which][sel], reads, writes))
        return out

    def _sample(self, pid: np.ndarray, offset: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        start, stop = self.part_start[pid], self.part_stop[pid]
        if self.threshold >= PRIME:
            idx, which = _ranges(start, stop)
        else:
            head = pid << 31
            lo = (-line_hash(offset)) % PRIME
            hi = lo + self.threshold
            first = np.searchsorted(self.part_keys, head + lo)
            last = np.searchsorted(self.part_keys, head + np.minimum(hi, PRIME))
            wrap = np.searchsorted(self.part_keys, head + np.maximum(hi - PRIME, 0))
            idx1, which1 = _ranges(first, last)
            idx2, which2 = _ranges(start, np.maximum(wrap, start))
            idx, which = np.concatenate([idx1, idx2]), np.concatenate([which1, which2])
        return self.part_lines[idx] + offset[which] * self.lpp, self.part_masks[idx], which


def _lines(sectors: np.ndarray, spl: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique lines of sorted `sectors` and the mask of the sectors used in each."""
    if len(sectors) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8)
    lines, first = np.unique(sectors // spl, return_index=True)
    bits = np.left_shift(1, sectors % spl).astype(np.uint8)
    return lines, np.bitwise_or.reduceat(bits, first)


def _empty_unit() -> Unit:
    empty = np.zeros(0, dtype=np.int64)
    return Unit(empty, empty.astype(np.uint8), empty.astype(np.uint8), 0, 0)


def _ranges(start: np.ndarray, stop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated aranges [start_i, stop_i) and the i each element came from."""
    lengths = np.maximum(stop - start, 0)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    which = np.repeat(np.arange(len(start)), lengths)
    first = np.cumsum(lengths) - lengths
    idx = np.arange(total, dtype=np.int64) - np.repeat(first, lengths) + np.repeat(start, lengths)
    return idx, which


def _union(lines: np.ndarray, masks: np.ndarray, write: np.ndarray, reads_req: int, writes_req: int) -> Unit:
    """Unique lines with their read and write masks OR-ed together."""
    if len(lines) == 0:
        unit = _empty_unit()
        return Unit(unit.lines, unit.rmask, unit.wmask, reads_req, writes_req)
    order = np.argsort(lines, kind="stable")
    ln, mk, wr = lines[order], masks[order], write[order]
    starts = np.flatnonzero(np.concatenate([[True], ln[1:] != ln[:-1]]))
    rmask = np.bitwise_or.reduceat(np.where(wr, 0, mk).astype(np.uint8), starts)
    wmask = np.bitwise_or.reduceat(np.where(wr, mk, 0).astype(np.uint8), starts)
    return Unit(ln[starts], rmask, wmask, reads_req, writes_req)


_POP = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)


def popcount(masks: np.ndarray) -> np.ndarray:
    """Set bits of each uint8 mask (sectors in a line)."""
    return _POP[masks]
