"""`kxform verify` on bad input: one clear line, a non-zero exit, nothing written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, run_cli
from kxform.runtime.cpu import CpuRuntime

pytestmark = pytest.mark.skipif(not CpuRuntime().available()[0], reason="no host C++ compiler")

KERNEL = """__global__ void scale(const float* x, float* y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
    SPIN
}
"""

SPEC = """version = 1
file = "k.cu"
[kernel.scale]
grid = ["ceil_div(N, 64)"]
block = ["64"]
compare = { mode = "exact" }
[[kernel.scale.args]]
name = "x"
kind = "buffer"
dtype = "DTYPE"
count = "N"
role = "in"
fill = { dist = "uniform", low = -1.0, high = 1.0 }
[[kernel.scale.args]]
name = "y"
kind = "buffer"
dtype = "float32"
count = "N"
role = "out"
[[kernel.scale.args]]
name = "a"
kind = "scalar"
dtype = "float32"
value = "2"
LAST
[[kernel.scale.sizes]]
name = "small"
N = 1000
"""

N_ARG = '[[kernel.scale.args]]\nname = "n"\nkind = "scalar"\ndtype = "int32"\nvalue = "N"\n'


def setup(tmp_path: Path, dtype: str = "float32", last: str = N_ARG, spin: str = "") -> Path:
    (tmp_path / "k.cu").write_text(KERNEL.replace("SPIN", spin))
    (tmp_path / "k.kxspec.toml").write_text(SPEC.replace("DTYPE", dtype).replace("LAST", last))
    return tmp_path


def verify(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = run_cli("verify", "k.cu", "k.cu", "--kernel", "scale", "--runtime", "cpu", *extra, cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    return proc


def test_identical_files_verify(tmp_path: Path) -> None:
    proc = verify(setup(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "scale: verified on the cpu runtime (original vs rewritten, 1 sizes)" in proc.stdout


def test_spec_missing_an_argument(tmp_path: Path) -> None:
    proc = verify(setup(tmp_path, last=""))
    assert proc.returncode == 2
    assert "k.kxspec.toml" in proc.stderr and "no argument for parameter 'int n' (#4)" in proc.stderr
    assert "add an [[kernel" in proc.stderr


def test_spec_with_a_wrong_dtype(tmp_path: Path) -> None:
    proc = verify(setup(tmp_path, dtype="float64"))
    assert proc.returncode == 2
    assert "arg 'x': dtype 'float64'" in proc.stderr and 'use dtype = "float32"' in proc.stderr
    assert "k.kxspec.toml:" in proc.stderr


def test_kernel_that_never_returns_is_killed(tmp_path: Path) -> None:
    """An original that cannot run says nothing about the rewrite: inconclusive (exit 3)."""
    proc = verify(setup(tmp_path, spin="volatile int forever = 1; while (forever) { }"), "--timeout", "3")
    assert proc.returncode == 3
    assert "scale[small] original: did not finish within 3 s" in proc.stderr
    assert "scale: inconclusive on the cpu runtime" in proc.stdout


def test_size_that_makes_the_original_fault(tmp_path: Path) -> None:
    proc = verify(setup(tmp_path, spin="if (i == 0) ((float*)0)[i] = 1.f;"))
    assert proc.returncode == 3
    assert "scale[small]" in proc.stderr and "the original kernel failed" in proc.stderr


def test_rewritten_kernel_that_faults_where_the_original_ran_is_a_mismatch(tmp_path: Path) -> None:
    setup(tmp_path)
    (tmp_path / "r.cu").write_text(KERNEL.replace("SPIN", "if (i == 0) y[n + 4] = 1.f;"))
    proc = run_cli("verify", "k.cu", "r.cu", "--kernel", "scale", "--runtime", "cpu", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the rewritten kernel failed where the original ran" in proc.stderr and "MISMATCH" in proc.stdout


def test_no_gpu_and_no_spec(tmp_path: Path) -> None:
    setup(tmp_path)
    gpu = run_cli("verify", "k.cu", "k.cu", "--kernel", "scale", "--runtime", "gpu", cwd=tmp_path)
    assert gpu.returncode == 2 and "GPU runtime unavailable" in gpu.stderr
    (tmp_path / "k.kxspec.toml").unlink()
    nospec = run_cli("verify", "k.cu", "k.cu", "--kernel", "scale", "--runtime", "cpu", cwd=tmp_path)
    assert nospec.returncode == 2 and "kxform harness infer k.cu --kernel scale" in nospec.stderr


def test_reference_mode_on_a_corpus_kernel(tmp_path: Path) -> None:
    shutil.copytree(CORPORA / "transpose", tmp_path / "t")
    proc = run_cli(
        "verify",
        "t/transpose.cu",
        "--reference",
        "--kernel",
        "transposeNoBankConflicts",
        "--runtime",
        "cpu",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "kernel vs NumPy reference" in proc.stdout


def test_quoted_includes_resolve_from_the_files_directory(tmp_path: Path) -> None:
    setup(tmp_path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "twice.cuh").write_text("__device__ inline float twice(float v) { return 2.f * v; }\n")
    (tmp_path / "k.cu").write_text(
        '#include "inc/twice.cuh"\n' + KERNEL.replace("a * x[i]", "twice(a) * x[i] / 2.f").replace("SPIN", "")
    )
    proc = verify(tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_a_dangling_link_in_an_include_directory_is_no_internal_error(tmp_path: Path) -> None:
    """An -I directory holding a link to nothing (a stale build artefact): the unit does
    not include it, so it verifies as without it (it was `internal error:
    FileNotFoundError`, exit 123, from the cache key's walk of the directory)."""
    setup(tmp_path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "stale.h").symlink_to(tmp_path / "gone" / "stale.h")
    proc = verify(tmp_path, "-I", "inc")
    assert proc.returncode == 0, proc.stderr
    assert "internal error" not in proc.stderr and "scale: verified on the cpu runtime" in proc.stdout
