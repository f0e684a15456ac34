"""The tile pass on small sources: what it lifts, the constraints it derives (with the line
each comes from), what it refuses and why, and how its rewrites are verified."""

from __future__ import annotations

import pytest

from kxform.api import explain, rewrite_with, space_of
from kxform.engine.pass_api import Outcome
from kxform.errors import UsageError
from kxform.hw import load_profile
from conftest import needs_nvcc
from swizzle_helpers import outcomes, remark_names, rewrite

GEMM = """#include <cstdio>
#define TILE 16

__global__ void gemm(const float* a, const float* b, float* c, int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; ++k)
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    c[row * n + col] = acc;
}

void run(const float* a, const float* b, float* c, int n) {
    dim3 block(TILE, TILE);
    dim3 grid((n + TILE - 1) / TILE, (n + TILE - 1) / TILE);
    gemm<<<grid, block>>>(a, b, c, n);
}
"""


def test_lifts_a_macro_at_its_value_with_a_guard_and_nothing_else() -> None:
    result = rewrite(GEMM, "tile")
    assert outcomes(result) == {"gemm": Outcome.APPLIED}
    out = result.new_data.decode()
    assert out == GEMM.replace("#define TILE 16\n", "#ifndef TILE\n#define TILE 16\n#endif\n")
    (passed,) = [r for r in result.remarks if r.kind.value == "Passed"]
    assert "lift TILE (16) into parameters" in passed.message
    assert result.results[0].policy.compare.mode == "exact" and not result.results[0].policy.required
    again = rewrite(out, "tile")
    assert not again.changed and outcomes(again) == {"gemm": Outcome.UNCHANGED}


def test_a_configuration_sets_the_value_and_requires_a_differential_run() -> None:
    result = rewrite(GEMM, "tile{TILE=8}")
    assert "#ifndef TILE\n#define TILE 8\n#endif\n" in result.new_data.decode()
    (kernel,) = result.results
    policy = kernel.policy
    assert policy.required and policy.compare.mode == "spec" and policy.compare.scale == 2.0
    assert "'acc' (line 14)" in policy.compare.reason
    assert policy.launch.grid == ("(n + TILE - 1) / TILE", "(n + TILE - 1) / TILE")
    assert policy.launch.block == ("TILE", "TILE") and dict(policy.launch.values) == {"TILE": 8}
    assert dict(policy.launch.defaults) == {"TILE": 16}
    again = rewrite(result.new_data, "tile{TILE=8}")
    assert not again.changed  # idempotent at the configuration too


def test_a_configuration_that_breaks_a_constraint_is_rejected_with_the_constraint_and_its_line() -> None:
    result = rewrite(GEMM, "tile{TILE=64}")
    assert outcomes(result) == {"gemm": Outcome.FAILED} and not result.changed
    (remark,) = [r for r in result.remarks if r.name == "CheckFailed"]
    assert "TILE * TILE <= hw.max_threads_per_block [k.cu:21]: threads per block" in remark.message


def test_unknown_parameter_and_bad_value_are_refused() -> None:
    assert "UnknownParameter" in remark_names(rewrite(GEMM, "tile{TIEL=8}"))
    bad = rewrite(GEMM, "tile{TILE=0}")
    (missed,) = [r for r in bad.remarks if r.name == "BadValue"]
    assert "TILE=0: not one of 1..1024" in missed.message and not bad.changed
    assert b"#define TILE 12\n" in rewrite(GEMM, "tile{TILE=12}").new_data  # any value the constraints allow


def test_space_and_rewrite_for_tuners() -> None:
    space = space_of(GEMM, "gemm", path="k.cu")
    assert space.names == ("TILE",) and space.defaults() == {"TILE": 16}
    texts = [c.text for c in space.constraints]
    assert "TILE * TILE <= hw.max_threads_per_block" in texts
    assert "4 * TILE * TILE + 4 * TILE * TILE <= 49152" in texts
    assert [c.origin for c in space.constraints] == ["k.cu:21", "k.cu:5"]
    result = rewrite_with(GEMM, "gemm", {"TILE": 32}, path="k.cu")
    assert b"#define TILE 32" in result.new_data
    with pytest.raises(UsageError, match="no kernel 'nope'"):
        space_of(GEMM, "nope", path="k.cu")


