"""The GPU runtime.

Three layers of tests:
- entry lookup and instantiation text with the real nvcc and demangler (no GPU);
- the parent/worker plumbing (requests over pipes, arrays inline and through files,
  parameter packing, poison, timeouts, crashes, worker reuse and replacement, sanitizer
  reports) against a stand-in `pycuda` written to a temp folder (no GPU);
- `@pytest.mark.gpu` tests on a real device, run by tools/gpu-check.sh.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kxform.build import Builder, BuildJob, find_demangler, instantiation_text, match_entry, ptx_entries
from kxform.build.entry import demangle, split_template
from kxform.runtime.base import (
    BufferArg,
    KernelParam,
    LaunchRequest,
    LaunchTimeout,
    RuntimeError_,
    ScalarArg,
    Unsupported,
)
from kxform.runtime.gpu import GpuRuntime, compile_kernel, sanitizer_error

from conftest import NVCC, needs_nvcc

SAXPY = """\
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
SAXPY_PARAMS = (
    KernelParam("int", "n"),
    KernelParam("float", "a"),
    KernelParam("const float*", "x"),
    KernelParam("float*", "y"),
)

KERNELS = (
    SAXPY
    + """
template <typename T, int SCALE>
__global__ void __launch_bounds__(256) scale(const T* __restrict__ x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * SCALE;
}

__global__ void half_fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 2) out[i] = 1.0f;
}

__global__ void fault(int* p) {
  int* bad = reinterpret_cast<int*>(0x10);
  bad[threadIdx.x] = p[0];
}

__global__ void expect_poison(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 1.0f;
}

__global__ void live_allocs(int* out) {
  out[0] = 0;
}

__global__ void spin(volatile int* flag) {
  while (flag[0] == 0) { }
}

__global__ void big_smem(float* out) {
  extern __shared__ float tile[];
  int n = 64 * 1024 / sizeof(float);
  for (int i = threadIdx.x; i < n; i += blockDim.x) tile[i] = i;
  __syncthreads();
  out[threadIdx.x] = tile[n - 1 - threadIdx.x];
}
"""
)


