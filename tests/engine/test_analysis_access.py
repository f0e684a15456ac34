"""The shared access analysis (kxform.analysis): loops, reductions, dependences and affine
indices, checked against expectations written by hand for corpus kernels and small
kernels of the forms the passes target."""

from __future__ import annotations

import pytest

from kxform.analysis import AccessAnalysis, Affine, Comparison, NotAffine, analyse_function
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source, validate_bytes

from conftest import CORPORA


def analysed(path: str, kernel: str) -> AccessAnalysis:
    model = parse_model(read_source(CORPORA / path))
    return analyse_function(model, next(k for k in model.kernels if k.name == kernel))


def analysed_text(text: str, kernel: str) -> AccessAnalysis:
    model = parse_model(validate_bytes("k.cu", text.encode()))
    return analyse_function(model, next(k for k in model.kernels if k.name == kernel))


def form(*terms: tuple[tuple[str, ...], int]) -> Affine:
    return Affine.of(dict(terms))


GLOBAL_X = form((("blockDim.x", "blockIdx.x"), 1), (("threadIdx.x",), 1))


# -- the affine form ----------------------------------------------------------------


def test_affine_forms_compare_by_value_and_keep_parameter_coefficients() -> None:
    row = Affine.symbol("blockIdx.y") * Affine.symbol("blockDim.y") + Affine.symbol("threadIdx.y")
    index = row * Affine.symbol("K") + Affine.symbol("k")
    assert index.coefficient("threadIdx.y") == Affine.symbol("K")
    assert index.stride("k") == 1 and index.stride("threadIdx.y") is None and index.stride("threadIdx.x") == 0
    assert index - Affine.symbol("k") + Affine.symbol("k") == index
    assert Affine.const(3).scaled(4).value == 12 and index.value is None
    assert str(Affine.symbol("n").scaled(-1) + Affine.const(2)) == "-n + 2"
    assert index.substitute("k", Affine.symbol("k") + Affine.const(1)) == index + Affine.const(1)
    tid = Affine.symbol("threadIdx.x")
    assert (tid.scaled(4) + Affine.const(8)).multiple_of(4) and not (tid.scaled(4) + Affine.const(2)).multiple_of(4)
    assert not (Affine.symbol("n") * Affine.symbol("row")).multiple_of(2) and Affine().multiple_of(16)


# -- an elementwise kernel ----------------------------------------------------------


def test_elementwise_kernel_contiguous_accesses_under_their_guard() -> None:
    a = analysed("fused_bias_gelu/fused_bias_gelu.cu", "fused_bias_gelu_residual")
    assert a.loops == ()
    by_buffer = {x.buffer: x for x in a.accesses}
    assert set(by_buffer) == {"x", "bias", "residual", "out"}
    for name in ("x", "residual", "out"):
        access = by_buffer[name]
        assert access.index == GLOBAL_X and access.contiguous and access.via == ("i",)
        assert [str(g) for g in access.guards] == ["i < n"]
        assert access.guards[0].bounds == (Comparison(GLOBAL_X, "<", Affine.symbol("n")),)
    assert by_buffer["out"].mode == "write" and by_buffer["x"].mode == "read"
    assert isinstance(by_buffer["bias"].index, NotAffine) and "remainder" in by_buffer["bias"].index.reason
    assert by_buffer["bias"].depends == {"blockIdx.x", "blockDim.x", "threadIdx.x"}
    assert a.buffer("x").restrict and a.buffer("x").const and a.buffer("x").element == "float"
    assert not a.thread_shared_writes and not a.communicates


# -- a one-thread-per-row normalisation with its reductions --------------------------

ROWWISE = """
__global__ void layernorm_naive(float* out, float* mean, float* rstd, const float* inp,
                                const float* weight, const float* bias, int N, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float eps = 1e-5f;
    if (idx < N) {
        const float* x = inp + idx * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];
        }
        m = m / C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float xshift = x[i] - m;
            v = v + xshift * xshift;
        }
        v = v / C;
        float mx = -INFINITY;
        for (int i = 0; i < C; i++) mx = fmaxf(mx, x[i]);
        float s = 1.0f / sqrtf(v + eps);
        float* out_idx = out + idx * C;
        for (int i = 0; i < C; i++) {
            float n = (s * (x[i] - m));
            out_idx[i] = n * weight[i] + bias[i] + mx;
        }
        mean[idx] = m;
        rstd[idx] = s;
    }
}
__global__ void prefix(float* out, const float* x, int C) {
    float acc = 0.0f;
    for (int i = 0; i < C; i++) {
        acc += x[i];
        out[i] = acc;
    }
}
"""