REDUCE = """#define THREADS 256
#define WIDTH 16
__global__ void reduce(const float* x, float* out, int n) {
    __shared__ float s[THREADS], t[WIDTH];
    float v = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    int lane = threadIdx.x % 32;
    if (threadIdx.x == 0) out[blockIdx.x] = s[0] + (float)lane + t[n & (WIDTH - 1)];
}
void go(const float* x, float* out, int n, int rows) { reduce<<<rows, THREADS>>>(x, out, n); }
"""


def test_reductions_warps_and_shifts_give_powers_of_two_and_whole_warps() -> None:
    space = space_of(REDUCE, "reduce", path="r.cu")
    described = {c.text: (c.origin, c.reason) for c in space.constraints}
    assert described["is_pow2(THREADS)"][0] == "r.cu:9"
    assert "halves blockDim.x" in described["is_pow2(THREADS)"][1]
    assert described["(THREADS) % 32 == 0"][0] == "r.cu:13"
    assert "whole warps" in described["(THREADS) % 32 == 0"][1]
    assert described["is_pow2(WIDTH)"][0] == "r.cu:14" and "masks with WIDTH - 1" in described["is_pow2(WIDTH)"][1]
    assert "4 * THREADS + 4 * WIDTH <= 49152" in described


def test_divisibility_and_a_coupling_the_launch_breaks() -> None:
    src = """#define TILE 32
#define ROWS 8
#define BX 32
__global__ void t(float* o, const float* i, int w) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    for (int j = 0; j < TILE; j += ROWS) tile[threadIdx.y + j][threadIdx.x] = i[(blockIdx.y * TILE + j) * w + x];
    __syncthreads();
    o[x] = tile[threadIdx.x][threadIdx.y];
}
void go(float* o, const float* i, int w) { dim3 b(BX, ROWS); t<<<dim3(w / TILE, w / TILE), b>>>(o, i, w); }
"""
    space = space_of(src, "t", path="t.cu")
    described = {c.text: c for c in space.constraints}
    assert described["(TILE) % (ROWS) == 0"].origin == "t.cu:7"
    coupling = described["BX == TILE"]
    assert coupling.origin == "t.cu:6" and "blockDim.x must equal TILE" in coupling.reason
    assert not space.is_valid({"TILE": 64, "ROWS": 8, "BX": 32})


def test_threads_covering_several_elements_are_no_coupling() -> None:
    src = """#define BN 128
#define TN 8
#define THREADS 16
__global__ void rb(float* o) {
    int col0 = blockIdx.x * BN;
    int tc = threadIdx.x * TN;
    for (int j = 0; j < TN; ++j) o[col0 + tc + j] = 0.0f;
}
void go(float* o, int n) { rb<<<n / BN, THREADS>>>(o); }
"""
    space = space_of(src, "rb", path="rb.cu")
    assert "THREADS == BN" not in {c.text for c in space.constraints}
    assert space.is_valid({"BN": 128, "TN": 8, "THREADS": 16}, load_profile("h100"))


