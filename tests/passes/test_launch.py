"""The launch pass: block sizes wherever the launch writes them lifted into parameters
(golden before/after), the constraints the kernel's code puts on them (each with its
line), refusals with their reasons, and how a new block size is verified."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.api import explain, space_of
from kxform.engine.pass_api import Outcome
from kxform.hw import load_profile
from conftest import needs_nvcc
from swizzle_helpers import outcomes, remark_names, rewrite

FIXTURES = Path(__file__).parents[1] / "fixtures" / "launch"
GOLDEN = Path(__file__).parents[1] / "golden"
GOLDEN_CASES = {
    "gelu.launch.cu": "gelu/gelu.cu",
    "layernorm_rows.launch.cu": "layernorm_rows/layernorm_rows.cu",
    "gemm_naive.launch.cu": "gemm_naive/gemm_naive.cu",
    "transpose_naive.launch.cu": "transpose_naive/transpose_naive.cu",
    "softmax_rows.launch.cu": "softmax_rows/softmax_rows.cu",
    "silu_caller.launch.cu": "silu_caller/silu_caller.cu",
}


@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden_lift_at_the_original_values_and_a_second_run_changes_nothing(golden: str) -> None:
    path = FIXTURES / GOLDEN_CASES[golden]
    result = rewrite(path.read_bytes(), "launch", path=str(path))
    assert set(outcomes(result).values()) == {Outcome.APPLIED}
    expected = GOLDEN / golden
    if not expected.exists():  # first run on a new case: write it for review, and fail
        expected.write_bytes(result.new_data)
        pytest.fail(f"golden file {expected} written; review it and commit it")
    assert result.new_data == expected.read_bytes()
    (kernel,) = result.results
    assert kernel.policy.compare.mode == "exact" and not kernel.policy.required
    again = rewrite(result.new_data, "launch", path=str(path))
    assert not again.changed and set(outcomes(again).values()) == {Outcome.UNCHANGED}


def test_a_new_block_size_changes_the_definition_only_and_is_verified_bit_exact() -> None:
    path = FIXTURES / "gelu" / "gelu.cu"
    lifted = rewrite(path.read_bytes(), "launch", path=str(path)).new_data
    result = rewrite(lifted, "launch{GELU_FORWARD_BLOCK_X=128}", path=str(path))
    assert result.new_data == lifted.replace(b"#define GELU_FORWARD_BLOCK_X 256", b"#define GELU_FORWARD_BLOCK_X 128")
    policy = result.results[0].policy
    assert policy.required and policy.compare.mode == "exact" and "do not communicate" in policy.compare.reason
    assert policy.launch.grid == ("(n + GELU_FORWARD_BLOCK_X - 1) / GELU_FORWARD_BLOCK_X",)
    assert dict(policy.launch.values) == {"GELU_FORWARD_BLOCK_X": 128}


def test_grids_over_launcher_locals_that_are_not_kernel_arguments_follow_through_the_launch_arguments() -> None:
    path = FIXTURES / "layernorm_rows" / "layernorm_rows.cu"
    result = rewrite(path.read_bytes(), "launch{LAYERNORM_ROWS_BLOCK_X=32}", path=str(path))
    launch = result.results[0].policy.launch
    # `rows` is passed as the kernel's N: the grid is read over N.
    assert launch.grid == ("((N + (LAYERNORM_ROWS_BLOCK_X) - 1) / (LAYERNORM_ROWS_BLOCK_X))",)
    assert b"const int block_size = LAYERNORM_ROWS_BLOCK_X;" in result.new_data


REDUCE = """#include <cuda_runtime.h>

__global__ void __launch_bounds__(512) block_sum(const float *in, float *out, int n)
{
    __shared__ float s[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride)
            s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid < 32)
        s[tid] += 0.0f;
    if (tid == 0)
        out[blockIdx.x] = s[0];
}

