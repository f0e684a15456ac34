"""Files whose host code uses cuBLAS, cuSPARSE or cuRAND, or declares a file-scope
`cudaDeviceProp`, run their kernels on the CPU runtime; a kernel that calls a library in
device code is still refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import needs_nvcc, run_cli

FIXTURE = Path(__file__).parents[1] / "fixtures" / "host_library"


@pytest.mark.slow
@needs_nvcc
def test_kernel_of_a_file_using_host_libraries_matches_its_numpy_reference() -> None:
    proc = run_cli(
        "verify", str(FIXTURE / "clamp_scale.cu"), "--reference", "--kernel", "clamp_scale", "--runtime", "cpu"
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "verified on the cpu runtime (kernel vs NumPy reference, 2 sizes)" in proc.stdout


@pytest.mark.slow
@needs_nvcc
def test_a_library_call_in_device_code_is_refused(tmp_path: Path) -> None:
    for name in ("clamp_scale.kxspec.toml", "reference.py"):
        shutil.copy(FIXTURE / name, tmp_path / name)
    source = (FIXTURE / "clamp_scale.cu").read_text()
    planted = source.replace(
        "        y[i] = isinf(v)", "        cublasSscal(g_blas, 1, &v, y, 1);\n        y[i] = isinf(v)"
    )
    assert planted != source
    (tmp_path / "clamp_scale.cu").write_text(planted)
    proc = run_cli(
        "verify", str(tmp_path / "clamp_scale.cu"), "--reference", "--kernel", "clamp_scale", "--runtime", "cpu"
    )
    assert proc.returncode != 0
    assert "cublasSscal" in proc.stderr + proc.stdout
    assert "verified" not in proc.stdout