@pytest.mark.parametrize(
    ("source", "key", "words"),
    [
        (
            "#define TILE 16\n__global__ void a(float* o) { __shared__ float s[TILE]; o[threadIdx.x] = s[threadIdx.x]; }\n"
            "__global__ void b(float* o) { o[threadIdx.x * TILE] = 0; }\n"
            "void go(float* o) { a<<<1, TILE>>>(o); b<<<1, 32>>>(o); }\n",
            "SharedWithOtherKernels",
            "also used by 'b'",
        ),
        (
            "#define TILE 16\n__global__ void a(float* o) { __shared__ float s[TILE]; o[threadIdx.x] = s[threadIdx.x]; }\n"
            "void go(float* o) { float host[TILE]; a<<<1, TILE>>>(o); }\n",
            "HostUse",
            "host code outside the launch",
        ),
        (
            "#include <mma.h>\nusing namespace nvcuda;\n#define BM 64\n"
            "__global__ void w(float* o) { __shared__ float s[BM]; wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;"
            " o[threadIdx.x] = s[threadIdx.x % BM]; }\nvoid go(float* o) { w<<<1, BM>>>(o); }\n",
            "HardwareFixedShape",
            "wmma fragments",
        ),
        (
            "#define W 16\n#define HALO 1\n__global__ void s(float* o) { __shared__ float t[W + 2 * HALO];"
            " o[blockIdx.x * W + threadIdx.x] = t[threadIdx.x + HALO]; }\nvoid go(float* o) { s<<<4, W>>>(o); }\n",
            "NotATileSize",
            "HALO only offsets or pads",
        ),
        (
            "#define TILE 16\n__global__ void u(float* o) { __shared__ float s[TILE]; for (int k = 0; k < 16; ++k)"
            " o[k] = s[k]; }\nvoid go(float* o) { u<<<1, TILE>>>(o); }\n",
            "HandUnrolled",
            "the body assumes TILE = 16",
        ),
        (
            "#define BASE 8\n#define TILE (BASE * 2)\n__global__ void d(float* o) { __shared__ float s[TILE]; "
            "o[threadIdx.x] = s[threadIdx.x]; }\nvoid go(float* o) { d<<<1, TILE>>>(o); }\n",
            "DerivedConstant",
            "is computed from other values",
        ),
        (
            "__global__ void v(const __nv_bfloat16* x, float* o) { constexpr int pack = 16 / sizeof(__nv_bfloat16);"
            " o[threadIdx.x * pack] = 0; }\nvoid go(const __nv_bfloat16* x, float* o) { v<<<1, 32>>>(x, o); }\n",
            "VectorWidth",
            "vector width",
        ),
        (
            "#define TILE 16\n__global__ void n(float* o) { __shared__ float s[TILE]; o[threadIdx.x] = s[threadIdx.x]; }\n",
            "NoLaunchSite",
            "not launched in this file",
        ),
        (
            "#define TILE 16\n__global__ void l(float* o) { __shared__ float s[TILE]; o[threadIdx.x] = s[threadIdx.x]; }\n"
            "void go(float* o) { l<<<1, TILE>>>(o); l<<<2, TILE / 2>>>(o); }\n",
            "LaunchesDisagree",
            "different",
        ),
        (
            "template <typename T, int TILE>\n__global__ void m(T* o) { __shared__ T s[TILE]; o[threadIdx.x] = s[0]; }\n"
            "template <int TILE> void go(float* o) { m<float, TILE><<<1, TILE>>>(o); }\n",
            "TemplateParameter",
            "already a template parameter",
        ),
        (
            "__global__ void e(float* o, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) o[i] = 0; }\n"
            "void go(float* o, int n) { const int threads = 256; e<<<(n + threads - 1) / threads, threads>>>(o, n); }\n",
            "NoTileSize",
            "no file-scope integer constant",
        ),
    ],
)
def test_refusals_name_their_reason(source: str, key: str, words: str) -> None:
    kernel = source.split("__global__ void ")[1].split("(")[0]
    result = rewrite(source, "tile", kernels=(kernel,))
    if outcomes(result)[kernel] is Outcome.MISSED:
        assert not result.changed
    messages = [r.message for r in result.remarks if r.name == key]
    assert messages and words in messages[0], [r.format() for r in result.remarks]


def test_a_refused_constant_leaves_the_others_lifted_with_an_analysis_remark() -> None:
    src = (
        "#define W 16\n#define HALO 1\n__global__ void s(float* o) { __shared__ float t[W + 2 * HALO];"
        " o[blockIdx.x * W + threadIdx.x] = t[threadIdx.x + HALO]; }\nvoid go(float* o) { s<<<4, W>>>(o); }\n"
    )
    result = rewrite(src, "tile")
    assert outcomes(result) == {"s": Outcome.APPLIED}
    assert "#ifndef W\n" in result.new_data.decode() and "#ifndef HALO" not in result.new_data.decode()
    (remark,) = [r for r in result.remarks if r.name == "NotATileSize"]
    assert remark.kind.value == "Analysis" and remark.line == 2
    info = explain(src, "s", path="s.cu")
    assert [p["name"] for p in info["params"]] == ["W"]
    assert "4 * (W + 2 * 1) <= 49152" in [c["expr"] for c in info["constraints"]]


