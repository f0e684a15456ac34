"""The nvcc build driver: real nvcc builds, the ptxas report, errors, cache, compile database."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kxform.build import (
    Builder,
    BuildJob,
    KernelResources,
    build_failure,
    find_nvcc,
    first_error,
    load_compile_commands,
    nvcc_version,
)
from kxform.build.diagnostics import map_line, rewrite_log
from kxform.build.ptxas import parse_ptxas_info
from kxform.errors import BuildFailed, InputError

from conftest import NVCC, needs_nvcc

SAXPY = """\
__global__ void saxpy(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""

# 64 live accumulators under a 32-register cap: ptxas must spill.
SPILLER = """\
__global__ void spill(const float* in, float* out, int n) {
  float acc[64];
  #pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = in[threadIdx.x + i * n];
  #pragma unroll
  for (int k = 0; k < 8; ++k) {
    #pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + k + 1) % 64] + 1.0f;
  }
  float s = 0;
  #pragma unroll
  for (int i = 0; i < 64; ++i) s += acc[i];
  out[threadIdx.x] = s;
}

__global__ void local_array(const int* idx, float* out) {
  float buf[256];
  for (int i = 0; i < 256; ++i) buf[i] = i * 0.5f;
  out[threadIdx.x] = buf[idx[threadIdx.x] & 255];
}
"""

# Verbatim `nvcc -cubin -arch=sm_90 -Xptxas -v` output of nvcc 13.0 (V13.0.88) for SPILLER.
NVCC13_REPORT = """\
ptxas info    : Overriding maximum register limit 256 for '_Z11local_arrayPKiPf' with  32 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for '_Z5spillPKfPfi' with  32 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z11local_arrayPKiPf' for 'sm_90'
ptxas info    : Function properties for _Z11local_arrayPKiPf
    1024 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 0 barriers, 1024 bytes cumulative stack size
ptxas info    : Compile time = 15.561 ms
ptxas info    : Compiling entry function '_Z5spillPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z5spillPKfPfi
    640 bytes stack frame, 1544 bytes spill stores, 1640 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 640 bytes cumulative stack size
ptxas info    : Compile time = 60.590 ms
"""

# The form of CUDA 11/12 (constant banks, `A+B bytes` terms, a non-entry function).
OLDER_REPORT = """\
ptxas info    : 0 bytes gmem, 8 bytes cmem[3]
ptxas info    : Function properties for _Z4deepPfi
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z3bigPfi' for 'sm_80'
ptxas info    : Function properties for _Z3bigPfi
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, 4096+0 bytes smem, 364 bytes cmem[0], 8 bytes cmem[2]
"""


@pytest.fixture()
def builder(tmp_path: Path) -> Builder:
    if NVCC is None:
        pytest.skip("nvcc not found (set KXFORM_NVCC or put it on PATH)")
    return Builder(cache_dir=tmp_path / "cache", nvcc=NVCC, jobs=2)


# ---------------------------------------------------------------- ptxas report parser


def test_parses_nvcc13_report() -> None:
    local, spill = parse_ptxas_info(NVCC13_REPORT)
    assert local == KernelResources(
        "_Z11local_arrayPKiPf", "_Z11local_arrayPKiPf", registers=30, stack_bytes=1024, arch="sm_90"
    )
    assert (spill.registers, spill.spill_stores, spill.spill_loads, spill.stack_bytes) == (32, 1544, 1640, 640)


def test_parses_older_report_and_skips_non_entries() -> None:
    (big,) = parse_ptxas_info(OLDER_REPORT)
    assert big.mangled == "_Z3bigPfi" and big.arch == "sm_80"
    assert (big.registers, big.shared_bytes, big.constant_bytes) == (40, 4096, 372)
    assert (big.stack_bytes, big.spill_stores, big.spill_loads) == (8, 4, 4)


# ------------------------------------------------------------------------ real builds


@needs_nvcc
def test_nvcc_version_names_release() -> None:
    assert NVCC is not None
    assert "release" in nvcc_version(NVCC)


def test_find_nvcc_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-nvcc"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("KXFORM_NVCC", str(fake))
    assert find_nvcc() == str(fake)
    monkeypatch.setenv("KXFORM_NVCC", str(tmp_path / "missing"))
    assert find_nvcc() is None


@needs_nvcc
def test_builds_cubin_and_ptx(builder: Builder) -> None:
    cubin = builder.build_or_raise(BuildJob(SAXPY, "saxpy.cu", "cubin", "sm_90"))
    assert cubin.output is not None and cubin.output[:4] == b"\x7fELF"
    (res,) = cubin.resources
    assert res.mangled == "_Z5saxpyifPKfPf" and res.registers > 0 and res.arch == "sm_90"
    if builder.demangler:
        assert res.demangled.startswith("saxpy(")
    ptx = builder.build_or_raise(BuildJob(SAXPY, "saxpy.cu", "ptx", "sm_90"))
    assert ptx.output is not None and b".entry _Z5saxpyifPKfPf" in ptx.output
    check = builder.build_or_raise(BuildJob(SAXPY, "saxpy.cu", "check", "sm_80"))
    assert check.ok and check.output is None


@needs_nvcc
def test_resources_show_stack_and_spills(builder: Builder) -> None:
    result = builder.build_or_raise(BuildJob(SPILLER, "spill.cu", extra_flags=("-maxrregcount=32",)))
    by_name = {r.mangled: r for r in result.resources}
    assert by_name["_Z11local_arrayPKiPf"].stack_bytes >= 1024
    spill = by_name["_Z5spillPKfPfi"]
    assert spill.registers <= 32 and spill.spill_stores > 0 and spill.spill_loads > 0


@needs_nvcc
def test_syntax_error_maps_to_original_line(builder: Builder) -> None:
    source = "// inserted by a pass\n__global__ void k(int* p) {\n  p[0] = undefined_name;\n}\n"
    job = BuildJob(source, "orig/kernel.cu", line_map=(0, 41, 42, 43))
    result = builder.build(job)
    assert not result.ok and result.output is None
    assert "/tmp/" not in result.log and "orig/kernel.cu(42)" in result.log
    with pytest.raises(BuildFailed) as info:
        builder.build_or_raise(job)
    message = str(info.value)
    assert message.startswith('orig/kernel.cu:42: error: identifier "undefined_name" is undefined')
    assert "\n" not in message and "undefined_name" in info.value.log
    assert info.value.location is not None and info.value.location.line == 42


@needs_nvcc
def test_ptxas_error_has_no_line(builder: Builder) -> None:
    source = (
        "__global__ void k(char* o) { __shared__ char big[300000]; big[threadIdx.x] = 1;\n"
        "  __syncthreads(); o[0] = big[5]; }\n"
    )
    with pytest.raises(BuildFailed, match=r"^big\.cu: ptxas error\s*: Entry function .* uses too much shared data"):
        builder.build_or_raise(BuildJob(source, "big.cu"))


@needs_nvcc
def test_quoted_includes_resolve_from_source_dir(builder: Builder, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "helper.cuh").write_text("__device__ inline float twice(float v) { return 2 * v; }\n")
    source = '#include "helper.cuh"\n__global__ void k(float* p) { p[0] = twice(p[0]) * SCALE; }\n'
    job = BuildJob(source, "src/k.cu", source_dir=str(tmp_path / "src"), defines=("SCALE=3",))
    assert builder.build_or_raise(job).ok
    assert not builder.build(BuildJob(source, "src/k.cu", defines=("SCALE=3",))).ok


@needs_nvcc
def test_cache_hit_runs_no_nvcc(builder: Builder, tmp_path: Path) -> None:
    job = BuildJob(SAXPY, "saxpy.cu")
    first = builder.build(job)
    assert first.ok and not first.cached and builder.nvcc_calls == 1
    second = builder.build(job)
    assert second.cached and second.output == first.output and second.resources == first.resources
    assert builder.nvcc_calls == 1
    other = Builder(cache_dir=tmp_path / "cache", nvcc=NVCC)  # a new process sees it too
    assert other.build(job).cached and other.nvcc_calls == 0
    builder.build(BuildJob(SAXPY, "saxpy.cu", defines=("X=1",)))  # any option changes the key
    assert builder.nvcc_calls == 2


@needs_nvcc
def test_failures_and_corrupt_entries_are_not_served(builder: Builder, tmp_path: Path) -> None:
    bad = BuildJob("__global__ void k( {", "bad.cu")
    builder.build(bad)
    builder.build(bad)
    assert builder.nvcc_calls == 2
    job = BuildJob(SAXPY, "saxpy.cu")
    builder.build(job)
    for meta in (tmp_path / "cache").rglob("*.json"):
        meta.write_text("{ not json")
    again = builder.build(job)
    assert again.ok and not again.cached and builder.nvcc_calls == 4


@needs_nvcc
def test_uncached_builder_always_compiles(tmp_path: Path) -> None:
    builder = Builder(nvcc=NVCC, use_cache=False)
    builder.build(BuildJob(SAXPY))
    builder.build(BuildJob(SAXPY))
    assert builder.nvcc_calls == 2


@needs_nvcc
def test_build_many_in_parallel_keeps_order(builder: Builder) -> None:
    jobs = [BuildJob(f"__global__ void k{i}(float* p) {{ p[threadIdx.x] = {i}.0f; }}\n", f"k{i}.cu") for i in range(4)]
    results = builder.build_many([*jobs, jobs[0]])
    assert [r.ok for r in results] == [True] * 5
    assert [r.resources[0].mangled for r in results] == [f"_Z2k{i}Pf" for i in range(4)] + ["_Z2k0Pf"]
    assert builder.nvcc_calls == 4  # the duplicate was built once


@needs_nvcc
def test_timeout_kills_nvcc(tmp_path: Path) -> None:
    builder = Builder(cache_dir=tmp_path, nvcc=NVCC, timeout_s=0.05)
    result = builder.build(BuildJob(SAXPY))
    assert not result.ok and "timed out" in result.log


def test_job_validation() -> None:
    with pytest.raises(ValueError, match="output"):
        BuildJob(SAXPY, output="exe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="arch"):
        BuildJob(SAXPY, arch="hopper")
    assert BuildJob(SAXPY, filename="dir/my kernel.cpp").temp_name == "my_kernel.cu"


# --------------------------------------------------------------------- diagnostics


def test_map_line_uses_nearest_original_line() -> None:
    line_map = (0, 10, 0, 0, 11)
    assert [map_line(n, line_map) for n in range(1, 7)] == [1, 10, 10, 10, 11, 11]
    assert map_line(3, None) == 3


def test_rewrite_log_and_first_error_forms() -> None:
    log = "/tmp/x/k.cu(3): warning #177-D: unused\n/tmp/x/k.cu:4:7: error: expected ';'\n"
    text = rewrite_log(log, "/tmp/x/k.cu", "a.cu", (0, 0, 20, 21))
    assert text.splitlines() == ["a.cu(20): warning #177-D: unused", "a.cu:21:7: error: expected ';'"]
    diag = first_error(text)
    assert diag is not None and (diag.path, diag.line, diag.col) == ("a.cu", 21, 7)
    assert str(build_failure("a.cu", text)) == "a.cu:21: error: expected ';'"
    assert (
        str(build_failure("a.cu", "nvcc fatal   : Unsupported gpu architecture 'compute_1'\n"))
        == "a.cu: nvcc fatal : Unsupported gpu architecture 'compute_1'"
    )


# ---------------------------------------------------------------- compile database


def _write_db(folder: Path, entries: list[dict[str, object]]) -> Path:
    path = folder / "compile_commands.json"
    path.write_text(json.dumps(entries))
    return path


def test_compile_database_arguments_and_command(tmp_path: Path) -> None:
    (tmp_path / "cmake").mkdir()
    (tmp_path / "build").mkdir()
    (tmp_path / "cmake" / "includes.rsp").write_text("-I../gen -isystem ../third_party/cutlass/include\n")
    _write_db(
        tmp_path,
        [
            {
                "directory": str(tmp_path / "build"),
                "file": "../src/gemm.cu",
                "arguments": [
                    "/usr/local/cuda/bin/nvcc",
                    "-forward-unknown-to-host-compiler",
                    "-DUSE_FAST=1",
                    "-D",
                    "TILE=64",
                    "-I../include",
                    "-I",
                    "/abs/inc",
                    "--options-file",
                    "../cmake/includes.rsp",
                    "-O3",
                    "-std=c++17",
                    "--expt-relaxed-constexpr",
                    "--generate-code=arch=compute_90,code=[compute_90,sm_90]",
                    "-gencode",
                    "arch=compute_80,code=sm_80",
                    "-arch=sm_90",
                    "-x",
                    "cu",
                    "-rdc=true",
                    "-Xcompiler",
                    "-fPIC",
                    "-MD",
                    "-MT",
                    "x.o",
                    "-MF",
                    "x.o.d",
                    "-c",
                    "../src/gemm.cu",
                    "-o",
                    "CMakeFiles/gemm.dir/src/gemm.cu.o",
                ],
            },
            {
                "directory": str(tmp_path),
                "file": "host.cpp",
                "command": "/usr/bin/g++ -DHOST -Iinc -fPIC -Wall -std=c++20 -c host.cpp -o host.o",
            },
        ],
    )
    db = load_compile_commands(tmp_path)
    includes, defines, flags = db.flags_for(tmp_path / "src" / "gemm.cu")
    assert includes == (str(tmp_path / "include"), "/abs/inc", str(tmp_path / "gen"))
    assert defines == ("USE_FAST=1", "TILE=64")
    # Only flags that cannot run another program are taken; the rest is listed as ignored.
    assert flags == (
        "-isystem",
        str(tmp_path / "third_party/cutlass/include"),
        "-std=c++17",
        "--expt-relaxed-constexpr",
    )
    assert {"-forward-unknown-to-host-compiler", "-O3", "-Xcompiler -fPIC", "-fPIC", "-Wall"} <= set(db.ignored)
    host = db.flags_for(str(tmp_path / "host.cpp"))
    assert host == ((str(tmp_path / "inc"),), ("HOST",), ("-std=c++20",))
    assert tmp_path / "host.cpp" in db and db.get(tmp_path / "other.cu") is None
    # A header has no entry: it takes the flags of the file that includes it, or none.
    assert db.flags_for(tmp_path / "src" / "gemm.cuh", tmp_path / "src" / "gemm.cu") == db.flags_for(
        tmp_path / "src" / "gemm.cu"
    )
    assert db.flags_for(tmp_path / "src" / "lonely.cuh") == ((), (), ())


def test_compile_database_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="compile_commands.json: compilation database not found"):
        load_compile_commands(tmp_path)
    path = tmp_path / "compile_commands.json"
    path.write_text("[{")
    with pytest.raises(InputError, match=r"compile_commands\.json:1:\d+: invalid JSON"):
        load_compile_commands(path)
    path.write_text(json.dumps([{"directory": "/", "file": "a.cu"}]))
    with pytest.raises(InputError, match="neither 'arguments' nor 'command'"):
        load_compile_commands(path)
    path.write_text(json.dumps([{"directory": str(tmp_path), "file": "a.cu", "arguments": ["nvcc", "a.cu"]}]))
    with pytest.raises(InputError, match=r"no entry for .*b\.cu in .*compile_commands\.json"):
        load_compile_commands(path).flags_for(tmp_path / "b.cu")


@needs_nvcc
def test_compile_database_flags_build(builder: Builder, tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "cfg.h").write_text("#define FACTOR 2.0f\n")
    _write_db(
        tmp_path,
        [
            {
                "directory": str(tmp_path),
                "file": "k.cu",
                "arguments": [
                    shutil.which("nvcc") or "nvcc",
                    "-Iinc",
                    "-DEXTRA=1",
                    "-std=c++17",
                    "-c",
                    "k.cu",
                    "-o",
                    "k.o",
                ],
            }
        ],
    )
    includes, defines, flags = load_compile_commands(tmp_path).flags_for(tmp_path / "k.cu")
    source = '#include "cfg.h"\n__global__ void k(float* p) { p[0] *= FACTOR * EXTRA; }\n'
    job = BuildJob(source, "k.cu", include_dirs=includes, defines=defines, extra_flags=flags)
    assert builder.build_or_raise(job).ok
