"""`kxform harness infer` on launches written the ways real files write them: grids over
`block.x`, over launcher locals the kernel receives under another name, C casts and
`ceil()` over floats, block sizes and problem sizes that are macros of an included header,
scalars typed through a macro or typedef, and a draft written into another directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from kxform.frontend.source import SourceText
from kxform.harness.infer import infer_spec

FIXTURES = Path(__file__).parents[1] / "fixtures" / "launch"

HEADER = """#define DATA_TYPE float
typedef int index_t;
#define NI 100
#define NJ 90
#define DIM_THREAD_BLOCK_X 32
#define DIM_THREAD_BLOCK_Y 8
"""

POLYBENCH = """#include <math.h>
#include "polybench.h"

__global__ void scale_kernel(index_t ni, index_t nj, DATA_TYPE alpha, DATA_TYPE *a, DATA_TYPE *c)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if ((i < ni) && (j < nj))
        c[i * nj + j] = alpha * a[i * nj + j] + (isinf(a[i * nj + j]) ? INFINITY : 0.0f);
}

void scaleCuda(DATA_TYPE *a, DATA_TYPE *c)
{
    dim3 block(DIM_THREAD_BLOCK_X, DIM_THREAD_BLOCK_Y);
    dim3 grid((size_t)(ceil(((float)NJ) / ((float)block.x))), (size_t)(ceil(((float)NI) / ((float)block.y))));
    scale_kernel<<<grid, block>>>(NI, NJ, 2.5f, a, c);
}
"""


def _draft(path: Path, kernel: str) -> str:
    return infer_spec(SourceText(str(path), path.read_bytes()), kernel).text


def test_a_grid_written_with_block_x_is_drafted_over_the_size_variables() -> None:
    text = _draft(FIXTURES / "gemm_naive" / "gemm_naive.cu", "gemm_naive")
    assert 'grid = ["(N + (16) - 1) / (16)", "(M + (16) - 1) / (16)"]  # from the launch at line 21' in text
    assert 'block = ["16", "16"]\n' in text


def test_a_grid_over_a_launcher_local_is_drafted_over_the_kernel_argument_it_is_passed_as() -> None:
    text = _draft(FIXTURES / "layernorm_rows" / "layernorm_rows.cu", "layernorm_rows")
    assert 'grid = ["((N + (128) - 1) / (128))"]' in text  # `rows` is passed as N


def test_header_macros_casts_ceil_and_typed_scalars(tmp_path: Path) -> None:
    (tmp_path / "polybench.h").write_text(HEADER)
    (tmp_path / "scale.cu").write_text(POLYBENCH)
    text = _draft(tmp_path / "scale.cu", "scale_kernel")
    assert 'grid = ["(ceil_div((nj), ((32))))", "(ceil_div((ni), ((8))))"]' in text
    assert 'block = ["32", "8"]' in text
    alpha = text.split('name = "alpha"')[1].split("[[")[0]
    assert 'dtype = "float32"' in alpha  # DATA_TYPE is float, not an int32 size
    ni = text.split('name = "ni"')[1].split("[[")[0]
    assert 'dtype = "int32"' in ni and 'value = "ni"' in ni  # index_t is an int: a size variable
    assert "# fill in:" not in text.split("[[")[0]  # the launch needs no hand edit


@pytest.mark.slow
def test_the_draft_written_elsewhere_checks_and_verifies_the_original_with_no_hand_edit(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "polybench.h").write_text(HEADER)
    (tmp_path / "src" / "scale.cu").write_text(POLYBENCH)
    (tmp_path / "specs").mkdir()
    proc = run_cli(
        "harness", "infer", "src/scale.cu", "--kernel", "scale_kernel", "-o", "specs/scale.toml", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    spec = (tmp_path / "specs" / "scale.toml").read_text()
    assert 'file = "../src/scale.cu"' in spec and "# fill in:" not in spec
    assert run_cli("harness", "check", "specs/scale.toml", cwd=tmp_path).returncode == 0
    verify = run_cli(
        "verify",
        "src/scale.cu",
        "src/scale.cu",
        "--kernel",
        "scale_kernel",
        "--spec",
        "specs/scale.toml",
        "--runtime",
        "cpu",
        cwd=tmp_path,
    )
    assert verify.returncode == 0 and "verified on the cpu runtime" in verify.stdout + verify.stderr


TEMPLATE = """template <typename T, int BLOCK>
__global__ void axpy(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

void run(float a, const float *x, float *y, int n)
{
    axpy<float, 128><<<(n + 127) / 128, 128>>>(a, x, y, n);
}
"""


def test_a_template_kernel_named_without_arguments_gets_the_instantiation_its_launch_spells(tmp_path: Path) -> None:
    (tmp_path / "axpy.cu").write_text(TEMPLATE)
    text = _draft(tmp_path / "axpy.cu", "axpy")
    assert '[kernel."axpy<float, 128>"]' in text and '[kernel."axpy"]' not in text
    assert text.count('dtype = "float32"') == 3 and "has no spec dtype" not in text  # T is float
    assert 'grid = ["(n + 127) / 128"]' in text


def test_a_grid_over_a_launcher_parameter_the_kernel_does_not_receive_becomes_a_size_variable(tmp_path: Path) -> None:
    (tmp_path / "rows.cu").write_text("""__global__ void row_scale(float *out, const float *in, int cols)
{
    int row = blockIdx.x;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        out[row * cols + j] = 2.0f * in[row * cols + j];
}

void launch_row_scale(float *out, const float *in, int rows, int cols)
{
    row_scale<<<rows, 128>>>(out, in, cols);
}
""")
    draft = infer_spec(SourceText(str(tmp_path / "rows.cu"), (tmp_path / "rows.cu").read_bytes()), "row_scale")
    assert 'grid = ["rows"]  # from the launch at line 10' in draft.text
    sizes = draft.text.split("sizes]]")[1]
    assert "cols = " in sizes and "rows = " in sizes  # rows is a size of its own, not a kernel argument
    assert not any("grid" in todo for todo in draft.todos)


CALLER = """__global__ void scale(float *out, const float *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}

static void launch_scale(float *out, const float *in, int n, int block_size)
{
    scale<<<(n + block_size - 1) / block_size, block_size>>>(out, in, n);
}

void scale_all(float *out, const float *in, int n)
{
    launch_scale(out, in, n, 512);
}
"""


def test_a_block_size_every_caller_passes_as_one_constant_is_that_constant(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(CALLER)
    text = _draft(tmp_path / "scale.cu", "scale")
    assert (
        'grid = ["(n + 512 - 1) / 512"]  # from the launch at line 9 (block_size = 512 at every call of '
        "launch_scale)" in text
    )
    assert 'block = ["512"]\n' in text
    assert "block_size = " not in text.split("sizes]]")[1]  # not a size variable


def test_a_block_size_the_callers_pass_differently_is_a_size_variable(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(
        CALLER.replace(
            "launch_scale(out, in, n, 512);", "launch_scale(out, in, n, 512);\n    launch_scale(out, in, n, 128);"
        )
    )
    text = _draft(tmp_path / "scale.cu", "scale")
    ragged, tiles = text.split("sizes]]")[1:3]
    # whole warps, never grown; three warps at the ragged size (not a power of two), 256 at the other
    assert 'block = ["block_size"]' in text
    assert "block_size = 96  # review: the block size the launcher takes from its caller" in ragged
    assert "block_size = 256  # review: the block size the launcher takes from its caller" in tiles


def test_sizes_the_launcher_requires_to_be_multiples_are_drafted_as_multiples(tmp_path: Path) -> None:
    (tmp_path / "pack.cu").write_text("""#include <cstdio>
#include <cstdlib>
__global__ void pack(unsigned *out, const unsigned *in, const uint n, const uint width)
{
    uint i = blockIdx.x * 128 + threadIdx.x;
    if (i < n * (width / 8)) out[i] = in[i];
}

void launch_pack(unsigned *out, const unsigned *in, uint n, uint width)
{
    if (width % 8 != 0) {
        fprintf(stderr, "width must be a multiple of 8\\n");
        exit(1);
    }
    assert(n % 2 == 0);
    pack<<<(n * (width / 8) + 127) / 128, 128>>>(out, in, n, width);
}
""")
    text = _draft(tmp_path / "pack.cu", "pack")
    sizes = text.split("sizes]]")[1]
    assert "width = 48  # review: a multiple of 8, as the launcher requires" in sizes  # 45 rounded up
    values = [int(line.split()[2]) for line in text.splitlines() if line.startswith(("n = ", "width = "))]
    assert values and all(v % 2 == 0 for v in values[::2]) and all(v % 8 == 0 for v in values[1::2]), values
    assert 'dtype = "uint32"' in text.split('name = "n"')[1].split("[[")[0]  # `uint` is a size, not an element


HOST_TEMPLATE = """template <typename T, int TILE>
__global__ void scale_tiles(T *out, const T *in, int n)
{
    int i = blockIdx.x * TILE + threadIdx.x;
    if (i < n) out[i] = in[i] + in[i];
}

template <typename T, int TILE>
void run_scale(T *out, const T *in, int n)
{
    dim3 block(TILE);
    dim3 grid((n + TILE - 1) / TILE);
    scale_tiles<T, TILE><<<grid, block>>>(out, in, n);
}

void run_all(float *f, const float *fin, double *d, const double *din, int n)
{
    run_scale<float, 64>(f, fin, n);
    run_scale<double, 128>(d, din, n);
}
"""


def test_a_launch_inside_a_function_template_is_drafted_at_its_first_spelled_call(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(HOST_TEMPLATE)
    text = _draft(tmp_path / "scale.cu", "scale_tiles")
    assert '[kernel."scale_tiles<float, 64>"]' in text
    assert (
        'grid = ["(n + 64 - 1) / 64"]  # from the launch at line 13 (TILE = 64 at the first call of run_scale)' in text
    )
    assert 'block = ["64"]' in text and text.count('dtype = "float32"') == 2 and "# fill in:" not in text.split("[[")[0]


def test_a_size_every_caller_passes_as_a_constant_stays_a_size_variable(tmp_path: Path) -> None:
    (tmp_path / "scale.cu").write_text(
        CALLER.replace("launch_scale(out, in, n, 512);", "launch_scale(out, in, 4096, 512);")
    )
    text = _draft(tmp_path / "scale.cu", "scale")
    assert 'grid = ["(n + 512 - 1) / 512"]' in text and "n = " in text.split("sizes]]")[1]


FAILS_ON_EVERY_RUN = """__global__ void idiv(const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int z = n / (n + 1);
  if (i < n) y[i] = x[i] / z;
}
void go(const int* x, int* y, int n) { idiv<<<(n + 255) / 256, 256>>>(x, y, n); }
"""


@pytest.mark.slow
def test_a_draft_whose_measuring_run_failed_says_its_sizes_are_guesses(tmp_path: Path) -> None:
    """Sizes the measuring run never confirmed (it crashed: a division by zero at every
    size) are said to be guesses on stderr, at the top of the draft and on each size line,
    never passed off as reviewed values."""
    (tmp_path / "k.cu").write_text(FAILS_ON_EVERY_RUN)
    proc = run_cli("harness", "infer", "k.cu", "--kernel", "idiv", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (warning,) = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warning.startswith("kxform: warning: k.cu: 'idiv': the measuring run failed (") and "division" in warning
    assert "so the sizes (ragged: n=" in warning and "are kxform's starting guesses" in warning
    head = proc.stdout.splitlines()[1]
    assert head.startswith("# WARNING: the measuring run failed")
    sizes = [line for line in proc.stdout.splitlines() if line.startswith("n = ")]
    assert len(sizes) == 2 and all(line.endswith("# guessed: the measuring run failed") for line in sizes)
    # the draft of a kernel that runs says nothing of the kind
    (tmp_path / "k.cu").write_text(FAILS_ON_EVERY_RUN.replace("int z = n / (n + 1);", "int z = 1 + n / (n + 1);"))
    fine = run_cli("harness", "infer", "k.cu", "--kernel", "idiv", cwd=tmp_path)
    assert fine.returncode == 0 and "warning" not in fine.stderr and "WARNING" not in fine.stdout, fine.stderr


LONG_COUNT = """__global__ void gelu_long(float* y, const float* x, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] = 0.5f * x[i];
}