def test_rowwise_kernel_reductions_and_distributable_loops() -> None:
    a = analysed_text(ROWWISE, "layernorm_naive")
    assert [loop.var for loop in a.loops] == ["i"] * 4 and all(loop.parent is None for loop in a.loops)
    assert all(loop.distributable and loop.independent for loop in a.loops)
    sums = [(r.var, r.op, r.identity, r.init) for r in a.reductions]
    assert sums == [("m", "+", "0.0f", "0.0f"), ("v", "+", "0.0f", "0.0f"), ("mx", "max", "-INFINITY", "-INFINITY")]
    assert [len(loop.reductions) for loop in a.loops] == [1, 1, 1, 0]
    text = ROWWISE.encode()
    reads = {r.var: [text[s.start : s.end].decode() for s in r.read_after] for r in a.reductions}
    assert {k: len(v) for k, v in reads.items()} == {"m": 4, "v": 2, "mx": 1}  # m / C, x[i] - m (twice), mean[idx]
    assert all(
        loop.bound == Affine.symbol("C") and loop.step == Affine.const(1) and loop.trip is None for loop in a.loops
    )
    row = [x for x in a.accesses if x.buffer == "inp"]
    assert len(row) == 4
    expected = GLOBAL_X * Affine.symbol("C") + Affine.symbol("i")  # x = inp + idx * C, followed
    assert all(x.index == expected and not x.contiguous for x in row)
    assert a.thread_stride(row[0]) == Affine.symbol("C")
    assert all(str(x.guards[0]) == "idx < N" for x in a.accesses)
    (out,) = [x for x in a.accesses if x.buffer == "out"]
    assert out.write and out.index == expected and out.loops == (3,)


def test_a_running_sum_that_is_read_in_the_loop_is_carried_not_a_reduction() -> None:
    a = analysed_text(ROWWISE, "prefix")
    (loop,) = a.loops
    assert loop.reductions == () and not loop.distributable
    assert any("`acc` is assigned in one iteration and read in another" in c for c in loop.carried)


# -- a naive GEMM nest ----------------------------------------------------------------


def test_naive_gemm_nest_has_an_independent_mapping_and_a_reduction_loop() -> None:
    a = analysed("hip_sgemm/sgemm_naive.hip", "sgemm_naive")
    row, col, k = a.loops
    assert (row.var, col.var, k.var) == ("row", "col", "k")
    assert (row.parent, col.parent, k.parent) == (None, 0, 1) and k.depth == 2
    assert row.init == form((("blockDim.y", "blockIdx.y"), 1), (("threadIdx.y",), 1))
    assert row.step == form((("blockDim.y", "gridDim.y"), 1)) and row.bound == Affine.symbol("M")
    assert k.init == Affine.const(0) and k.bound == Affine.symbol("K") and k.step == Affine.const(1)
    (acc,) = k.reductions
    assert (acc.var, acc.op, acc.loop) == ("acc", "+", k.id)
    assert row.distributable and col.distributable and k.independent
    a_read, b_read, c_write = a.accesses
    assert a_read.index == Affine.symbol("row") * Affine.symbol("K") + Affine.symbol("k")
    assert b_read.index == Affine.symbol("k") * Affine.symbol("N") + Affine.symbol("col")
    assert c_write.write and c_write.loops == (0, 1)
    assert a.thread_stride(a_read) == Affine() and a.contiguous(b_read) and a.contiguous(c_write)


# -- a stencil --------------------------------------------------------------------------


def test_stencil_neighbours_differ_by_constant_offsets_after_the_early_exit() -> None:
    a = analysed("stencil5/stencil5.cu", "jacobi5")
    centre = GLOBAL_X + form((("blockDim.y", "blockIdx.y", "nx"), 1), (("nx", "threadIdx.y"), 1))
    reads = [x.index for x in a.accesses if x.buffer == "in"]
    assert len(reads) == 6
    offsets = sorted(str(r - centre) for r in reads if isinstance(r, Affine))
    assert offsets == sorted(["0", "0", "-1", "1", "-nx", "nx"])
    assert all(str(x.guards[0]) == "!(x >= nx || y >= ny)" and x.guards[0].kind == "exit" for x in a.accesses)
    y = form((("blockDim.y", "blockIdx.y"), 1), (("threadIdx.y",), 1))
    assert a.accesses[0].guards[0].bounds == (
        Comparison(GLOBAL_X, "<", Affine.symbol("nx")),
        Comparison(y, "<", Affine.symbol("ny")),
    )
    assert all(x.contiguous and x.via == ("idx", "x", "y") for x in a.accesses)


# -- a transpose ----------------------------------------------------------------------


