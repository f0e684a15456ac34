"""Files whose host code uses cuBLAS, cuBLASLt, cuDNN, NCCL, cuSPARSE or cuRAND, or
declares a file-scope `cudaDeviceProp`, run their kernels on the CPU runtime, and so does
a file including a GPU library header no stand-in covers (the kernel is compiled without
it); a kernel that calls a library in device code is still refused."""

from __future__ import annotations

import shutil
from dataclasses import replace
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


TRAINING_STYLE = """#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cudnn.h>
#include <nccl.h>
#include <cusparseLt.h>
#include <cutensor.h>

cublasLtHandle_t lt_handle;
ncclComm_t comm;
static cudnnHandle_t dnn;

__global__ void scale(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""


@pytest.mark.slow
def test_library_headers_of_host_code_do_not_stop_the_kernel(cpu) -> None:  # type: ignore[no-untyped-def]
    """cuBLASLt, cuDNN and NCCL have stand-ins (their handles at file scope compile);
    cuSPARSELt and cuTENSOR are missing here and have none: each is given empty, and the
    kernel, which uses neither, runs."""
    import numpy as np

    from kxform.runtime.base import BufferArg, LaunchRequest, ScalarArg

    x = np.arange(100, dtype=np.float32)
    request = LaunchRequest(
        source=TRAINING_STYLE,
        kernel="scale",
        params=(),
        args=(BufferArg("y", np.zeros_like(x), "out"), BufferArg("x", x, "in"), ScalarArg("n", np.int32(100))),
        grid=(4, 1, 1),
        block=(32, 1, 1),
        label="scale",
    )
    assert np.array_equal(cpu.run(request).outputs["y"], 2 * x)
    uses = TRAINING_STYLE.replace("y[i] = 2.0f * x[i];", "{ cutensorHandle_t h; (void)h; y[i] = x[i]; }")
    from kxform.runtime.base import Unsupported

    with pytest.raises(Unsupported, match=r"uses <cusparseLt.h> \(not emulated\)|uses <cutensor.h> \(not emulated\)"):
        cpu.run(replace(request, source=uses))


@pytest.mark.slow
def test_harness_infer_measures_a_kernel_beside_library_headers(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(TRAINING_STYLE)
    proc = run_cli("harness", "infer", str(tmp_path / "scale.cu"), "--kernel", "scale", "-o", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    draft = (tmp_path / "scale.kxspec.toml").read_text()
    assert "measuring run failed" not in draft + proc.stderr and 'count = "n"  # measured' in draft