void run(const float *in, float *out, int n)
{
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;
    block_sum<<<blocks, threads>>>(in, out, n);
}
"""


def test_the_kernels_assumptions_become_constraints_with_their_lines() -> None:
    space = space_of(REDUCE, "block_sum", "launch", path="r.cu")
    by_text = {c.text: c for c in space.constraints}
    assert set(by_text) == {
        "BLOCK_SUM_BLOCK_X <= hw.max_threads_per_block",
        "BLOCK_SUM_BLOCK_X <= BLOCK_SUM_MAX_THREADS",
        "BLOCK_SUM_MAX_THREADS <= hw.max_threads_per_block",
        "is_pow2(BLOCK_SUM_BLOCK_X)",
        "BLOCK_SUM_BLOCK_X <= 256",
        "BLOCK_SUM_BLOCK_X >= 32",
    }
    assert by_text["is_pow2(BLOCK_SUM_BLOCK_X)"].origin == "r.cu:10"
    assert by_text["BLOCK_SUM_BLOCK_X <= 256"].origin == "r.cu:5"
    assert by_text["BLOCK_SUM_BLOCK_X >= 32"].origin == "r.cu:15"
    assert by_text["BLOCK_SUM_BLOCK_X <= BLOCK_SUM_MAX_THREADS"].origin == "r.cu:3"
    hw = load_profile("h100")
    at = {"BLOCK_SUM_MAX_THREADS": 512}
    assert not space.is_valid({"BLOCK_SUM_BLOCK_X": 96, **at}, hw)
    assert not space.is_valid({"BLOCK_SUM_BLOCK_X": 512, **at}, hw)
    assert space.is_valid({"BLOCK_SUM_BLOCK_X": 64, **at}, hw)
    assert not space.is_valid({"BLOCK_SUM_BLOCK_X": 64, "BLOCK_SUM_MAX_THREADS": 32}, hw)


def test_launch_bounds_are_lifted_beside_the_block_and_a_block_above_them_is_refused() -> None:
    result = rewrite(REDUCE, "launch", path="r.cu")
    out = result.new_data.decode()
    assert (
        "#ifndef BLOCK_SUM_MAX_THREADS\n#define BLOCK_SUM_MAX_THREADS 512\n#endif\n__global__ void "
        "__launch_bounds__(BLOCK_SUM_MAX_THREADS) block_sum(" in out
    )
    assert outcomes(rewrite(out, "launch", path="r.cu")) == {"block_sum": Outcome.UNCHANGED}
    lower = rewrite(out, "launch{BLOCK_SUM_MAX_THREADS=256}", path="r.cu")
    assert lower.new_data.decode() == out.replace(
        "#define BLOCK_SUM_MAX_THREADS 512", "#define BLOCK_SUM_MAX_THREADS 256"
    )
    assert (
        lower.results[0].policy.compare.mode == "exact"
        and "register allocation" in lower.results[0].policy.compare.reason
    )
    below = rewrite(out, "launch{BLOCK_SUM_MAX_THREADS=128}", path="r.cu")
    assert not below.changed and "BLOCK_SUM_BLOCK_X <= BLOCK_SUM_MAX_THREADS" in below.results[0].reasons[0]


def test_a_value_the_kernel_cannot_take_is_never_proposed_and_is_refused_when_asked() -> None:
    from kxform.api import _analysed

    pass_, ctx, analysis = _analysed(REDUCE, "block_sum", "launch", "r.cu", "h100", None)
    proposed = [int(p.options["BLOCK_SUM_BLOCK_X"]) for p in pass_.candidates(ctx, analysis)]
    assert proposed == [128, 64, 32]  # powers of two from 32 to 256, nearest first
    result = rewrite(REDUCE, "launch{BLOCK_SUM_BLOCK_X=512}", path="r.cu")
    assert outcomes(result) == {"block_sum": Outcome.FAILED} and not result.changed
    assert "BLOCK_SUM_BLOCK_X <= 256 [r.cu:5]" in result.results[0].reasons[0]


def test_threads_that_communicate_compare_within_twice_the_spec_tolerance() -> None:
    result = rewrite(REDUCE, "launch{BLOCK_SUM_BLOCK_X=128}", path="r.cu")
    compare = result.results[0].policy.compare
    assert compare.mode == "spec" and compare.scale == 2.0 and "__shared__ (line 5)" in compare.reason


LAUNCHER = """#include <cuda_runtime.h>
__global__ void scale(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= 2.0f;
}
"""


@pytest.mark.parametrize(
    ("launcher", "key", "words"),
    [
        (
            "void run(float *x, int n, int block_size) { float *h = new float[block_size];\n"
            "  scale<<<(n + block_size - 1) / block_size, block_size>>>(x, n); }",
            "HostUse",
            "'block_size', the block size the callers of 'run' pass to 'scale', is also read by host code (line 8)",
        ),
        (
            "void run(float *x, int n, int b) { scale<<<n / b, b>>>(x, n); scale<<<n / 64, 64>>>(x, n); }\n"
            "void a(float *x) { run(x, 10, 64); }\nvoid c(float *x) { run(x, 10, 128); }",
            "LaunchesDisagree",
            "write block.x as b (line 8), 64 (line 8): some from a caller, some not",
        ),
        (
            "void run(float *x, int n) { scale<<<n / 256, 256>>>(x, n); scale<<<n / 128, 128>>>(x, n); }",
            "LaunchesDisagree",
            "write block.x as 256 (line 8), 128 (line 8)",
        ),
        (
            "#define BLOCK 256\nvoid run(float *x, int n) { scale<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x, n); }",
            "TileParameter",
            "BLOCK (line 9), a file-scope constant of this file",
        ),
        (
            "void run(float *x, int n) { const int t = 256; float *h = new float[t]; scale<<<n / t, t>>>(x, n); }",
            "HostUse",
            "'t', which changes with the block size of 'scale', is also read by host code (line 8)",
        ),
        (
            "void run(float *x, int n) { const int t = 256; const int g = (n + t - 1) / t;\n"
            "  scale<<<g, t>>>(x, n); scale2<<<g, n / 2>>>(x, n); }",
            "SharedWithOtherKernels",
            "'g', which changes with the block size of 'scale', also launches 'scale2' (line 10)",
        ),
        (
            "void run(float *x, int n) { scale<<<1, n / 2>>>(x, n); }",
            "BlockExpression",
            "'n / 2' (line 8), an expression kxform does not follow",
        ),
        ("", "NoLaunchSite", "'scale' is not launched in this file"),
    ],
)
def test_refusals_say_why_and_touch_nothing(launcher: str, key: str, words: str) -> None:
    second = (
        "__global__ void scale2(float *x, int n) { x[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }\n"
        if "scale2" in launcher
        else ""
    )
    result = rewrite(LAUNCHER + second + launcher + "\n", "launch", path="k.cu")
    assert outcomes(result)["scale"] is Outcome.MISSED and not result.changed
    assert key in remark_names(result)
    assert any(words in r.message for r in result.remarks), [r.message for r in result.remarks]


def test_a_body_written_for_one_block_size_is_refused() -> None:
    text = (
        LAUNCHER.replace("blockIdx.x * blockDim.x", "blockIdx.x * 256")
        + "void run(float *x, int n) { scale<<<(n + 255) / 256, 256>>>(x, n); }\n"
    )
    result = rewrite(text, "launch", path="k.cu")
    assert outcomes(result) == {"scale": Outcome.MISSED}
    assert any(r.name == "HandWrittenBlockSize" and "line 4 spells 256" in r.message for r in result.remarks)


def test_an_unknown_parameter_is_named_with_the_known_ones() -> None:
    path = FIXTURES / "gelu" / "gelu.cu"
    result = rewrite(path.read_bytes(), "launch{BLOCK=64}", path=str(path))
    assert not result.changed
    assert any(
        "BLOCK is not a parameter of any kernel in this file (parameters: GELU_FORWARD_BLOCK_X, GELU_FORWARD_MIN_BLOCKS)"
        in r.message
        for r in result.remarks
    )


def test_a_block_size_macro_from_an_included_header_is_lifted(tmp_path: Path) -> None:
    (tmp_path / "params.h").write_text("#define ROW_THREADS 64\n")
    source = tmp_path / "k.cu"
    source.write_text(
        '#include "params.h"\n'
        + LAUNCHER
        + "void run(float *x, int n) { scale<<<(n + ROW_THREADS - 1) / ROW_THREADS, ROW_THREADS>>>(x, n); }\n"
    )
    info = explain(source.read_bytes(), "scale", "launch", path=str(source))
    assert [(p["name"], p["default"]) for p in info["params"]] == [("SCALE_BLOCK_X", 64), ("SCALE_MIN_BLOCKS", 0)]
    result = rewrite(source.read_bytes(), "launch", path=str(source))
    assert b"scale<<<(n + SCALE_BLOCK_X - 1) / SCALE_BLOCK_X, SCALE_BLOCK_X>>>" in result.new_data
    assert b"#ifndef SCALE_BLOCK_X\n#define SCALE_BLOCK_X 64\n#endif\nvoid run" in result.new_data


CALLER = (
    LAUNCHER
    + """