def test_transpose_follows_reassigned_locals_and_flattens_the_padded_tile() -> None:
    a = analysed("transpose/transpose.cu", "transposeNoBankConflicts")
    assert [(loop.var, loop.trip, loop.distributable) for loop in a.loops] == [("j", 4, True), ("j", 4, True)]
    load, store_tile, load_tile, store = a.accesses
    assert load.index == form(
        (("blockIdx.x",), 32),
        (("blockIdx.y", "width"), 32),
        (("j", "width"), 1),
        (("threadIdx.x",), 1),
        (("threadIdx.y", "width"), 1),
    )
    assert store.index == form(
        (("blockIdx.x", "height"), 32),
        (("blockIdx.y",), 32),
        (("height", "j"), 1),
        (("height", "threadIdx.y"), 1),
        (("threadIdx.x",), 1),
    )
    assert store_tile.space == "shared" and store_tile.index == form(
        (("j",), 33), (("threadIdx.x",), 1), (("threadIdx.y",), 33)
    )
    assert load_tile.index.stride("threadIdx.x") == 33 and not load_tile.contiguous  # type: ignore[union-attr]
    assert a.buffer("tile").extents == (Affine.const(32), Affine.const(33))
    assert str(load.guards[0]) == "xIndex < width && yIndex + j < height"
    assert a.communicates and a.barriers


# -- what is not affine, and says why --------------------------------------------------


@pytest.mark.parametrize(
    "index, reason",
    [
        ("x[col_idx[j]]", "`col_idx[j]` is loaded from memory"),
        ("x[threadIdx.x * j]", "multiplies two varying values"),
        ("x[j / 2]", "integer division"),
        ("x[threadIdx.x & 31]", "a bitwise and"),
        ("x[j > 2 ? j : 0]", "the conditional"),
    ],
)
def test_indices_that_are_not_affine_name_the_cause(index: str, reason: str) -> None:
    text = (
        f"__global__ void k(float* y, const float* x, const int* col_idx, int n) {{\n"
        f"  for (int j = 0; j < n; j++) y[j] = {index};\n}}\n"
    )
    a = analysed_text(text, "k")
    read = next(x for x in a.accesses if x.buffer == "x")
    assert isinstance(read.index, NotAffine) and reason in read.index.reason, read.index


def test_loop_carried_memory_dependence_is_found() -> None:
    text = "__global__ void scan(float* a, int n) {\n  for (int i = 1; i < n; i++) a[i] = a[i - 1] + a[i];\n}\n"
    (loop,) = analysed_text(text, "scan").loops
    assert not loop.independent and any("iterations may depend on each other" in c for c in loop.carried)


def test_barrier_in_a_loop_blocks_distribution_and_pragma_is_attached() -> None:
    text = (
        "#define T 8\n__global__ void k(float* a) {\n  __shared__ float s[64];\n"
        "#pragma unroll 4\n  for (int i = 0; i < T * 2; i += 2) {\n    s[threadIdx.x] = a[i];\n"
        "    __syncthreads();\n  }\n}\n"
    )
    (loop,) = analysed_text(text, "k").loops
    assert loop.pragma == "4" and loop.trip == 8 and loop.barrier
    assert "a barrier or warp-level operation inside the loop" in loop.distribute_blockers


def test_every_corpus_kernel_is_analysed_without_error() -> None:
    """Every kernel and device function of the corpus: accesses recorded with a line and a
    mode, loops numbered in order, and a not-affine index always with its reason."""
    for path in sorted(CORPORA.glob("*/*.cu")) + sorted(CORPORA.glob("*/*.hip")):
        model = parse_model(read_source(path))
        for function in model.functions:
            if function.kind.value == "host":
                continue
            a = analyse_function(model, function)
            assert [loop.id for loop in a.loops] == list(range(len(a.loops)))
            for access in a.accesses:
                assert access.read or access.write
                assert isinstance(access.index, Affine) or access.index.reason, (path, access.text)


REGISTERS = """
#define TM 4
__global__ void blocked(const float* A, const float* B, float* C, int K) {
    float acc[TM][TM];
    for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TM; ++j)
            acc[i][j] = 0.0f;
    for (int k = 0; k < K; ++k) {
        float a[TM], b[TM];
        for (int i = 0; i < TM; ++i) a[i] = A[k * TM + i];
        for (int i = 0; i < TM; ++i) b[i] = B[k * TM + i];
        for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TM; ++j)
                acc[i][j] += a[i] * b[j];
    }
    for (int i = 0; i < TM; ++i)
        C[i] = acc[i][0];
}
"""