def test_a_launch_the_verifier_cannot_follow_rejects_non_default_configurations() -> None:
    src = (
        "#define TILE 16\n__global__ void g(float* o) { __shared__ float s[TILE]; o[threadIdx.x] = s[0]; }\n"
        "int rows();\nvoid go(float* o) { g<<<rows() / TILE, TILE>>>(o); }\n"
    )
    assert outcomes(rewrite(src, "tile")) == {"g": Outcome.APPLIED}  # lifting alone keeps the launch
    result = rewrite(src, "tile{TILE=32}")
    assert outcomes(result) == {"g": Outcome.FAILED}
    assert any("cannot be verified" in r.message for r in result.remarks)


def test_constexpr_is_a_parameter_already_and_changes_only_at_a_configuration() -> None:
    src = (
        "constexpr int THREADS = 128;\n__global__ void k(float* o, int n) { int i = blockIdx.x * THREADS + "
        "threadIdx.x; if (i < n) o[i] = 0; }\nvoid go(float* o, int n) { const int blocks = (n + THREADS - 1) / "
        "THREADS; k<<<blocks, THREADS>>>(o, n); }\n"
    )
    lifted = rewrite(src, "tile")
    assert outcomes(lifted) == {"k": Outcome.UNCHANGED} and not lifted.changed
    result = rewrite(src, "tile{THREADS=256}")
    assert result.new_data.decode().startswith("constexpr int THREADS = 256;\n")
    policy = result.results[0].policy
    assert policy.launch.grid == ("((n + THREADS - 1) / THREADS)",) and policy.compare.mode == "exact"


@pytest.mark.parametrize(
    ("source", "key", "words"),
    [
        (
            "#define TILE 16\n__global__ void c(float* o) { constexpr int step = 4; __shared__ float s[TILE];"
            " for (int i = 0; i < TILE; i += step) o[i] = s[i]; }\nvoid go(float* o) { c<<<1, TILE>>>(o); }\n",
            "LocalConstant",
            "defined inside 'c'",
        ),
        (
            "#define BM 64\n__global__ void p(float* o) { __shared__ float s[BM]; unsigned r;"
            ' asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0}, {%0}, {%0}, {%0};" : "+r"(r));'
            " o[threadIdx.x] = s[threadIdx.x % BM]; }\nvoid go(float* o) { p<<<1, BM>>>(o); }\n",
            "HardwareFixedShape",
            "mma instructions",
        ),
        (
            "#define TILE 16\n__global__ void y(float* o) { extern __shared__ float d[]; __shared__ float s[TILE];"
            " o[threadIdx.x] = s[threadIdx.x] + d[threadIdx.x]; }\nvoid go(float* o) { y<<<1, TILE, 4096>>>(o); }\n",
            "DynamicSharedFixed",
            "fixed amount of dynamic shared memory",
        ),
        (
            "#define BLOCK 128\n__global__ void z(float* o, int n) { __shared__ float s[BLOCK]; o[blockIdx.x * BLOCK +"
            " threadIdx.x] = s[threadIdx.x]; }\nvoid go(float* o, int n) { const int blocks = (n + BLOCK - 1) / BLOCK;"
            " float* flags = new float[blocks]; z<<<blocks, BLOCK>>>(o, n); }\n",
            "HostUse",
            "sets the launch variable 'blocks'",
        ),
    ],
)
def test_more_refusals_name_their_reason(source: str, key: str, words: str) -> None:
    test_refusals_name_their_reason(source, key, words)


