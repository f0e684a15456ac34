"""From simulated traffic to a predicted time: DRAM, scattered write-backs, the remap itself.

    time(order) = (DRAM read + write bytes) / bandwidth                       (1)
                + WRITE_SCATTER * write bytes / bandwidth * (1 - write locality)  (2)
                + blocks * warps per block * remap instructions / issue rate     (3)

(1) is what the L2 decides. (2) is the second-order figure: the L2 writes dirty lines
back in the order they were last written, so a write-back stream that touches a DRAM
page with one line before moving on costs more than one that fills pages; write
locality is the written fraction of each DRAM page per visit (1: whole pages). Reads
get no such term: the memory controller reorders the many queued read misses, while
write-backs drain in eviction order (docs/locality-model.md, "Second-order effects").
(3) is the cost of the order itself: every thread evaluates the remap helper once, and
its integer divisions by grid dimensions are not free (the CUDA C++ Programming Guide,
"Arithmetic Instructions": integer division and modulo compile to up to 20
instructions); on a memory-bound kernel with millions of threads this is what makes
every non-row order slower when the L2 has nothing to gain.

The time is a memory-side estimate: compute is not modelled, so for a compute-bound
kernel the predicted gain is an upper bound on the real one (its sign and rank are
what the proposer uses).
"""

from __future__ import annotations

import math
import re

from kxform.locality.machine import Machine
from kxform.remap import RemapConfig

DIV_INSTRUCTIONS = 20
"""CUDA C++ Programming Guide: a 32-bit integer division or modulo by a variable compiles
to up to 20 instructions (a division and the modulo of the same operands count once)."""
WRITE_SCATTER = 0.5
"""Extra cost of a write-back that opens a DRAM page for a single line, as a fraction of
its transfer time. Calibrated once (docs/locality-model.md lists the range over which
the H200 directions hold); one constant for every kernel."""


def remap_instructions(config: RemapConfig | None, gx: int, gy: int) -> tuple[float, bool]:
    """Warp instructions the remap helper adds per block (averaged over the grid), and
    whether the count comes from the table below (False: estimated from the C body)."""
    if config is None or config.pattern.name == "row":
        return 0.0, True
    name = config.pattern.name
    div = DIV_INSTRUCTIONS
    table = {
        "column": 1 + div,
        "grouped": 7 + 2 * div,
        "diagonal": 3 + 2 * div,
        "xcd": 14 + div,  # divisions by the constant XCD count are shifts and multiplies
        "xcd-grouped": 19 + 2 * div,
    }
    if name in table:
        return float(table[name]), True
    if name in ("hilbert", "morton"):
        n = 1 << (min(gx, gy).bit_length() - 1)
        inside = n * n / (gx * gy)
        steps = max(1, n.bit_length() - 1)
        loop = steps * (14 if name == "hilbert" else 8)
        return 6 + inside * loop + (1 - inside) * (4 + div), True
    body = config.pattern.c_body(config.params)
    divisions = len(re.findall(r"[/%]\s*(?!\d)", body))
    return 10 + math.ceil(divisions / 2) * div, False


def remap_seconds(config: RemapConfig | None, grid: tuple[int, int, int], threads: int, machine: Machine) -> float:
    """Issue time of the helper over the whole launch (every warp evaluates it once)."""
    per_block, _ = remap_instructions(config, grid[0], grid[1])
    warps = math.ceil(threads / 32)
    issue_rate = machine.sm_count * machine.schedulers_per_sm * machine.clock_mhz * 1e6
    return grid[0] * grid[1] * grid[2] * warps * per_block / issue_rate


def dram_seconds(read_bytes: float, write_bytes: float, write_locality: float, machine: Machine) -> tuple[float, float]:
    """(transfer time, scattered write-back penalty) of the DRAM traffic."""
    bandwidth = machine.bandwidth_gbs * 1e9
    transfer = (read_bytes + write_bytes) / bandwidth
    penalty = WRITE_SCATTER * write_bytes / bandwidth * max(0.0, 1.0 - write_locality)
    return transfer, penalty