def test_register_arrays_accumulate_over_the_reduction_loop_and_reloaded_ones_are_private() -> None:
    a = analysed_text(REGISTERS, "blocked")
    k = next(loop for loop in a.loops if loop.var == "k")
    assert [(r.var, r.op, r.loop) for r in k.reductions] == [("acc", "+", k.id)]
    assert k.independent and k.distributable  # a[] and b[] are rewritten before they are read
    assert a.buffer("acc").space == "local" and a.buffer("acc").extents == (Affine.const(4), Affine.const(4))
    (update,) = [x for x in a.accesses if x.buffer == "acc" and x.update_op]
    assert update.update_op == "+=" and update.index == form((("i",), 4), (("j",), 1))
    load_b = "for (int i = 0; i < TM; ++i) b[i] = B[k * TM + i];"
    stale = (
        REGISTERS.replace(load_b, "")
        .replace("        float a[TM], b[TM];\n", "")
        .replace("    for (int k = 0;", "    float a[TM], b[TM];\n    for (int k = 0;")
        .replace("acc[i][j] += a[i] * b[j];", "acc[i][j] += a[i] * b[j];\n        " + load_b)
    )
    assert stale.count(load_b) == 1 and stale.index("b[j]") < stale.index(load_b)
    k = next(loop for loop in analysed_text(stale, "blocked").loops if loop.var == "k")
    assert not k.independent  # b[] read in one iteration is written by the previous one: carried


@pytest.mark.parametrize(
    "path, kernel, expected",
    [
        ("sgemm_tiled/sgemm_tiled.cu", "sgemm_tiled", "'acc' (line 48)"),  # k < TILE: the order follows the tile
        ("softmax/softmax.cu", "softmax_rows", "'local_sum' (line 52)"),  # its max reduction is exact in any order
        ("hip_sgemm/sgemm_naive.hip", "sgemm_naive", None),  # over k < K whatever the block: same order, bit-exact
        ("stencil5/stencil5.cu", "jacobi5", None),
    ],
)
def test_tile_finds_reordered_sums_from_the_analysis(path: str, kernel: str, expected: str | None) -> None:
    from kxform.engine.pass_api import PassContext, RunOptions
    from kxform.hw import load_profile
    from kxform.log.remarks import RemarkSink
    from kxform.passes.tile.policy import reordered_sum
    from kxform.passes.tile.tile import TileFacts

    model = parse_model(read_source(CORPORA / path))
    ctx = PassContext(model, load_profile("h100"), RunOptions(), RemarkSink())
    tiling = ctx.analysis(TileFacts, next(k for k in model.kernels if k.name == kernel)).tiling
    analyses = [ctx.analysis(AccessAnalysis, f) for f in model.functions if f.name in tiling.closure]
    assert reordered_sum(model, tiling, analyses) == expected


TRICKY = """
__global__ void tricky(float* a, float* b, int n) {
    int i = threadIdx.x;
    {
        int i = 5;
        a[i] = 0.0f;
    }
    b[i] = 1.0f;
    float* p = a + blockIdx.x * n;
    p += 2;
    p[i] = 2.0f;
    i++;
    b[i] = 3.0f;
    n -= 1;
    b[n] = 4.0f;
    float* q = n > 3 ? a : b;
    q[0] = 5.0f;
    for (int k = 0; k < n; ++k) {
        if (k == 3) continue;
        a[k] = 6.0f;
        if (a[k] > 0.0f) k++;
    }
}
"""


def test_scopes_pointer_moves_increments_and_unknown_pointers() -> None:
    a = analysed_text(TRICKY, "tricky")
    by_value = [(x.buffer, x.space, str(x.index)) for x in a.accesses if x.write]
    assert by_value[:6] == [
        ("a", "global", "5"),  # the inner `i` shadows the outer one in its block only
        ("b", "global", "threadIdx.x"),
        ("a", "global", "blockIdx.x*n + threadIdx.x + 2"),  # p = a + blockIdx.x * n, then p += 2
        ("b", "global", "threadIdx.x + 1"),  # i++
        ("b", "global", "n - 1"),  # a scalar parameter updated in place
        ("q", "unknown", "not affine, because `q` does not point into a buffer kxform can name"),
    ]
    (loop,) = a.loops
    assert "the loop variable `k` is assigned in the body" in loop.carried and not loop.distributable
    (store,) = [x for x in a.accesses if x.loops and x.write]
    assert [(str(g), g.kind) for g in store.guards] == [("!(k == 3)", "exit")]


