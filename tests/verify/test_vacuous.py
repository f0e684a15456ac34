"""Verification that cannot pass vacuously.

Each test plants a bug the old verifier let through: a spec drafted with no hand edits
that declared a read buffer `out` (NaN == NaN), a kernel that writes none of its outputs,
NaN on both sides, an output left at its fill, a template verified at one instantiation
only, a draft that would not fit in memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli
from kxform.engine.pass_api import KernelResult, Outcome
from kxform.frontend.source import SourceText
from kxform.harness.infer import infer_spec
from kxform.harness.spec import load_spec
from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, ScalarArg
from kxform.verify.differential import verify_pair
from kxform.verify.stage import verify_file
from kxform.verify.verdict import vacuity

SGEMM = """#define TILE 16
__global__ void sgemm(int M, int N, int K, float alpha, const float *A, const float *B, float beta, float *C)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    float acc = 0.0f;
    for (int t = 0; t < K; t += TILE) {
        const int ar = blockIdx.y * TILE + ty;
        const int bc = blockIdx.x * TILE + tx;
        As[ty][tx] = (ar < M && t + tx < K) ? A[ar * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && bc < N) ? B[(t + ty) * N + bc] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;
    if (row < M && col < N)
        C[row * N + col] = alpha * acc + beta * C[row * N + col];
}

