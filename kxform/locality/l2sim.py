"""The L2 simulator: LRU over 128-byte lines with 32-byte sector masks, per unit of time.

State per line: the unit of its last access, the sectors filled during its current
residency and the sectors dirty in it. A line is resident when its LRU stack distance
(distinct lines touched since its last access, counted at unit granularity) is below
the capacity; with `ways`-way sets under hashed indexing, a line at stack distance d is
resident with probability P[Poisson(d / sets) < ways] (the random-mapping model of a
set-associative cache, Smith 1978), drawn per line. A sector read from a resident line
whose sector is filled is a hit, otherwise a DRAM read; a written sector not already
dirty becomes one sector of DRAM write-back (now or when the line leaves). Stores never
read DRAM (the L2 keeps byte masks).

Lines of one unit are taken as one set: concurrent requests for a line are served by one
fill. Stack distances count half of the lines of the line's own last unit and half of
the current unit (their order inside a unit is unknown).
"""

from __future__ import annotations

import numpy as np

from kxform.locality.units import popcount


def _hit_table(ways: int, limit: float, steps: int = 4096) -> tuple[np.ndarray, float]:
    """P[Poisson(lam) <= ways - 1] on a grid of lam in [0, limit]."""
    lam = np.linspace(0.0, limit, steps)
    term = np.exp(-lam)
    total = term.copy()
    for k in range(1, ways):
        term = term * lam / k
        total += term
    return np.clip(total, 0.0, 1.0), limit / (steps - 1)


class LineCache:
    """One L2 (or one partition of it) over a dense line-address space."""

    def __init__(self, total_lines: int, capacity_lines: float, ways: int, rng: np.random.Generator) -> None:
        self.capacity = max(capacity_lines, 1.0)
        self.ways = max(1, ways)
        self.sets = max(self.capacity / self.ways, 1.0)
        self.table, self.step = _hit_table(self.ways, 4.0 * self.ways)
        self.rng = rng
        self.last = np.full(total_lines, -1, dtype=np.int32)
        self.valid = np.zeros(total_lines, dtype=np.uint8)
        self.dirty = np.zeros(total_lines, dtype=np.uint8)
        self.counts = np.zeros(1024, dtype=np.int64)
        self.unit = 0
        self.touched: list[np.ndarray] = []

    def reset(self) -> None:
        """Forget everything (the start of a new sampled window)."""
        for lines in self.touched:
            self.last[lines] = -1
            self.valid[lines] = 0
            self.dirty[lines] = 0
        self.touched = []
        self.counts[:] = 0
        self.unit = 0

    def resident(self, lines: np.ndarray, pending: int) -> np.ndarray:
        """Which of the unique `lines` are still in the cache at the start of this unit,
        of which `pending` lines in all are touched."""
        old = self.last[lines]
        seen = old >= 0
        if not seen.any():
            return seen
        counts = self.counts[: self.unit]
        after = np.concatenate([np.cumsum(counts[::-1])[::-1][1:], [0]]) if self.unit else np.zeros(0, np.int64)
        safe = np.where(seen, old, 0)
        distance = after[safe] + 0.5 * counts[safe] + 0.5 * pending
        if self.ways == 1 or self.sets <= 1:
            return seen & (distance < self.capacity)
        lam = distance / self.sets
        index = np.minimum(np.rint(lam / self.step).astype(np.int64), len(self.table) - 1)
        prob = np.where(lam >= self.step * (len(self.table) - 1), 0.0, self.table[index])
        return seen & (self.rng.random(len(lines)) < prob)

    def commit(
        self, lines: np.ndarray, rmask: np.ndarray, wmask: np.ndarray, resident: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Apply one unit's accesses to the unique `lines`; returns per line the sectors read
        from DRAM and the sectors that became dirty."""
        valid = np.where(resident, self.valid[lines], 0).astype(np.uint8)
        dirty = np.where(resident, self.dirty[lines], 0).astype(np.uint8)
        missed = popcount(rmask & ~valid)
        new_dirty = popcount(wmask & ~dirty)
        self.valid[lines] = valid | rmask | wmask
        self.dirty[lines] = dirty | wmask
        old = self.last[lines]
        if self.unit >= len(self.counts):
            self.counts = np.concatenate([self.counts, np.zeros(len(self.counts), dtype=np.int64)])
        seen = old[old >= 0]
        if len(seen):
            self.counts[: self.unit] -= np.bincount(seen, minlength=self.unit)[: self.unit]
        self.counts[self.unit] = len(lines)
        self.last[lines] = self.unit
        self.unit += 1
        self.touched.append(lines)
        return missed, new_dirty