static void launch_scale(float *x, int n, int block_size)
{
    int blocks = (n + block_size - 1) / block_size;
    scale<<<blocks, block_size>>>(x, n);
}

void run(float *x, int n)
{
    launch_scale(x, n, 128);
}
"""
)


def test_a_block_size_from_the_one_caller_is_lifted_where_the_caller_writes_it() -> None:
    result = rewrite(CALLER, "launch", path="k.cu")
    assert outcomes(result) == {"scale": Outcome.APPLIED}
    assert result.new_data.decode() == CALLER.replace(
        "static void launch_scale", "#ifndef SCALE_BLOCK_X\n#define SCALE_BLOCK_X 128\n#endif\nstatic void launch_scale"
    ).replace("launch_scale(x, n, 128);", "launch_scale(x, n, SCALE_BLOCK_X);")
    again = rewrite(result.new_data, "launch", path="k.cu")
    assert not again.changed and outcomes(again) == {"scale": Outcome.UNCHANGED}
    launch = rewrite(CALLER, "launch{SCALE_BLOCK_X=64}", path="k.cu").results[0].policy.launch
    assert launch.block == ("SCALE_BLOCK_X",) and launch.grid == ("((n + SCALE_BLOCK_X - 1) / SCALE_BLOCK_X)",)


def test_a_local_assigned_once_is_followed_and_one_assigned_again_is_not() -> None:
    once = LAUNCHER + "void run(float *x, int n) { int t = 64; int g = (n + t - 1) / t; scale<<<g, t>>>(x, n); }\n"
    result = rewrite(once, "launch", path="k.cu")
    assert b"int t = SCALE_BLOCK_X;" in result.new_data
    again = once.replace("int t = 64;", "int t = 64; t *= 2;")
    assert outcomes(rewrite(again, "launch", path="k.cu")) == {"scale": Outcome.MISSED}


def test_a_header_macro_the_kernel_reads_too_bounds_or_refuses_the_block(tmp_path: Path) -> None:
    (tmp_path / "params.h").write_text("#define THREADS 128\n")
    body = """#include "params.h"
