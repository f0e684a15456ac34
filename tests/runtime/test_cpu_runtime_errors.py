"""CPU runtime: what it refuses, and how launches that go wrong are reported."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pytest

from kxform.runtime.base import (
    Arg,
    BufferArg,
    KernelParam,
    LaunchRequest,
    LaunchResult,
    LaunchTimeout,
    RuntimeError_,
    ScalarArg,
    Unsupported,
)
from kxform.runtime.cpu import CpuOptions, CpuRuntime


def out_buffer(n: int = 64) -> list[Arg]:
    return [BufferArg("out", np.zeros(n, np.int32), "out")]


def launch(
    cpu: CpuRuntime,
    source: str,
    args: Sequence[Arg] | None = None,
    block: int = 64,
    label: str = "probe[64]",
    **kw: object,
) -> LaunchResult:
    return cpu.run(
        LaunchRequest(
            source=source,
            kernel="k",
            params=(),
            args=tuple(args or out_buffer()),
            grid=(1, 1, 1),
            block=(block, 1, 1),
            label=label,
            **kw,
        )
    )  # type: ignore[arg-type]


# ------------------------------------------------------------------ barrier divergence
def test_barrier_skipped_by_some_threads_is_reported_not_hung(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out) {\n  if (threadIdx.x < 16)\n    __syncthreads();\n  out[threadIdx.x] = 1;\n}\n"
    start = time.monotonic()
    with pytest.raises(LaunchTimeout, match=r"^probe\[64\]: barrier divergence .*wait at __syncthreads \(line 3\)"):
        launch(cpu, src, timeout_s=30)
    assert time.monotonic() - start < 10  # detected by the scheduler, not by the timeout


def test_threads_exiting_before_a_barrier_are_reported(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out) {\n  if (threadIdx.x >= 40) return;\n  __syncthreads();\n  out[0] = 1;\n}"
    with pytest.raises(LaunchTimeout, match=r"thread \(40,0,0\) exited while 40 thread\(s\) wait at __syncthreads"):
        launch(cpu, src)


def test_different_barriers_on_one_line_are_divergence(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out) { if (threadIdx.x % 2) { __syncthreads(); } else { __syncthreads(); } }"
    with pytest.raises(LaunchTimeout, match="another barrier on the same line"):
        launch(cpu, src)


def test_warp_collective_deadlock_names_both_sides(cpu: CpuRuntime) -> None:
    src = (
        "__global__ void k(int* out) {\n  int v = threadIdx.x;\n"
        "  if (threadIdx.x < 16) v = __shfl_sync(0xffffffff, v, 0);\n  __syncthreads();\n  out[threadIdx.x] = v;\n}"
    )
    with pytest.raises(
        LaunchTimeout,
        match=r"deadlock in block \(0,0,0\): 48 thread\(s\) wait at __syncthreads "
        r"\(line 4\); lanes 0xffff of warp 0 wait at __shfl_sync \(line 3\)",
    ):
        launch(cpu, src)


def test_endless_loop_hits_the_timeout(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out) { volatile int spin = 1; while (spin) {} }"
    with pytest.raises(LaunchTimeout, match=r"did not finish within 1 s"):
        launch(cpu, src, timeout_s=1.0)


@pytest.mark.slow
def test_spin_wait_on_a_sibling_thread_makes_progress(cpu: CpuRuntime) -> None:
    src = """__global__ void k(int* out) {
  __shared__ volatile int flag;
  if (threadIdx.x == 0) flag = 0;
  __syncthreads();
  if (threadIdx.x == 0) { while (flag == 0) __nanosleep(100); out[0] = flag; }
  if (threadIdx.x == 63) flag = 7;
}"""
    assert launch(cpu, src, timeout_s=10).outputs["out"][0] == 7


# ------------------------------------------------------------------ unsupported features
def test_inline_asm_is_unsupported_with_its_line(cpu: CpuRuntime) -> None:
    src = (
        '__global__ void k(int* out) {\n  unsigned lane;\n  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));\n'
        "  out[threadIdx.x] = lane;\n}\n"
    )
    expected = r"^cannot run on the CPU runtime: uses inline assembly \(asm\) at probe\[64\]:3$"
    with pytest.raises(Unsupported, match=expected):
        launch(cpu, src)


def test_wmma_runs_and_an_unemulated_fragment_type_is_unsupported(cpu: CpuRuntime) -> None:
    """Half-precision fragments are emulated (tests/test_cpu_wmma.py); int8 ones are not,
    and that is "unsupported", never a failed launch."""
    emulated = (
        "#include <mma.h>\nusing namespace nvcuda;\n__global__ void k(int* out) {\n"
        "  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;\n"
        "  out[threadIdx.x] = a.num_elements;\n}\n"
    )
    assert (launch(cpu, emulated).outputs["out"] > 0).all()
    int8 = emulated.replace("half, wmma::row_major", "signed char, wmma::row_major")
    with pytest.raises(Unsupported, match=r"cannot run on the CPU runtime: uses this nvcuda::wmma element type"):
        launch(cpu, int8)


def test_asm_behind_a_macro_is_found_and_dead_branches_are_not(cpu: CpuRuntime) -> None:
    hidden = (
        '#define LANE(v) asm("mov.u32 %0, %%laneid;" : "=r"(v))\n__global__ void k(int* out) {\n  int v; LANE(v);\n}\n'
    )
    with pytest.raises(Unsupported, match=r"at probe\[64\]:3$"):
        launch(cpu, hidden)
    dead = (
        '#if __CUDA_ARCH__ < 500\n#define LANE(v) asm("mov.u32 %0, %%laneid;" : "=r"(v))\n#else\n'
        '#define LANE(v) v = threadIdx.x % 32\n#endif\n// asm("in a comment")\n'
        "__global__ void k(int* out) { int v; LANE(v); out[threadIdx.x] = v; }\n"
    )
    np.testing.assert_array_equal(launch(cpu, dead).outputs["out"], np.arange(64) % 32)


@pytest.mark.parametrize(
    ("body", "feature"),
    [
        ("cudaTextureObject_t t; (void)t;", "texture fetches"),
        ("cooperative_groups::this_grid().sync();", "grid-wide cooperative-groups synchronisation"),
        ("auto g = cooperative_groups::coalesced_threads(); (void)g;", "coalesced cooperative groups"),
    ],
)
def test_other_unsupported_features(cpu: CpuRuntime, body: str, feature: str) -> None:
    src = f"#include <cooperative_groups.h>\n__global__ void k(int* out) {{\n  {body}\n}}\n"
    with pytest.raises(Unsupported, match=rf"uses {feature}.* at probe\[64\]:3$"):
        launch(cpu, src)


@pytest.mark.slow
def test_a_gpu_library_header_the_kernel_uses_is_unsupported(cpu: CpuRuntime) -> None:
    src = "#include <cub/cub.cuh>\n__global__ void k(int* out) { cub::WarpReduce<int>::TempStorage t; (void)t; }\n"
    with pytest.raises(Unsupported, match=r"uses <cub/cub.cuh> \(not emulated\) at probe\[64\]:1"):
        launch(cpu, src)


# ------------------------------------------------------------------ faults and bad launches
@pytest.mark.slow
def test_out_of_bounds_write_is_a_clear_error(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out) { out[threadIdx.x + 64] = 1; }"
    with pytest.raises(RuntimeError_) as err:
        launch(cpu, src, label="oob_write[n=64] rewritten")
    message = str(err.value)
    assert "\n" not in message
    # Caught by the bounds check at the store, with the thread (the guard page is the fallback).
    assert message.startswith("oob_write[n=64] rewritten: out-of-bounds write of 4 bytes")
    assert "byte offset 256 of buffer 'out' (256 bytes) in thread (0,0,0) of block (0,0,0)" in message
    assert not isinstance(err.value, (Unsupported, LaunchTimeout))


@pytest.mark.slow
def test_failed_device_assert_names_the_condition(cpu: CpuRuntime) -> None:
    src = "#include <cassert>\n__global__ void k(int* out) {\n  assert(threadIdx.x < 10);\n}\n"
    expected = r"device assertion `threadIdx.x < 10` failed at probe\[64\]:3 in thread \(10,0,0\)"
    with pytest.raises(RuntimeError_, match=expected):
        launch(cpu, src)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("volatile int zero = 0; out[threadIdx.x] = 5 / zero;", r"arithmetic exception .* in thread \(0,0,0\)"),
        ("if (threadIdx.x == 3) __trap();", r"__trap\(\) at line 1 in thread \(3,0,0\) of block \(0,0,0\)"),
    ],
)
def test_traps_name_the_thread(cpu: CpuRuntime, body: str, message: str) -> None:
    with pytest.raises(RuntimeError_, match=message):
        launch(cpu, f"__global__ void k(int* out) {{ {body} }}")


@pytest.mark.parametrize("offset", [0, 1])
def test_a_vector_load_hint_must_be_aligned_to_its_type_as_on_the_gpu(cpu: CpuRuntime, offset: int) -> None:
    """The host would read a misaligned float4 silently; the GPU faults, and so does the emulation."""
    src = (
        "__global__ void k(const float* x, float* out) {\n"
        "  float4 v = __ldg(reinterpret_cast<const float4*>(&x[4 * threadIdx.x + OFF]));\n"
        "  out[threadIdx.x] = v.x + v.w;\n}\n"
    ).replace("OFF", str(offset))
    args = [BufferArg("x", np.arange(260, dtype=np.float32), "in"), BufferArg("out", np.zeros(64, np.float32), "out")]
    if offset == 0:
        out = launch(cpu, src, args).outputs["out"]
        np.testing.assert_array_equal(out, np.arange(64, dtype=np.float32) * 8 + 3)
        return
    with pytest.raises(RuntimeError_, match=r"misaligned address: __ldg .* at line 2 in thread \(0,0,0\)"):
        launch(cpu, src, args)


@pytest.mark.slow
def test_compile_error_reports_the_first_error_line(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out) {\n  out[0] = not_declared_anywhere;\n}\n"
    expected = r"^probe\[64\]: compile error: probe\[64\]:2:\d+: error: .*not_declared_anywhere"
    with pytest.raises(RuntimeError_, match=expected):
        launch(cpu, src)


@pytest.mark.slow
def test_argument_that_does_not_match_the_kernel(cpu: CpuRuntime) -> None:
    src = "__global__ void k(int* out, int n) { out[0] = n; }"
    with pytest.raises(RuntimeError_, match="argument 2: the kernel parameter has 4 bytes but the scalar given has 8"):
        launch(cpu, src, args=[*out_buffer(), ScalarArg("n", np.int64(3))])
    with pytest.raises(RuntimeError_, match="takes 2 parameter"):
        launch(cpu, src)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"block": (2048, 1, 1)}, "more than 1024"),
        ({"grid": (0, 1, 1)}, "must be positive"),
        ({"trace_blocks": ((1, 0, 0),)}, "outside the grid"),
        ({"params": (KernelParam("int", "out"),)}, "is a buffer but parameter 'int out' is not"),
    ],
)
def test_malformed_requests_are_rejected(cpu: CpuRuntime, change: dict[str, object], message: str) -> None:
    fields: dict[str, object] = {
        "source": "__global__ void k(int* out) {}",
        "kernel": "k",
        "params": (),
        "args": tuple(out_buffer()),
        "grid": (1, 1, 1),
        "block": (64, 1, 1),
        "label": "bad",
    }
    fields.update(change)
    with pytest.raises(RuntimeError_, match=message):
        cpu.run(LaunchRequest(**fields))  # type: ignore[arg-type]


def test_unavailable_without_a_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CXX", raising=False)
    ok, why = CpuRuntime(CpuOptions(cxx="/nonexistent/g++")).available()
    assert not ok and "no host C++ compiler" in why
