"""The kernel corpus: manifest consistency, specs, references and nvcc builds.

Everything is driven by corpora/index.toml, so adding a kernel is adding an entry.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from conftest import NVCC, needs_nvcc
from kxform.harness.inputs import make_inputs
from kxform.harness.model import HarnessSpec, KernelSpec
from kxform.harness.reference import run_reference
from kxform.harness.spec import load_spec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CORPORA = Path(__file__).resolve().parents[2] / "corpora"
MANIFEST = CORPORA / "index.toml"
ENTRIES: list[dict[str, Any]] = tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["kernel"]

KINDS = {
    "gemm",
    "elementwise",
    "reduction",
    "normalization",
    "sparse",
    "transpose",
    "stencil",
    "wavefront",
    "scan",
    "attention",
    "distance",
}
SWIZZLE = {"applies", "refused", "input-error"}
REASONS = {"spin-wait", "grid-sync", "syntax-error"}
REQUIRED = {"name", "path", "kernel", "kind", "grid_dims", "nvcc", "swizzle", "description"}
OPTIONAL = {"spec", "reason", "tile", "tile_reason"}
L2_BYTES = 60 * 10**6
BENCH_MIN_BYTES = 3 * L2_BYTES
"""A bench size must move several times the 60 MB L2 of an H200."""

NVCC_FLAGS = ("-c", "-arch=sm_90", "-o", os.devnull)


def entry_id(entry: dict[str, Any]) -> str:
    return str(entry["name"])


SPEC_ENTRIES = [e for e in ENTRIES if "spec" in e]
SPEC_PATHS = sorted({e["spec"] for e in SPEC_ENTRIES})


def _load(rel: str) -> HarnessSpec:
    return load_spec(CORPORA / rel)


SPECS: dict[str, HarnessSpec] = {}


def spec_of(rel: str) -> HarnessSpec:
    """Each spec loaded once per session (loading resolves every size)."""
    if rel not in SPECS:
        SPECS[rel] = _load(rel)
    return SPECS[rel]


def all_kernels() -> Iterator[tuple[str, KernelSpec]]:
    for rel in SPEC_PATHS:
        for kernel in spec_of(rel).kernels.values():
            yield rel, kernel


def check_cases() -> list[Any]:
    return [
        pytest.param(rel, kernel.name, size.name, id=f"{Path(rel).parent}:{kernel.name}:{size.name}")
        for rel, kernel in all_kernels()
        for size in kernel.check_sizes
    ]


# ---------------------------------------------------------------- manifest


def test_manifest_names_are_unique() -> None:
    names = [e["name"] for e in ENTRIES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_manifest_entry_is_well_formed(entry: dict[str, Any]) -> None:
    keys = set(entry)
    assert keys >= REQUIRED, f"missing {sorted(REQUIRED - keys)}"
    assert keys <= REQUIRED | OPTIONAL, f"unknown {sorted(keys - REQUIRED - OPTIONAL)}"
    assert entry["kind"] in KINDS
    assert entry["grid_dims"] in (1, 2, 3)
    assert isinstance(entry["nvcc"], bool)
    assert entry["swizzle"] in SWIZZLE
    if entry["swizzle"] == "applies":
        assert "reason" not in entry
    else:
        assert entry.get("reason") in REASONS
    assert entry["description"].strip() and "\n" not in entry["description"]
    source = CORPORA / entry["path"]
    assert source.is_file(), source
    if source.suffix == ".hip":
        assert entry["nvcc"] is False, "HIP sources cannot be compiled with nvcc"
    if entry["swizzle"] == "input-error":
        assert "spec" not in entry and entry["nvcc"] is False


@pytest.mark.parametrize("entry", ENTRIES, ids=entry_id)
def test_manifest_kernel_is_defined_in_source(entry: dict[str, Any]) -> None:
    text = (CORPORA / entry["path"]).read_text(encoding="utf-8")
    base = entry["kernel"].split("<", 1)[0].strip()
    assert re.search(r"__global__[^;{}]*?\b" + re.escape(base) + r"\s*\(", text), base
    if "<" in entry["kernel"]:
        assert re.search(r"template\s*<[^>]*>\s*__global__[^;{}]*?\b" + re.escape(base), text)


@pytest.mark.parametrize("entry", SPEC_ENTRIES, ids=entry_id)
def test_manifest_matches_its_spec(entry: dict[str, Any]) -> None:
    spec = spec_of(entry["spec"])
    assert spec.source.resolve() == (CORPORA / entry["path"]).resolve()
    assert entry["kernel"] in spec.kernels, f"spec kernels: {list(spec.kernels)}"
    kernel = spec.kernels[entry["kernel"]]
    assert len(kernel.grid) == entry["grid_dims"]
    assert kernel.description.strip()


def test_every_spec_kernel_has_a_manifest_entry() -> None:
    listed = {(e["spec"], e["kernel"]) for e in SPEC_ENTRIES}
    for rel, kernel in all_kernels():
        assert (rel, kernel.name) in listed, f"{rel}: {kernel.name} is not in index.toml"


def test_every_corpus_folder_is_listed() -> None:
    listed = {Path(e["path"]).parts[0] for e in ENTRIES}
    # a folder with its own index.toml is a corpus of its own (corpora/naive: tests/test_corpus_naive.py)
    folders = {
        p.name
        for p in CORPORA.iterdir()
        if p.is_dir() and not p.name.startswith((".", "_")) and not (p / "index.toml").is_file()
    }
    assert folders == listed
    specs = {
        str(p.relative_to(CORPORA)) for p in CORPORA.glob("*/*.kxspec.toml") if not (p.parent / "index.toml").is_file()
    }
    assert specs == set(SPEC_PATHS)


# ---------------------------------------------------------------- specs


@pytest.mark.parametrize("rel", SPEC_PATHS)
def test_spec_loads_with_check_and_bench_sizes(rel: str) -> None:
    for kernel in spec_of(rel).kernels.values():
        assert kernel.reference is not None
        assert len(kernel.check_sizes) >= 2, f"{kernel.name}: needs several correctness sizes"
        assert kernel.bench_sizes, f"{kernel.name}: needs a bench size"
        for size in kernel.bench_sizes:
            moved = kernel.launch(size).total_bytes
            assert moved >= BENCH_MIN_BYTES, f"{kernel.name}[{size.name}] moves only {moved / 1e6:.0f} MB"


@pytest.mark.parametrize("rel", SPEC_PATHS)
def test_spec_has_a_ragged_size(rel: str) -> None:
    """Some correctness size leaves a partial block: its largest output is not a whole number of blocks."""
    for kernel in spec_of(rel).kernels.values():
        ragged = []
        for size in kernel.check_sizes:
            launch = kernel.launch(size)
            largest = max((a for a in launch.args if a.role != "in" and a.kind == "buffer"), key=lambda a: a.count)
            ragged.append(largest.count % launch.threads_per_block != 0)
        assert any(ragged), f"{kernel.name}: every size divides the block"


@pytest.mark.parametrize(("rel", "kernel_name", "size_name"), check_cases())
def test_reference_runs_on_every_check_size(rel: str, kernel_name: str, size_name: str) -> None:
    kernel = spec_of(rel).kernel(kernel_name)
    launch = kernel.launch(size_name)
    inputs = make_inputs(kernel, launch)
    expected = run_reference(kernel, launch, inputs)
    outputs = {a.name: a for a in launch.args if a.kind == "buffer" and a.role != "in"}
    assert set(expected) == set(outputs)
    for name, arg in outputs.items():
        assert expected[name].shape == arg.shape
        assert expected[name].dtype == inputs[name].dtype
    poison = {name: inputs[name] for name, arg in outputs.items() if arg.role == "out"}
    for name, value in poison.items():
        assert expected[name].tobytes() != value.tobytes(), f"{name}: reference left the poison"


# ---------------------------------------------------------------- nvcc


def _compile(source: Path) -> tuple[int, str]:
    proc = subprocess.run(
        [str(NVCC), *NVCC_FLAGS, str(source)], capture_output=True, text=True, timeout=300, check=False
    )
    return proc.returncode, proc.stderr


@pytest.fixture(scope="session")
def nvcc_results() -> dict[str, tuple[int, str]]:
    """Compile every .cu source of the corpus once, in parallel."""
    if NVCC is None:
        pytest.skip("nvcc not found (set KXFORM_NVCC or put it on PATH)")
    sources = sorted({e["path"] for e in ENTRIES if e["path"].endswith(".cu")})
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = pool.map(lambda rel: _compile(CORPORA / rel), sources)
        return dict(zip(sources, results, strict=True))


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["nvcc"]], ids=entry_id)
def test_compiles_with_nvcc(entry: dict[str, Any], nvcc_results: dict[str, tuple[int, str]]) -> None:
    code, log = nvcc_results[entry["path"]]
    assert code == 0, log


@needs_nvcc
@pytest.mark.parametrize(
    "entry", [e for e in ENTRIES if e["swizzle"] == "input-error" and e["path"].endswith(".cu")], ids=entry_id
)
def test_input_error_sources_do_not_compile(entry: dict[str, Any], nvcc_results: dict[str, tuple[int, str]]) -> None:
    code, log = nvcc_results[entry["path"]]
    assert code != 0 and "error" in log
