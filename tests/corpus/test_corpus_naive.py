"""The naive/expert corpus (corpora/naive/index.toml): manifest, specs, sources, nvcc
builds, and both versions of every pair verified against the NumPy reference on the CPU
runtime (the expensive checks are slow-marked).

The naive version is what kxform's passes start from, so its shape is checked (a host
launcher with a ceil-div grid and a literal or launcher-local block size); the expert
version is a yardstick only, never an input to a pass.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPORA, NVCC, needs_nvcc
from kxform.frontend.source import read_source, validate_bytes
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec
from kxform.runtime.base import Runtime
from kxform.verify.differential import verify_reference

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

NAIVE = CORPORA / "naive"
PAIRS: list[dict[str, Any]] = tomllib.loads((NAIVE / "index.toml").read_text(encoding="utf-8"))["pair"]
VERSIONS = ("naive", "expert")
KINDS = {"elementwise", "reduction", "normalization", "gemm", "transpose", "stencil"}
FIELDS = {"name", "family", "kind", "expert_use", "yardstick"} | {
    f"{v}{suffix}" for v in VERSIONS for suffix in ("", "_kernel", "_spec", "_style")
}
BENCH_MIN_BYTES = 3 * 60 * 10**6
"""A bench size moves several times the 60 MB L2 of an H200."""
MIN_FAMILIES = 14

_SPECS: dict[str, Any] = {}


def kernel_of(pair: dict[str, Any], version: str) -> KernelSpec:
    rel = pair[f"{version}_spec"]
    if rel not in _SPECS:
        _SPECS[rel] = load_spec(NAIVE / rel)
    return _SPECS[rel].kernel(pair[f"{version}_kernel"])


def pair_id(pair: dict[str, Any]) -> str:
    return str(pair["name"])


def cases() -> list[Any]:
    return [pytest.param(p, v, id=f"{p['name']}:{v}") for p in PAIRS for v in VERSIONS]


# ---------------------------------------------------------------- manifest


def test_manifest_covers_the_families() -> None:
    names = [p["name"] for p in PAIRS]
    assert len(names) == len(set(names))
    folders = {Path(p["naive"]).parts[0] for p in PAIRS}
    assert len(folders) >= MIN_FAMILIES
    on_disk = {d.name for d in NAIVE.iterdir() if d.is_dir() and not d.name.startswith((".", "_"))}
    assert on_disk == folders


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_manifest_entry_is_well_formed(pair: dict[str, Any]) -> None:
    keys = set(pair)
    assert keys >= FIELDS, f"missing {sorted(FIELDS - keys)}"
    assert keys <= FIELDS | {"cublas"}, f"unknown {sorted(keys - FIELDS - {'cublas'})}"
    assert pair["kind"] in KINDS
    assert pair["expert_use"] == "yardstick", "an expert version is a yardstick, never an input to a pass"
    assert pair["yardstick"] in ("copy", "cublas")
    assert ("cublas" in pair) == (pair["yardstick"] == "cublas")
    for version in VERSIONS:
        source = NAIVE / pair[version]
        assert source.is_file(), source
        text = source.read_text(encoding="utf-8")
        assert re.search(r"__global__[^;{}]*?\b" + re.escape(pair[f"{version}_kernel"]) + r"\s*\(", text)
        spec = load_spec(NAIVE / pair[f"{version}_spec"])
        assert spec.source.resolve() == source.resolve()


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_naive_version_is_written_as_people_write_it(pair: dict[str, Any]) -> None:
    """A host launcher in the file launches the kernel with a ceil-div grid (or one block
    per row, a size, where a block-stride loop walks the row) and a block size that is a
    literal or a launcher local (what the passes must handle)."""
    text = (NAIVE / pair["naive"]).read_text(encoding="utf-8")
    launch = re.search(re.escape(pair["naive_kernel"]) + r"<<<([^>]*)>>>", text)
    assert launch, "no launch of the naive kernel in its file"
    per_row = re.fullmatch(r"\s*[A-Za-z_]\w*\s*,.*", launch.group(1)) and "+= blockDim.x" in text
    ceil_div = re.search(r"\(\s*\w+(\s*\*\s*\w+)?\s*\+\s*(\w+(\.\w)?)\s*-\s*1\s*\)\s*/\s*\2", text)
    assert ceil_div or per_row, "no ceil-div grid, nor a block per row with a block-stride loop"
    assert re.search(r"const int block_size = \d+;|dim3 block\(\d+(, \d+)?\);", text), "no literal block size"
    assert "__shfl" not in text and "float4" not in text and "__shared__" not in text


@pytest.mark.parametrize("pair", PAIRS, ids=pair_id)
def test_expert_version_is_cooperative_or_vectorised(pair: dict[str, Any]) -> None:
    text = (NAIVE / pair["expert"]).read_text(encoding="utf-8")
    assert any(token in text for token in ("__shfl_xor_sync", "float4", "uint4", "__shared__"))
    prose = re.sub(r"\s*\n//\s*", " ", text)  # the header comment as one line
    assert "yardstick" in prose and "never an input to a pass" in prose


# ---------------------------------------------------------------- specs


@pytest.mark.parametrize(("pair", "version"), cases())
def test_spec_sizes_are_shared_ragged_and_large_enough(pair: dict[str, Any], version: str) -> None:
    kernel = kernel_of(pair, version)
    other = kernel_of(pair, "expert" if version == "naive" else "naive")
    assert [(s.name, s.bench, s.values) for s in kernel.sizes] == [(s.name, s.bench, s.values) for s in other.sizes]
    assert [a.name for a in kernel.args] == [a.name for a in other.args]
    assert kernel.reference == other.reference and kernel.reference is not None
    assert len(kernel.check_sizes) >= 2
    launches = [kernel.launch(size) for size in kernel.check_sizes]
    # several blocks along every grid dimension the kernel uses, at some check size
    for dim, _ in enumerate(kernel.grid):
        assert any(launch.grid[dim] >= 2 for launch in launches), f"grid dimension {dim} has one block"
    ragged = []
    for launch in launches:
        largest = max((a for a in launch.args if a.kind == "buffer" and a.role != "in"), key=lambda a: a.count)
        ragged.append(largest.count % launch.threads_per_block != 0)
    assert any(ragged), "every check size divides the block"
    for size in kernel.bench_sizes:
        moved = kernel.launch(size).total_bytes
        assert moved >= BENCH_MIN_BYTES, f"{size.name} moves only {moved / 1e6:.0f} MB"
    assert kernel.bench_sizes


@pytest.mark.parametrize(("pair", "version"), cases())
def test_tolerance_is_stated_in_the_spec(pair: dict[str, Any], version: str) -> None:
    kernel = kernel_of(pair, version)
    text = (NAIVE / pair[f"{version}_spec"]).read_text(encoding="utf-8")
    block = text.split(f"[kernel.{kernel.name}]", 1)[1].split("[[", 1)[0]
    assert re.search(r"^#.*\S", block, re.M), "the compare line needs the reason for its tolerance"
    if kernel.compare.mode == "allclose":
        assert 0 < kernel.compare.rtol <= 1e-2


# ---------------------------------------------------------------- nvcc


@pytest.fixture(scope="module")
def nvcc_results() -> dict[str, tuple[int, str]]:
    """Every source of the corpus compiled once for sm_90, in parallel."""
    if NVCC is None:
        pytest.skip("nvcc not found (set KXFORM_NVCC or put it on PATH)")
    sources = sorted({p[v] for p in PAIRS for v in VERSIONS})

    def build(rel: str) -> tuple[int, str]:
        done = subprocess.run(
            [str(NVCC), "-c", "-arch=sm_90", "-o", os.devnull, str(NAIVE / rel)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        return done.returncode, done.stderr

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(sources, pool.map(build, sources), strict=True))


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize(("pair", "version"), cases())
def test_compiles_with_nvcc(pair: dict[str, Any], version: str, nvcc_results: dict[str, tuple[int, str]]) -> None:
    code, log = nvcc_results[pair[version]]
    assert code == 0, log


# ---------------------------------------------------------------- verification


@pytest.fixture(scope="module")
def runtime(cpu: Runtime) -> Runtime:
    return cpu


@pytest.mark.slow
@pytest.mark.parametrize(("pair", "version"), cases())
def test_verifies_against_the_reference_on_the_cpu(pair: dict[str, Any], version: str, runtime: Runtime) -> None:
    kernel = kernel_of(pair, version)
    report = verify_reference(read_source(str(NAIVE / pair[version])), kernel, runtime)
    assert report.ok, report.summary()
    assert len(report.sizes) == len(kernel.check_sizes)


@pytest.fixture(scope="module")
def gpu() -> Runtime:
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    return runtime


@pytest.mark.gpu
@pytest.mark.parametrize(("pair", "version"), cases())
def test_verifies_against_the_reference_on_the_gpu(pair: dict[str, Any], version: str, gpu: Runtime) -> None:
    """The stated tolerances hold for the GPU's math too (FMA contraction, its expf/tanhf)."""
    kernel = kernel_of(pair, version)
    report = verify_reference(read_source(str(NAIVE / pair[version])), kernel, gpu)
    assert report.ok, report.summary()


