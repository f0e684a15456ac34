"""Drafted specs can catch bugs: `kxform harness infer` chooses sizes that launch at least
three blocks along every grid dimension a size variable sets, with a ragged edge, 1-D
kernels included, so planted x/y swaps and wrong tiles in a saxpy and a block reduction
are mismatches (the real CPU runtime, the draft used unedited)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.infer import MIN_BLOCKS, infer_spec
from kxform.harness.spec import load_spec
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair

SAXPY = """#define BLOCK 256
__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
void run(int n, float a, const float* x, float* y) {
    saxpy<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(n, a, x, y);
}
"""

REDUCE = """#define THREADS 128
__global__ void block_sum(const float* in, float* out, int n) {
    __shared__ float s[THREADS];
    int i = blockIdx.x * THREADS + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int step = THREADS / 2; step > 0; step >>= 1) {
        if (threadIdx.x < step) s[threadIdx.x] += s[threadIdx.x + step];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
void run(const float* in, float* out, int n) {
    block_sum<<<(n + THREADS - 1) / THREADS, THREADS>>>(in, out, n);
}
"""

PLANTS = {
    "saxpy": [
        ("blockIdx.x * BLOCK", "blockIdx.y * BLOCK"),  # x/y swap
        ("blockIdx.x * BLOCK", "blockIdx.x * (BLOCK / 2)"),
    ],  # wrong tile
    "block_sum": [("out[blockIdx.x]", "out[blockIdx.y]"), ("blockIdx.x * THREADS", "blockIdx.x * (THREADS / 2)")],
}


def _drafted(tmp_path: Path, text: str, kernel: str, cpu: CpuRuntime):  # type: ignore[no-untyped-def]
    path = tmp_path / f"{kernel}.cu"
    path.write_text(text)
    draft = infer_spec(SourceText(str(path), text.encode()), kernel, cpu)
    (tmp_path / f"{kernel}.kxspec.toml").write_text(draft.text)
    return path, load_spec(tmp_path / f"{kernel}.kxspec.toml").kernel(kernel)


@pytest.mark.slow
@pytest.mark.parametrize("text, kernel", [(SAXPY, "saxpy"), (REDUCE, "block_sum")])
def test_a_drafted_spec_of_a_1d_kernel_launches_several_blocks_and_catches_planted_bugs(
    tmp_path: Path, cpu: CpuRuntime, text: str, kernel: str
) -> None:
    path, spec = _drafted(tmp_path, text, kernel, cpu)
    for size in spec.check_sizes:
        blocks = spec.launch(size).grid[0]
        n = size.values["n"]
        assert blocks >= MIN_BLOCKS and n % spec.launch(size).block[0] != 0 or size.name == "tiles", (size, blocks)
    original = validate_bytes(str(path), text.encode())
    assert verify_pair(original, original, spec, cpu).status == "ok"
    for wanted, planted in PLANTS[kernel]:
        assert text.count(wanted) == 1
        bad = validate_bytes(str(path), text.replace(wanted, planted).encode(), rewritten=True)
        report = verify_pair(original, bad, spec, cpu)
        assert report.status == "mismatch", (planted, report.summary(), [s.summary() for s in report.sizes])


SPEC = """version = 1
file = "saxpy.cu"
[kernel.saxpy]
description = "saxpy"
seed = 0
grid = ["ceil_div(n, 256)"]
block = [256]
compare = { mode = "exact" }
[[kernel.saxpy.args]]
name = "n"
kind = "scalar"
dtype = "int32"
value = "n"
[[kernel.saxpy.args]]
name = "a"
kind = "scalar"
dtype = "float32"
value = 1.5
[[kernel.saxpy.args]]
name = "x"
kind = "buffer"
dtype = "float32"
count = "n"
role = "in"
fill = { dist = "uniform", low = -1.0, high = 1.0 }
[[kernel.saxpy.args]]
name = "y"
kind = "buffer"
dtype = "float32"
count = "n"
role = "inout"
fill = { dist = "uniform", low = -1.0, high = 1.0 }
[[kernel.saxpy.sizes]]
name = "small"
n = 70
[[kernel.saxpy.sizes]]
name = "big"
n = 1000
"""


def test_harness_check_warns_of_a_size_that_launches_one_block(tmp_path: Path) -> None:
    from conftest import run_cli

    (tmp_path / "saxpy.cu").write_text(SAXPY)
    (tmp_path / "saxpy.kxspec.toml").write_text(SPEC)
    done = run_cli("harness", "check", "saxpy.kxspec.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (warning,) = done.stderr.strip().splitlines()
    assert (
        warning.startswith("kxform: warning: saxpy.kxspec.toml:")
        and "size 'small' launches 1 block along x (ceil_div(n, 256) = 1)" in warning
    )
    (tmp_path / "saxpy.kxspec.toml").write_text(SPEC.replace("n = 70", "n = 700"))
    assert run_cli("harness", "check", "saxpy.kxspec.toml", cwd=tmp_path).stderr == ""
