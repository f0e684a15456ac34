"""Trace acquisition and the affine footprint fit, on the real CPU runtime.

Covers `LaunchRequest.only_traced_blocks` (the traced blocks alone run, with the same
traces as a full launch), the fit (extrapolated sector sets equal the traces of every
block, edges included), and the refusals: a data-dependent gather does not extrapolate,
and is traced whole only when the grid is small.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from kxform.locality import footprint
from kxform.locality.footprint import Footprints, trace_footprints
from kxform.locality.trace import BlockTracer, ModelRefused
from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, ScalarArg

TILED = r"""
__global__ void tiled_copy(const float* in, float* out, int w, int h) {
    __shared__ float t[8][9];
    int x = blockIdx.x * 8 + threadIdx.x, y = blockIdx.y * 8 + threadIdx.y;
    float v = 0.f;
    if (x < w && y < h) v = in[y * w + x];
    if (x > 0 && x < w && y < h) v += in[y * w + x - 1];   /* a halo column, clipped at the left edge */
    t[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    if (x < w && y < h) out[y * w + x] = t[threadIdx.y][threadIdx.x];
}
"""

GATHER = r"""
__global__ void gather(const int* idx, const float* x, float* y, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (i < n) y[i] = x[idx[i]];
}
"""


def _tiled(w: int, h: int) -> LaunchRequest:
    data = np.arange(w * h, dtype=np.float32)
    return LaunchRequest(
        TILED,
        "tiled_copy",
        (),
        (
            BufferArg("in", data, "in"),
            BufferArg("out", data * 0, "out"),
            ScalarArg("w", np.int32(w)),
            ScalarArg("h", np.int32(h)),
        ),
        grid=(-(-w // 8), -(-h // 8), 1),
        block=(8, 8, 1),
        label="tiled",
    )


def _gather(n: int) -> LaunchRequest:
    rng = np.random.default_rng(3)
    idx = rng.integers(0, n, n).astype(np.int32)
    return LaunchRequest(
        GATHER,
        "gather",
        (),
        (
            BufferArg("idx", idx, "in"),
            BufferArg("x", np.ones(n, np.float32), "in"),
            BufferArg("y", np.zeros(n, np.float32), "out"),
            ScalarArg("n", np.int32(n)),
        ),
        grid=(-(-n // 64), 1, 1),
        block=(64, 1, 1),
        label="gather",
    )


def test_only_traced_blocks_run_alone_with_the_traces_of_a_full_launch(cpu) -> None:  # type: ignore[no-untyped-def]
    request = replace(_tiled(37, 29), trace_blocks=((0, 0, 0), (2, 1, 0), (4, 3, 0)))
    full = cpu.run(request)
    alone = cpu.run(replace(request, only_traced_blocks=True))
    assert alone.outputs == {} and alone.unwritten == {}
    assert full.outputs["out"].size and full.unwritten["out"] == 0
    for a, b in zip(full.traces, alone.traces, strict=True):
        assert a.block == b.block and a.reads == b.reads and a.writes == b.writes
        assert a.reads["in"] and a.writes["out"]


def test_only_traced_blocks_needs_traced_blocks(cpu) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError_, match="only_traced_blocks needs trace_blocks"):
        cpu.run(replace(_tiled(16, 16), only_traced_blocks=True))


def _all_blocks(grid: tuple[int, int, int]) -> list[tuple[int, int, int]]:
    return [(x, y, z) for z in range(grid[2]) for y in range(grid[1]) for x in range(grid[0])]


@pytest.mark.parametrize(("w", "h"), [(64, 48), (37, 29)])
def test_the_affine_fit_reproduces_every_block(cpu, w: int, h: int) -> None:  # type: ignore[no-untyped-def]
    """Fit on a few blocks, then trace every block and compare sector for sector (the left
    edge drops its halo, a ragged last tile is narrower: both are edge classes)."""
    request = _tiled(w, h)
    tracer = BlockTracer(request, cpu)
    fp = trace_footprints(tracer, request.grid)
    assert not fp.exact and fp.traced < request.grid[0] * request.grid[1]
    assert fp.shifts[0].tolist() == [1, w, 0]  # 8 floats along x; 8 rows of w floats (w sectors) along y
    for trace in tracer.trace(_all_blocks(request.grid)):
        for got, want in zip(fp.block_streams(trace.block), trace.streams(), strict=True):
            assert np.array_equal(got, want), trace.block


def test_a_planted_extrapolation_error_is_caught(cpu) -> None:  # type: ignore[no-untyped-def]
    """A footprint whose shift is off by one sector must fail the held-out comparison."""
    request = _tiled(64, 48)
    tracer = BlockTracer(request, cpu)
    fp = trace_footprints(tracer, request.grid)
    broken = Footprints(fp.grid, fp.reps, fp.shifts + np.array([[0, 1, 0]] + [[0, 0, 0]] * (fp.streams - 1)))
    checks = tracer.trace([(5, 4, 0)])  # not the representative (3, 2): its offset is not zero
    assert footprint._first_mismatch(broken, checks, tracer) is not None
    assert footprint._first_mismatch(fp, checks, tracer) is None


def test_a_data_dependent_gather_is_refused_when_the_grid_is_large(cpu, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    request = _gather(64 * 40)
    monkeypatch.setattr(footprint, "FULL_TRACE_LIMIT", 16)
    with pytest.raises(ModelRefused, match="do not follow an affine tiling.*'x'"):
        trace_footprints(BlockTracer(request, cpu), request.grid)


def test_a_data_dependent_gather_is_traced_whole_when_the_grid_is_small(cpu) -> None:  # type: ignore[no-untyped-def]
    request = _gather(64 * 40)
    fp = trace_footprints(BlockTracer(request, cpu), request.grid)
    assert fp.exact and fp.traced == 40 and len(fp.reps) == 40


def test_a_kernel_the_cpu_runtime_cannot_run_is_refused(cpu) -> None:  # type: ignore[no-untyped-def]
    source = '__global__ void k(float* y) { asm volatile(""); y[threadIdx.x] = 1.f; }\n'
    request = LaunchRequest(
        source,
        "k",
        (),
        (BufferArg("y", np.zeros(32, np.float32), "out"),),
        grid=(4, 1, 1),
        block=(32, 1, 1),
        label="asm",
    )
    with pytest.raises(ModelRefused, match="cannot trace on the CPU runtime.*asm"):
        trace_footprints(BlockTracer(request, cpu), request.grid)
