"""Kernel extraction: one kernel and what it needs, no host code, original line numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc
from kxform.errors import UsageError
from kxform.build.extract import extract_kernel, split_spelling
from kxform.frontend.source import validate_bytes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST = tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]

SRC = """#include <cstdio>
#define TILE 8
template <typename T, int N = 4>
__global__ void __launch_bounds__(64) scale(T* x, T a) { x[blockIdx.x * N + threadIdx.x] *= a; }
__global__ void other(int* p) { p[0] = 1; }
int main() { float* x; scale<float><<<1, 4>>>(x, 2.f); return 0; }
"""


def test_template_instantiation_gets_a_concrete_extern_c_entry() -> None:
    ext = extract_kernel(validate_bytes("k.cu", SRC.encode()), "scale<float>")
    assert ext.entry == "kxform_entry_scale"
    assert [(p.ctype, p.name) for p in ext.params] == [("float*", "x"), ("float", "a")]
    assert 'extern "C" __global__ void __launch_bounds__(64) kxform_entry_scale(float* x, float a)' in ext.source
    assert "scale<float>(x, a);" in ext.source
    assert "__device__ __forceinline__ void  scale(T* x, T a)" in ext.source
    assert "int main" not in ext.source and "void other" not in ext.source
    lines = ext.source.splitlines()
    assert lines[3].startswith("__device__ __forceinline__ void")  # line 4 stays line 4
    assert ext.path == "k.cu"


@pytest.mark.parametrize(
    ("spelling", "message"),
    [
        ("scale", "is a template"),
        ("scale<float, 4, 2>", "takes 2 template arguments"),
        ("nope", "no kernel named 'nope'"),
        ("other<int>", "not a template"),
    ],
)
def test_bad_spellings_are_usage_errors(spelling: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        extract_kernel(validate_bytes("k.cu", SRC.encode()), spelling)


def test_split_spelling_keeps_nested_arguments() -> None:
    assert split_spelling("k<Tile<2, 3>, (4 > 3)>") == ("k", ["Tile<2, 3>", "(4 > 3)"])


@needs_nvcc
@pytest.mark.parametrize(
    "entry", [e for e in MANIFEST if e.get("nvcc", True) and e["swizzle"] != "input-error"], ids=lambda e: e["name"]
)
def test_every_corpus_kernel_extracts_to_a_unit_nvcc_builds(entry: dict, tmp_path: Path) -> None:
    from kxform.build.builder import Builder
    from kxform.build.nvcc import BuildJob

    path = CORPORA / entry["path"]
    ext = extract_kernel(validate_bytes(str(path), path.read_bytes()), entry["kernel"])
    result = Builder(cache_dir=tmp_path).build(
        BuildJob(ext.source, filename=str(path), output="ptx", arch="sm_90", source_dir=str(path.parent))
    )
    assert result.ok, result.log
    assert f".entry {ext.entry}(" in result.output.decode()


WINDOWS_ENTRY = """#include <cuda_runtime.h>
#ifdef _WIN32
#include <windows.h>
BOOL WINAPI DllMain(HINSTANCE instance, DWORD reason, LPVOID reserved) { return TRUE; }
#endif
__global__ void scale(float* out, int n) { if (threadIdx.x < n) out[threadIdx.x] *= 2.0f; }
"""


@needs_nvcc
def test_a_syntax_error_in_host_code_the_unit_drops_does_not_block_extraction(tmp_path: Path) -> None:
    from kxform.build.builder import Builder
    from kxform.build.nvcc import BuildJob

    source = validate_bytes(str(tmp_path / "win.cu"), WINDOWS_ENTRY.encode())
    unit = extract_kernel(source, "scale")  # DllMain: dropped with the host code
    assert "__device__ __forceinline__ void scale" in unit.source
    result = Builder(cache_dir=tmp_path).build(
        BuildJob(unit.source, filename=str(tmp_path / "win.cu"), output="ptx", arch="sm_90", source_dir=str(tmp_path))
    )
    assert result.ok, result.log


def test_a_syntax_error_in_the_kernel_or_before_it_still_blocks_extraction(tmp_path: Path) -> None:
    from kxform.errors import InputError

    inside = WINDOWS_ENTRY.replace("*= 2.0f;", "*= = 2.0f;")
    with pytest.raises(InputError, match="syntax error; cannot extract a kernel"):
        extract_kernel(validate_bytes(str(tmp_path / "a.cu"), inside.encode()), "scale")
