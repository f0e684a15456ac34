"""The blind set is what its README says: kernels in the index with a style and a timing
size, each file compiling as CUDA; the measuring tool reads it (tools/bench_blind.py).
Nothing here looks at what kxform does to them: that is measured once, on a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import bench_blind  # noqa: E402

BLIND = CORPORA / "blind"


def test_every_kernel_is_listed_with_a_style_and_a_timing_size() -> None:
    entries = bench_blind.entries(set())
    assert len(entries) >= 12
    for entry in entries:
        assert (BLIND / entry["file"]).is_file(), entry
        assert entry["style"] and entry["bench"], entry
    names = {bench_blind.spec_path(e).name for e in entries}
    assert len(names) == len(entries)  # one spec per kernel, two kernels of one file included
    assert (
        "pointwise_ops.mul_kernel.kxspec.toml" in names
        and "rmsnorm_bf16.rmsnorm_rows___nv_bfloat16.kxspec.toml" in names
    )


def test_an_unknown_kernel_is_a_usage_error() -> None:
    with pytest.raises(SystemExit, match="no kernel of corpora/blind/index.toml is named"):
        bench_blind.entries({"no_such_kernel"})


def test_the_table_reports_failures_as_rows_and_the_geomean_of_the_rest() -> None:
    rows = [
        {"kernel": "a", "error": "the drafted spec does not load: x"},
        {
            "kernel": "b",
            "original_ms": 2.0,
            "best_ms": 0.5,
            "speedup": 4.0,
            "kept_original": False,
            "pipeline": "rows{lanes=32,rows=4}",
            "copy_fraction": {"original": 0.1, "best": 0.4},
        },
        {
            "kernel": "c",
            "original_ms": 1.0,
            "best_ms": 1.0,
            "speedup": 1.0,
            "kept_original": True,
            "pipeline": "",
            "copy_fraction": {"original": 0.5, "best": 0.5},
        },
    ]
    text = bench_blind.table(rows, 4200.0)
    assert "the drafted spec does not load" in text and "10% -> 40%" in text and "original kept" in text
    assert "geomean speed-up over 2 kernels: 2.000" in text


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("name", sorted(p.name for p in BLIND.glob("*.cu")))
def test_every_file_compiles_as_cuda(tmp_path: Path, name: str) -> None:
    """With kxform's stand-ins for host library headers the machine may lack (cuBLAS)."""
    import subprocess

    from kxform.runtime.cpu.build import LIBRARY_STUB_DIR

    proc = subprocess.run(
        [
            "nvcc",
            "-arch=sm_90",
            "-c",
            str(BLIND / name),
            "-o",
            str(tmp_path / "k.o"),
            "-Xcompiler",
            f"-idirafter,{LIBRARY_STUB_DIR}",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
