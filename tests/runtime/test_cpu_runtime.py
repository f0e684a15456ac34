"""CPU runtime: real kernels emulated on the host and compared with NumPy."""

from __future__ import annotations

import pytest
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from kxform.runtime.base import (
    Arg,
    BufferArg,
    KernelParam,
    LaunchRequest,
    LaunchResult,
    ScalarArg,
)
from kxform.runtime.cpu import CpuRuntime

RNG = np.random.default_rng(1234)


def launch(
    cpu: CpuRuntime,
    source: str,
    kernel: str,
    args: Sequence[Arg],
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    **kw: object,
) -> LaunchResult:
    return cpu.run(
        LaunchRequest(
            source=source,
            kernel=kernel,
            params=(),
            args=tuple(args),
            grid=grid,
            block=block,
            label=f"{kernel}[test]",
            **kw,
        )
    )  # type: ignore[arg-type]


SAXPY = r"""
#include <cuda_runtime.h>
__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


@pytest.mark.slow
def test_saxpy_ragged_size(cpu: CpuRuntime) -> None:
    n = 1000
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    params = (
        KernelParam("int", "n"),
        KernelParam("float", "a"),
        KernelParam("const float*", "x"),
        KernelParam("float*", "y"),
    )
    req = LaunchRequest(
        source=SAXPY,
        kernel="saxpy",
        params=params,
        args=(
            ScalarArg("n", np.int32(n)),
            ScalarArg("a", np.float32(2.5)),
            BufferArg("x", x, "in"),
            BufferArg("y", y, "inout"),
        ),
        grid=(4, 1, 1),
        block=(256, 1, 1),
        label="saxpy[n=1000]",
    )
    result = cpu.run(req)
    np.testing.assert_array_equal(result.outputs["y"], np.float32(2.5) * x + y)
    assert result.runtime == "cpu" and result.elapsed_ms is not None and set(result.outputs) == {"y"}


MATMUL = r"""
#define TILE 16
__global__ void matmul(int M, int N, int K, const float* A, const float* B, float* C) {
  __shared__ float As[TILE][TILE], Bs[TILE][TILE];
  int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[row * K + k0 + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(k0 + threadIdx.y) * N + col] : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}