void run(int M, int N, int K, const float *A, const float *B, float *C)
{
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    sgemm<<<grid, block>>>(M, N, K, 1.0f, A, B, 0.5f, C);
}
"""
STORE_ROW = "const int row = blockIdx.y * TILE + ty;"
STORE_COL = "const int col = blockIdx.x * TILE + tx;"
PLANTED = {
    "non-bijective blockIdx.y / 2": SGEMM.replace("blockIdx.y * TILE", "(blockIdx.y / 2) * TILE"),
    "x and y swapped in one place": SGEMM.replace(STORE_COL, "const int col = blockIdx.y * TILE + tx;"),
    "bijective but wrong (blockIdx.y + 1) % gridDim.y": SGEMM.replace(
        STORE_ROW, "const int row = ((blockIdx.y + 1) % gridDim.y) * TILE + ty;"
    ),
}


@pytest.fixture
def drafted(tmp_path: Path, cpu) -> Path:  # type: ignore[no-untyped-def]
    """The SGEMM and the spec `kxform harness infer` drafts for it, unedited."""
    path = tmp_path / "sgemm.cu"
    path.write_text(SGEMM)
    proc = run_cli("harness", "infer", "sgemm.cu", "--kernel", "sgemm", "-o", "kxform-spec.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "fill in" not in proc.stderr, proc.stderr
    return path


def test_the_draft_reads_roles_and_counts_off_the_kernel(drafted: Path) -> None:
    kernel = load_spec(drafted.parent / "kxform-spec.toml").kernel("sgemm")
    assert [(a.name, a.role) for a in kernel.args if a.kind == "buffer"] == [("A", "in"), ("B", "in"), ("C", "inout")]
    assert {a.name: str(a.count) for a in kernel.args if a.kind == "buffer"} == {
        "A": "M * K",
        "B": "N * K",
        "C": "M * N",
    }
    assert len({tuple(sorted(s.values.values())) for s in kernel.check_sizes}) == len(kernel.check_sizes) >= 2


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_sgemm_rewrites_are_caught_with_a_drafted_spec(drafted: Path, name: str, cpu) -> None:  # type: ignore[no-untyped-def]
    kernel = load_spec(drafted.parent / "kxform-spec.toml").kernel("sgemm")
    original = SourceText(str(drafted), SGEMM.encode())
    assert verify_pair(original, original, kernel, cpu).ok  # the draft can pass ...
    report = verify_pair(original, SourceText(str(drafted), PLANTED[name].encode()), kernel, cpu)
    assert report.status == "mismatch", report.summary()  # ... and fail


def test_the_old_draft_is_not_vacuous_either(drafted: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    """With C declared `out` (what the old draft said), the plants are no longer "ok": the
    read of C is reported with its line, and the NaN outputs are inconclusive."""
    spec = drafted.parent / "kxform-spec.toml"
    text = spec.read_text()
    start = text.index('name = "C"')
    spec.write_text(
        text[:start]
        + text[start:]
        .replace('role = "inout"', 'role = "out"', 1)
        .replace('fill = { dist = "uniform", low = -1.0, high = 1.0 }\n', "", 1)
    )
    kernel = load_spec(spec).kernel("sgemm")
    original = SourceText(str(drafted), SGEMM.encode())
    for planted in PLANTED.values():
        report = verify_pair(original, SourceText(str(drafted), planted.encode()), kernel, cpu)
        assert not report.ok and report.status in ("inconclusive", "mismatch"), report.summary()
    report = verify_pair(original, original, kernel, cpu)
    assert report.status == "inconclusive"
    assert f"'C' is read at {drafted}:21" in report.summary() and "declare it inout" in report.summary()


def test_read_before_write_names_the_buffer_and_line(cpu) -> None:  # type: ignore[no-untyped-def]
    source = (
        "__global__ void k(const float* x, float* y, int n) {\n  int i = threadIdx.x;\n"
        "  if (i < n) y[i] = y[i] + x[i];\n}\n"
    )
    result = cpu.run(
        LaunchRequest(
            source=source,
            kernel="k",
            params=(),
            grid=(1, 1, 1),
            block=(32, 1, 1),
            args=(
                BufferArg("x", np.ones(32, np.float32), "in"),
                BufferArg("y", np.zeros(32, np.float32), "out"),
                ScalarArg("n", np.int32(32)),
            ),
            filename="scale.cu",
            watch=True,
        )
    )
    (read,) = result.unwritten_reads
    assert (read.buffer, read.where) == ("y", "scale.cu:3")
    assert result.extents == {"x": 128, "y": 128}
    clean = cpu.run(
        LaunchRequest(
            source=source.replace("y[i] + x[i]", "2.f * x[i]"),
            kernel="k",
            params=(),
            grid=(1, 1, 1),
            block=(32, 1, 1),
            watch=True,
            args=(
                BufferArg("x", np.ones(64, np.float32), "in"),
                BufferArg("y", np.zeros(64, np.float32), "out"),
                ScalarArg("n", np.int32(20)),
            ),
        )
    )
    assert clean.unwritten_reads == () and clean.extents == {"x": 80, "y": 80}


def test_a_watched_launch_checks_bounds_like_any_other(cpu) -> None:  # type: ignore[no-untyped-def]
    """The watched build is instrumented for the watch, not with the bounds hooks: its
    accesses are bounds-checked through the watch. x[-1] lies in the slack before the
    buffer, where no guard page faults and no canary sees a read."""
    source = "__global__ void k(const float* x, float* y) {\n  int i = threadIdx.x;\n  y[i] = x[i - 1];\n}\n"
    args = (BufferArg("x", np.ones(32, np.float32), "in"), BufferArg("y", np.zeros(32, np.float32), "out"))
    for watch in (False, True):
        with pytest.raises(
            RuntimeError_,
            match=r"out-of-bounds read of 4 bytes at byte offset -4 of buffer 'x' "
            r"\(128 bytes\) in thread \(0,0,0\)",
        ):
            cpu.run(
                LaunchRequest(
                    source=source,
                    kernel="k",
                    params=(),
                    grid=(1, 1, 1),
                    block=(32, 1, 1),
                    args=args,
                    filename="shift.cu",
                    watch=watch,
                )
            )


SCALE = """__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) WRITE;
}
"""
SCALE_SPEC = """version = 1
file = "k.cu"
[kernel.scale]
grid = ["ceil_div(N, 64)"]
block = ["64"]
[[kernel.scale.args]]
name = "x"
kind = "buffer"
dtype = "float32"
count = "N"
role = "in"
fill = FILL
[[kernel.scale.args]]
name = "y"
kind = "buffer"
dtype = "float32"
count = "N"
role = "ROLE"
YFILL
[[kernel.scale.args]]
name = "n"
kind = "scalar"
dtype = "int32"
value = "N"
[[kernel.scale.sizes]]
name = "small"
N = 1000
"""


def _scale(tmp_path: Path, write: str, role: str = "out", fill: str = '{ dist = "uniform", low = -1.0, high = 1.0 }'):  # type: ignore[no-untyped-def]
    (tmp_path / "k.cu").write_text(SCALE.replace("WRITE", write))
    yfill = "" if role == "out" else 'fill = { dist = "uniform", low = -1.0, high = 1.0 }'
    (tmp_path / "k.kxspec.toml").write_text(
        SCALE_SPEC.replace("YFILL", yfill).replace("FILL", fill).replace("ROLE", role)
    )
    source = SourceText(str(tmp_path / "k.cu"), (tmp_path / "k.cu").read_bytes())
    return source, load_spec(tmp_path / "k.kxspec.toml").kernel("scale")


def test_a_kernel_that_writes_none_of_its_outputs_is_not_ok(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    source, kernel = _scale(tmp_path, "(void)x[i]")
    report = verify_pair(source, source, kernel, cpu)
    assert report.status == "inconclusive" and not report.ok
    assert "'y' still holds the poison in all elements" in report.summary()


def test_all_nan_on_both_sides_is_inconclusive(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    source, kernel = _scale(tmp_path, "y[i] = sqrtf(-1.f - x[i] * x[i])")
    report = verify_pair(source, source, kernel, cpu)
    assert report.status == "inconclusive"
    assert "'y': all elements are NaN or Inf in both runs although the inputs hold none" in report.summary()


def test_nan_from_nan_inputs_is_a_real_comparison(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    np.save(tmp_path / "nan.npy", np.full(1000, np.nan, np.float32))
    source, kernel = _scale(tmp_path, "y[i] = 2.f * x[i]", fill='{ dist = "npy", path = "nan.npy" }')
    assert verify_pair(source, source, kernel, cpu).ok


def test_an_output_left_at_its_fill_is_inconclusive(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    source, kernel = _scale(tmp_path, "(void)x[i]", role="inout")
    report = verify_pair(source, source, kernel, cpu)
    assert report.status == "inconclusive"
    assert "'y' is identical to its initial fill after both runs" in report.summary()


def test_vacuity_rules_on_arrays() -> None:
    poison = np.full(4, np.nan, np.float32)
    poison.view(np.uint32)[:] = 0xFFFFFFFF
    ones = np.ones(4, np.float32)
    assert vacuity("y", "out", "float32", poison, ones, ones, True) is None
    assert "2 of 4" in (vacuity("y", "out", "float32", poison, np.where([1, 1, 0, 0], ones, poison), ones, True) or "")
    minus_one = np.full(4, -1, np.int32)
    assert vacuity("c", "out", "int32", minus_one, np.array([-1, 2, 3, -1], np.int32), minus_one, True) is None
    assert vacuity("c", "out", "int32", minus_one, minus_one, minus_one, True) is not None
    nan = np.full(4, np.nan, np.float32)
    assert vacuity("y", "inout", "float32", ones, nan, nan, False) is None  # the inputs held NaN: intended
    assert "NaN or Inf" in (vacuity("y", "inout", "float32", ones, nan, nan, True) or "")


TEMPLATE = """template <typename T, int B>
__global__ void scale(const T* x, T* y, int n) {
    int i = ROW * B + threadIdx.x;
    if (i < n) y[i] = x[i] * T(2);
}
void launch(const __half* xh, __half* yh, int n) { scale<__half, 32><<<(n + 31) / 32, 32>>>(xh, yh, n); }
"""
TEMPLATE_SPEC = """version = 1
file = "t.cu"
""" + "".join(
    f"""[kernel."scale<{t}, {b}>"]
