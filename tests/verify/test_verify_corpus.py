"""Differential verification over the corpus, on the CPU runtime (CI) and the GPU (suite).

* every corpus kernel with a spec matches its NumPy reference at every check size;
* every swizzle pattern applied to every applicable corpus kernel verifies bit-exact
  against the original;
* a deliberately non-bijective remap is caught;
* kernels the CPU runtime cannot emulate are "unverified" with a clear message, never a
  mismatch; the tensor-core (WMMA) kernel runs on the CPU runtime.
"""

from __future__ import annotations

import re
import sys

import pytest

from conftest import CORPORA
from kxform.harness.spec import load_spec
from kxform.engine.pass_api import Outcome
from kxform.passes.swizzle.patterns import PATTERNS
from kxform.runtime.base import Runtime, Unsupported
from kxform.frontend.source import validate_bytes
from kxform.verify.differential import verify_pair, verify_reference
from swizzle_helpers import outcomes, rewrite

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST = [e for e in tomllib.loads((CORPORA / "index.toml").read_text())["kernel"] if e.get("spec")]
SWIZZLABLE = [e for e in MANIFEST if e["swizzle"] == "applies"]


def _runtime(name: str) -> Runtime:
    if name == "cpu":
        from kxform.runtime.cpu import CpuRuntime

        runtime: Runtime = CpuRuntime()
    else:
        from kxform.runtime.gpu import GpuRuntime

        runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"{name} runtime unavailable: {why}")
    return runtime


@pytest.fixture(scope="module", params=[pytest.param("cpu"), pytest.param("gpu", marks=pytest.mark.gpu)])
def runtime(request: pytest.FixtureRequest) -> Runtime:
    return _runtime(request.param)


def kernel_spec(entry: dict):  # type: ignore[no-untyped-def]
    spec = load_spec(CORPORA / entry["spec"])
    return spec.kernels[entry["kernel"]]


def source_of(entry: dict):  # type: ignore[no-untyped-def]
    path = CORPORA / entry["path"]
    return validate_bytes(str(path), path.read_bytes())


def _run_or_skip(runtime: Runtime, thunk):  # type: ignore[no-untyped-def]
    try:
        return thunk()
    except Unsupported as exc:
        if runtime.name == "cpu":
            pytest.skip(str(exc))
        raise


def _report_or_skip(runtime: Runtime, report):  # type: ignore[no-untyped-def]
    errors = [v.error for v in report.sizes if v.error]
    if errors and runtime.name == "cpu" and all("cannot run on the CPU runtime" in e for e in errors):
        pytest.skip(errors[0])
    return report


@pytest.mark.parametrize("entry", [e for e in MANIFEST if e.get("nvcc", True) or True], ids=lambda e: e["name"])
def test_kernel_matches_numpy_reference(runtime: Runtime, entry: dict) -> None:
    report = _report_or_skip(
        runtime, _run_or_skip(runtime, lambda: verify_reference(source_of(entry), kernel_spec(entry), runtime))
    )
    assert report.ok, "\n".join(v.summary() for v in report.sizes)


def _patterns_for(entry: dict) -> list[str]:
    dims = 1 if entry["grid_dims"] == 1 else 2
    # a pattern without a formula twin cannot be proven, so it is refused (tests/passes/test_patterns.py)
    return [p.name for p in PATTERNS.values() if p.name != "row" and dims in p.dims and p.formula is not None]


CASES = [pytest.param(e, p, id=f"{e['name']}-{p}") for e in SWIZZLABLE for p in _patterns_for(e)]


@pytest.mark.slow
@pytest.mark.parametrize(("entry", "pattern"), CASES)
def test_every_pattern_verifies_bit_exact(runtime: Runtime, entry: dict, pattern: str) -> None:
    original = source_of(entry)
    name = entry["kernel"].split("<")[0]
    result = rewrite(original.data, path=original.path, kernels=(name,), hw="mi300x", pattern=pattern)
    assert outcomes(result)[name] is Outcome.APPLIED
    rewritten = validate_bytes(original.path, result.new_data)
    report = _report_or_skip(
        runtime, _run_or_skip(runtime, lambda: verify_pair(original, rewritten, kernel_spec(entry), runtime))
    )
    assert report.ok, "\n".join(v.summary() for v in report.sizes)


@pytest.mark.parametrize("name", ["sgemm_tiled", "hip_sgemm"])
def test_non_bijective_remap_is_caught(runtime: Runtime, name: str) -> None:
    """A remap that sends two blocks to the same tile is rejected, in CUDA and in HIP
    (on the GPU the HIP unit builds with nvcc through the HIP-in-CUDA headers)."""
    entry = next(e for e in SWIZZLABLE if e["name"] == name)
    original = source_of(entry)
    result = rewrite(original.data, path=original.path, pattern="grouped", group="2")
    text = result.new_data.decode()
    broken = text.replace("first + in_group % size", "first + (in_group % size) / 2u * 2u")
    assert broken != text
    report = verify_pair(original, validate_bytes(original.path, broken.encode()), kernel_spec(entry), runtime)
    assert not report.ok
    bad = next(v for v in report.sizes if not v.ok)
    assert re.search(r"elements differ|never written", bad.summary()), bad.summary()


def test_unsupported_features_are_unverified_never_a_mismatch() -> None:
    """A kernel the CPU runtime cannot run is "unverified (reason)", located, never MISMATCH."""
    runtime = _runtime("cpu")
    entry = next(e for e in MANIFEST if e["name"] == "sgemm_tiled")
    original = source_of(entry)
    text = original.data.decode().replace("float acc = 0.0f;", 'float acc = 0.0f;\n    asm volatile("" ::: "memory");')
    source = validate_bytes(original.path, text.encode())
    for report in (
        verify_reference(source, kernel_spec(entry), runtime),
        verify_pair(source, source, kernel_spec(entry), runtime),
    ):
        assert report.status == "unverified" and not report.ok, report.summary()
        assert "MISMATCH" not in report.summary() and "unverified on the cpu runtime" in report.summary()
        error = report.sizes[0].error or ""
        assert "cannot run on the CPU runtime" in error and "asm" in error
        assert re.search(r"sgemm_tiled.cu:\d+", error), error


def test_wmma_kernel_verifies_on_the_cpu_runtime() -> None:
    """The tensor-core corpus kernel runs on the CPU runtime and matches its NumPy reference."""
    runtime = _runtime("cpu")
    entry = next(e for e in MANIFEST if e["name"] == "gemm_bf16_wmma")
    report = verify_reference(source_of(entry), kernel_spec(entry), runtime)
    assert report.ok, "\n".join(v.summary() for v in report.sizes)
    assert len(report.sizes) >= 3
