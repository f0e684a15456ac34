"""Buffers placed in one another or at an offset of their allocation (runtime arenas, a
spec size's `layout`), and typed accesses checked for alignment on the CPU runtime: two
arguments that overlap see each other's stores, a 16-byte vector load at a 4-byte offset
fails as it does on a GPU (x86 would run it), and the GPU runtime's staging passes a
view as its arena's pointer plus the offset (checked without a GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from kxform.harness.placement import place
from kxform.harness.spec import load_spec
from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, ScalarArg
from kxform.runtime.cpu import CpuRuntime

PREFIX_SUM = r"""
#include <cuda_runtime.h>
__global__ void k(float* y, const float* x, int n)
{
    if (threadIdx.x == 0)
        for (int j = 1; j < n; j++)
            y[j] = y[j] + x[j];
}
"""

WIDE_COPY = r"""
#include <cuda_runtime.h>
__global__ void k(float* out, const float* in)
{
    reinterpret_cast<uint4*>(out)[threadIdx.x] = reinterpret_cast<const uint4*>(in)[threadIdx.x];
}
"""


def _request(source: str, args: tuple, arenas: tuple = (), block: int = 32) -> LaunchRequest:
    return LaunchRequest(
        source=source,
        kernel="k",
        params=(),
        args=args,
        arenas=arenas,
        grid=(1, 1, 1),
        block=(block, 1, 1),
        label="placed",
    )


@pytest.mark.slow
def test_two_arguments_in_one_arena_see_each_others_stores(cpu: CpuRuntime) -> None:
    arena = np.arange(9, dtype=np.float32)  # x is y shifted one element back: y[j] += y[j - 1]
    args = (
        BufferArg("y", np.zeros(8, np.float32), "inout", arena="A", offset=4),
        BufferArg("x", np.zeros(8, np.float32), "in", arena="A", offset=0),
        ScalarArg("n", np.int32(8)),
    )
    result = cpu.run(_request(PREFIX_SUM, args, (BufferArg("A", arena.view(np.uint8), "inout"),)))
    np.testing.assert_array_equal(result.outputs["y"], np.cumsum(arena[1:]))


@pytest.mark.slow
def test_a_misaligned_vector_access_fails_as_on_a_gpu(cpu: CpuRuntime) -> None:
    data = np.arange(40, dtype=np.float32)
    aligned = (BufferArg("out", np.zeros(32, np.float32), "out"), BufferArg("in", data[:32].copy(), "in"))
    np.testing.assert_array_equal(cpu.run(_request(WIDE_COPY, aligned, block=8)).outputs["out"], data[:32])
    arena = BufferArg("A", data.view(np.uint8), "inout")
    shifted = (aligned[0], BufferArg("in", data[:32].copy(), "in", arena="A", offset=4))
    with pytest.raises(RuntimeError_, match=r"misaligned address: .*uint4.*alignment 16.*byte offset 4 of buffer 'A'"):
        cpu.run(_request(WIDE_COPY, shifted, (arena,), block=8))


def test_a_layout_places_buffers_in_an_arena_with_the_roots_values_on_top() -> None:
    spec = load_spec(ROOT / "tests" / "fixtures" / "contracts" / "alias" / "rscan.kxspec.toml").kernels["rscan"]
    resolved = spec.launch("in-place")
    y = np.full(resolved.arg("y").shape, 2.0, np.float32)
    x = np.full(resolved.arg("x").shape, 7.0, np.float32)
    args, arenas = place(resolved, [BufferArg("y", y, "inout"), BufferArg("x", x, "in")])
    (arena,) = arenas
    assert {a.name: (a.arena, a.offset) for a in args} == {"y": ("y@arena", 0), "x": ("y@arena", 0)}
    assert arena.data.nbytes == y.nbytes and (arena.data.view(np.float32) == 2.0).all()


def test_a_misaligned_layout_leads_the_buffer_with_slack() -> None:
    spec = load_spec(ROOT / "corpora" / "naive" / "gelu_f32" / "naive.kxspec.toml").kernels["gelu_f32_naive"]
    resolved = spec.launch("misaligned")
    out = np.zeros(resolved.arg("out").shape, np.float32)
    inp = np.ones(resolved.arg("inp").shape, np.float32)
    args, arenas = place(resolved, [BufferArg("out", out, "out"), BufferArg("inp", inp, "in")])
    assert {a.name: a.offset for a in args} == {"out": 12, "inp": 4}
    assert {a.name: a.data.nbytes for a in arenas} == {"out@arena": out.nbytes + 12, "inp@arena": inp.nbytes + 4}


def test_the_gpu_staging_passes_a_view_as_its_arenas_pointer_plus_the_offset(tmp_path: Path) -> None:
    from kxform.runtime import gpu_child
    from kxform.runtime.gpu_worker import _Staging

    arena = np.arange(9, dtype=np.float32)
    request = _request(
        PREFIX_SUM,
        (
            BufferArg("y", np.zeros(8, np.float32), "inout", arena="A", offset=4),
            BufferArg("x", np.zeros(8, np.float32), "in", arena="A", offset=0),
            ScalarArg("n", np.int32(8)),
        ),
        (BufferArg("A", arena.view(np.uint8), "inout"),),
    )
    staging = _Staging(tmp_path, 1 << 20, "t_")
    job = staging.args(request, "placed", True)
    assert [a.get("view") for a in job] == [3, 3, None, None] and job[3]["param"] is False
    buffers = [None, None, None, 0x10000]  # the arena's device address
    packed = gpu_child._pack(job, buffers)
    assert packed[:16] == (0x10004).to_bytes(8, "little") + (0x10000).to_bytes(8, "little")
    returned = (arena + 1).view(np.uint8).tobytes()
    outputs, _ = staging.outputs(request, {3: returned}, True)
    np.testing.assert_array_equal(outputs["y"], arena[1:] + 1)
