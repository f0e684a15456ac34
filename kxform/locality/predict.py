"""Predictions per block order, from one kernel's traces: the model's public entry point.

    ranking = rank_orders(source, spec, load_profile("h200"))
    ranking.identity.stats.dram_read_bytes.value, ranking.chosen, ranking.decision

Steps: the launch at the chosen size with the spec's real inputs (trace.trace_request), traces
of a few blocks on the CPU runtime and the affine fit (footprint.fit), occupancy from
ptxas and the profile (occupancy), one simulation per distinct block order (simulate),
then time and gain per order (cost) and the proposer's decision (decide).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from typing import Any
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from kxform.errors import KxformError
from kxform.frontend.source import SourceText
from kxform.harness.launch import ResolvedLaunch
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.harness.request import UnitFlags
from kxform.hw import HwProfile
from kxform.locality import cost, store
from kxform.locality.dispatch import blocks_for
from kxform.locality.footprint import trace_footprints
from kxform.locality.machine import Machine
from kxform.locality.occupancy import Occupancy, kernel_registers, occupancy
from kxform.locality.simulate import OrderSimulator, OrderStats
from kxform.locality.trace import (
    BlockTracer,
    default_runtime,
    extract,
    launch_shape,
    resolve_size,
    source_dir,
    trace_request,
)
from kxform.locality.units import Layout
from kxform.remap import PATTERNS, RemapConfig
from kxform.runtime.cpu import CpuRuntime

DRAM_MARGIN = 0.10
"""A proposed order must cut predicted DRAM bytes (read + write) by at least 10% ..."""
GAIN_MARGIN = 0.02
"""... and predict at least a 2% shorter time than row-major, both beyond 3 standard errors."""
SHARE_OF_BEST = 0.5
"""Among orders that pass, the first in PREFERENCE with at least half the best gain wins."""
PARALLEL_ORDERS = 8
"""At most this many worker processes simulate orders at once (bounded by the CPU count)."""
PREFERENCE = ("grouped", "xcd-grouped", "column", "hilbert", "morton", "xcd", "diagonal")
"""Simplest remaps first: the gain is a memory-side upper bound, so an order that gets most
of the best predicted saving with a cheaper, easier to read helper is preferred."""


@dataclass(frozen=True)
class OrderPrediction:
    """One block order: simulated traffic, predicted time and its comparison with row-major."""

    config: RemapConfig | None
    stats: OrderStats
    same_as: str | None
    remap_s: float
    dram_s: float
    penalty_s: float
    time_s: float
    gain: float
    """Share of row-major's predicted memory-side time this order saves (0.05: 5% less;
    negative: slower). The margin to identity."""
    dram_change: float
    """Relative change of DRAM read + write bytes against row-major (-0.5: half)."""
    rank: int = 0

    @property
    def label(self) -> str:
        return self.config.label() if self.config is not None else "row"

    @property
    def dram_bytes(self) -> float:
        return self.stats.dram_read_bytes.value + self.stats.dram_write_bytes.value

    def to_json(self) -> dict[str, object]:
        s = self.stats
        return {
            "order": self.label,
            "rank": self.rank,
            "same_as": self.same_as,
            "l2_hit_rate": round(s.hit_rate.value, 4),
            "l2_hit_rate_se": round(s.hit_rate.se, 4),
            "dram_read_bytes": round(s.dram_read_bytes.value),
            "dram_read_bytes_se": round(s.dram_read_bytes.se),
            "dram_write_bytes": round(s.dram_write_bytes.value),
            "read_page_locality": round(s.read_locality, 3),
            "write_page_locality": round(s.write_locality, 3),
            "dram_change": round(self.dram_change, 4),
            "margin_to_identity": round(self.gain, 4),
            "dram_saving": round(-self.dram_change, 4) + 0.0,
            "time_saving": round(self.gain, 4),
            "predicted_ms": round(self.time_s * 1e3, 4),
            "dram_ms": round(self.dram_s * 1e3, 4),
            "write_scatter_ms": round(self.penalty_s * 1e3, 4),
            "remap_ms": round(self.remap_s * 1e3, 4),
            "sampling_rate": round(s.rate, 5),
            "steps_simulated": s.steps_simulated,
            "steps_total": s.steps_total,
            "seconds": round(s.seconds, 3),
        }


@dataclass(frozen=True)
class Ranking:
    """Every candidate order of one kernel at one size on one machine, best first."""

    kernel: str
    size: str
    hw: str
    grid: tuple[int, int, int]
    occupancy: str
    predictions: tuple[OrderPrediction, ...]
    chosen: OrderPrediction | None
    decision: str
    notes: tuple[str, ...]
    seconds: dict[str, float]

    @property
    def identity(self) -> OrderPrediction:
        return next(p for p in self.predictions if p.config is None)

    def to_json(self) -> dict[str, object]:
        return {
            "kernel": self.kernel,
            "size": self.size,
            "hw": self.hw,
            "grid": list(self.grid),
            "occupancy": self.occupancy,
            "chosen": self.chosen.label if self.chosen else None,
            "decision": self.decision,
            "notes": list(self.notes),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "orders": [p.to_json() for p in self.predictions],
        }


def candidate_configs(hw: HwProfile, dims: int = 2) -> list[RemapConfig]:
    """Every library pattern that applies to a grid of `dims` dimensions and that the
    swizzle pass can prove a bijection, with the profile's XCD count and the patterns'
    defaults (what the swizzle pass offers)."""
    out = []
    for pattern in PATTERNS.values():
        if pattern.name == "row" or min(dims, 2) not in pattern.dims or pattern.formula is None:
            continue  # the identity; a grid it does not apply to; a remap the pass cannot prove
        takes = {p.name for p in pattern.params}
        out.append(pattern.resolve({"xcds": hw.xcds} if "xcds" in takes else {}))
    return out


def rank_orders(
    source: SourceText,
    spec: KernelSpec,
    hw: HwProfile,
    size: str | SizeSpec | None = None,
    configs: list[RemapConfig] | None = None,
    runtime: CpuRuntime | None = None,
    launch: ResolvedLaunch | None = None,
    flags: UnitFlags | None = None,
) -> Ranking:
    """Trace, simulate and rank `configs` (default: every applicable library pattern)
    against row-major. Raises ModelRefused when the kernel cannot be judged. Footprints
    and per-order statistics are cached on disk (store.py). `launch`: the launch to model
    instead of the spec's at `size` (a rewrite that changes it: kxform.locality.tile);
    `flags`: the unit's include directories and defines (the project's build flags)."""
    started = time.perf_counter()
    chosen_size = resolve_size(spec, size)
    shape = launch_shape(spec, chosen_size, launch)
    extracted = extract(source, spec)
    trace_key = store.key(
        source.text,
        _spec_text(spec),
        spec.name,
        chosen_size.name,
        repr(sorted(chosen_size.values.items())),
        *(() if launch is None else (repr((launch.grid, launch.block, launch.shared_bytes)),)),
        *(() if flags is None else (repr((flags.include_dirs, flags.defines)),)),
    )
    footprints = store.load_footprints(trace_key)
    cached = footprints is not None
    if footprints is None:
        request = trace_request(extracted, spec, chosen_size, launch=launch, flags=flags)
        footprints = trace_footprints(BlockTracer(request, runtime or default_runtime()), shape.grid)
        store.save_footprints(trace_key, footprints)
    traced = time.perf_counter()
    regs, static_smem, ptxas_note = kernel_registers(
        extracted.source,
        extracted.entry,
        hw.arch,
        source_dir(extracted),
        *((flags.include_dirs, flags.defines) if flags else ()),
    )
    occ = occupancy(hw, shape.threads, regs, static_smem + shape.shared_bytes)
    machine = Machine.of(hw, occ)
    layout = Layout.of(
        tuple(b.nbytes for b in shape.buffers), machine.sector_bytes, machine.line_bytes, machine.dram_page_bytes
    )
    simulator = OrderSimulator(footprints, machine, layout)
    dims = 2 if len(spec.grid) >= 2 else 1
    wanted: list[RemapConfig | None] = [None, *(configs if configs is not None else candidate_configs(hw, dims))]
    sim_key = store.key(trace_key, repr(machine), repr(layout), repr(cost_constants()))
    results = _simulate_distinct(simulator, wanted, shape.grid, sim_key)
    simulated = time.perf_counter()
    predictions = _predict(results, shape.grid, shape.threads, machine)
    chosen, decision = decide(predictions, occupancy_veto(source, spec, hw, shape.threads, shape.shared_bytes, occ))
    how = "every block" if footprints.exact else "affine fit"
    notes = (
        ptxas_note,
        f"traced {footprints.traced} blocks ({how}, {footprints.verified} held out{'; cached' if cached else ''})",
        *machine.notes,
    )
    seconds = {"trace": traced - started, "simulate": simulated - traced, "total": time.perf_counter() - started}
    return Ranking(
        spec.name, shape.size, hw.name, shape.grid, occ.describe(), predictions, chosen, decision, notes, seconds
    )


def cost_constants() -> tuple[object, ...]:
    """What the simulation's results depend on besides its inputs (part of the cache key)."""
    from kxform.locality import simulate

    return (
        simulate.ELEMENT_BUDGET,
        simulate.UNIT_BUDGET,
        simulate.MIDDLE_WINDOWS,
        simulate.MAX_BINS,
        simulate.MIN_SAMPLED_LINES,
    )


