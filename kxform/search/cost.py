"""A predicted time per configuration, before it is built: the tuner's cost model.

For a kernel at its timing size, from what one thread does (kxform.analysis.footprint:
its global loads and stores, the 32-byte sectors they cost, arithmetic, barriers, the
static shared memory of a block), the launch (grid and block, the rewritten one for a
rewritten kernel), the registers ptxas gives a thread where a build reported them, and
the hardware profile (kxform.hw):

* the **roofline lower bound** `max(least bytes / copy bandwidth, operations / FP32
  peak)`: each buffer read or written once at the measured copy bandwidth, every counted
  operation at the peak rate. No configuration of the same problem runs faster;
* the **occupancy-adjusted estimate**, the largest of four times:
  - `memory`: the least bytes over the bandwidth that the resident warps can keep busy
    (Little's law: bytes in flight = bandwidth x latency; a warp keeps `ILP` requests of
    its sector bytes in flight, so few resident warps, or narrow requests, leave the
    bandwidth idle);
  - `transactions`: every sector the warps' requests move (uncoalesced accesses move
    eight times the bytes they use) over the L1/L2 sector rate;
  - `compute`: the operations at the FP32 peak, scaled by the share of the SMs' issue
    slots the resident warps fill;
  - `latency`: waves of blocks, each as long as one thread's chain of loads (`ILP` at a
    time, each `LOAD_LATENCY_NS`) and barriers: what a kernel of few, long threads
    (one thread per row, then coarsened) is bound by.

Occupancy (resident blocks per SM) is the least of the profile's block, thread, shared
memory and register limits. The estimate is not a simulator: it exists to rank the
configurations of one kernel, so that the search builds the promising ones first and
never builds those predicted several times slower than the best measured once the model
has shown it ranks this kernel's measurements well (kxform.search.kernel_objective);
its rank correlation against the measurements is reported per run. The constants below
are order-of-magnitude figures of current GPUs, not fitted to any measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kxform.analysis.footprint import SECTOR_BYTES, WARP, Footprint
from kxform.hw import HwProfile

LOAD_LATENCY_NS = 500.0
"""A global load that misses the caches, order of magnitude (400-700 ns on recent GPUs)."""
BARRIER_NS = 50.0
"""One `__syncthreads()` of a block whose warps arrive together."""
ILP = 4.0
"""Independent loads one thread keeps in flight (loops the compiler unrolls by four)."""
SECTOR_BYTES_PER_CLOCK = 64
"""Sector bytes one SM exchanges with the L1/L2 per clock."""
ISSUE_WARPS = 16
"""Resident warps per SM that keep its schedulers issuing every clock."""
DEFAULT_BLOCKS_PER_SM = 32
DEFAULT_CLOCK_MHZ = 1500
DEFAULT_TFLOPS = 20.0


@dataclass(frozen=True)
class Prediction:
    """The predicted time of one configuration, in milliseconds: `lower_ms` the roofline
    bound, `estimate_ms` the occupancy-adjusted estimate (what orders and prunes),
    `limiter` the term the estimate is (memory, transactions, compute, latency)."""

    lower_ms: float
    estimate_ms: float
    limiter: str
    occupancy: float
    """Resident warps per SM over the most an SM holds."""
    detail: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "lower_ms": self.lower_ms,
            "estimate_ms": self.estimate_ms,
            "limiter": self.limiter,
            "occupancy": round(self.occupancy, 4),
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Launch:
    """The launch a prediction is made for."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int = 0
    least_bytes: int = 0
    """Bytes of every buffer the kernel reads or writes, each once (inout twice)."""

    @property
    def threads_per_block(self) -> int:
        return math.prod(self.block)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)


