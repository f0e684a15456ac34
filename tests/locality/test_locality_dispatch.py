"""The model's NumPy block orders equal the swizzle patterns' Python references, and the
hardware profiles carry the locality figures with their sources."""

from __future__ import annotations

import numpy as np
import pytest

from kxform.hw import list_profiles
from kxform.locality.dispatch import blocks_for, logical_tiles
from kxform.locality.occupancy import occupancy
from kxform.passes.swizzle.patterns import PATTERNS, RemapConfig

GRIDS = [(1, 1), (1, 7), (7, 1), (5, 3), (16, 16), (17, 9), (8, 33), (64, 64), (100, 37), (256, 1024)]


def _configs() -> list[RemapConfig]:
    out = []
    for pattern in PATTERNS.values():
        out.append(pattern.resolve({}))
        names = {p.name for p in pattern.params}
        if "group" in names:
            out += [pattern.resolve({"group": 3, "along": "x"}), pattern.resolve({"group": 5})]
        if "xcds" in names:
            out.append(pattern.resolve({"xcds": 3}))
    return out


@pytest.mark.parametrize("config", _configs(), ids=lambda c: c.label())
def test_vectorised_orders_equal_the_references(config: RemapConfig) -> None:
    for gx, gy in GRIDS:
        pids = np.arange(gx * gy) if gx * gy <= 5000 else np.random.default_rng(1).integers(0, gx * gy, 5000)
        lx, ly = logical_tiles(config, pids, gx, gy)
        expected = [config.apply(int(p) % gx, int(p) // gx, gx, gy) for p in pids]
        assert list(zip(lx.tolist(), ly.tolist())) == expected, (gx, gy)


def test_z_is_never_remapped() -> None:
    config = PATTERNS["hilbert"].resolve({})
    blocks = blocks_for(config, (4, 4, 3), np.arange(48))
    assert blocks[:, 2].tolist() == [p // 16 for p in range(48)]
    assert sorted(map(tuple, blocks[16:32, :2].tolist())) == [(x, y) for x in range(4) for y in range(4)]


LOCALITY_FIGURES = ("l2_line_bytes", "l2_ways", "l2_partitions", "schedulers_per_sm", "dram_page_bytes", "clock_mhz")


@pytest.mark.parametrize("profile", list_profiles(), ids=lambda p: p.name)
def test_profiles_state_the_locality_figures_with_sources(profile) -> None:  # type: ignore[no-untyped-def]
    for name in LOCALITY_FIGURES:
        assert getattr(profile, name) is not None, name
        assert profile.sources[name].strip(), name


def test_occupancy_follows_the_cuda_rules() -> None:
    h200 = next(p for p in list_profiles() if p.name == "h200")
    # 125 registers -> 128 per thread after rounding: 16 warps of 8 fit 65536 registers twice
    assert occupancy(h200, 256, 125, 8192).blocks_per_sm == 2
    assert occupancy(h200, 256, 125, 8192).limiter == "registers"
    assert occupancy(h200, 256, 32, 2048).blocks_per_sm == 8  # threads: 2048 / 256
    assert occupancy(h200, 64, 16, 0).blocks_per_sm == 32  # the block limit of compute capability 9.0
    assert occupancy(h200, 128, None, 100 * 1024).blocks_per_sm == 2  # shared memory: 228 KiB / (100 + 1) KiB