def _spec_text(spec: KernelSpec) -> str:
    path = spec.location.path
    try:
        return open(path, encoding="utf-8").read() if path else repr(spec)
    except OSError:
        return repr(spec)


def _simulate_distinct(
    simulator: OrderSimulator, wanted: list[RemapConfig | None], grid: tuple[int, int, int], sim_key: str
) -> list[tuple[RemapConfig | None, OrderStats, str | None]]:
    """Simulate each distinct dispatch order once (xcd with one XCD is row-major, ...),
    reusing cached statistics, the rest in parallel."""
    total = grid[0] * grid[1] * grid[2]
    keys = [_order_key(c, grid) if total <= 1 << 22 else (c.label() if c else "row") for c in wanted]
    todo: dict[str, RemapConfig | None] = {}
    done: dict[str, OrderStats] = {}
    for key, config in zip(keys, wanted):
        if key in done or key in todo:
            continue
        stats = store.load_stats(store.key(sim_key, key))
        if stats is None:
            todo[key] = config
        else:
            done[key] = stats
    for key, stats in zip(todo, _run_all(simulator, list(todo.values()))):
        store.save_stats(store.key(sim_key, key), stats)
        done[key] = stats
    out, first_label = [], {}
    for key, config in zip(keys, wanted):
        label = config.label() if config is not None else "row"
        same = first_label.setdefault(key, label)
        out.append((config, replace(done[key], order=label), None if same == label else same))
    return out