__global__ void total(const float *x, float *out, int n)
{
    __shared__ float s[THREADS];
    s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) out[blockIdx.x] = s[0] + STEP;
}
void run(const float *x, float *out, int n) { total<<<n / THREADS, THREADS>>>(x, out, n); }
"""
    source = tmp_path / "k.cu"
    source.write_text(body.replace(" + STEP", ""))
    space = space_of(source.read_bytes(), "total", "launch", path=str(source))
    assert "TOTAL_BLOCK_X <= 128" in {c.text for c in space.constraints}  # s[THREADS]: one element per thread
    source.write_text(body.replace("STEP", "THREADS"))
    result = rewrite(source.read_bytes(), "launch", path=str(source))
    assert outcomes(result) == {"total": Outcome.MISSED}
    assert any("line 7 reads THREADS, the macro the launch sizes the block" in r.message for r in result.remarks)


def test_a_literal_that_caps_the_block_is_the_parameter() -> None:
    text = LAUNCHER + "void run(float *x, int n) { dim3 block(std::min(n, 1024)); scale<<<1, block>>>(x, n); }\n"
    result = rewrite(text, "launch", path="k.cu")
    assert b"dim3 block(std::min(n, SCALE_BLOCK_X));" in result.new_data
    launch = rewrite(text, "launch{SCALE_BLOCK_X=256}", path="k.cu").results[0].policy.launch
    assert launch.block == ("min(n, SCALE_BLOCK_X)",)


def test_the_tile_pass_leaves_the_launch_parameters_to_the_launch_pass() -> None:
    path = FIXTURES / "gelu" / "gelu.cu"
    lifted = rewrite(path.read_bytes(), "launch", path=str(path)).new_data
    tile = rewrite(lifted, "tile", path=str(path))
    assert outcomes(tile) == {"gelu_forward": Outcome.MISSED} and not tile.changed
    assert any(
        r.name == "LaunchParameter"
        and "GELU_FORWARD_BLOCK_X is the block size or launch bound the launch pass lifted" in r.message
        for r in tile.remarks
    )


def test_a_hip_launch_is_lifted_like_a_chevron() -> None:
    text = """#include <hip/hip_runtime.h>
