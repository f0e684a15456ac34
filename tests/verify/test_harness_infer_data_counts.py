"""Counts of buffers whose extent the data or the kernel's constants set, measured on the
CPU runtime: integer inputs are filled below every size variable (an index read from
memory stays inside the row it indexes), a table indexed by one spans the fill's rows,
and the same extent at both sizes is a count only where every index of it is affine."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.infer import infer_spec
from kxform.harness.spec import load_spec
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair

PICK = """__global__ void pick(float* out, const float* logits, const int* targets, int B, int V) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) out[b] = logits[(size_t)b * V + targets[b]];
}
void run(float* out, const float* logits, const int* targets, int B, int V) {
    pick<<<(B + 127) / 128, 128>>>(out, logits, targets, B, V);
}
"""

GATHER = """__global__ void gather(float* out, const int* ids, const float* table, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N)
        for (int c = 0; c < C; c++) out[i * C + c] = table[ids[i] * C + c];
}
void run(float* out, const int* ids, const float* table, int N, int C) {
    gather<<<(N + 127) / 128, 128>>>(out, ids, table, N, C);
}
"""

FILTER = """#define K 3
__global__ void blur(float* out, const float* in, const float* w, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        for (int k = 0; k < K * K; k++) acc += w[k] * in[i];
        out[i] = acc;
    }
}
void run(float* out, const float* in, const float* w, int n) {
    blur<<<(n + 127) / 128, 128>>>(out, in, w, n);
}
"""

LOOKUP = """__global__ void lookup(float* out, const int* idx, const float* lut, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = lut[2 * idx[i] + 1];
}
void run(float* out, const int* idx, const float* lut, int n) {
    lookup<<<(n + 127) / 128, 128>>>(out, idx, lut, n);
}
"""


def _draft(tmp_path: Path, text: str, kernel: str, cpu: CpuRuntime) -> str:
    path = tmp_path / f"{kernel}.cu"
    path.write_text(text)
    return infer_spec(SourceText(str(path), text.encode()), kernel, cpu).text


def _arg(text: str, name: str) -> str:
    return text.split(f'name = "{name}"')[1].split("[[")[0]


@pytest.mark.slow
def test_an_index_read_from_memory_stays_in_its_row_and_the_draft_verifies(tmp_path: Path, cpu: CpuRuntime) -> None:
    text = _draft(tmp_path, PICK, "pick", cpu)
    assert 'count = "B * V"  # measured' in _arg(text, "logits") and "last row read in part" in _arg(text, "logits")
    high = int(_arg(text, "targets").split("high = ")[1].split()[0])
    values = [int(line.split()[2]) for line in text.splitlines() if line.startswith(("B = ", "V = "))]
    assert high < min(values)  # every target is inside its row at every drafted size
    (tmp_path / "pick.kxspec.toml").write_text(text)
    spec = load_spec(tmp_path / "pick.kxspec.toml").kernel("pick")
    original = validate_bytes(str(tmp_path / "pick.cu"), PICK.encode())
    assert verify_pair(original, original, spec, cpu).status == "ok"
    planted = validate_bytes(str(tmp_path / "pick.cu"), PICK.replace("+ targets[b]", "+ targets[b] / 2").encode())
    assert verify_pair(original, planted, spec, cpu).status == "mismatch"


@pytest.mark.slow
def test_a_table_indexed_by_data_spans_the_rows_the_fill_reaches(tmp_path: Path, cpu: CpuRuntime) -> None:
    text = _draft(tmp_path, GATHER, "gather", cpu)
    high = int(_arg(text, "ids").split("high = ")[1].split()[0])
    table = _arg(text, "table")
    assert f'count = "{high + 1} * C"  # measured' in table and "its row index is read from memory" in table
    assert "# fill in:" not in text


@pytest.mark.slow
def test_the_same_extent_at_both_sizes_is_a_count_where_every_index_is_affine_or_within_the_fill(
    tmp_path: Path, cpu: CpuRuntime
) -> None:
    text = _draft(tmp_path, FILTER, "blur", cpu)
    assert 'count = "9"  # measured' in _arg(text, "w") and "a constant of the kernel" in _arg(text, "w")
    lookup = _draft(tmp_path, LOOKUP, "lookup", cpu)  # past the fill's reach: only the data says how far
    assert "# fill in:" in _arg(lookup, "lut")


BATCHED = """__global__ void batched_scale(float* out, const float* in, int n, int batch) {
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    size_t base = (size_t)blockIdx.z * n * n;
    if (x < n && y < n) out[base + y * n + x] = 2.0f * in[base + y * n + x];
}
void run(float* out, const float* in, int n, int batch) {
    dim3 grid((n + 15) / 16, (n + 15) / 16, batch);
    batched_scale<<<grid, dim3(16, 16)>>>(out, in, n, batch);
}
"""


@pytest.mark.slow
def test_a_count_of_higher_degree_than_the_product_is_measured_in_a_larger_run(tmp_path: Path, cpu: CpuRuntime) -> None:
    text = _draft(tmp_path, BATCHED, "batched_scale", cpu)  # n * batch at first: read past
    assert 'count = "n * n * batch"  # measured' in _arg(text, "in")
    assert 'count = "n * n * batch"  # measured' in _arg(text, "out") and "# fill in:" not in text


PARTIAL = """#define THREADS 128
__global__ void partial_sums(const float* in, float* partial, int n) {
    __shared__ float s[THREADS];
    int i = blockIdx.x * THREADS + threadIdx.x;
    s[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int step = THREADS / 2; step > 0; step >>= 1) {
        if (threadIdx.x < step) s[threadIdx.x] += s[threadIdx.x + step];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}
void run(const float* in, float* partial, int n) {
    partial_sums<<<(n + THREADS - 1) / THREADS, THREADS>>>(in, partial, n);
}
"""


@pytest.mark.slow
def test_a_buffer_of_one_element_per_block_is_counted_by_the_grid(tmp_path: Path, cpu: CpuRuntime) -> None:
    text = _draft(tmp_path, PARTIAL, "partial_sums", cpu)
    assert 'count = "(n + 128 - 1) / 128"  # measured' in _arg(text, "partial"), _arg(text, "partial")
    assert "# fill in:" not in text
    (tmp_path / "p.kxspec.toml").write_text(text)
    spec = load_spec(tmp_path / "p.kxspec.toml").kernel("partial_sums")
    original = validate_bytes(str(tmp_path / "partial_sums.cu"), PARTIAL.encode())
    assert verify_pair(original, original, spec, cpu).status == "ok"
    planted = PARTIAL.replace("partial[blockIdx.x] = s[0]", "partial[blockIdx.x] = s[1]")
    assert (
        verify_pair(original, validate_bytes(str(tmp_path / "partial_sums.cu"), planted.encode()), spec, cpu).status
        == "mismatch"
    )


MANY_INTS = """__global__ void affine_ints(int* out, const int* in, int n, int a, int b, int c, int d, int e) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * in[i] + b - c + d * e;
}
void run(int* out, const int* in, int n, int a, int b, int c, int d, int e) {
    affine_ints<<<(n + 255) / 256, 256>>>(out, in, n, a, b, c, d, e);
}
"""


@pytest.mark.slow
def test_a_kernel_with_many_integer_parameters_is_measured_within_bounds(tmp_path: Path, cpu: CpuRuntime) -> None:
    text = _draft(tmp_path, MANY_INTS, "affine_ints", cpu)  # the product of six values would be too large
    assert 'count = "n"  # measured' in _arg(text, "in") and 'count = "n"  # measured' in _arg(text, "out")
    assert "too large" not in text and "# fill in:" not in text


CSR = """__global__ void spmv(int rows, const int* row_ptr, const int* cols, const float* vals, const float* x,
                     float* y) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float acc = 0.0f;
        for (int j = row_ptr[r]; j < row_ptr[r + 1]; j++) acc += vals[j] * x[cols[j]];
        y[r] = acc;
    }
}
void run(int rows, const int* row_ptr, const int* cols, const float* vals, const float* x, float* y) {
    spmv<<<(rows + 127) / 128, 128>>>(rows, row_ptr, cols, vals, x, y);
}
"""


@pytest.mark.slow
def test_buffers_reached_through_indices_and_bounds_read_from_memory_span_the_fills_reach(
    tmp_path: Path, cpu: CpuRuntime
) -> None:
    text = _draft(tmp_path, CSR, "spmv", cpu)
    high = int(_arg(text, "cols").split("high = ")[1].split()[0])
    for name in ("cols", "vals", "x"):  # a loop bound, a loop index and a gathered index, all data
        assert f'count = "{high + 1}"  # measured' in _arg(text, name), _arg(text, name)
        assert "indices or bounds read from memory reach at most" in _arg(text, name)
    assert 'count = "rows + 1"  # measured' in _arg(text, "row_ptr") and "# fill in:" not in text