def saxpy_request(n: int = 1000, label: str = "saxpy[small]", seed: int = 0, **kw: object) -> LaunchRequest:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    args = (
        ScalarArg("n", np.int32(n)),
        ScalarArg("a", np.float32(2.5)),
        BufferArg("x", x, "in"),
        BufferArg("y", y, "inout"),
    )
    return LaunchRequest(KERNELS, "saxpy", SAXPY_PARAMS, args, ((n + 255) // 256, 1, 1), (256, 1, 1), label=label, **kw)  # type: ignore[arg-type]


def one_arg_request(kernel: str, arg: BufferArg, label: str, **kw: object) -> LaunchRequest:
    params = (KernelParam("int*", arg.name),)
    return LaunchRequest(KERNELS, kernel, params, (arg,), (1, 1, 1), (32, 1, 1), label=label, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- no GPU: entries


def test_split_template() -> None:
    assert split_template("ns::gemm<float, (N > 2), Tile<4, 4>>") == ("ns::gemm", ("float", "(N > 2)", "Tile<4, 4>"))
    assert split_template(" saxpy ") == ("saxpy", ())


def test_explicit_instantiation_text() -> None:
    params = ["const T* __restrict__", "T*", "int"]
    text = instantiation_text("scale<float, 3>", params, KERNELS)
    assert (
        text.strip().splitlines()[-1]
        == "template __global__ void scale<float, 3>(const float* __restrict__, float*, int);"
    )
    assert instantiation_text("saxpy", ["int"], KERNELS) == ""
    already = KERNELS + "template __global__ void scale< float,3 >(const float*, float*, int);\n"
    assert instantiation_text("scale<float, 3>", params, already) == ""
    packed = "template <typename... Ts> __global__ void v(Ts... xs) {}\n"
    assert "(void*)&v<int, float>" in instantiation_text("v<int, float>", ["Ts..."], packed)
    defaulted = "template <typename T, int N = 4 * sizeof(T)> __global__ void d(T* p) { p[0] = N; }\n"
    assert "void d<double>(double*);" in instantiation_text("d<double>", ["T*"], defaulted)
    unnamed = "template <typename T, int> __global__ void u(T* p) {}\n"
    assert "void u<int, 3>(int*);" in instantiation_text("u<int, 3>", ["T*"], unnamed)
    assert "(void*)&u<int, 3>" in instantiation_text("u<int, 3>", [], unnamed)  # parameters unknown


@needs_nvcc
def test_instantiated_entries_match_with_the_real_demangler(tmp_path: Path) -> None:
    builder = Builder(cache_dir=tmp_path, nvcc=NVCC)
    params = ["const T* __restrict__", "T*", "int"]
    source = (
        KERNELS
        + instantiation_text("scale<float, 3>", params, KERNELS)
        + instantiation_text("scale<unsigned, 2>", params, KERNELS)
        + "template <typename... Ts> __global__ void v(Ts... xs) {}\n"
    )
    source += instantiation_text("v<int, float>", ["Ts..."], source)
    ptx = builder.build_or_raise(BuildJob(source, "k.cu", "ptx", "sm_90"))
    assert ptx.output is not None
    entries = ptx_entries(ptx.output.decode())
    assert "_Z5scaleIfLi3EEvPKT_PS0_i" in entries and "_Z5saxpyifPKfPf" in entries
    tool = find_demangler(NVCC)
    if tool is None:
        pytest.skip("neither cu++filt nor c++filt is installed")
    names = dict(zip(entries, demangle(entries, tool), strict=True))
    assert match_entry("scale<float, 3>", names) == "_Z5scaleIfLi3EEvPKT_PS0_i"
    assert match_entry("scale < unsigned int, 2u >", names) == "_Z5scaleIjLi2EEvPKT_PS0_i"
    assert match_entry("saxpy", names) == "_Z5saxpyifPKfPf"
    assert match_entry("v<int, float>", names).startswith("_Z1vIJifEEvDpT_")
    with pytest.raises(Exception, match="ambiguous"):
        match_entry("scale", names)


@needs_nvcc
def test_compile_kernel_finds_the_template_entry(tmp_path: Path) -> None:
    params = (KernelParam("const T* __restrict__", "x"), KernelParam("T*", "y"), KernelParam("int", "n"))
    request = LaunchRequest(KERNELS, "scale<float, 3>", params, (), (1, 1, 1), (32, 1, 1))
    compiled = compile_kernel(Builder(cache_dir=tmp_path, nvcc=NVCC), request, "sm_90")
    assert compiled.entry == "_Z5scaleIfLi3EEvPKT_PS0_i" and compiled.cubin[:4] == b"\x7fELF"
    assert compiled.resources is not None and compiled.resources.registers > 0


@needs_nvcc
def test_compile_kernel_builds_a_hip_kernel_through_the_shim(tmp_path: Path) -> None:
    """A HIP unit (the corpus's naive SGEMM, as extraction hands it over) builds for an
    NVIDIA GPU: `hip/hip_runtime.h` comes from kxform's HIP-in-CUDA headers. Without
    them nvcc stops at the include, as it did on a GPU machine before."""
    from kxform.build.extract import extract_kernel
    from kxform.frontend.source import read_source

    path = Path(__file__).resolve().parents[2] / "corpora" / "hip_sgemm" / "sgemm_naive.hip"
    extracted = extract_kernel(read_source(path), "sgemm_naive")
    params = (
        KernelParam("const float* __restrict__", "A"),
        KernelParam("const float* __restrict__", "B"),
        KernelParam("float* __restrict__", "C"),
        KernelParam("int", "M"),
        KernelParam("int", "N"),
        KernelParam("int", "K"),
    )
    request = LaunchRequest(extracted.source, extracted.entry, params, (), (1, 1, 1), (16, 16, 1))
    compiled = compile_kernel(Builder(cache_dir=tmp_path, nvcc=NVCC), request, "sm_90")
    assert extracted.entry in compiled.entry and compiled.cubin[:4] == b"\x7fELF"
    plain = BuildJob(extracted.source, "kernel.cu", "cubin", "sm_90")  # the same unit without the shim
    assert "hip/hip_runtime.h" in Builder(cache_dir=tmp_path, nvcc=NVCC).build(plain).log


@needs_nvcc
def test_compile_kernel_falls_back_to_ptx_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    import kxform.build.nvcc as nvcc_module

    monkeypatch.setattr(nvcc_module, "parse_ptxas_info", lambda log: ())
    request = LaunchRequest(KERNELS, "saxpy", SAXPY_PARAMS, (), (1, 1, 1), (32, 1, 1))
    builder = Builder(nvcc=NVCC, use_cache=False)
    compiled = compile_kernel(builder, request, "sm_90")
    assert compiled.entry == "_Z5saxpyifPKfPf" and compiled.resources is None
    assert builder.nvcc_calls == 2  # the cubin, then the PTX for its entry names


def test_sanitizer_error_line() -> None:
    log = textwrap.dedent("""\
        ========= COMPUTE-SANITIZER
        ========= Invalid __global__ write of size 4 bytes
        =========     at fault(int *)+0x70
        =========     by thread (0,0,0) in block (0,0,0)
        ========= ERROR SUMMARY: 1 error
        """)
    assert sanitizer_error(log) == "Invalid __global__ write of size 4 bytes at fault(int *)+0x70"
    assert sanitizer_error("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == ""
    racecheck = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
    assert sanitizer_error(racecheck) == ""  # racecheck's clean tally is not a finding
    api_first = "========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719)\n" + log
    assert sanitizer_error(api_first).startswith("Invalid __global__ write")
    assert sanitizer_error("========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719)\n").startswith("Program hit")


# ------------------------------------------------- no GPU: plumbing with a stand-in

FAKE_DRIVER = '''
"""A stand-in for pycuda.driver: host memory, and kernels emulated by name."""
import os, struct, time
import numpy as np

_mem = {}
_next = [0x10000]
_pending = []


class _Alloc:
    def __init__(self, n):
        self.ptr = _next[0]
        _next[0] += n + 4096
        _mem[self.ptr] = np.zeros(n, np.uint8)

    def __int__(self):
        return self.ptr

    def free(self):
        del _mem[self.ptr]


def _view(ptr, dtype):
    return _mem[ptr].view(dtype)


class device_attribute:
    MULTIPROCESSOR_COUNT, L2_CACHE_SIZE, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 1, 2, 3


class function_attribute:
    MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def init(flags=0):
    if os.environ.get("FAKE_NO_DEVICE"):
        raise RuntimeError("cuInit failed: no CUDA-capable device is detected")


def get_driver_version():
    return 13000


class Context:
    def pop(self):
        pass

    @staticmethod
    def synchronize():
        if _pending:
            raise RuntimeError(_pending.pop())


class Device:
    @staticmethod
    def count():
        return 1

    def __init__(self, index):
        self.index = index

    def name(self):
        return "Stand-in GPU"

    def compute_capability(self):
        return (9, 0)

    def get_attribute(self, attr):
        return {1: 132, 2: 1 << 20, 3: 232448}[attr]

    def total_memory(self):
        return 1 << 30

    def make_context(self):
        if os.environ.get("FAKE_CONTEXT_FAILS"):
            raise RuntimeError("cuCtxCreate failed: out of memory")
        time.sleep(float(os.environ.get("FAKE_CONTEXT_SLEEP", "0")))
        return Context()


def mem_alloc(n):
    return _Alloc(n)


def memset_d8(dest, value, n):
    _mem[int(dest)][:n] = value


def memcpy_htod(dest, host):
    _mem[int(dest)][: host.nbytes] = host.view(np.uint8).reshape(-1)


def memcpy_dtoh(host, src):
    host.view(np.uint8).reshape(-1)[:] = _mem[int(src)][: host.nbytes]


def memcpy_dtod(dest, src, n):
    _mem[int(dest)][:n] = _mem[int(src)][:n]


class Event:
    def record(self, stream=None):
        self.t = time.perf_counter()
        return self

    def synchronize(self):
        Context.synchronize()
        return self

    def time_since(self, other):
        return (self.t - other.t) * 1e3 + 1e-3


def module_from_buffer(data):
    assert bytes(data[:4]) == b"\\x7fELF", "not a cubin"
    return _Module()


class _Module:
    def get_function(self, name):
        return _Function(name)


class _Function:
    def __init__(self, name):
        self.name = name

    def set_attribute(self, attr, value):
        assert attr == function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
        self.max_dynamic_smem = value

    def prepare(self, types):
        self.types = types
        return self

    def prepared_call(self, grid, block, *args, shared_size=0):
        params = args[0] if args else b""
        assert self.types == ([f"{len(params)}s"] if params else [])
        if shared_size > getattr(self, "max_dynamic_smem", 48 * 1024):
            raise RuntimeError("cuLaunchKernel failed: invalid argument")
        if "saxpy" in self.name:
            n, a = struct.unpack_from("<if", params, 0)
            x, y = struct.unpack_from("<QQ", params, 8)
            _view(y, np.float32)[:n] = np.float32(a) * _view(x, np.float32)[:n] + _view(y, np.float32)[:n]
        elif "half_fill" in self.name:
            out, n = struct.unpack_from("<Qi", params, 0)
            _view(out, np.float32)[: n // 2] = 1.0
        elif "expect_poison" in self.name:
            out, n = struct.unpack_from("<Qi", params, 0)
            if not np.all(_view(out, np.uint8)[: 4 * n] == 0xFF):
                _pending.append("out buffer not poisoned before the launch")
            _view(out, np.float32)[:n] = 1.0
        elif "live_allocs" in self.name:
            (out,) = struct.unpack_from("<Q", params, 0)
            _view(out, np.int32)[0] = len(_mem)
        elif "fault" in self.name:
            _pending.append("cuCtxSynchronize failed: an illegal memory access was encountered")
        elif "spin" in self.name:
            while True:
                time.sleep(1)
        elif "crash" in self.name:
            os.abort()
'''

FAKE_SANITIZER = """#!/bin/sh
# Stand-in compute-sanitizer: runs the command, then reports one memcheck error.
shift 2
"$@"
echo "========= COMPUTE-SANITIZER"
echo "========= Invalid __global__ write of size 4 bytes"
echo "=========     at fault(int *)+0x70"
echo "========= ERROR SUMMARY: 1 error"
exit 99
"""


@pytest.fixture()
def fake_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GpuRuntime]:
    """A runtime whose child imports the stand-in pycuda; real nvcc builds the cubins."""
    if NVCC is None:
        pytest.skip("nvcc not found")
    package = tmp_path / "fake" / "pycuda"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('VERSION_TEXT = "stand-in"\n')
    (package / "driver.py").write_text(FAKE_DRIVER)
    monkeypatch.syspath_prepend(str(tmp_path / "fake"))
    path = os.pathsep.join(filter(None, [str(tmp_path / "fake"), os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    with GpuRuntime(Builder(cache_dir=tmp_path / "cache", nvcc=NVCC), startup_timeout_s=60) as runtime:
        yield runtime


@needs_nvcc
def test_fake_probe_and_saxpy(fake_gpu: GpuRuntime) -> None:
    assert fake_gpu.available() == (True, "ok")
    info = fake_gpu.device_info()
    assert (info.name, info.arch, info.sm_count) == ("Stand-in GPU", "sm_90", 132)
    request = saxpy_request(1000)
    result = fake_gpu.run(request)
    x, y = request.args[2].data, request.args[3].data  # type: ignore[union-attr]
    np.testing.assert_array_equal(result.outputs["y"], np.float32(2.5) * x + y)
    assert result.outputs["y"].dtype == np.float32 and result.unwritten == {"y": 0}
    assert result.runtime == "gpu" and result.elapsed_ms is not None and result.elapsed_ms > 0


@needs_nvcc
def test_fake_unwritten_outputs_are_counted(fake_gpu: GpuRuntime) -> None:
    out = BufferArg("out", np.zeros(100, np.float32), "out")
    request = LaunchRequest(
        KERNELS,
        "half_fill",
        (KernelParam("float*", "out"), KernelParam("int", "n")),
        (out, ScalarArg("n", np.int32(100))),
        (1, 1, 1),
        (128, 1, 1),
        label="half",
    )
    result = fake_gpu.run(request)
    assert result.unwritten == {"out": 50}
    assert np.all(result.outputs["out"][:50] == 1.0) and np.all(np.isnan(result.outputs["out"][50:]))


@needs_nvcc
def test_fake_fault_names_label_and_parent_survives(fake_gpu: GpuRuntime) -> None:
    request = one_arg_request("fault", BufferArg("p", np.zeros(4, np.int32), "in"), "fault[tiny] rewritten")
    with pytest.raises(RuntimeError_) as info:
        fake_gpu.run(request)
    message = str(info.value)
    cause = "cuCtxSynchronize failed: an illegal memory access was encountered"
    assert message == f"fault[tiny] rewritten: sync failed: {cause}"
    assert fake_gpu.run(saxpy_request(10)).unwritten == {"y": 0}


@needs_nvcc
def test_fake_hang_is_killed_after_timeout(fake_gpu: GpuRuntime) -> None:
    request = one_arg_request("spin", BufferArg("flag", np.zeros(1, np.int32), "in"), "spin[1]", timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(LaunchTimeout, match=r"^spin\[1\]: timed out after 1 s \(kernel hung or too slow\); killed$"):
        fake_gpu.run(request)
    assert time.monotonic() - started < 30


@needs_nvcc
def test_fake_crash_is_reported(fake_gpu: GpuRuntime, tmp_path: Path) -> None:
    source = "__global__ void crash(int* p) { p[0] = 1; }\n"
    args = (BufferArg("p", np.zeros(1, np.int32), "out"),)
    request = LaunchRequest(source, "crash", (KernelParam("int*", "p"),), args, (1, 1, 1), (1, 1, 1), label="crash[x]")
    with pytest.raises(RuntimeError_, match=r"^crash\[x\]: child process died \(SIGABRT\)"):
        fake_gpu.run(request)


@needs_nvcc
def test_fake_build_error_names_label(fake_gpu: GpuRuntime) -> None:
    source = "__global__ void k(int* p) { p[0] = nope; }\n"
    request = LaunchRequest(source, "k", (), (), (1, 1, 1), (1, 1, 1), label="k[v2]")
    with pytest.raises(RuntimeError_, match=r"^k\[v2\]: build failed: kernel\.cu:1: error: identifier \"nope\""):
        fake_gpu.run(request)


@needs_nvcc
def test_fake_large_dynamic_shared_memory(fake_gpu: GpuRuntime) -> None:
    out = BufferArg("out", np.zeros(32, np.float32), "out")
    request = LaunchRequest(
        KERNELS,
        "big_smem",
        (KernelParam("float*", "out"),),
        (out,),
        (1, 1, 1),
        (32, 1, 1),
        shared_bytes=64 * 1024,
        label="smem",
    )
    fake_gpu.run(request)  # the stand-in refuses the launch unless the attribute was raised


@needs_nvcc
def test_fake_argument_checks(fake_gpu: GpuRuntime) -> None:
    too_much = LaunchRequest(
        KERNELS,
        "big_smem",
        (KernelParam("float*", "out"),),
        (BufferArg("out", np.zeros(4, np.float32), "out"),),
        (1, 1, 1),
        (32, 1, 1),
        shared_bytes=300_000,
        label="smem[huge]",
    )
    with pytest.raises(RuntimeError_, match=r"^smem\[huge\]: 300000 bytes of dynamic shared memory exceed"):
        fake_gpu.run(too_much)
    untyped = LaunchRequest(
        KERNELS,
        "half_fill",
        (KernelParam("float*", "out"), KernelParam("int", "n")),
        (BufferArg("out", np.zeros(4, np.float32), "out"), ScalarArg("n", 4)),  # type: ignore[arg-type]
        (1, 1, 1),
        (32, 1, 1),
        label="half[int]",
    )
    with pytest.raises(RuntimeError_, match=r"^half\[int\]: argument n: pass a NumPy scalar"):
        fake_gpu.run(untyped)


@needs_nvcc
def test_fake_timing_rotates_and_flushes(fake_gpu: GpuRuntime) -> None:
    timed = fake_gpu.time(saxpy_request(1000), warmup=2, repeat=5, flush_l2=True)
    assert len(timed.samples_ms) == 5 and all(t > 0 for t in timed.samples_ms)
    assert timed.outputs == {}  # not asked for
    with pytest.raises(ValueError):
        fake_gpu.time(saxpy_request(10), repeat=0)


@needs_nvcc
def test_fake_sanitizer_report(fake_gpu: GpuRuntime, tmp_path: Path) -> None:
    script = tmp_path / "compute-sanitizer"
    script.write_text(FAKE_SANITIZER)
    script.chmod(0o755)
    runtime = GpuRuntime(fake_gpu.builder, sanitize=True, sanitizer=str(script))
    expected = r"^saxpy\[s\]: compute-sanitizer: Invalid __global__ write of size 4 bytes at fault"
    with pytest.raises(RuntimeError_, match=expected):
        runtime.run(saxpy_request(10, label="saxpy[s]"))


@needs_nvcc
def test_fake_no_device(fake_gpu: GpuRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NO_DEVICE", "1")
    runtime = GpuRuntime(fake_gpu.builder)
    assert runtime.available() == (False, "no CUDA device")
    with pytest.raises(Unsupported, match=r"^saxpy\[small\]: gpu runtime unavailable: no CUDA device$"):
        runtime.run(saxpy_request())


def _gone(pid: int) -> bool:
    """Whether process `pid` has exited and been reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def live_allocs_request() -> LaunchRequest:
    return one_arg_request("live_allocs", BufferArg("out", np.zeros(1, np.int32), "out"), "live")


@needs_nvcc
def test_fake_worker_is_reused(fake_gpu: GpuRuntime) -> None:
    assert fake_gpu.worker_pid is None  # started lazily
    fake_gpu.run(saxpy_request(10))
    pid = fake_gpu.worker_pid
    assert pid is not None and not _gone(pid)
    fake_gpu.run(saxpy_request(20, seed=1))
    fake_gpu.time(saxpy_request(30), warmup=1, repeat=2)
    assert fake_gpu.worker_pid == pid


@needs_nvcc
def test_fake_worker_frees_device_memory_between_requests(fake_gpu: GpuRuntime) -> None:
    assert fake_gpu.run(live_allocs_request()).outputs["out"][0] == 1  # its own buffer only
    fake_gpu.run(saxpy_request(100_000))
    fake_gpu.time(saxpy_request(1000), warmup=1, repeat=3, flush_l2=True)
    assert fake_gpu.run(live_allocs_request()).outputs["out"][0] == 1


@pytest.mark.parametrize("n", [100, 200_000])  # inline, and through memory-mapped files
@needs_nvcc
def test_fake_arrays_cross_inline_and_through_files(fake_gpu: GpuRuntime, n: int) -> None:
    request = saxpy_request(n, seed=n)
    x, y = request.args[2].data, request.args[3].data  # type: ignore[union-attr]
    result = fake_gpu.run(request)
    np.testing.assert_array_equal(result.outputs["y"], np.float32(2.5) * x + y)
    assert result.outputs["y"].flags.writeable and result.outputs["y"].flags.aligned
    out = BufferArg("out", np.zeros(n, np.float32), "out")
    half = LaunchRequest(
        KERNELS,
        "half_fill",
        (KernelParam("float*", "out"), KernelParam("int", "n")),
        (out, ScalarArg("n", np.int32(n))),
        (1, 1, 1),
        (128, 1, 1),
        label="half",
    )
    assert fake_gpu.run(half).unwritten == {"out": n - n // 2}
    scratch = fake_gpu._scratch_dir()
    assert sorted(p.name for p in scratch.iterdir()) == ["worker.log"]  # no staged array left behind
    fake_gpu.close()
    assert not scratch.exists()


@needs_nvcc
def test_fake_every_launch_sees_poisoned_outputs(fake_gpu: GpuRuntime) -> None:
    for n in (64, 100_000):
        out = BufferArg("out", np.zeros(n, np.float32), "out")
        request = LaunchRequest(
            KERNELS,
            "expect_poison",
            (KernelParam("float*", "out"), KernelParam("int", "n")),
            (out, ScalarArg("n", np.int32(n))),
            (1, 1, 1),
            (64, 1, 1),
            label="poison",
        )
        assert fake_gpu.run(request).unwritten == {"out": 0}
        # more launches than rotated copies (at most 8): the stand-in fails an unpoisoned launch
        timed = fake_gpu.time(request, warmup=2, repeat=10, keep_outputs=True)
        assert len(timed.samples_ms) == 10
        # the last timed launch's outputs come back (inline and through files) for re-checking
        np.testing.assert_array_equal(timed.outputs["out"], np.ones(n, np.float32))


@needs_nvcc
def test_fake_worker_replaced_after_crash(fake_gpu: GpuRuntime) -> None:
    fake_gpu.run(saxpy_request(10))
    first = fake_gpu.worker_pid
    assert first is not None
    source = "__global__ void crash(int* p) { p[0] = 1; }\n"
    args = (BufferArg("p", np.zeros(1, np.int32), "out"),)
    crash = LaunchRequest(source, "crash", (KernelParam("int*", "p"),), args, (1, 1, 1), (1, 1, 1), label="crash[y]")
    with pytest.raises(RuntimeError_, match=r"^crash\[y\]: child process died \(SIGABRT\)"):
        fake_gpu.run(crash)
    assert fake_gpu.worker_pid is None and _gone(first)
    assert fake_gpu.run(saxpy_request(10)).unwritten == {"y": 0}
    second = fake_gpu.worker_pid
    assert second is not None and second != first


@needs_nvcc
def test_fake_worker_replaced_after_cuda_error(fake_gpu: GpuRuntime) -> None:
    fake_gpu.run(saxpy_request(10))
    first = fake_gpu.worker_pid
    request = one_arg_request("fault", BufferArg("p", np.zeros(4, np.int32), "in"), "fault[w]")
    with pytest.raises(RuntimeError_, match=r"^fault\[w\]: sync failed: .*illegal memory access"):
        fake_gpu.run(request)
    assert first is not None and fake_gpu.worker_pid is None and _gone(first)
    fake_gpu.run(saxpy_request(10))
    assert fake_gpu.worker_pid not in (None, first)


@needs_nvcc
def test_fake_worker_replaced_after_timeout(fake_gpu: GpuRuntime) -> None:
    fake_gpu.run(saxpy_request(10))
    first = fake_gpu.worker_pid
    spin = one_arg_request("spin", BufferArg("flag", np.zeros(1, np.int32), "in"), "spin[w]", timeout_s=0.5)
    with pytest.raises(LaunchTimeout, match=r"^spin\[w\]: timed out after 0.5 s \(kernel hung or too slow\); killed$"):
        fake_gpu.run(spin)
    assert first is not None and fake_gpu.worker_pid is None and _gone(first)
    with pytest.raises(LaunchTimeout, match=r"^spin\[w\]: timed out after 1 s"):  # 2 launches x 0.5 s
        fake_gpu.time(spin, warmup=1, repeat=1)
    assert fake_gpu.run(saxpy_request(10)).unwritten == {"y": 0}
    assert fake_gpu.worker_pid not in (None, first)


@needs_nvcc
def test_fake_worker_start_failures(fake_gpu: GpuRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fake_gpu.available() == (True, "ok")
    monkeypatch.setenv("FAKE_CONTEXT_FAILS", "1")
    with pytest.raises(RuntimeError_, match=r"^saxpy\[small\]: init failed: cuCtxCreate failed: out of memory$"):
        fake_gpu.run(saxpy_request())
    assert fake_gpu.worker_pid is None
    monkeypatch.delenv("FAKE_CONTEXT_FAILS")
    monkeypatch.setenv("FAKE_CONTEXT_SLEEP", "30")
    slow = GpuRuntime(fake_gpu.builder, startup_timeout_s=2)
    expected = r"^saxpy\[small\]: timed out after 2 s before the launch \(context creation or module load hung\)"
    with pytest.raises(LaunchTimeout, match=expected):
        slow.run(saxpy_request())
    assert slow.worker_pid is None
    monkeypatch.delenv("FAKE_CONTEXT_SLEEP")
    assert slow.run(saxpy_request()).unwritten == {"y": 0}
    slow.close()


@needs_nvcc
def test_fake_close_and_context_manager(fake_gpu: GpuRuntime) -> None:
    with GpuRuntime(fake_gpu.builder) as runtime:
        runtime.run(saxpy_request(10))
        pid = runtime.worker_pid
        assert pid is not None
    assert runtime.worker_pid is None and _gone(pid)
    runtime.close()  # twice is fine
    runtime.run(saxpy_request(10))  # and the runtime stays usable
    again = runtime.worker_pid
    assert again is not None and again != pid
    del runtime  # dropping the runtime stops its worker
    import gc

    gc.collect()
    assert _gone(again)


@needs_nvcc
def test_fake_worker_launch_overhead(fake_gpu: GpuRuntime) -> None:
    """A launch through a warm worker is a pipe round trip, not a process start."""
    request = saxpy_request(1000)
    fake_gpu.run(request)
    started = time.perf_counter()
    for _ in range(20):
        fake_gpu.run(request)
    per_launch = (time.perf_counter() - started) / 20
    assert per_launch < 0.05, f"{per_launch * 1e3:.1f} ms per launch"


def test_without_pycuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pycuda" else real(name, *a))
    assert GpuRuntime().available() == (False, "pycuda is not installed: pip install 'kxform[gpu]'")


# ------------------------------------------------------------------- on a real GPU


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuRuntime]:
    if NVCC is None:
        pytest.skip("nvcc not found")
    runtime = GpuRuntime(Builder(cache_dir=tmp_path_factory.mktemp("nvcc-cache"), nvcc=NVCC))
    ok, reason = runtime.available()
    if not ok:
        pytest.skip(reason)
    with runtime:
        yield runtime


@pytest.mark.gpu
@needs_nvcc
def test_cuxxfilt_demangles_real_entries(tmp_path: Path) -> None:
    """Runs with the GPU suite because cu++filt ships with full CUDA toolkits, not pip's nvcc."""
    tool = find_demangler(NVCC)
    if tool is None or not tool.endswith("cu++filt"):
        pytest.skip("cu++filt not found beside nvcc or on PATH")
    source = KERNELS + instantiation_text("scale<float, 3>", ["const T* __restrict__", "T*", "int"], KERNELS)
    ptx = Builder(cache_dir=tmp_path, nvcc=NVCC).build_or_raise(BuildJob(source, "k.cu", "ptx", "sm_90"))
    assert ptx.output is not None
    entries = ptx_entries(ptx.output.decode())
    names = dict(zip(entries, demangle(entries, tool), strict=True))
    assert match_entry("scale<float, 3>", names) == "_Z5scaleIfLi3EEvPKT_PS0_i"
    assert match_entry("saxpy", names) == "_Z5saxpyifPKfPf"


@pytest.mark.gpu
def test_gpu_saxpy_matches_numpy(gpu: GpuRuntime) -> None:
    for n in (1, 1000, 1 << 20):
        request = saxpy_request(n, label=f"saxpy[{n}]", seed=n)
        x, y = request.args[2].data, request.args[3].data  # type: ignore[union-attr]
        result = gpu.run(request)
        np.testing.assert_allclose(result.outputs["y"], np.float32(2.5) * x + y, rtol=1e-6, atol=1e-6)
        assert result.unwritten == {"y": 0}


@pytest.mark.gpu
def test_gpu_template_instantiation(gpu: GpuRuntime) -> None:
    x = np.arange(300, dtype=np.float64)
    params = (KernelParam("const T* __restrict__", "x"), KernelParam("T*", "y"), KernelParam("int", "n"))
    args = (BufferArg("x", x, "in"), BufferArg("y", np.zeros_like(x), "out"), ScalarArg("n", np.int32(300)))
    request = LaunchRequest(KERNELS, "scale<double, 7>", params, args, (2, 1, 1), (256, 1, 1), label="scale<double,7>")
    result = gpu.run(request)
    np.testing.assert_array_equal(result.outputs["y"], x * 7)


@pytest.mark.gpu
def test_gpu_unwritten_outputs_counted(gpu: GpuRuntime) -> None:
    out = BufferArg("out", np.zeros(1000, np.float32), "out")
    request = LaunchRequest(
        KERNELS,
        "half_fill",
        (KernelParam("float*", "out"), KernelParam("int", "n")),
        (out, ScalarArg("n", np.int32(1000))),
        (4, 1, 1),
        (256, 1, 1),
        label="half_fill",
    )
    assert gpu.run(request).unwritten == {"out": 500}


@pytest.mark.gpu
def test_gpu_illegal_address_reported_and_process_survives(gpu: GpuRuntime) -> None:
    request = one_arg_request("fault", BufferArg("p", np.ones(4, np.int32), "in"), "fault[tiny] rewritten")
    with pytest.raises(RuntimeError_) as info:
        gpu.run(request)
    message = str(info.value)
    assert message.startswith("fault[tiny] rewritten: ") and "\n" not in message
    assert "illegal" in message or "launch failure" in message
    assert gpu.run(saxpy_request(100)).unwritten == {"y": 0}  # this process still works


@pytest.mark.gpu
def test_gpu_infinite_loop_killed(gpu: GpuRuntime) -> None:
    request = one_arg_request("spin", BufferArg("flag", np.zeros(1, np.int32), "in"), "spin[forever]", timeout_s=2.0)
    started = time.monotonic()
    with pytest.raises(LaunchTimeout, match=r"^spin\[forever\]: timed out after 2 s"):
        gpu.run(request)
    assert time.monotonic() - started < 60
    assert gpu.run(saxpy_request(100)).unwritten == {"y": 0}


@pytest.mark.gpu
def test_gpu_large_dynamic_shared_memory(gpu: GpuRuntime) -> None:
    out = BufferArg("out", np.zeros(128, np.float32), "out")
    request = LaunchRequest(
        KERNELS,
        "big_smem",
        (KernelParam("float*", "out"),),
        (out,),
        (1, 1, 1),
        (128, 1, 1),
        shared_bytes=64 * 1024,
        label="big_smem",
    )
    n = 64 * 1024 // 4
    np.testing.assert_array_equal(gpu.run(request).outputs["out"], np.arange(n - 1, n - 129, -1, dtype=np.float32))


@pytest.mark.gpu
def test_gpu_timing_positive_medians(gpu: GpuRuntime) -> None:
    request = saxpy_request(1 << 22, label="saxpy[4M]")
    for flush in (False, True):
        timed = gpu.time(request, warmup=3, repeat=10, flush_l2=flush)
        assert len(timed.samples_ms) == 10 and min(timed.samples_ms) > 0
        assert statistics.median(timed.samples_ms) > 0
        assert timed.persisting_l2_bytes == 0  # the carveout is capped while timing


@pytest.mark.gpu
def test_gpu_sanitizer_reports_first_error(gpu: GpuRuntime) -> None:
    runtime = GpuRuntime(gpu.builder, sanitize=True)
    ok, reason = runtime.available()
    if not ok:
        pytest.skip(reason)
    request = one_arg_request("fault", BufferArg("p", np.ones(4, np.int32), "in"), "fault[sanitized]", timeout_s=120.0)
    with pytest.raises(RuntimeError_, match=r"^fault\[sanitized\]: compute-sanitizer: .*Invalid __global__ write"):
        runtime.run(request)


def test_importing_the_runtime_does_not_import_pycuda() -> None:
    code = "import sys, kxform.runtime.gpu; print('pycuda' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
