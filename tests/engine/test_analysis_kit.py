"""The analyses the passes share (the pass kit): thread communication, the call closure,
the statement split and the thread-index shape. Each is one definition every pass reads."""

from __future__ import annotations

import pytest

from kxform.analysis.access import closure_functions, closure_names
from kxform.analysis.communication import Communication, first_communication
from kxform.analysis.manager import AnalysisManager
from kxform.analysis.statements import statements
from kxform.analysis.thread_index import IndexShape, index_axis
from kxform.engine.pass_api import PassContext, RunOptions
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import validate_bytes
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink


def context(text: str) -> PassContext:
    model = parse_model(validate_bytes("k.cu", text.encode()))
    return PassContext(model, load_profile("h100"), RunOptions(), RemarkSink(), analyses=AnalysisManager())


def kernel_of(ctx: PassContext, name: str = "k"):
    return next(k for k in ctx.model.kernels if k.name == name)


INDEPENDENT = """
__device__ float twice(float v) { return 2.0f * v; }
__global__ void k(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { STATEMENT out[i] = twice(in[i]); }
}
"""

FORMS = [
    ("__shared__ float s[32];", "__shared__"),
    ("__syncthreads();", "__syncthreads"),
    ("int c = __syncthreads_count(1);", "__syncthreads_count"),
    ("__syncwarp();", "__syncwarp"),
    ("__threadfence();", "__threadfence"),
    ("float v = __shfl_xor_sync(0xffffffff, 1.0f, 1);", "__shfl_xor_sync"),
    ("float v = __shfl_down_sync(0xffffffff, 1.0f, 1);", "__shfl_down_sync"),
    ("unsigned b = __ballot_sync(0xffffffff, 1);", "__ballot_sync"),
    ("int a = __any_sync(0xffffffff, 1);", "__any_sync"),
    ("int a = __all_sync(0xffffffff, 1);", "__all_sync"),
    ("int a = __any(1);", "__any"),
    ("unsigned m = __match_any_sync(0xffffffff, 1);", "__match_any_sync"),
    ("unsigned r = __reduce_add_sync(0xffffffff, 1u);", "__reduce_add_sync"),
    ("unsigned m = __activemask();", "__activemask"),
    ("atomicAdd(out, 1.0f);", "atomicAdd"),
    ("atomicCAS((int*)out, 0, 1);", "atomicCAS"),
    ("auto b = cg::this_thread_block();", "this_thread_block"),
    ("auto g = cg::this_grid();", "this_grid"),
    ("auto c = cg::this_cluster();", "this_cluster"),
    ("auto t = cg::tiled_partition<16>(b);", "tiled_partition"),
    ("cg::thread_block_tile<32> t;", "thread_block_tile"),
    ("auto a = cg::coalesced_threads();", "coalesced_threads"),
    ("cg::grid_group g;", "grid_group"),
    ('asm volatile("bar.sync 0;");', "bar.sync"),
    ('asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 31, -1;" : "=r"(x) : "r"(y));', "shfl.sync"),
    ('asm volatile("red.global.add.f32 [%0], %1;" :: "l"(out), "f"(1.0f));', "red.global"),
]


@pytest.mark.parametrize("statement, what", FORMS, ids=[w for _, w in FORMS])
def test_every_form_of_communication_is_found_in_the_kernel(statement, what):
    ctx = context(INDEPENDENT.replace("STATEMENT", statement))
    found = ctx.analysis(Communication, kernel_of(ctx)).found
    assert found is not None and found.what == what
    assert found.line == 5 and found.how == f"{what} (line 5)"


@pytest.mark.parametrize("statement, what", FORMS[:8], ids=[w for _, w in FORMS[:8]])
def test_communication_in_a_callee_is_found(statement, what):
    text = INDEPENDENT.replace("return 2.0f * v;", f"{statement} return 2.0f * v;").replace("STATEMENT", "")
    ctx = context(text)
    found = ctx.analysis(Communication, kernel_of(ctx)).found
    assert found is not None and found.what == what and found.line == 2


