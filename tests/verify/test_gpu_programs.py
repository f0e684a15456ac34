"""On a GPU: whole-program verification of rewritten corpus programs, and every corpus
kernel against its NumPy reference at its bench size too (data several times the L2)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.api import rewrite
from kxform.harness.spec import load_spec
from kxform.verify.program import verify_programs
from kxform.frontend.source import validate_bytes
from kxform.verify.differential import verify_reference

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytestmark = pytest.mark.gpu
MANIFEST = tomllib.loads((CORPORA / "index.toml").read_text())["kernel"]
TIMING_LINES = (r"\d+(\.\d+)? ms\b", r"GFLOP/s", r"GB/s")


@pytest.fixture(scope="module")
def gpu():  # type: ignore[no-untyped-def]
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    yield runtime
    runtime.close()


@pytest.mark.parametrize(
    ("folder", "pattern"), [("sgemm_tiled", "diagonal"), ("transpose", "column"), ("stencil5", "grouped")]
)
def test_rewritten_program_prints_what_the_original_prints(
    gpu,
    folder: str,
    pattern: str,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    source = next((CORPORA / folder).glob("*.cu"))
    copy = tmp_path / folder
    shutil.copytree(CORPORA / folder, copy)
    result = rewrite(source.read_bytes(), path=str(source), hw="h200", pattern=pattern)
    assert result.changed
    (copy / source.name).write_bytes(result.new_data)
    report = verify_programs(str(source), str(copy / source.name), masks=TIMING_LINES, rtol=1e-6)
    assert report.ok, report.summary() + "\n" + report.original.output + report.rewritten.output


def test_a_differing_program_is_reported(gpu, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    source = CORPORA / "stencil5" / "stencil5.cu"
    broken = tmp_path / "stencil5.cu"
    broken.write_text(
        source.read_text().replace(
            'printf("u[ny/2][1] = %f\\n", h[(size_t)(ny / 2) * nx + 1]);',
            'printf("u[ny/2][1] = %f\\n", 1.0f + h[(size_t)(ny / 2) * nx + 1]);',
        )
    )
    assert broken.read_text() != source.read_text()
    report = verify_programs(str(source), str(broken), masks=TIMING_LINES, rtol=1e-6)
    assert not report.ok and "u[ny/2][1]" in report.detail


BENCH = [e for e in MANIFEST if e.get("spec") and not e["path"].endswith(".hip")]


@pytest.mark.slow
@pytest.mark.parametrize("entry", BENCH, ids=lambda e: e["name"])
def test_kernel_matches_reference_at_the_bench_size(gpu, entry: dict) -> None:  # type: ignore[no-untyped-def]
    path = CORPORA / entry["path"]
    spec = load_spec(CORPORA / entry["spec"]).kernels[entry["kernel"]]
    names = tuple(s.name for s in spec.bench_sizes)
    report = verify_reference(validate_bytes(str(path), path.read_bytes()), spec, gpu, names, timeout_s=300)
    assert report.ok, "\n".join(v.summary() for v in report.sizes)