grid = ["ceil_div(N, {b})"]
block = ["{b}"]
[[kernel."scale<{t}, {b}>".args]]
name = "x"
kind = "buffer"
dtype = "{d}"
count = "N"
role = "in"
fill = {{ dist = "uniform", low = -1.0, high = 1.0 }}
[[kernel."scale<{t}, {b}>".args]]
name = "y"
kind = "buffer"
dtype = "{d}"
count = "N"
role = "out"
[[kernel."scale<{t}, {b}>".args]]
name = "n"
kind = "scalar"
dtype = "int32"
value = "N"
[[kernel."scale<{t}, {b}>".sizes]]
name = "small"
N = 1000
"""
    for t, b, d in (("float", 64, "float32"), ("double", 128, "float64"))
)


def test_every_instantiation_is_verified_and_a_missing_one_is_named(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "t.cu"
    original = TEMPLATE.replace("ROW", "blockIdx.x").encode()
    path.write_bytes(original)
    (tmp_path / "t.kxspec.toml").write_text(TEMPLATE_SPEC)
    applied = [KernelResult(str(path), "scale", "swizzle", Outcome.APPLIED, 1)]
    good, keep = verify_file(original, original, str(path), applied, cpu, measure=False)
    assert keep and good[0].outcome is Outcome.APPLIED
    (record,) = [c for c in good[0].checks if c.name == "verify"]
    assert "scale<float, 64>: verified" in record.detail and "scale<double, 128>: verified" in record.detail
    assert (
        "instantiation scale<__half, 32> (launched at line 6) has no spec entry and was not verified" in record.detail
    )
    wrong_in_one = TEMPLATE.replace("ROW", "(B == 128 ? blockIdx.x / 2 : blockIdx.x)").encode()
    bad, keep = verify_file(original, wrong_in_one, str(path), applied, cpu, measure=False)
    assert not keep and bad[0].outcome is Outcome.FAILED and "scale<double, 128>: MISMATCH" in bad[0].reasons[0]


def test_harness_check_refuses_a_draft_that_would_not_fit_in_memory(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(SCALE.replace("WRITE", "y[i] = x[i]"))
    (tmp_path / "k.kxspec.toml").write_text(
        SCALE_SPEC.replace("YFILL", "")
        .replace("FILL", '{ dist = "uniform" }')
        .replace("ROLE", "out")
        .replace('count = "N"', 'count = "N * N * N"')
        .replace("N = 1000", "N = 100000")
    )
    proc = run_cli("harness", "check", "k.kxspec.toml", cwd=tmp_path)
    assert proc.returncode == 2
    assert "k.kxspec.toml:" in proc.stderr and "size 'small': its buffers need" in proc.stderr
    assert "more than this machine's" in proc.stderr


def test_infer_names_the_line_to_fill_in_when_the_grid_comes_from_host_code(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(
        SCALE.replace("WRITE", "y[i] = x[i]") + "void go(const float* x, float* y, int n) { int blocks = query(n);\n"
        "  scale<<<blocks, 64>>>(x, y, n); }\n"
    )
    draft = infer_spec(SourceText(str(tmp_path / "k.cu"), (tmp_path / "k.cu").read_bytes()), "scale")
    todo, *counts = draft.todos
    assert [c.split(": ", 1)[1] for c in counts] == ["element count (not measured: the launch is not known)"] * 2
    line = int(todo.split(":")[0].removeprefix("line "))
    assert draft.text.splitlines()[line - 1].startswith("grid = ")
    assert (
        "'blocks' in the launch at" in todo
        and "k.cu:6" in todo
        and "write grid in terms of the size variables (n)" in todo
    )