def blocks_per_sm(hw: HwProfile, launch: Launch, shared_bytes: int, registers: int | None) -> int:
    """Resident blocks per SM: the least of the profile's limits (0: the block does not fit)."""
    threads = launch.threads_per_block
    warps = math.ceil(threads / hw.warp_size)
    limits = [hw.max_blocks_per_sm or DEFAULT_BLOCKS_PER_SM, hw.max_threads_per_sm // (warps * hw.warp_size)]
    if shared_bytes > 0:
        limits.append(hw.smem_per_sm // shared_bytes if shared_bytes <= hw.smem_per_block else 0)
    if registers:
        limits.append(hw.regs_per_sm // (registers * warps * hw.warp_size))
    return max(0, min(limits))


def predict(fp: Footprint, launch: Launch, hw: HwProfile, registers: int | None = None) -> Prediction:
    """The prediction for a kernel whose thread does `fp`, launched as `launch` on `hw`."""
    threads = launch.threads_per_block * launch.blocks
    warps_per_block = math.ceil(launch.threads_per_block / hw.warp_size)
    shared = fp.shared_bytes + launch.dynamic_shared
    resident = blocks_per_sm(hw, launch, shared, registers)
    if resident == 0:  # cannot launch: no time is a prediction
        return Prediction(math.inf, math.inf, "occupancy", 0.0, "a block does not fit on an SM")
    clock = (hw.clock_mhz or DEFAULT_CLOCK_MHZ) * 1e6
    bandwidth = hw.mem_bandwidth_gbs * 1e9
    peak = (hw.fp32_tflops or DEFAULT_TFLOPS) * 1e12
    sms_busy = min(hw.sm_count, launch.blocks)
    warps_per_sm = min(resident, math.ceil(launch.blocks / hw.sm_count)) * warps_per_block
    occupancy = warps_per_sm / (hw.max_threads_per_sm / hw.warp_size)

    least = launch.least_bytes or fp.useful_bytes * threads
    ops = fp.ops * threads
    lower = max(least / bandwidth, ops / peak)

    accesses = fp.loads + fp.stores
    request = fp.sector_bytes / accesses * WARP if accesses else SECTOR_BYTES
    in_flight = sms_busy * warps_per_sm * request * ILP
    memory = least / bandwidth / min(1.0, in_flight / (bandwidth * LOAD_LATENCY_NS * 1e-9))
    transactions = fp.sector_bytes * threads / (hw.sm_count * SECTOR_BYTES_PER_CLOCK * clock)
    compute = ops / peak / min(1.0, sms_busy / hw.sm_count * warps_per_sm / ISSUE_WARPS)
    waves = math.ceil(launch.blocks / (resident * hw.sm_count))
    chain = fp.loads / ILP * LOAD_LATENCY_NS * 1e-9 + fp.barriers * BARRIER_NS * 1e-9
    latency = waves * chain
    terms = {"memory": memory, "transactions": transactions, "compute": compute, "latency": latency}
    limiter = max(terms, key=lambda k: terms[k])
    estimate = max(terms[limiter], lower)
    detail = (
        f"{launch.blocks} blocks of {launch.threads_per_block}, {resident} per SM ({occupancy:.0%} occupancy), "
        f"{waves} waves; per thread {fp.loads:.0f} loads, {fp.stores:.0f} stores, "
        f"{fp.sector_bytes / max(fp.useful_bytes, 1e-9):.1f}x sector bytes over useful, {fp.ops:.0f} operations"
    )
    return Prediction(lower * 1e3, estimate * 1e3, limiter, occupancy, detail)


def launch_values(launch: Launch, scalars: Mapping[str, int]) -> dict[str, int]:
    """The values a footprint is evaluated at: the scalar arguments and the launch's
    `blockDim`/`gridDim`."""
    values = dict(scalars)
    for axis, block, grid in zip("xyz", launch.block, launch.grid):
        values[f"blockDim.{axis}"] = block
        values[f"gridDim.{axis}"] = grid
    return values


def rank_agreement(pairs: Sequence[tuple[float, float]]) -> float | None:
    """Kendall's tau-b between predicted and measured times of `pairs` (None: fewer than
    three pairs, or either side constant): how well the model ranks what was measured."""
    if len(pairs) < 3:
        return None
    x, y = (np.asarray(side, dtype=float) for side in zip(*pairs))
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    upper = np.triu_indices(len(x), 1)
    concordance = float((dx * dy)[upper].sum())
    pairs_x, pairs_y = float(np.abs(dx[upper]).sum()), float(np.abs(dy[upper]).sum())
    if pairs_x == 0 or pairs_y == 0:
        return None
    return concordance / math.sqrt(pairs_x * pairs_y)


PRUNE_FACTOR = 3.0
"""A configuration predicted this many times slower than the prediction of the best
measured configuration is not built (once the model is trusted on the kernel)."""
TRUST_PAIRS = 6
"""Measured configurations with predictions before the model may prune."""
TRUST_TAU = 0.5
"""Kendall's tau between predictions and measurements the model must reach to prune."""


class Pruning:
    """When the cost model may decide that a configuration is not worth building: once it
    has ranked this kernel's measured configurations well (Kendall's tau at least
    TRUST_TAU over at least TRUST_PAIRS of them), a configuration predicted PRUNE_FACTOR
    times slower than the best measured configuration's prediction is pruned. Not
    thread-safe: its owner serialises the calls."""

    def __init__(self) -> None:
        self._pairs: list[tuple[float, float]] = []
        self._best: tuple[float, float] | None = None
        """(measured, predicted) milliseconds of the fastest measured configuration."""

    def observe(self, predicted: float | None, measured: float | None, cut_off: bool = False) -> None:
        """A measured configuration (a cut-off time is of a few launches: it counts for the
        best, not as evidence of the model's ranking)."""
        if measured is None or predicted is None or not math.isfinite(predicted):
            return
        if not cut_off:
            self._pairs.append((predicted, measured))
        if self._best is None or measured < self._best[0]:
            self._best = (measured, predicted)

    @property
    def agreement(self) -> float | None:
        """Kendall's tau of the predictions against the measurements so far."""
        return rank_agreement(self._pairs)

    def why(self, predicted: float) -> str:
        """Why a configuration predicted to take `predicted` ms is pruned ("": it is not)."""
        if self._best is None or len(self._pairs) < TRUST_PAIRS:
            return ""
        tau = self.agreement
        measured, bar = self._best
        if tau is None or tau < TRUST_TAU or not predicted >= PRUNE_FACTOR * bar:
            return ""
        return (
            f"pruned: predicted {predicted:.4g} ms, at least {PRUNE_FACTOR:g}x the {bar:.4g} ms predicted for the "
            f"best measured configuration ({measured:.4g} ms); the model ranks this kernel's {len(self._pairs)} "
            f"measured configurations with Kendall's tau {tau:.2f}"
        )