void gelu(float* y, const float* x, long n) { gelu_long<<<1024, 256>>>(y, x, n); }
"""


@pytest.mark.parametrize("ctype", ["long", "unsigned long", "ptrdiff_t", "size_t"])
def test_a_64_bit_count_is_drafted_as_one_and_measured(tmp_path: Path, ctype: str) -> None:
    """A `long` count (LP64: 8 bytes) was drafted as int32, so the measuring run failed
    (`the kernel parameter has 8 bytes but the scalar given has 4`) and the sizes were
    guesses; a scalar type with no spec dtype is a line to fill in, never a silent int32."""
    path = tmp_path / "g.cu"
    path.write_text(LONG_COUNT.replace("long n", f"{ctype} n"))
    draft = infer_spec(SourceText(str(path), path.read_bytes()), "gelu_long")
    scalar = draft.text.split('name = "n"')[1].split("[[")[0]
    assert 'dtype = "int64"' in scalar or 'dtype = "uint64"' in scalar, scalar
    assert "measuring run failed" not in draft.text
    unknown = infer_spec(
        SourceText(str(path), path.read_bytes().replace(ctype.encode() + b" n", b"idx_t n")), "gelu_long"
    )
    assert "fill in: scalar type 'idx_t' has no spec dtype" in unknown.text
