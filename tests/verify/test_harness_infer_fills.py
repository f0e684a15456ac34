"""`kxform harness infer` fills: inputs are drawn from [-1, 1], and from [0.5, 1.5] where
the kernel's outputs at [-1, 1] are NaN or Inf (a log or a square root of an input),
measured on the CPU runtime; a verification with them is a real one."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.infer import infer_spec
from kxform.harness.spec import load_spec
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair

LOG_RATIO = """__global__ void log_ratio(float* out, const float* s, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = logf(s[i] / x[i]) + sqrtf(x[i]);
}
void run(float* out, const float* s, const float* x, int n) {
    log_ratio<<<(n + 127) / 128, 128>>>(out, s, x, n);
}
"""


def _draft(tmp_path: Path, text: str, kernel: str, cpu: CpuRuntime):  # type: ignore[no-untyped-def]
    path = tmp_path / f"{kernel}.cu"
    path.write_text(text)
    draft = infer_spec(SourceText(str(path), text.encode()), kernel, cpu)
    (tmp_path / f"{kernel}.kxspec.toml").write_text(draft.text)
    return path, draft, load_spec(tmp_path / f"{kernel}.kxspec.toml").kernel(kernel)


@pytest.mark.slow
def test_inputs_outside_the_kernels_domain_are_drafted_positive_and_verify(tmp_path: Path, cpu: CpuRuntime) -> None:
    path, draft, spec = _draft(tmp_path, LOG_RATIO, "log_ratio", cpu)
    assert not draft.todos, draft.todos
    assert draft.text.count('fill = { dist = "uniform", low = 0.5, high = 1.5 }  # review: positive') == 2
    original = validate_bytes(str(path), LOG_RATIO.encode())
    assert verify_pair(original, original, spec, cpu).status == "ok"
    planted = validate_bytes(str(path), LOG_RATIO.replace("s[i] / x[i]", "x[i] / s[i]").encode())
    assert verify_pair(original, planted, spec, cpu).status == "mismatch"


@pytest.mark.slow
def test_outputs_non_finite_at_any_input_keep_the_plain_fill(tmp_path: Path, cpu: CpuRuntime) -> None:
    always = LOG_RATIO.replace("logf(s[i] / x[i]) + sqrtf(x[i])", "s[i] / (x[i] - x[i])")
    _, draft, _ = _draft(tmp_path, always, "log_ratio", cpu)
    assert draft.probe is not None and draft.probe.non_finite  # the measuring run saw it
    assert "low = 0.5" not in draft.text and draft.text.count("low = -1.0, high = 1.0 }") == 2


COUNTED = """__global__ void count_hits(const float* x, int* hits, volatile int* done, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) atomicAdd(hits, 1);
    if (threadIdx.x == 0) done[blockIdx.x] = done[blockIdx.x] + 1;
}
void run(const float* x, int* d_hits, int* d_done, int n) {
    int blocks = (n + 255) / 256;
    cudaMemset(d_hits, 0, sizeof(int));
    count_hits<<<blocks, 256>>>(x, d_hits, d_done, n);
}
"""


def test_flags_and_counters_the_launcher_clears_start_at_zero(tmp_path: Path) -> None:
    path = tmp_path / "hits.cu"
    path.write_text(COUNTED)
    text = infer_spec(SourceText(str(path), COUNTED.encode()), "count_hits").text
    arg = {name: text.split(f'name = "{name}"')[1].split("[[")[0] for name in ("x", "hits", "done")}
    assert (
        'fill = { dist = "const", value = 0 }  # review: cleared before the launch (cudaMemset(d_hits, 0, ...))'
        in arg["hits"]
    )
    assert 'fill = { dist = "const", value = 0 }  # review: volatile: a flag or counter, cleared' in arg["done"]
    assert 'dist = "uniform"' in arg["x"]  # data keeps its random fill


MOMENTUM = """__global__ void momentum(float* m, const float* g, int n, float beta) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) m[i] = beta * m[i] + (1.0f - beta) * g[i];
}
void run(float* m, const float* g, int n, float beta) {
    momentum<<<(n + 255) / 256, 256>>>(m, g, n, beta);
}
"""


@pytest.mark.slow
def test_a_float_scalar_is_drafted_neither_zero_nor_one_so_its_update_shows(tmp_path: Path, cpu: CpuRuntime) -> None:
    path, draft, spec = _draft(tmp_path, MOMENTUM, "momentum", cpu)
    assert 'value = "0.75"  # review' in draft.text.split('name = "beta"')[1]
    original = validate_bytes(str(path), MOMENTUM.encode())
    assert verify_pair(original, original, spec, cpu).status == "ok"  # with beta = 1, m would not change
    planted = validate_bytes(str(path), MOMENTUM.replace("(1.0f - beta)", "(1.0f + beta)").encode())
    assert verify_pair(original, planted, spec, cpu).status == "mismatch"