def test_independent_threads_do_not_communicate():
    """Names that only resemble a form are not one: a field `atom.x` outside a string, an
    `atomic` variable that is not called, a `red` struct."""
    statement = "float3 red = make_float3(0, 0, 0); float atomic = red.x; struct { float x; } atom; atom.x = atomic;"
    ctx = context(INDEPENDENT.replace("STATEMENT", statement))
    analysis = ctx.analysis(Communication, kernel_of(ctx))
    assert analysis.found is None and not analysis.communicates


def test_a_form_in_a_function_the_kernel_does_not_reach_is_not_its():
    text = INDEPENDENT.replace("STATEMENT", "") + "__device__ void other() { __syncthreads(); }\n"
    ctx = context(text)
    assert ctx.analysis(Communication, kernel_of(ctx)).found is None
    other = next(f for f in ctx.model.functions if f.name == "other")
    assert first_communication(ctx.model, [other]).what == "__syncthreads"


def test_the_closure_is_the_kernel_and_the_device_functions_it_reaches():
    text = INDEPENDENT.replace("STATEMENT", "") + "void host() {}\n"
    ctx = context(text)
    names = [f.name for f in closure_functions(ctx.model, kernel_of(ctx))]
    assert names == ["k", "twice"]
    assert closure_names(ctx.model, kernel_of(ctx)) == frozenset({"k", "twice"})


def test_statements_split_at_the_top_level_with_else_kept_and_comments_dropped():
    text = "int i = f(a, b); // note\nif (i < n) { x[i] = 1; } else { x[i] = 2; }\n/* c; */ for (;;) { g(); }\ntail()"
    assert [t for _, t in statements(text)] == [
        "int i = f(a, b);",
        "if (i < n) { x[i] = 1; } else { x[i] = 2; }",
        "for (;;) { g(); }",
        "tail()",
    ]


@pytest.mark.parametrize(
    "init, axis",
    [
        ("blockIdx.x * blockDim.x + threadIdx.x", "x"),
        ("threadIdx.y + blockDim.y * blockIdx.y", "y"),
        ("(blockIdx.z * blockDim.z) + threadIdx.z", "z"),
        ("blockIdx.x * blockDim.y + threadIdx.x", None),  # a planted mix of axes
        ("blockIdx.x * blockDim.x + threadIdx.x + 1", None),
        ("blockIdx.x * blockDim.x", None),
    ],
)
def test_index_axis_reads_only_a_global_thread_index(init, axis):
    assert index_axis(init) == axis


SHAPED = """
__global__ void k(float* out, int n, int m) {
    // the indices (π: offsets are bytes), then the rest
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = threadIdx.y + blockIdx.y * blockDim.y;
    int again = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && j < m) out[i * m + j] = 1.0f;
}
"""


def test_the_index_shape_is_the_leading_indices_one_per_axis_and_the_rest():
    ctx = context(SHAPED)
    kernel = kernel_of(ctx)
    shape = ctx.analysis(IndexShape, kernel)
    assert [(d.axis, d.var, d.ctype) for d in shape.indices] == [("x", "j", "const int"), ("y", "i", "int")]
    assert shape.axes == ("x", "y") and shape.index("y").var == "i" and shape.index("z") is None
    data = ctx.model.source.data
    for statement in shape.statements:  # byte offsets into the file
        assert data[statement.offset :].decode().startswith(statement.text)
    assert [s.text[:10] for s in shape.rest] == ["int again ", "if (i < n "]
    assert shape.rest_text(ctx.model, kernel).startswith("int again =") and shape.rest_at == shape.rest[0].offset


def test_a_body_without_a_leading_index_has_none():
    ctx = context("__global__ void k(float* o) { float v = 2.0f; int i = blockIdx.x * blockDim.x + threadIdx.x; }\n")
    shape = ctx.analysis(IndexShape, kernel_of(ctx))
    assert shape.indices == () and len(shape.rest) == 2
