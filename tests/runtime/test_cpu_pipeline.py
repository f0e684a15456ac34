"""Asynchronous copies to shared memory (`<cuda_pipeline_primitives.h>`) on the CPU runtime.

A copy is made when its thread waits for its group, the latest moment the GPU allows, so
a kernel that reads a stage before waiting for it (or waits for too few groups) reads the
stage's old bytes on every run, not only when the hardware happens to be slow. Each case
below is a planted bug of a double-buffered loop that the emulation must expose.
"""

from __future__ import annotations

import numpy as np
import pytest

from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, ScalarArg

SOURCE = r"""
#include <cuda_pipeline_primitives.h>

// Sums x over slices of 64: each slice is copied into one of two stages while the
// previous one is summed; thread t adds up column t of every slice.
__global__ void staged_sum(const float* x, float* out, int slices, int wait, int width)
{
    __shared__ __align__(16) float stage[2][64];
    const int t = threadIdx.x;
    float sum = 0.0f;
    for (int s = -1; s < slices; s++) {
        __pipeline_wait_prior(wait);
        __syncthreads();
        if (s + 1 < slices) {
            if (width == 16 && t % 4 == 0)
                __pipeline_memcpy_async(&stage[(s + 1) % 2][t], &x[(s + 1) * 64 + t], 16);
            else if (width == 4)
                __pipeline_memcpy_async(&stage[(s + 1) % 2][t], &x[(s + 1) * 64 + t], 4);
            else if (width == 5)  // misaligned: a 16-byte copy from an odd element
                __pipeline_memcpy_async(&stage[(s + 1) % 2][t], &x[(s + 1) * 64 + t + 1], 16);
        }
        __pipeline_commit();
        if (s >= 0)
            sum += stage[s % 2][t];
    }
    out[t] = sum;
}

// zfill: the last `fill` bytes of each 16-byte copy are zeros, not the source's.
__global__ void zero_fill(const float* x, float* out, int fill)
{
    __shared__ __align__(16) float stage[64];
    const int t = threadIdx.x;
    if (t % 4 == 0)
        __pipeline_memcpy_async(&stage[t], &x[t], 16, fill);
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();
    out[t] = stage[t];
}

// Copies issued and never waited for are dropped when the thread ends: a later block
// (the even blocks leave copies behind, the odd ones wait for none of their own) must
// not see them made into its shared memory.
__global__ void left_pending(const float* x, float* out)
{
    __shared__ float stage[64];
    const int t = threadIdx.x;
    stage[t] = -1.0f;
    __syncthreads();
    if (blockIdx.x % 2 == 0) {
        __pipeline_memcpy_async(&stage[t], &x[t], 4);
        __pipeline_commit();
        return;
    }
    __pipeline_wait_prior(0);
    out[blockIdx.x / 2 * 64 + t] = stage[t];
}
"""

N_SLICES = 5


def _sum(cpu, wait: int, width: int, slices: int = N_SLICES, extra: int = 0) -> np.ndarray:  # type: ignore[no-untyped-def]
    x = np.arange(slices * 64 + extra, dtype=np.float32)
    result = cpu.run(
        LaunchRequest(
            source=SOURCE,
            kernel="staged_sum",
            params=(),
            args=(
                BufferArg("x", x, "in"),
                BufferArg("out", np.zeros(64, np.float32), "out"),
                ScalarArg("slices", np.int32(slices)),
                ScalarArg("wait", np.int32(wait)),
                ScalarArg("width", np.int32(width)),
            ),
            grid=(1, 1, 1),
            block=(64, 1, 1),
            label=f"staged_sum[wait={wait},width={width}]",
        )
    )
    return result.outputs["out"]


def _expected(slices: int = N_SLICES) -> np.ndarray:
    return np.arange(slices * 64, dtype=np.float64).reshape(slices, 64).sum(axis=0).astype(np.float32)


@pytest.mark.parametrize("width", [4, 16])
def test_a_double_buffered_loop_that_waits_for_its_slice_is_exact(cpu, width: int) -> None:  # type: ignore[no-untyped-def]
    np.testing.assert_array_equal(_sum(cpu, wait=0, width=width), _expected())


@pytest.mark.parametrize("width", [4, 16])
def test_reading_a_stage_before_its_copies_are_waited_for_reads_stale_bytes(cpu, width: int) -> None:  # type: ignore[no-untyped-def]
    """wait_prior(1) leaves the slice about to be summed in flight (a wrong wait count)."""
    got = _sum(cpu, wait=1, width=width)
    assert not np.array_equal(got, _expected())


def test_a_misaligned_16_byte_copy_faults_like_the_gpu(cpu) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError_, match="misaligned address: __pipeline_memcpy_async"):
        _sum(cpu, wait=0, width=5, extra=4)


def test_an_out_of_bounds_source_is_reported_when_the_copy_is_made(cpu) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(RuntimeError_, match="out-of-bounds read of 4 bytes at byte offset 1280 of buffer 'x'"):
        _sum(cpu, wait=0, width=16, slices=N_SLICES + 1, extra=-64)  # the last slice is past the buffer


@pytest.mark.parametrize("fill", [0, 4, 12, 16])
def test_zero_fill_writes_zeros_past_the_bytes_read(cpu, fill: int) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(1, 65, dtype=np.float32)
    result = cpu.run(
        LaunchRequest(
            source=SOURCE,
            kernel="zero_fill",
            params=(),
            args=(
                BufferArg("x", x, "in"),
                BufferArg("out", np.zeros(64, np.float32), "out"),
                ScalarArg("f", np.int32(fill)),
            ),
            grid=(1, 1, 1),
            block=(64, 1, 1),
            label=f"zero_fill[{fill}]",
        )
    )
    kept = (16 - fill) // 4
    expected = np.where(np.arange(64) % 4 < kept, x, 0.0).astype(np.float32)
    np.testing.assert_array_equal(result.outputs["out"], expected)


def test_copies_a_thread_left_pending_are_not_made_in_a_later_block(cpu) -> None:  # type: ignore[no-untyped-def]
    x = np.arange(64, dtype=np.float32)
    result = cpu.run(
        LaunchRequest(
            source=SOURCE,
            kernel="left_pending",
            params=(),
            args=(BufferArg("x", x, "in"), BufferArg("out", np.zeros(8 * 64, np.float32), "inout")),
            grid=(16, 1, 1),
            block=(64, 1, 1),
            label="left_pending",
        )
    )
    np.testing.assert_array_equal(result.outputs["out"], np.full(8 * 64, -1.0, np.float32))
