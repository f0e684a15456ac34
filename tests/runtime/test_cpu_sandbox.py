"""The CPU runtime runs kernel code natively: what it refuses to run, and the box the
child runs in (no programs started, no writes outside its work directory, resource
limits), plus the out-of-bounds accesses its guard pages alone would miss."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, Unsupported
from kxform.runtime.cpu import CpuRuntime

from conftest import needs_nvcc, run_cli


def _run(cpu: CpuRuntime, source: str, args: tuple, block: int = 32, label: str = "probe"):  # type: ignore[no-untyped-def]
    return cpu.run(
        LaunchRequest(
            source=source,
            kernel="k",
            params=(),
            args=args,
            grid=(1, 1, 1),
            block=(block, 1, 1),
            label=label,
            timeout_s=60,
        )
    )


@needs_nvcc
def test_device_code_nvcc_rejects_is_never_run(cpu: CpuRuntime, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    src = textwrap.dedent(f"""\
        #include <cstdlib>
        __global__ void k(int* out) {{
            if (threadIdx.x == 0) out[0] = system("touch {marker}");
        }}
        """)
    with pytest.raises(Unsupported, match="nvcc does not accept"):
        _run(cpu, src, (BufferArg("out", np.zeros(1, np.int32), "out"),))
    assert not marker.exists()


def test_host_code_cannot_start_programs_or_write_outside_its_directory(cpu: CpuRuntime, tmp_path: Path) -> None:
    ran, written = tmp_path / "ran", tmp_path / "written"
    src = textwrap.dedent(f"""\
        #include <cstdio>
        #include <cstdlib>
        static int kx_started = std::system("touch {ran}");
        static int kx_wrote = [] {{ FILE* f = std::fopen("{written}", "w"); if (f) std::fclose(f); return 0; }}();
        __global__ void k(int* out) {{ out[threadIdx.x] = 7; }}
        """)
    result = _run(cpu, src, (BufferArg("out", np.zeros(32, np.int32), "out"),))
    assert (result.outputs["out"] == 7).all()  # the kernel itself still runs
    assert not ran.exists(), "host code started a program"
    from kxform.runtime.cpu.sandbox import sandbox_support

    if sandbox_support().filesystem:
        assert not written.exists(), "host code wrote outside the work directory"


def test_the_child_runs_under_a_memory_limit(cpu: CpuRuntime) -> None:
    src = textwrap.dedent("""\
        __global__ void k(int* out) {
            if (threadIdx.x == 0) {
                void* p = malloc(16ull << 30);
                out[0] = p != nullptr;
                free(p);
            }
        }
        """)
    result = _run(cpu, src, (BufferArg("out", np.full(1, 5, np.int32), "inout"),), block=1)
    assert result.outputs["out"][0] == 0  # a 16 GiB allocation is refused


@pytest.mark.parametrize(
    "kind, body, buffer, size",
    [
        ("write past the end", "p[10] = 1;", "out", 10),
        ("write before the start", "p[-1] = 1;", "out", 16),
        ("read before the start", "q[0] = p[-4];", "in", 64),
    ],
)
def test_out_of_bounds_accesses_the_guard_pages_miss(
    cpu: CpuRuntime, kind: str, body: str, buffer: str, size: int
) -> None:
    src = f"__global__ void k(unsigned char* p, unsigned char* q) {{\n  if (threadIdx.x == 0) {{ {body} }}\n}}\n"
    role = "in" if buffer == "in" else "inout"
    args = (BufferArg(buffer, np.zeros(size, np.uint8), role), BufferArg("q", np.zeros(4, np.uint8), "inout"))
    with pytest.raises(RuntimeError_, match=rf"out-of-bounds .*buffer '{buffer}'"):
        _run(cpu, src, args, block=1)


def test_in_bounds_accesses_at_both_ends_are_fine(cpu: CpuRuntime) -> None:
    src = (
        "__global__ void k(unsigned char* p, unsigned char* q) {\n"
        "  if (threadIdx.x == 0) { p[0] = q[0]; p[9] = q[3]; }\n}\n"
    )
    args = (BufferArg("p", np.zeros(10, np.uint8), "inout"), BufferArg("q", np.arange(4, dtype=np.uint8), "in"))
    out = _run(cpu, src, args, block=1).outputs["p"]
    assert out[0] == 0 and out[9] == 3


@pytest.mark.slow
@needs_nvcc
def test_plain_apply_never_runs_a_kernel_that_calls_system(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "k.cu").write_text(
        textwrap.dedent(f"""\
        #include <cstdlib>
        __global__ void k(float* out, int n) {{
            int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
            if (x == 0 && y == 0) system("touch {marker}");
            if (x < n && y < n) out[y * n + x] = 1.0f;
        }}
        """)
    )
    (tmp_path / "k.kxspec.toml").write_text(
        textwrap.dedent("""\
        version = 1
        file = "k.cu"
        [kernel.k]
        grid = ["ceil_div(n, 16)", "ceil_div(n, 16)"]
        block = [16, 16]
        [[kernel.k.args]]
        name = "out"
        kind = "buffer"
        dtype = "float32"
        role = "out"
        count = "n * n"
        [[kernel.k.args]]
        name = "n"
        kind = "scalar"
        dtype = "int32"
        value = "n"
        [[kernel.k.sizes]]
        name = "small"
        n = 32
        """)
    )
    proc = run_cli("apply", "--pass", "swizzle", "--verify", "cpu", "--check", "k.cu", cwd=tmp_path)
    assert not marker.exists(), proc.stderr