__global__ void k(float *x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = 0; }
void r(float *x, int n) {
    hipLaunchKernelGGL(k, dim3((n + 255) / 256), dim3(256), 0, 0, x, n);
}
"""
    result = rewrite(text, "launch", path="k.hip")
    assert (
        b"hipLaunchKernelGGL(k, dim3((n + K_BLOCK_X - 1) / K_BLOCK_X), dim3(K_BLOCK_X), 0, 0, x, n);" in result.new_data
    )


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("golden", sorted(GOLDEN_CASES))
def test_golden_rewrites_compile(golden: str, tmp_path: Path) -> None:
    from kxform.build.builder import Builder
    from kxform.build.nvcc import BuildJob

    source = FIXTURES / GOLDEN_CASES[golden]
    job = BuildJob(
        source=(GOLDEN / golden).read_text(),
        filename=golden,
        output="check",
        arch="sm_90",
        source_dir=str(source.parent),
    )
    result = Builder(cache_dir=tmp_path).build(job)
    assert result.ok, result.log


@needs_nvcc
def test_launch_bounds_are_added_with_the_block_as_their_maximum() -> None:
    """Where the kernel has none: `__launch_bounds__(BLOCK, MIN_BLOCKS)` after `__global__`,
    the block's names defined before the kernel (the attribute reads them)."""
    path = FIXTURES / "gelu" / "gelu.cu"
    result = rewrite(path.read_bytes(), "launch{GELU_FORWARD_MIN_BLOCKS=2}", path=str(path))
    assert result.changed, [r.message for r in result.remarks]
    text = result.new_data.decode()
    attribute = "__global__ __launch_bounds__(GELU_FORWARD_BLOCK_X, GELU_FORWARD_MIN_BLOCKS) void gelu_forward("
    assert attribute in text
    assert text.index("#define GELU_FORWARD_BLOCK_X 256") < text.index(attribute)
    assert text.index("#define GELU_FORWARD_MIN_BLOCKS 2") < text.index(attribute)


def test_launch_bounds_are_not_offered_where_the_block_is_defined_after_the_kernel() -> None:
    """A block size already lifted before its launcher (after the kernel) cannot bound the
    kernel: the attribute would read a name not yet defined."""
    lifted = LAUNCHER + (
        "#define SCALE_BLOCK_X 128\nvoid run(float *x, int n) "
        "{ scale<<<(n + SCALE_BLOCK_X - 1) / SCALE_BLOCK_X, SCALE_BLOCK_X>>>(x, n); }\n"
    )
    names = space_of(lifted.encode(), "scale", "launch", path="k.cu").names
    assert names == ("SCALE_BLOCK_X",)
    first = LAUNCHER + "void run(float *x, int n) { scale<<<(n + 127) / 128, 128>>>(x, n); }\n"
    assert space_of(first.encode(), "scale", "launch", path="k.cu").names == ("SCALE_BLOCK_X", "SCALE_MIN_BLOCKS")


def test_candidates_are_nearest_first_beside_an_added_launch_bound_of_default_zero() -> None:
    """A kernel that may get a launch bound (its parameter's default is 0: none) still
    gets its block sizes ordered by distance from the original (the bound, at 0, is no
    distance to divide by)."""
    from kxform.api import analyse_kernel, kernel_context
    from kxform.engine.registry import default_registry

    path = Path(__file__).parents[2] / "corpora" / "naive" / "gelu_f32" / "naive.cu"
    ctx = kernel_context(path.read_bytes(), "gelu_f32_naive", path=str(path))
    pass_ = default_registry().get("launch")()
    space = pass_.space(ctx, analyse_kernel(pass_, ctx, "gelu_f32_naive"))
    assert space.defaults()["GELU_F32_NAIVE_MIN_BLOCKS"] == 0
    found = [
        p.options["GELU_F32_NAIVE_BLOCK_X"] for p in pass_.candidates(ctx, analyse_kernel(pass_, ctx, "gelu_f32_naive"))
    ]
    assert found[:3] == [64, 256, 32]