@pytest.mark.parametrize(
    "path, kernel, reductions, distributable",
    [
        ("layernorm/layernorm.cu", "layernorm_forward_kernel", [("sum", "+"), ("var", "+")], [True, True, True]),
        (
            "softmax/softmax.cu",
            "softmax_rows",
            [("local_max", "max"), ("local_sum", "+")],
            [True, False, True, False, True],
        ),  # the shared-memory trees write sdata[tid] every step
        ("fused_add_rmsnorm/fused_add_rmsnorm.cu", "fused_add_rms_norm_kernel", [("variance", "+")], [True, True]),
        ("spmv_csr/spmv_csr.cu", "spmv_csr_scalar_kernel", [("dot", "+")], [False]),  # bounds loaded from row_ptr
        ("black_scholes/black_scholes.cu", "BlackScholesGPU", [], [True]),
        (
            "sgemm_128/sgemm_128.cu",
            "sgemm_128",
            [("acc", "+")],
            [True, True, False, False, True, True, True, True, True, False, False],
        ),
    ],
)
def test_corpus_reductions_and_distributable_loops(
    path: str, kernel: str, reductions: list[tuple[str, str]], distributable: list[bool]
) -> None:
    a = analysed(path, kernel)
    assert [(r.var, r.op) for r in a.reductions] == reductions
    assert [loop.distributable for loop in a.loops] == distributable


@pytest.mark.parametrize(
    "header, trip",
    [
        ("int i = 10; i > 0; i -= 2", 5),
        ("int i = 0; i <= 7; i++", 8),
        ("int i = 0; i != 12; i += 4", 3),
        ("int i = 0; i < 0; ++i", 0),
        ("int i = 1; i < 1 << 4; i += 1", 15),
        ("int i = 0; i < n; ++i", None),
    ],
)
def test_trip_counts(header: str, trip: int | None) -> None:
    (loop,) = analysed_text(f"__global__ void k(float* a, int n) {{\n  for ({header}) a[0] += 1.0f;\n}}\n", "k").loops
    assert loop.trip == trip


@pytest.mark.slow
def test_mutated_corpus_sources_never_make_the_analysis_raise() -> None:
    """Bytes deleted and tokens planted at random (fixed seed) in corpus files: whatever
    parses is analysed, and what the analysis cannot read is NotAffine, never an exception."""
    import random

    from kxform.errors import KxformError

    rng = random.Random(1)
    files = sorted(CORPORA.glob("*/*.cu")) + sorted(CORPORA.glob("*/*.hip"))
    tokens = [
        b"{",
        b"}",
        b"(",
        b")",
        b";",
        b"[",
        b"]",
        b"+=",
        b"for (",
        b"int i = 0;",
        b"*",
        b"&",
        b"threadIdx.x",
        b"#pragma unroll\n",
        b"return;",
        b"if (",
        b"?",
        b":",
        b"/",
        b"%",
        b"<<",
    ]
    analysed_functions = 0
    for _ in range(150):
        data = bytearray(rng.choice(files).read_bytes())
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                del data[at : at + rng.randint(1, 8)]
            else:
                data[at:at] = rng.choice(tokens)
        try:
            model = parse_model(validate_bytes("f.cu", bytes(data)))
        except KxformError:
            continue
        for function in model.functions:
            analyse_function(model, function)
            analysed_functions += 1
    assert analysed_functions > 300


# -- accesses through casts and memory intrinsics -------------------------------------

CASTS = """
__global__ void k(const float* x, float* y)
{
    __shared__ float s[2][8];
    float4 v = *reinterpret_cast<const float4*>(&s[0][4]);
    *reinterpret_cast<float4*>(&s[1][0]) = v;
    float4 w = __ldg(reinterpret_cast<const float4*>(&x[4]));
    __pipeline_memcpy_async(&s[1][4], &x[8], 16);
    float2 u = *(const float2*)&s[0][2];
    __stcg(&y[0], u.x + w.x);
}
"""


def test_an_element_accessed_through_a_cast_or_an_intrinsic_is_read_or_written_as_it_is_used() -> None:
    """`&x[i]` passed to an unknown call may be read or written; through a cast, a load
    hint, a store hint or an asynchronous copy, what happens to it is known."""
    a = analysed_text(CASTS, "k")
    modes = [(x.text, x.mode, x.asynchronous) for x in a.accesses]
    assert modes == [
        ("s[0][4]", "read", False),
        ("s[1][0]", "write", False),
        ("x[4]", "read", False),
        ("s[1][4]", "write", True),
        ("x[8]", "read", False),
        ("s[0][2]", "read", False),
        ("y[0]", "write", False),
    ]
    assert a.accesses[3].space == "shared" and a.accesses[3].subscripts == (Affine.const(1), Affine.const(4))
