"""The L2 simulator against traces whose answer can be worked out by hand.

Footprints are built directly (no CPU runtime): one representative per block ("exact"
footprints), on a small machine whose L2 size is chosen against the data sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

from kxform.locality.footprint import Footprints
from kxform.locality.machine import Machine
from kxform.locality.simulate import OrderSimulator
from kxform.locality.trace import BlockSectors
from kxform.locality.units import Layout
from kxform.passes.swizzle.patterns import get_pattern

SECTOR, LINE, PAGE = 32, 128, 1024
EMPTY = np.zeros(0, dtype=np.int64)


def machine(
    l2_bytes: int, sms: int = 4, blocks_per_sm: int = 1, domains: int = 1, partitions: int = 1, ways: int = 1
) -> Machine:
    """ways=1 makes the L2 fully associative LRU (the exact stack-distance rule)."""
    return Machine(
        "test",
        domains,
        sms,
        blocks_per_sm,
        partitions,
        l2_bytes,
        LINE,
        SECTOR,
        ways,
        4,
        1000,
        PAGE,
        1000.0,
        sms * domains,
    )


def exact(
    grid: tuple[int, int, int], reads: dict[int, list[np.ndarray]], writes: dict[int, list[np.ndarray]] | None = None
) -> Footprints:
    """Footprints where block (b, 0, 0) reads `reads[b][i]` sectors of buffer i."""
    reps = {}
    n_buf = len(next(iter(reads.values())))
    for b, per_buffer in reads.items():
        wr = (writes or {}).get(b, [EMPTY] * n_buf)
        reps[(b, 0, 0)] = BlockSectors((b, 0, 0), tuple(per_buffer), tuple(wr))
    return Footprints(grid, reps, np.zeros((2 * n_buf, 3), dtype=np.int64), exact=True)


def sectors(first_byte: int, nbytes: int) -> np.ndarray:
    return np.arange(first_byte // SECTOR, (first_byte + nbytes) // SECTOR, dtype=np.int64)


def run(fp: Footprints, m: Machine, sizes: tuple[int, ...], pattern: str | None = None, **params: int):
    layout = Layout.of(sizes, SECTOR, LINE, PAGE)
    config = get_pattern(pattern).resolve(params) if pattern else None
    return OrderSimulator(fp, m, layout).run(config)


def test_streaming_copy_larger_than_l2_has_no_reuse() -> None:
    chunk, blocks = 64 * 1024, 64  # 4 MiB copied through a 256 KiB L2
    reads = {b: [sectors(b * chunk, chunk), EMPTY] for b in range(blocks)}
    writes = {b: [EMPTY, sectors(b * chunk, chunk)] for b in range(blocks)}
    stats = run(exact((blocks, 1, 1), reads, writes), machine(256 * 1024), (blocks * chunk, blocks * chunk))
    assert stats.dram_read_bytes.value == blocks * chunk  # every byte read once from DRAM
    assert stats.dram_write_bytes.value == blocks * chunk
    assert stats.hit_rate.value == pytest.approx(0.5)  # reads all miss; stores count as hits
    assert stats.write_locality == pytest.approx(1.0) and stats.read_locality == pytest.approx(1.0)


@pytest.mark.parametrize(("l2_kib", "expected_reads"), [(512, 1), (64, 2)])
def test_a_buffer_read_twice_hits_the_second_time_only_if_it_fits(l2_kib: int, expected_reads: int) -> None:
    """Blocks 0..15 read 16 KiB chunks of a 256 KiB buffer, blocks 16..31 read them again.
    In a 512 KiB L2 the second pass hits; in a 64 KiB LRU L2 it is evicted first."""
    chunk, half = 16 * 1024, 16
    reads = {b: [sectors((b % half) * chunk, chunk)] for b in range(2 * half)}
    stats = run(exact((2 * half, 1, 1), reads), machine(l2_kib * 1024), (half * chunk,))
    assert stats.dram_read_bytes.value == expected_reads * half * chunk
    assert stats.hit_rate.value == pytest.approx(1 - expected_reads / 2)


def test_blocks_running_together_share_fills() -> None:
    """Four blocks of one wave read the same 1 MiB (more than the L2): one DRAM fill."""
    data = 1 << 20
    reads = {b: [sectors(0, data)] for b in range(4)}
    stats = run(exact((4, 1, 1), reads), machine(256 * 1024, sms=4), (data,))
    assert stats.dram_read_bytes.value == data
    assert stats.hit_rate.value == pytest.approx(0.75)


def test_xcd_round_robin_splits_reuse_and_the_xcd_remap_restores_it() -> None:
    """Blocks 2i and 2i+1 read the same chunk. Dealt round-robin over 2 XCDs with private
    L2s they land on different dies: every chunk is fetched twice. The xcd remap gives each
    die contiguous tiles, so pairs meet on one die again: every chunk is fetched once."""
    chunk, pairs = 32 * 1024, 32
    reads = {b: [sectors((b // 2) * chunk, chunk)] for b in range(2 * pairs)}
    m = machine(128 * 1024, sms=2, domains=2)
    fp = exact((2 * pairs, 1, 1), reads)
    plain = run(fp, m, (pairs * chunk,))
    remapped = run(fp, m, (pairs * chunk,), "xcd", xcds=2)
    assert plain.dram_read_bytes.value == 2 * pairs * chunk
    assert remapped.dram_read_bytes.value == pairs * chunk


def test_far_partition_lookups_count_but_do_not_read_dram_twice() -> None:
    """Two partitions: a line read by SMs on both sides is read from DRAM once, and the
    side that is not its home looks it up twice (near miss, then home), as the profiler counts."""
    data = 64 * 1024
    reads = {b: [sectors(0, data)] for b in range(2)}
    stats = run(exact((2, 1, 1), reads), machine(1 << 20, sms=2, partitions=2), (data,))
    assert stats.dram_read_bytes.value == data
    requests = 2 * data // SECTOR
    assert stats.lookups > requests  # some near misses went on to the home partition
    assert stats.hit_rate.value < 0.5 + 1e-9


def test_sampling_agrees_with_the_full_simulation_within_its_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spatial (page-hash) sampling of a tiled-GEMM-like footprint (private row panels,
    column panels shared by every 8th block): the estimate and its reported error
    against the unsampled run."""
    import kxform.locality.simulate as sim

    n, panel = 64, 256 * 1024
    reads = {b: [sectors(b * panel, panel), sectors((b % 8) * panel, panel)] for b in range(n)}
    fp = exact((n, 1, 1), reads)
    m = machine(1 << 20, sms=16)
    layout = Layout.of((n * panel, 8 * panel), SECTOR, LINE, PAGE)
    full = OrderSimulator(fp, m, layout)
    assert full.rate == 1.0
    truth = full.run(None).dram_read_bytes.value
    monkeypatch.setattr(sim, "ELEMENT_BUDGET", 20_000)
    monkeypatch.setattr(sim, "MIN_SAMPLED_LINES", 256)
    sampled = OrderSimulator(fp, m, layout)
    estimate = sampled.run(None).dram_read_bytes
    assert sampled.rate < 0.2
    assert estimate.se > 0
    assert abs(estimate.value - truth) <= max(4 * estimate.se, 0.05 * truth)