"""


def test_shared_memory_tiled_matmul(cpu: CpuRuntime) -> None:
    m, n, k = 40, 33, 50
    a = RNG.uniform(-1, 1, (m, k)).astype(np.float32)
    b = RNG.uniform(-1, 1, (k, n)).astype(np.float32)
    args: list[Arg] = [
        ScalarArg("M", np.int32(m)),
        ScalarArg("N", np.int32(n)),
        ScalarArg("K", np.int32(k)),
        BufferArg("A", a, "in"),
        BufferArg("B", b, "in"),
        BufferArg("C", np.zeros((m, n), np.float32), "out"),
    ]
    result = launch(cpu, MATMUL, "matmul", args, ((n + 15) // 16, (m + 15) // 16, 1), (16, 16, 1))
    np.testing.assert_allclose(result.outputs["C"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert result.unwritten == {"C": 0}


REDUCE = r"""
template <int BLOCK>
__global__ void block_sum(int n, const float* x, float* out, int* positive) {
  __shared__ float s[BLOCK];
  int i = blockIdx.x * BLOCK + threadIdx.x;
  float v = i < n ? x[i] : 0.0f;
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  int count = __syncthreads_count(v > 0.0f);
  if (threadIdx.x == 0) { out[blockIdx.x] = s[0]; positive[blockIdx.x] = count; }
}
"""


def test_block_reduction_with_barriers(cpu: CpuRuntime) -> None:
    n = 1000
    x = RNG.standard_normal(n).astype(np.float32)
    args: list[Arg] = [
        ScalarArg("n", np.int32(n)),
        BufferArg("x", x, "in"),
        BufferArg("out", np.zeros(8, np.float32), "out"),
        BufferArg("positive", np.zeros(8, np.int32), "out"),
    ]
    result = launch(cpu, REDUCE, "block_sum<128>", args, (8, 1, 1), (128, 1, 1))
    padded = np.zeros(1024, np.float64)
    padded[:n] = x
    np.testing.assert_allclose(result.outputs["out"], padded.reshape(8, 128).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(result.outputs["positive"], (padded.reshape(8, 128) > 0).sum(1))


WARP = r"""
__global__ void warp_ops(const float* x, float* down, float* butterfly, unsigned* ballot, int* scan, int* match) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32, warp = i / 32;
  float v = x[i], d = v, b = v;
  for (int o = 16; o > 0; o /= 2) d += __shfl_down_sync(0xffffffffu, d, o);
  for (int o = 16; o > 0; o /= 2) b += __shfl_xor_sync(0xffffffffu, b, o);
  unsigned bal = __ballot_sync(0xffffffffu, v > 0.0f);
  int s = 1;
  for (int o = 1; o < 32; o *= 2) { int t = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += t; }
  match[i] = __popc(__match_any_sync(0xffffffffu, lane / 8)) + 100 * __all_sync(0xffffffffu, v > -100.0f)
             + 1000 * __any_sync(0xffffffffu, v > 100.0f) + 10000 * __shfl_sync(0xffffffffu, lane, 31 - lane);
  scan[i] = s;
  butterfly[i] = b;
  if (lane == 0) { down[warp] = d; ballot[warp] = bal; }
}
"""


@pytest.mark.slow
def test_warp_shuffles_votes_and_match(cpu: CpuRuntime) -> None:
    x = RNG.standard_normal(256).astype(np.float32)
    args = [
        BufferArg("x", x, "in"),
        BufferArg("down", np.zeros(8, np.float32), "out"),
        BufferArg("butterfly", np.zeros(256, np.float32), "out"),
        BufferArg("ballot", np.zeros(8, np.uint32), "out"),
        BufferArg("scan", np.zeros(256, np.int32), "out"),
        BufferArg("match", np.zeros(256, np.int32), "out"),
    ]
    r = launch(cpu, WARP, "warp_ops", args, (2, 1, 1), (128, 1, 1))
    warps = x.astype(np.float64).reshape(8, 32)
    np.testing.assert_allclose(r.outputs["down"], warps.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r.outputs["butterfly"], np.repeat(warps.sum(1), 32), rtol=1e-5, atol=1e-5)
    expected_ballot = [sum(1 << j for j in range(32) if row[j] > 0) for row in warps]
    np.testing.assert_array_equal(r.outputs["ballot"], np.array(expected_ballot, np.uint32))
    np.testing.assert_array_equal(r.outputs["scan"], np.tile(np.arange(1, 33), 8))
    lanes = np.tile(np.arange(32), 8)
    np.testing.assert_array_equal(r.outputs["match"], 8 + 100 + 10000 * (31 - lanes))


ATOMICS = r"""
__global__ void histogram(int n, const float* x, float* sums, int* counts, unsigned* maxbits, int* total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  __shared__ int local;
  if (threadIdx.x == 0) local = 0;
  __syncthreads();
  if (i < n) {
    int bin = min((int)(x[i] * 8.0f), 7);
    atomicAdd(&sums[bin], x[i]);
    atomicAdd(&counts[bin], 1);
    atomicMax(maxbits, __float_as_uint(x[i]));
    atomicAdd(&local, 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(total, local);
}
"""


def test_atomics_histogram(cpu: CpuRuntime) -> None:
    n = 5000
    x = RNG.uniform(0, 1, n).astype(np.float32)
    args: list[Arg] = [
        ScalarArg("n", np.int32(n)),
        BufferArg("x", x, "in"),
        BufferArg("sums", np.zeros(8, np.float32), "inout"),
        BufferArg("counts", np.zeros(8, np.int32), "inout"),
        BufferArg("maxbits", np.zeros(1, np.uint32), "inout"),
        BufferArg("total", np.zeros(1, np.int32), "inout"),
    ]
    r = launch(cpu, ATOMICS, "histogram", args, ((n + 255) // 256, 1, 1), (256, 1, 1))
    bins = np.minimum((x * np.float32(8)).astype(np.int64), 7)
    np.testing.assert_array_equal(r.outputs["counts"], np.bincount(bins, minlength=8))
    np.testing.assert_allclose(r.outputs["sums"], np.bincount(bins, weights=x, minlength=8), rtol=1e-4)
    assert r.outputs["maxbits"][0] == x.max().view(np.uint32)
    assert r.outputs["total"][0] == n


DYNAMIC_SHARED = r"""
extern __shared__ float tail[];  // namespace scope works too
template <typename T>
__global__ void reverse_block(const T* in, T* out) {
  extern __shared__ __align__(16) unsigned char raw[];
  T* s = reinterpret_cast<T*>(raw);
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = in[i];
  __syncthreads();
  out[i] = s[blockDim.x - 1 - threadIdx.x] + (T)(tail == (float*)raw ? 0 : 1);
}
"""


def test_dynamic_shared_memory(cpu: CpuRuntime) -> None:
    x = np.arange(384, dtype=np.float64)
    args = [BufferArg("in", x, "in"), BufferArg("out", np.zeros_like(x), "out")]
    r = launch(cpu, DYNAMIC_SHARED, "reverse_block<double>", args, (3, 1, 1), (128, 1, 1), shared_bytes=128 * 8)
    np.testing.assert_array_equal(r.outputs["out"], x.reshape(3, 128)[:, ::-1].reshape(-1))


HALF = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void convert(int n, const float* f, unsigned short* h, unsigned short* b, float* hmath, float* bmath) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __half x = __float2half(f[i]);
  __nv_bfloat16 y = __float2bfloat16(f[i]);
  h[i] = __half_as_ushort(x);
  b[i] = __bfloat16_as_ushort(y);
  hmath[i] = __half2float(__hfma(x, __float2half(0.5f), x) - __float2half(1.0f));
  bmath[i] = __bfloat162float(y * __float2bfloat16(3.0f) + y);
}
"""


def _bf16_rne(v: np.ndarray) -> np.ndarray:
    u = v.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16(v: np.ndarray) -> np.ndarray:
    return (_bf16_rne(v).astype(np.uint32) << 16).view(np.float32)


def test_half_and_bfloat16_round_like_the_gpu(cpu: CpuRuntime) -> None:
    edges = np.array(
        [
            0.0,
            -0.0,
            1.0,
            65504,
            65519.99,
            65520,
            1e6,
            2**-24,
            2**-25,
            3 * 2**-26,
            6.1e-5,
            np.inf,
            -np.inf,
            1.00048828125,
            1.0009765625 + 2**-12,
            3.3895314e38,
        ],
        np.float32,
    )
    f = np.concatenate([edges, (RNG.standard_normal(20000) * 10.0 ** RNG.integers(-8, 5, 20000)).astype(np.float32)])
    n = f.size
    args: list[Arg] = [
        ScalarArg("n", np.int32(n)),
        BufferArg("f", f, "in"),
        BufferArg("h", np.zeros(n, np.uint16), "out"),
        BufferArg("b", np.zeros(n, np.uint16), "out"),
        BufferArg("hmath", np.zeros(n, np.float32), "out"),
        BufferArg("bmath", np.zeros(n, np.float32), "out"),
    ]
    r = launch(cpu, HALF, "convert", args, ((n + 255) // 256, 1, 1), (256, 1, 1))
    with np.errstate(over="ignore", invalid="ignore"):
        h = f.astype(np.float16)
        np.testing.assert_array_equal(r.outputs["h"], h.view(np.uint16))
        np.testing.assert_array_equal(r.outputs["b"], _bf16_rne(f))
        # fma rounds once; 0.5*x is exact in half except in the subnormal range
        expected_h = ((h.astype(np.float64) * 0.5 + h).astype(np.float16) - np.float16(1)).astype(np.float32)
        normal = np.abs(h.astype(np.float32)) >= 2**-13
        np.testing.assert_array_equal(r.outputs["hmath"][normal], expected_h[normal])
        y = _bf16(f)
        np.testing.assert_array_equal(r.outputs["bmath"], _bf16(_bf16(y * np.float32(3)) + y))


HIP_WARP = r"""
#include <hip/hip_runtime.h>
__global__ void wave_sum(const int* x, int* out, unsigned long long* ballot) {
  int i = hipBlockIdx_x * hipBlockDim_x + hipThreadIdx_x, v = x[i];
  for (int o = warpSize / 2; o > 0; o /= 2) v += __shfl_xor(v, o);
  unsigned long long b = __ballot(hipThreadIdx_x % 3 == 0);
  if (hipThreadIdx_x % warpSize == 0) { out[i / warpSize] = v; ballot[i / warpSize] = b; }
}
"""


def test_hip_kernel_uses_64_lane_wavefronts(cpu: CpuRuntime) -> None:
    x = np.arange(256, dtype=np.int32)
    args = [
        BufferArg("x", x, "in"),
        BufferArg("out", np.zeros(4, np.int32), "out"),
        BufferArg("ballot", np.zeros(4, np.uint64), "out"),
    ]
    r = launch(cpu, HIP_WARP, "wave_sum", args, (2, 1, 1), (128, 1, 1))
    np.testing.assert_array_equal(r.outputs["out"], x.reshape(4, 64).sum(1))
    expected = sum(1 << j for j in range(64) if j % 3 == 0)  # lane j of each wave is thread j or 64 + j
    assert [int(v) for v in r.outputs["ballot"]] == [expected, sum(1 << j for j in range(64) if (64 + j) % 3 == 0)] * 2


COOPERATIVE = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void tile_sums(const float* x, float* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<16> tile = cg::tiled_partition<16>(block);
  float s = cg::reduce(tile, x[blockIdx.x * block.size() + block.thread_rank()], cg::plus<float>());
  block.sync();
  if (tile.thread_rank() == 0) out[blockIdx.x * tile.meta_group_size() + tile.meta_group_rank()] = s;
}
"""


def test_cooperative_groups_tiles(cpu: CpuRuntime) -> None:
    x = RNG.uniform(0, 1, 256).astype(np.float32)
    args = [BufferArg("x", x, "in"), BufferArg("out", np.zeros(16, np.float32), "out")]
    r = launch(cpu, COOPERATIVE, "tile_sums", args, (2, 1, 1), (128, 1, 1))
    np.testing.assert_allclose(r.outputs["out"], x.astype(np.float64).reshape(16, 16).sum(1), rtol=1e-5)


def test_unwritten_outputs_are_counted(cpu: CpuRuntime) -> None:
    src = "__global__ void evens(float* y, int* untouched) { y[2 * (blockIdx.x * blockDim.x + threadIdx.x)] = 1.0f; }"
    args = [BufferArg("y", np.zeros(512, np.float32), "out"), BufferArg("untouched", np.zeros(10, np.int32), "out")]
    r = launch(cpu, src, "evens", args, (2, 1, 1), (128, 1, 1))
    assert r.unwritten == {"y": 256, "untouched": 10}
    assert np.isnan(r.outputs["y"][1]) and r.outputs["y"][0] == 1.0


COPY = r"""
__global__ void strided_copy(int n, const float* __restrict__ in, float* __restrict__ out, int* counter) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[2 * i];
  if (threadIdx.x == 0) atomicAdd(counter, 1);
}
"""


def test_sector_traces_are_exact(cpu: CpuRuntime) -> None:
    n = 1000
    src = np.arange(2 * n, dtype=np.float32)
    args: list[Arg] = [
        ScalarArg("n", np.int32(n)),
        BufferArg("in", src, "in"),
        BufferArg("out", np.zeros(n, np.float32), "out"),
        BufferArg("counter", np.zeros(1, np.int32), "inout"),
    ]
    blocks = ((0, 0, 0), (3, 0, 0))
    r = launch(cpu, COPY, "strided_copy", args, (4, 1, 1), (256, 1, 1), trace_blocks=blocks)
    np.testing.assert_array_equal(r.outputs["out"], src[::2])
    assert [t.block for t in r.traces] == list(blocks)
    for trace in r.traces:
        first, last = trace.block[0] * 256, min(n, trace.block[0] * 256 + 256)
        assert trace.reads["in"] == {8 * i // 32 for i in range(first, last)}
        assert trace.writes["out"] == {4 * i // 32 for i in range(first, last)}
        assert trace.reads["out"] == frozenset() and trace.writes["in"] == frozenset()
        assert trace.reads["counter"] == trace.writes["counter"] == {0}
    assert r.traces[1].reads["in"] == set(range(192, 250))  # last block: 232 threads, stride 2


def test_cached_binary_is_reused(cpu: CpuRuntime) -> None:
    req = LaunchRequest(
        source=SAXPY,
        kernel="saxpy",
        params=(),
        args=(
            ScalarArg("n", np.int32(4)),
            ScalarArg("a", np.float32(1)),
            BufferArg("x", np.ones(4, np.float32), "in"),
            BufferArg("y", np.ones(4, np.float32), "inout"),
        ),
        grid=(1, 1, 1),
        block=(32, 1, 1),
    )
    exe = cpu.builder().cached_binary(cpu.unit_for(req))
    cpu.run(req)
    assert exe.exists()
    mtime = exe.stat().st_mtime_ns
    np.testing.assert_array_equal(cpu.run(req).outputs["y"], np.full(4, 2, np.float32))
    assert exe.stat().st_mtime_ns == mtime
    assert Path(exe).parent.parent == cpu.builder().cache_dir


ISOLATION = r"""
template <typename T>
__device__ T stash_and_reload(T v) {
  __shared__ T slot[64];
  slot[threadIdx.x] = v;
  __syncthreads();
  __nanosleep(10);  // let sibling threads run between the write and the read
  T r = slot[(threadIdx.x + 1) % blockDim.x];
  __syncthreads();
  return r;
}
__global__ void isolation(int* out) {
  int v = stash_and_reload<int>(blockIdx.x * 1000 + threadIdx.x);
  long long w = stash_and_reload<long long>(-(long long)blockIdx.x);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v + (int)w;
}
"""


def test_static_shared_memory_is_per_block_across_workers(cpu: CpuRuntime) -> None:
    blocks = 96
    r = launch(
        cpu,
        ISOLATION,
        "isolation",
        [BufferArg("out", np.zeros(blocks * 64, np.int32), "out")],
        (blocks, 1, 1),
        (64, 1, 1),
    )
    b, t = np.divmod(np.arange(blocks * 64), 64)
    np.testing.assert_array_equal(r.outputs["out"], b * 1000 + (t + 1) % 64 - b)


SCANS_AND_HALF_ATOMICS = r"""
#include <cooperative_groups.h>
#include <cooperative_groups/scan.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
namespace cg = cooperative_groups;
__global__ void scans(int* out, __half* h, __half2* h2, __nv_bfloat16* b) {
  auto tile = cg::tiled_partition<8>(cg::this_thread_block());
  int inclusive = cg::inclusive_scan(tile, 1);
  int exclusive = cg::exclusive_scan(tile, (int)tile.thread_rank(), cg::plus<int>());
  cg::sync(tile);
  out[threadIdx.x] = inclusive * 100 + exclusive;
  atomicAdd(h, __float2half(1.0f));
  atomicAdd(h2, __floats2half2_rn(1.0f, 2.0f));
  atomicAdd(b, __float2bfloat16(1.0f));
}
"""


def test_tile_scans_and_half_atomics(cpu: CpuRuntime) -> None:
    args = [
        BufferArg("out", np.zeros(64, np.int32), "out"),
        BufferArg("h", np.zeros(1, np.float16), "inout"),
        BufferArg("h2", np.zeros(2, np.float16), "inout"),
        BufferArg("b", np.zeros(1, np.uint16), "inout"),
    ]
    r = launch(cpu, SCANS_AND_HALF_ATOMICS, "scans", args, (1, 1, 1), (64, 1, 1))
    lane = np.arange(64) % 8
    np.testing.assert_array_equal(r.outputs["out"], (lane + 1) * 100 + lane * (lane - 1) // 2)
    np.testing.assert_array_equal(r.outputs["h"], [64])
    np.testing.assert_array_equal(r.outputs["h2"], [64, 128])
    assert (r.outputs["b"].astype(np.uint32) << 16).view(np.float32)[0] == 64


def test_hip_warp_size_can_be_overridden(cpu: CpuRuntime) -> None:
    src = (
        "#include <hip/hip_runtime.h>\n"
        "__global__ void k(int* o) { o[threadIdx.x] = warpSize * 1000 + __popcll(__ballot(1)); }"
    )
    for defines, expected in (((), 64064), (("KXFORM_CPU_WARP_SIZE=32",), 32032)):
        r = launch(
            cpu, src, "k", [BufferArg("o", np.zeros(64, np.int32), "out")], (1, 1, 1), (64, 1, 1), defines=defines
        )
        assert set(r.outputs["o"].tolist()) == {expected}


MACROS = r"""
#define R 2
#define P 3
#define F 1
#define I 0
#define T 4
#define run 5
#define count 6
#define size 7
#define args 8
#define is_ptr 9
__global__ void scale(int n, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] * (R + P + F + I + T + run + count + size + args + is_ptr);
}
"""


USER_MACROS = r"""#define T 32
#define R 1
#define N 4
#include <cuda_runtime.h>
#include <cuda_fp16.h>
__global__ void reduce(int n, const float* __restrict__ x, float* out) {
  __shared__ float s[T];
  int i = blockIdx.x * T + threadIdx.x;
  float v = i < n ? __ldg(&x[i]) * R : 0.0f;
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  s[threadIdx.x] = __half2float(__float2half(v));
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd(out, min(s[0], 1e9f) * (N / 4));
}
"""


def test_short_macro_names_in_the_source_do_not_reach_the_runtime(cpu: CpuRuntime) -> None:
    """`#define R 2` (a stencil radius) or `#define size 7` in the kernel's file compiles
    with nvcc, so it must on the CPU runtime too: its launch code is out of their reach."""
    y = np.arange(100, dtype=np.float32)
    result = launch(
        cpu, MACROS, "scale", (ScalarArg("n", np.int32(100)), BufferArg("y", y, "inout")), (2, 1, 1), (64, 1, 1)
    )
    np.testing.assert_array_equal(result.outputs["y"], y * 45)


def test_single_letter_user_macros_leave_the_runtime_alone(cpu: CpuRuntime) -> None:
    """A user's `#define T 32` before the includes: the runtime's own names are reserved
    ones (`_KxT`), so its templates and launch glue still read as written."""
    x, out = np.ones(100, np.float32), np.zeros(1, np.float32)
    params = (KernelParam("int", "n"), KernelParam("const float*", "x"), KernelParam("float*", "out"))
    args = (ScalarArg("n", np.int32(100)), BufferArg("x", x, "in"), BufferArg("out", out, "inout"))
    result = cpu.run(
        LaunchRequest(
            source=USER_MACROS,
            kernel="reduce",
            params=params,
            args=args,
            grid=(4, 1, 1),
            block=(32, 1, 1),
            label="reduce[user macros]",
        )
    )
    assert result.outputs["out"][0] == 100.0
