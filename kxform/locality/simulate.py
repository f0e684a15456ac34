"""One block order through the simulated memory hierarchy: waves, phases, partitions.

Dispatch: blocks are dealt round-robin over the domains (XCDs; one domain on NVIDIA),
in linear index order; in each domain they run in waves of SMs x resident blocks, wave
after wave, and the n-th dispatched block computes the tile the order assigns to it.
Within a wave blocks progress in lockstep through `bins` phases (units.py). On GPUs
with a partitioned L2 (A100, H100, H200: two partitions), block i of a wave runs on SM
i mod SMs, SM j sits on partition j mod P, and each line has a home partition (address
hash): a request looks up its own partition first, which also keeps copies of lines
homed in the other one; a miss there is looked up again at the home partition, and only
a miss at home reads DRAM. Both lookups count, as the profiler counts them.

Large launches are not simulated whole: the first and last wave of every domain are,
and a seeded random sample of the waves between them, each after enough warm-up waves
to fill the L2; lines are sampled by hash (units.py). Both errors are estimated (wave
spread, replicate spread) and reported as one standard error.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass

import numpy as np

from kxform.locality.dispatch import blocks_for
from kxform.locality.footprint import Footprints
from kxform.locality.l2sim import LineCache
from kxform.locality.machine import Machine
from kxform.locality.units import REPLICATES, Layout, Unit, UnitBuilder, Wave, line_hash, popcount
from kxform.remap import RemapConfig

ELEMENT_BUDGET = 2_000_000
"""Sampled line-accesses generated per order (sets the spatial sampling rate)."""
UNIT_BUDGET = 300
"""Units simulated per order before waves are sampled."""
MIDDLE_WINDOWS = 4
MIN_SAMPLED_LINES = 4096
"""The sampled L2 partition keeps at least this many lines (bounds the lowest rate)."""
MAX_BINS = 16
MAX_WARMUP = 4
"""Block lifetimes simulated before a sampled window (enough to fill the L2, at most this)."""


@dataclass(frozen=True)
class Estimate:
    value: float
    se: float

    def rel(self) -> float:
        return self.se / self.value if self.value else 0.0


@dataclass(frozen=True)
class OrderStats:
    """What one order does to the memory hierarchy, for the whole launch."""

    order: str
    dram_read_bytes: Estimate
    dram_write_bytes: Estimate
    hit_rate: Estimate
    read_locality: float
    """Read-miss bytes per DRAM page visit, as a fraction of the page (1: whole pages)."""
    write_locality: float
    """Write-back bytes per DRAM page visit, as a fraction of the page."""
    requests_bytes: int
    lookups: float
    steps_total: int
    steps_simulated: int
    rate: float
    units: int
    seconds: float


@dataclass
class _Acc:
    read: float = 0.0
    write: float = 0.0
    near: float = 0.0
    read_visits: float = 0.0
    write_visits: float = 0.0
    rep: np.ndarray | None = None

    def add(self, other: _Acc, weight: float = 1.0) -> None:
        self.read += weight * other.read
        self.write += weight * other.write
        self.near += weight * other.near
        self.read_visits += weight * other.read_visits
        self.write_visits += weight * other.write_visits
        rep = other.rep if other.rep is not None else np.zeros(REPLICATES)
        self.rep = (self.rep if self.rep is not None else np.zeros(REPLICATES)) + weight * rep


def plan_bins(lines_per_block: float, machine: Machine) -> int:
    """Steps per block lifetime: enough that what all resident blocks touch in one step is
    at most 1/8 of a partition; a multiple of the resident blocks per SM (sub-waves start
    every bins / k steps)."""
    volume = lines_per_block * machine.wave / max(machine.partitions, 1)
    wanted = min(MAX_BINS, max(1, math.ceil(4 * volume / machine.partition_lines)))
    k = max(1, machine.blocks_per_sm)
    return k * max(1, -(-wanted // k))


class OrderSimulator:
    """Simulates block orders of one launch on one machine (reuses the unit builder).

    Time advances in steps of 1/bins of a block's lifetime. In each domain the blocks are
    dealt to SMs in dispatch order; with k resident blocks per SM the launch runs as
    staggered sub-waves of one block per SM: sub-wave s starts at step s * bins / k and
    runs `bins` steps, so k sub-waves, at different phases, share the L2 at any time
    (co-resident blocks finish and are replaced at different times; see
    docs/locality-model.md for why the model staggers them rather than running all k in
    lockstep).
    """

    def __init__(self, footprints: Footprints, machine: Machine, layout: Layout, seed: int = 7) -> None:
        self.fp = footprints
        self.machine = machine
        self.layout = layout
        self.seed = seed
        self.grid = footprints.grid
        self.blocks = self.grid[0] * self.grid[1] * self.grid[2]
        spl = machine.line_bytes // machine.sector_bytes
        self.lines_per_block = float(
            np.mean([sum(len(np.unique(s // spl)) for s in r.streams()) for r in footprints.reps.values()])
        )
        self.k = machine.blocks_per_sm
        self.bins = plan_bins(self.lines_per_block, machine)
        self.stride = self.bins // self.k
        self.requests = _exact_requests(footprints)
        self.plan = self._plan()
        self.rate = self._rate()
        self.builder = UnitBuilder(footprints, layout, self.bins, self.rate, machine.partitions)

    # ---------------------------------------------------------------- planning

    def _domain_blocks(self, domain: int) -> int:
        x = self.machine.domains
        return -(-(self.blocks - domain) // x) if self.blocks > domain else 0

    def _subwaves(self, domain: int) -> int:
        return -(-self._domain_blocks(domain) // self.machine.sms_per_domain)

    def _steps(self, domain: int) -> int:
        n = self._subwaves(domain)
        return (n - 1) * self.stride + self.bins if n else 0

    def _plan(self) -> list[tuple[int, int, int, int, str]]:
        """(domain, first step run, stop, first measured step, stratum) windows."""
        steps = [self._steps(d) for d in range(self.machine.domains)]
        span = self.bins
        if sum(steps) <= UNIT_BUDGET or all(n <= 3 * span for n in steps):
            return [(d, 0, n, 0, "all") for d, n in enumerate(steps) if n]
        warm = self._warmup() * span
        plan = []
        for d, n in enumerate(steps):
            plan.append((d, 0, span, 0, "all"))
            plan.append((d, max(span, n - span - warm), n, n - span, "all"))
        middle = [(d, t) for d, n in enumerate(steps) for t in range(span, n - 2 * span + 1, span)]
        picks = random.Random(self.seed).sample(middle, min(MIDDLE_WINDOWS, len(middle)))
        plan += [(d, max(0, t - warm), t + span, t, "mid") for d, t in sorted(picks)]
        return plan

    def _middle_segments(self) -> float:
        return sum(max(0, self._steps(d) - 2 * self.bins) for d in range(self.machine.domains)) / self.bins

    def _warmup(self) -> int:
        """Block lifetimes of history that fill one partition (footprint sum: a lower bound)."""
        volume = self.lines_per_block * self.machine.wave / max(self.machine.partitions, 1)
        return int(min(MAX_WARMUP, max(1, math.ceil(1.5 * self.machine.partition_lines / max(volume, 1.0)))))

    def _rate(self) -> float:
        steps = sum(stop - start for _, start, stop, _, _ in self.plan)
        elements = steps / self.bins * self.machine.wave * self.lines_per_block
        floor = min(1.0, MIN_SAMPLED_LINES / self.machine.partition_lines)
        return float(min(1.0, max(floor, ELEMENT_BUDGET / max(elements, 1.0))))

    # ---------------------------------------------------------------- running

    def run(self, config: RemapConfig | None) -> OrderStats:
        started = time.perf_counter()
        m = self.machine
        rng = np.random.default_rng(self.seed)
        caches = [
            LineCache(self.layout.total_lines, m.partition_lines * self.rate, m.ways, rng) for _ in range(m.partitions)
        ]
        exact, mids, units = _Acc(), [], 0
        for domain, start, stop, measure, stratum in self.plan:
            for cache in caches:
                cache.reset()
            window = _Acc()
            waves: dict[int, Wave] = {}
            for t in range(start, stop):
                active = range(
                    max(0, (t - self.bins) // self.stride + 1), min(self._subwaves(domain), t // self.stride + 1)
                )
                waves = {s: waves[s] if s in waves else self._subwave(config, domain, s) for s in active}
                units_now = self.builder.units([(waves[s], t - s * self.stride) for s in active])
                step = _step(caches, units_now, self.builder.threshold, self.builder.lpp)
                units += 1
                if t >= measure:
                    window.add(step)
            (exact.add(window) if stratum == "all" else mids.append(window))
        simulated = sum(stop - start for _, start, stop, _, _ in self.plan)
        return self._finish(config, exact, mids, units, simulated, started)

    def _subwave(self, config: RemapConfig | None, domain: int, s: int) -> Wave:
        m = self.machine
        local = np.arange(s * m.sms_per_domain, min((s + 1) * m.sms_per_domain, self._domain_blocks(domain)))
        blocks = blocks_for(config, self.grid, domain + m.domains * local)
        return self.builder.wave(blocks, np.arange(len(local)) % m.partitions)

    def _finish(
        self, config: RemapConfig | None, exact: _Acc, mids: list[_Acc], units: int, simulated: int, started: float
    ) -> OrderStats:
        scale = self.machine.sector_bytes / self.rate
        n_mid = self._middle_segments()
        read, write, near = exact.read, exact.write, exact.near
        visits_r, visits_w = exact.read_visits, exact.write_visits
        se_wave_read = se_wave_near = 0.0
        rep = exact.rep if exact.rep is not None else np.zeros(REPLICATES)
        if mids:
            k = len(mids)
            totals = {}
            for attr in ("read", "write", "near"):
                values = np.array([getattr(a, attr) for a in mids])
                se = n_mid * values.std(ddof=1) / math.sqrt(k) * math.sqrt(max(0.0, 1 - k / n_mid)) if k > 1 else 0.0
                totals[attr] = (n_mid * values.mean(), se)
            read += totals["read"][0]
            write += totals["write"][0]
            near += totals["near"][0]
            se_wave_read, se_wave_near = totals["read"][1], totals["near"][1]
            visits_r += n_mid * float(np.mean([a.read_visits for a in mids]))
            visits_w += n_mid * float(np.mean([a.write_visits for a in mids]))
            for a in mids:
                rep = rep + (n_mid / k) * (a.rep if a.rep is not None else 0)
        se_spatial = float(np.std(rep * REPLICATES, ddof=1) / math.sqrt(REPLICATES)) if self.rate < 1 else 0.0
        se_read = math.hypot(se_wave_read, se_spatial) * scale
        reads_req, writes_req = self.requests
        lookups = reads_req + writes_req + near / self.rate
        misses = (near + read) / self.rate
        hit = 1.0 - misses / lookups if lookups else 0.0
        se_hit = math.hypot(se_read / self.machine.sector_bytes, se_wave_near / self.rate) / lookups if lookups else 0.0
        total_steps = sum(self._steps(d) for d in range(self.machine.domains))
        label = config.label() if config is not None else "row"
        page_sectors = self.layout.sectors_per_page
        locality_r = read / (visits_r * page_sectors) if visits_r else 1.0
        locality_w = write / (visits_w * page_sectors) if visits_w else 1.0
        return OrderStats(
            label,
            Estimate(read * scale, se_read),
            Estimate(write * scale, 0.0),
            Estimate(hit, se_hit),
            locality_r,
            locality_w,
            (reads_req + writes_req) * self.machine.sector_bytes,
            lookups,
            total_steps,
            simulated,
            self.rate,
            units,
            time.perf_counter() - started,
        )


def _exact_requests(fp: Footprints) -> tuple[int, int]:
    """Sectors requested by all blocks (each block's distinct sectors), reads and writes."""
    counts = _class_counts(fp)
    n_buf = fp.streams // 2
    reads = writes = 0
    for key, rep in fp.reps.items():
        streams = rep.streams()
        reads += counts[key] * sum(len(s) for s in streams[:n_buf])
        writes += counts[key] * sum(len(s) for s in streams[n_buf:])
    return reads, writes


def _class_counts(fp: Footprints) -> dict[tuple[int, int, int], int]:
    if fp.exact:
        return {k: 1 for k in fp.reps}
    sizes = []
    for g in fp.grid:
        sizes.append({0: 1, 1: max(0, g - 2), 2: 1 if g > 1 else 0})
    return {k: sizes[0][k[0]] * sizes[1][k[1]] * sizes[2][k[2]] for k in fp.reps}


def _home(pages: np.ndarray, partitions: int) -> np.ndarray:
    """Home partition of each DRAM page (an address hash; one page never spans two)."""
    return (line_hash(pages + 0x5BD1E995) >> 7) % partitions


def _replicate(lines: np.ndarray, threshold: int, lpp: int) -> np.ndarray:
    return np.minimum(line_hash(lines // lpp) * REPLICATES // max(threshold, 1), REPLICATES - 1)


def _merge(lines: list[np.ndarray], rmasks: list[np.ndarray], wmasks: list[np.ndarray]) -> Unit:
    ln = np.concatenate(lines)
    rm = np.concatenate(rmasks)
    wm = np.concatenate(wmasks)
    order = np.argsort(ln, kind="stable")
    ln, rm, wm = ln[order], rm[order], wm[order]
    starts = np.flatnonzero(np.concatenate([[True], ln[1:] != ln[:-1]])) if len(ln) else np.zeros(0, np.int64)
    if len(ln) == 0:
        return Unit(ln, rm, wm, 0, 0)
    return Unit(ln[starts], np.bitwise_or.reduceat(rm, starts), np.bitwise_or.reduceat(wm, starts), 0, 0)


def _step(caches: list[LineCache], units: list[Unit], threshold: int, lpp: int) -> _Acc:
    """One unit on every partition: sampled DRAM read sectors, new dirty sectors, near
    misses, and the DRAM pages the read misses and the new dirty lines fall in."""
    acc = _Acc(rep=np.zeros(REPLICATES))
    parts = len(caches)
    missed_lines, dirty_lines = [], []
    if parts == 1:
        u = units[0]
        res = caches[0].resident(u.lines, len(u.lines))
        missed, dirty = caches[0].commit(u.lines, u.rmask, u.wmask, res)
        home_parts = [(u.lines, missed, dirty)]
    else:
        home_parts = _partitioned(caches, units, acc, lpp)
    for lines, missed, dirty in home_parts:
        acc.read += float(missed.sum())
        acc.write += float(dirty.sum())
        acc.rep = acc.rep + np.bincount(_replicate(lines, threshold, lpp), weights=missed, minlength=REPLICATES)
        missed_lines.append(lines[missed > 0])
        dirty_lines.append(lines[dirty > 0])
    acc.read_visits = float(sum(_distinct_sorted(lines // lpp) for lines in missed_lines))
    acc.write_visits = float(sum(_distinct_sorted(lines // lpp) for lines in dirty_lines))
    return acc


def _distinct_sorted(values: np.ndarray) -> int:
    """Distinct values of a sorted array (pages of one partition never meet another's)."""
    return int(len(values) and 1 + np.count_nonzero(values[1:] != values[:-1]))


def _partitioned(caches: list[LineCache], units: list[Unit], acc: _Acc, lpp: int) -> list[tuple[np.ndarray, ...]]:
    """Near lookups (copies of lines homed elsewhere), then home lookups of what missed."""
    parts = len(caches)
    homes = [_home(u.lines // lpp, parts) for u in units]
    forwards: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(parts)]
    near: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for c, (u, home) in enumerate(zip(units, homes)):
        copy = home != c
        lines, rmask = u.lines[copy], u.rmask[copy]
        res = caches[c].resident(lines, len(u.lines))
        valid = np.where(res, caches[c].valid[lines], 0).astype(np.uint8)
        need = rmask & ~valid
        acc.near += float(popcount(need).sum())
        near.append((lines, rmask, res))
        for h in range(parts):
            sel = home[copy] == h
            if sel.any():
                forwards[h].append((lines[sel], need[sel], u.wmask[copy][sel]))
        own = ~copy
        forwards[c].append((u.lines[own], u.rmask[own], u.wmask[own]))
    out = []
    for c, cache in enumerate(caches):
        merged = _merge([f[0] for f in forwards[c]], [f[1] for f in forwards[c]], [f[2] for f in forwards[c]])
        copies, copy_rmask, copy_res = near[c]
        res = cache.resident(merged.lines, len(merged.lines) + len(copies))
        n = len(copies)
        missed, dirty = cache.commit(
            np.concatenate([copies, merged.lines]),
            np.concatenate([copy_rmask, merged.rmask]),
            np.concatenate([np.zeros(n, np.uint8), merged.wmask]),
            np.concatenate([copy_res, res]),
        )
        out.append((merged.lines, missed[n:], dirty[n:]))
    return out