_WORK: tuple[OrderSimulator, list[RemapConfig | None]] | None = None
"""What forked workers simulate (set just before the pool forks; configs do not pickle)."""


def _run_one(index: int) -> OrderStats:
    assert _WORK is not None
    simulator, configs = _WORK
    return simulator.run(configs[index])


def _run_all(simulator: OrderSimulator, configs: list[RemapConfig | None]) -> list[OrderStats]:
    """Orders are independent: run them in forked worker processes (one per CPU), or here
    when forking is not possible (a daemonic worker, a platform without fork)."""
    global _WORK
    workers = min(len(configs), os.cpu_count() or 1, PARALLEL_ORDERS)
    if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [simulator.run(c) for c in configs]
    _WORK = (simulator, configs)
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_run_one, range(len(configs))))
    except (OSError, AssertionError, BrokenProcessPool):
        return [simulator.run(c) for c in configs]
    finally:
        _WORK = None


def _order_key(config: RemapConfig | None, grid: tuple[int, int, int]) -> str:
    total = grid[0] * grid[1] * grid[2]
    mapping = blocks_for(config, grid, np.arange(total, dtype=np.int64))
    return hashlib.sha256(np.ascontiguousarray(mapping).tobytes()).hexdigest()


def _predict(
    results: list[tuple[RemapConfig | None, OrderStats, str | None]],
    grid: tuple[int, int, int],
    threads: int,
    machine: Machine,
) -> tuple[OrderPrediction, ...]:
    raw = []
    for config, stats, same in results:
        dram, penalty = cost.dram_seconds(
            stats.dram_read_bytes.value, stats.dram_write_bytes.value, stats.write_locality, machine
        )
        remap = cost.remap_seconds(config, grid, threads, machine)
        raw.append((config, stats, same, remap, dram, penalty, dram + penalty + remap))
    base = raw[0]
    base_dram = base[1].dram_read_bytes.value + base[1].dram_write_bytes.value
    preds = []
    for config, stats, same, remap, dram, penalty, total in raw:
        moved = stats.dram_read_bytes.value + stats.dram_write_bytes.value
        gain = 1.0 - total / base[6] if base[6] > 0 else 0.0
        change = moved / base_dram - 1.0 if base_dram else 0.0
        preds.append(OrderPrediction(config, stats, same, remap, dram, penalty, total, gain, change))
    order = sorted(range(len(preds)), key=lambda i: (-preds[i].gain, preds[i].dram_bytes))
    ranked = [replace(preds[i], rank=r + 1) for r, i in enumerate(order)]
    return tuple(ranked)


def against_row(share: float, what: str) -> str:
    """A share of row-major's figure (0.05: 5% less) in words a loss cannot be misread in:
    `5.0% less DRAM traffic`, `83.8% more predicted memory time` (a signed "saved -83.8%"
    beside an unsigned "saves 86.4%" read as two savings)."""
    return f"{abs(share):.1%} {'less' if share >= 0 else 'more'} {what}"