def _planted(pair_name: str, old: str, new: str) -> tuple[Any, KernelSpec]:
    pair = next(p for p in PAIRS if p["name"] == pair_name)
    path = NAIVE / pair["expert"]
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1
    return validate_bytes(str(path), text.replace(old, new).encode()), kernel_of(pair, "expert")


@pytest.mark.slow
def test_a_dropped_term_is_outside_the_tolerance(runtime: Runtime) -> None:
    """The matvec tolerance (atol 1e-3 for cancelling dot products) still rejects a dot
    product missing its last term where the row length leaves a scalar tail."""
    source, kernel = _planted("matvec", "j < N; j += 32)", "j < N - 1; j += 32)")
    report = verify_reference(source, kernel, runtime)
    assert not report.ok
    assert {s.size for s in report.sizes if not s.ok} == {"odd-row"}  # the only size with a scalar tail


@pytest.mark.slow
def test_a_missing_vector_tail_is_rejected(runtime: Runtime) -> None:
    """An expert version that forgets the scalar tail after its float4 loop is caught."""
    source, kernel = _planted("gelu_f32", "for (int j = i; j < N; j++)", "for (int j = i; j < i; j++)")
    report = verify_reference(source, kernel, runtime)
    assert not report.ok
    assert all(not s.ok for s in report.sizes)