THRESHOLD = """#define TILE 16

__global__ void scale(const float *in, float *out, int n) {
    __shared__ float buf[TILE];
    int i = blockIdx.x * TILE + threadIdx.x;
    if (i < n) {
        buf[threadIdx.x] = in[i];
        float s = (n > 100000 / TILE) ? 2.0f : 1.0f;
        out[i] = buf[threadIdx.x] * s;
    }
}

void launch(const float *in, float *out, int n) {
    scale<<<(n + TILE - 1) / TILE, TILE>>>(in, out, n);
}
"""


@pytest.mark.parametrize("spec", ["tile", "tile{TILE=64}"])
def test_a_constant_that_is_also_a_threshold_is_not_lifted_and_the_line_is_named(spec: str) -> None:
    result = rewrite(THRESHOLD, spec)
    assert outcomes(result) == {"scale": Outcome.MISSED} and not result.changed
    (remark,) = [r for r in result.remarks if r.name == "ControlFlowUse"]
    assert (
        remark.line == 8 and "TILE is a threshold in `n > 100000 / TILE`, which decides control flow" in remark.message
    )


@pytest.mark.parametrize(
    "test",
    [
        "if (threadIdx.x % TILE == 0) o[0] = 1;",
        "while (n / TILE > 8) n /= 2;",
        "o[0] = (n % TILE) ? 1 : 0;",
        "if (n >= TILE * 4) o[0] = 1;",
    ],
)
def test_a_threshold_in_control_flow_refuses_the_lift_but_a_loop_header_or_an_index_test_does_not(test: str) -> None:
    body = (
        "#define TILE 16\n__global__ void d(float* o, int n) { __shared__ float s[TILE];"
        " for (int k = 0; k < n / TILE; ++k) o[k] = s[k % TILE]; BODY }\n"
        "void go(float* o, int n) { d<<<1, TILE>>>(o, n); }\n"
    )
    assert outcomes(rewrite(body.replace("BODY", ""), "tile")) == {"d": Outcome.APPLIED}
    index_test = "int tx = threadIdx.x; if (tx < TILE && blockIdx.x * TILE + tx < n) o[tx] = 1;"
    assert outcomes(rewrite(body.replace("BODY", index_test), "tile")) == {"d": Outcome.APPLIED}
    refused = rewrite(body.replace("BODY", test), "tile")
    assert outcomes(refused) == {"d": Outcome.MISSED}
    assert [r.name for r in refused.remarks if r.name == "ControlFlowUse"] == ["ControlFlowUse"]


HEAVY = """#define THREADS 128
__global__ void heavy(const float* x, float* o, int n, int rows) {
    float acc[96];
#pragma unroll
    for (int r = 0; r < 96; ++r) acc[r] = x[(blockIdx.x * THREADS + threadIdx.x) * 96 + r];
    for (int it = 0; it < n; ++it) {
#pragma unroll
        for (int r = 0; r < 96; ++r) acc[r] = acc[r] * acc[(r + 1) % 96] + 1.0f;
    }
    float s = 0.0f;
#pragma unroll
    for (int r = 0; r < 96; ++r) s += acc[r];
    o[blockIdx.x * THREADS + threadIdx.x] = s;
}
void go(const float* x, float* o, int n, int rows) { heavy<<<rows / THREADS, THREADS>>>(x, o, n, rows); }
"""


@needs_nvcc
def test_ptxas_registers_times_threads_reject_a_configuration() -> None:
    result = rewrite_with(HEAVY, "heavy", {"THREADS": 1024}, path="heavy.cu")
    assert outcomes(result) == {"heavy": Outcome.FAILED} and not result.changed
    (remark,) = [r for r in result.remarks if r.name == "CheckFailed"]
    assert "registers x 1024 threads" in remark.message and "> 65536 registers per block" in remark.message
    fine = rewrite_with(HEAVY, "heavy", {"THREADS": 256}, path="heavy.cu")
    (kernel,) = fine.results
    (resources,) = [c for c in kernel.checks if c.name == "resources"]
    assert resources.ok and "no spills" in resources.detail and "x 256 threads" in resources.detail