def decide(
    predictions: tuple[OrderPrediction, ...], veto: Callable[[RemapConfig], str | None] = lambda config: None
) -> tuple[OrderPrediction | None, str]:
    """The order to propose (or None) and why, by the documented margins. `veto` may
    refuse an order that passes them (its reason); the next passing order is taken."""
    identity = next(p for p in predictions if p.config is None)
    base = identity.dram_bytes
    passing = []
    for p in predictions:
        if p.config is None or p.same_as == "row":
            continue
        se = float(np.hypot(p.stats.dram_read_bytes.se, identity.stats.dram_read_bytes.se))
        saved = base - p.dram_bytes
        if saved >= DRAM_MARGIN * base and saved > 3 * se and p.gain >= GAIN_MARGIN:
            passing.append(p)
    best_other = next((p for p in predictions if p.config is not None and p.same_as != "row"), None)
    if not passing:
        if best_other is None:
            return None, "no candidate order"
        return None, (
            f"no order beats row-major by the margins (DRAM saved {DRAM_MARGIN:.0%}, time saved "
            f"{GAIN_MARGIN:.0%}); best: {best_other.label}: {against_row(-best_other.dram_change, 'DRAM traffic')}, "
            f"{against_row(best_other.gain, 'predicted memory time')} than row-major"
        )
    best = max(p.gain for p in passing)

    def preferred(p: Any) -> tuple[bool, int, float]:
        return (
            p.gain < SHARE_OF_BEST * best,  # most of the best gain first, ...
            PREFERENCE.index(p.config.pattern.name)  # ... the simplest remap among them
            if p.config is not None and p.config.pattern.name in PREFERENCE
            else len(PREFERENCE),
            -p.gain,
        )

    vetoed = []
    for chosen in sorted(passing, key=preferred):
        assert chosen.config is not None
        why = veto(chosen.config)
        if why is None:
            refused = f"; not {', '.join(vetoed)}" if vetoed else ""
            return chosen, (
                f"{chosen.label}: DRAM saved {-chosen.dram_change:+.1%}, predicted time saved "
                f"{chosen.gain:+.1%} (best {best:+.1%}; margins DRAM saved {DRAM_MARGIN:.0%}, time saved "
                f"{GAIN_MARGIN:.0%}){refused}"
            )
        vetoed.append(f"{chosen.label} ({why})")
    return None, f"every order that beats row-major by the margins is refused: {'; '.join(vetoed)}"


def occupancy_veto(
    source: SourceText, spec: KernelSpec, hw: HwProfile, threads: int, dynamic_smem: int, original: Occupancy
) -> Callable[[RemapConfig], str | None]:
    """A veto for `decide`: an order whose rewritten kernel fits fewer blocks per SM than
    the original. The model simulates memory traffic only; a remap's index arithmetic can
    take registers (a WMMA GEMM went from 64 to 79 per thread, 8 to 6 blocks per SM, and
    ran 5% slower on an H100 while its DRAM reads fell by four fifths), and the compute
    side it loses is not in the prediction. The rewrite comes from the swizzle pass with
    the order's options; where the pass or ptxas gives no answer, nothing is vetoed (the
    proposal's own checks still run)."""

    def veto(config: RemapConfig) -> str | None:
        if original.registers is None:
            return None
        try:
            registers, static_smem, _ = _remapped_resources(source, spec, hw, config)
        except KxformError:
            return None
        if registers is None:
            return None
        after = occupancy(hw, threads, registers, static_smem + dynamic_smem)
        if after.blocks_per_sm >= original.blocks_per_sm:
            return None
        return (
            f"its rewrite fits {after.blocks_per_sm} blocks/SM instead of {original.blocks_per_sm} "
            f"({original.registers} -> {registers} registers per thread; {after.limiter})"
        )

    return veto


def _remapped_resources(
    source: SourceText, spec: KernelSpec, hw: HwProfile, config: RemapConfig
) -> tuple[int | None, int, str]:
    """ptxas's registers and static shared memory of the kernel rewritten at `config`."""
    from kxform.core import rewrite_with  # the pass pipeline imports this module: import late
    from kxform.engine.pass_api import Outcome
    from kxform.frontend.source import validate_bytes

    result = rewrite_with(source.data, spec.base_name, config.options(), "swizzle", path=source.path, hw=hw.name)
    if not any(r.outcome is Outcome.APPLIED for r in result.results):
        raise KxformError(f"swizzle {config.label()} not applied")
    extracted = extract(validate_bytes(source.path, result.new_data, rewritten=True), spec)
    return kernel_registers(extracted.source, extracted.entry, hw.arch, source_dir(extracted))
