"""`kxform harness infer` on a kernel its file never launches: the grid and block come
from the kernel's own guards (kxform.harness.guarded), or the draft says why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.guarded import GuardedLaunch, launch_from_guards
from kxform.harness.infer import infer_spec
from kxform.harness.spec import load_spec
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair

ONE_D = """__global__ void twice(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""

TWO_D = """__global__ void scale_2d(const float* in, float* out, int rows, int cols, float s) {
    const int x = blockIdx.x * 16 + threadIdx.x;
    const int y = blockIdx.y * 8 + threadIdx.y;
    if (x < cols && y < rows) out[y * cols + x] = s * in[y * cols + x];
}
"""

PER_ROW = """__global__ void row_scale(float* out, const float* in, int rows, int cols) {
    int row = blockIdx.x;
    if (row >= rows) return;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        out[row * cols + j] = 3.0f * in[row * cols + j];
}
"""

GRID_STRIDE = """__global__ void fill(float* out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        out[i] = 1.0f;
}
"""


def _launch(text: str, kernel: str, size_vars: list[str]) -> GuardedLaunch | str:
    model = parse_model(SourceText("k.cu", text.encode()))
    return launch_from_guards(model, next(f for f in model.kernels if f.name == kernel), size_vars)


@pytest.mark.parametrize(
    "text, kernel, size_vars, grid, block",
    [
        (ONE_D, "twice", ["n"], ("ceil_div(n, 256)",), ("256",)),
        (TWO_D, "scale_2d", ["rows", "cols"], ("ceil_div(cols, 16)", "ceil_div(rows, 8)"), ("16", "8")),
        (PER_ROW, "row_scale", ["rows", "cols"], ("rows",), ("256",)),
        (GRID_STRIDE, "fill", ["n"], ("ceil_div(n, 256)",), ("256",)),
        (
            ONE_D.replace("void twice", "void __launch_bounds__(128) twice"),
            "twice",
            ["n"],
            ("ceil_div(n, 128)",),
            ("128",),
        ),
    ],
)
def test_the_guards_give_the_grid_and_the_written_constants_the_block(
    text: str, kernel: str, size_vars: list[str], grid: tuple[str, ...], block: tuple[str, ...]
) -> None:
    found = _launch(text, kernel, size_vars)
    assert isinstance(found, GuardedLaunch), found
    assert (found.grid, found.block) == (grid, block)
    assert found.note.startswith("review: no launch in the file; from the kernel's guards (")


@pytest.mark.parametrize(
    "text, kernel, why",
    [
        (
            """__global__ void k(float* out, int n) {
    __shared__ float s[128];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    s[threadIdx.x] = 1.0f;
    __syncthreads();
    if (i < n) out[i] = s[threadIdx.x];
}
""",
            "k",
            "shared arrays sized for a block size the file does not show",
        ),
        (
            """__global__ void k(float* out, const float* in, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
    if (i < m) out[i] += 1.0f;
}
""",
            "k",
            "the guards bound blockIdx.x differently (m, n)",
        ),
        (
            """#define AT(p, i) p[i]
__global__ void k(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) AT(out, i) = 1.0f;
    if (i < n) out[ROW(i)] = 1.0f;
}
""",
            "k",
            "has an index kxform cannot read",
        ),
        (
            """__global__ void k(float* out, int n) {
    int i = blockIdx.x * TILE_FROM_ELSEWHERE + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}
""",
            "k",
            "no guard bounds blockIdx.x by the size variables (n)",
        ),
        (
            """__global__ void k(float* out, int n) {
    int i = blockIdx.x * 64 + threadIdx.x;
    if (i < n) out[i] = 1.0f;
    out[blockIdx.y] = 0.0f;
}
""",
            "k",
            "no guard bounds blockIdx.y",
        ),
        (
            """__global__ void __launch_bounds__(64) k(float* out, int n) {
    int i = blockIdx.x * 256 + threadIdx.x;
    if (i < n) out[i] = 1.0f;
}
""",
            "k",
            "the block the guards imply (256) exceeds __launch_bounds__(64)",
        ),
    ],
)
def test_a_launch_the_guards_do_not_settle_is_refused_with_the_reason(text: str, kernel: str, why: str) -> None:
    found = _launch(text, kernel, ["n", "m"] if "int m" in text else ["n"])
    assert isinstance(found, str) and why in found, found


def test_the_draft_says_why_when_the_guards_do_not_settle_the_launch(tmp_path: Path) -> None:
    path = tmp_path / "k.cu"
    path.write_text("__global__ void k(float* out, int n) {\n    out[blockIdx.x] = 1.0f;\n}\n")
    draft = infer_spec(SourceText(str(path), path.read_bytes()), "k")
    assert any(
        "no launch of k in" in todo and "no guard bounds blockIdx.x by the size variables (n)" in todo
        for todo in draft.todos
    ), draft.todos


@pytest.mark.slow
def test_a_draft_from_the_guards_verifies_the_original_and_catches_a_planted_bug(
    tmp_path: Path, cpu: CpuRuntime
) -> None:
    path = tmp_path / "scale.cu"
    path.write_text(TWO_D)
    draft = infer_spec(SourceText(str(path), TWO_D.encode()), "scale_2d", cpu)
    assert not draft.todos, draft.todos
    (tmp_path / "scale.kxspec.toml").write_text(draft.text)
    spec = load_spec(tmp_path / "scale.kxspec.toml").kernel("scale_2d")
    original = validate_bytes(str(path), TWO_D.encode())
    assert verify_pair(original, original, spec, cpu).status == "ok"
    planted = TWO_D.replace("blockIdx.y * 8", "blockIdx.y * 4")  # a wrong tile along y
    report = verify_pair(original, validate_bytes(str(path), planted.encode()), spec, cpu)
    assert report.status == "mismatch", report.summary()


def test_a_kernel_that_does_not_parse_is_refused_as_such() -> None:
    text = (
        "__global__ void k(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] = = 1.0f;\n}\n"
    )
    found = _launch(text, "k", ["n"])
    assert found == "the kernel does not parse (line 3)"
