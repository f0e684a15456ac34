"""The `coarsen` pass: each thread computes F outputs along x or y, the grid divided by F,
rewritten byte for byte as reviewed, refused with its reason where threads communicate or
the body reads the coarsened axis, composed with launch and vectorize, and verified
bit-exact on the CPU runtime, where a thread that skips its last output's guard (or its
last output) must fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPORA
from swizzle_helpers import outcomes, remark_names, rewrite

from kxform.api import space_of
from kxform.engine.pass_api import Outcome
from kxform.engine.policy import VerifyPolicy
from kxform.engine.registry import default_registry
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import find_spec_for, load_spec
from kxform.verify.differential import verify_pair

NAIVE = CORPORA / "naive"
GOLDEN = Path(__file__).parents[1] / "golden"
JACOBI = NAIVE / "jacobi2d" / "naive.cu"
GEMM = NAIVE / "gemm" / "naive.cu"


@pytest.mark.parametrize(
    ("path", "spec", "golden"),
    [
        (JACOBI, "coarsen{factor=2,along=y,layout=strided}", "jacobi2d.coarsen2y.cu"),
        (GEMM, "coarsen{factor=4,along=x,layout=contiguous}", "gemm_naive.coarsen4x.cu"),
    ],
)
def test_golden_rewrite_and_idempotence(path: Path, spec: str, golden: str) -> None:
    result = rewrite(path.read_bytes(), spec, path=str(path))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == (GOLDEN / golden).read_bytes()
    assert kernel.policy.compare.mode == "exact" and kernel.policy.required
    again = rewrite(result.new_data, spec, path=str(path))
    assert not again.changed and outcomes(again)[kernel.kernel] is Outcome.UNCHANGED


def test_guards_stay_per_output_and_an_early_return_moves_to_the_next_output() -> None:
    text = rewrite((NAIVE / "adamw" / "naive.cu").read_bytes(), "coarsen{factor=2}").new_data.decode()
    kernel = text.split("__global__")[1].split("\nvoid ")[0]
    assert "if (i >= N)\n            continue;" in kernel and "return" not in kernel
    assert "int i = (blockIdx.x * blockDim.x + threadIdx.x) * ADAMW_NAIVE_COARSEN + kx_f;" in text
    assert "((grid_size) + ADAMW_NAIVE_COARSEN - 1) / ADAMW_NAIVE_COARSEN" in text


def test_refusals_name_their_reason() -> None:
    shared = (CORPORA / "transpose").glob("*.cu")
    path = next(iter(sorted(shared)))
    result = rewrite(path.read_bytes(), "coarsen{factor=2}", path=str(path))
    assert "Communicates" in remark_names(result) and not result.changed
    reads = (
        "__global__ void k(float* out, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) out[i] = threadIdx.x;\n}\n"
        "void run(float* o, int n) { k<<<(n + 255) / 256, 256>>>(o, n); }\n"
    )
    (missed,) = [r for r in rewrite(reads, "coarsen{factor=2}").remarks if r.name == "ReadsThreadAxis"]
    assert "reads `threadIdx.x` after the index (line 3)" in missed.message
    looped = reads.replace(
        "    if (i < n) out[i] = threadIdx.x;", "    for (int k = 0; k < 4; ++k) { if (i >= n) return; out[i] += k; }"
    )
    assert "ReturnInLoop" in remark_names(rewrite(looped, "coarsen{factor=2}"))
    assert "along" in next(
        r.message
        for r in rewrite(reads.replace("threadIdx.x;\n}", "1.0f;\n}"), "coarsen{factor=2,along=y}").remarks
        if r.name == "BadValue"
    )
    assert "NoEvidence" in remark_names(rewrite(JACOBI.read_bytes(), "coarsen", path=str(JACOBI)))


def test_space_order_and_spec_through_the_pass_api() -> None:
    assert [p.name for p in default_registry().pipeline("coarsen{factor=2},vectorize{width=4},launch")] == [
        "launch",
        "vectorize",
        "coarsen",
    ]
    assert default_registry().parse("coarsen{factor=2,along=y}").spec() == "coarsen{factor=2,along=y}"
    space = space_of(JACOBI.read_bytes(), "jacobi2d_naive", "coarsen", path=str(JACOBI))
    assert space.names == ("factor", "along", "layout", "loads") and space.param("along").values == ("x", "y")
    conv = NAIVE / "conv2d" / "naive.cu"  # every load is under the window's bounds check: nothing is shared
    assert space_of(conv.read_bytes(), "conv2d_naive", "coarsen", path=str(conv)).names == ("factor", "along", "layout")


def _verify(cpu, path: Path, kernel: str, spec: str, new: bytes | None = None):  # type: ignore[no-untyped-def]
    result = rewrite(path.read_bytes(), spec, path=str(path))
    policy = VerifyPolicy()
    for applied in result.results:
        assert applied.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
        policy = policy.then(applied.policy)
    harness = load_spec(find_spec_for(path)).kernel(kernel)
    sizes = tuple(s.name for s in harness.sizes if not s.bench)
    return verify_pair(
        validate_bytes(str(path), path.read_bytes()),
        validate_bytes(str(path), result.new_data if new is None else new),
        harness,
        cpu,
        sizes=sizes,
        policy=policy,
    ), result.new_data


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "kernel", "spec"),
    [
        ("jacobi2d", "jacobi2d_naive", "coarsen{factor=2,along=y,layout=strided}"),
        ("conv2d", "conv2d_naive", "coarsen{factor=2,along=x,layout=strided}"),
        ("gemm", "gemm_naive", "coarsen{factor=4,along=x,layout=contiguous}"),
        ("adamw", "adamw_naive", "coarsen{factor=4,layout=strided}"),
        ("gelu_f32", "gelu_f32_naive", "launch,vectorize{width=4},coarsen{factor=2,layout=strided}"),
        ("jacobi2d", "jacobi2d_naive", "launch{JACOBI2D_NAIVE_BLOCK_Y=4},coarsen{factor=4,along=y}"),
        # loads=once: registers across outputs
        ("jacobi2d", "jacobi2d_naive", "coarsen{factor=4,along=y,loads=once}"),
        ("jacobi2d", "jacobi2d_naive", "coarsen{factor=8,along=x,loads=once}"),
        ("jacobi2d", "jacobi2d_naive", "launch{JACOBI2D_NAIVE_BLOCK_Y=2},coarsen{factor=2,along=y,loads=once}"),
        # loads=once: the outputs' loops jammed
        ("gemm", "gemm_naive", "coarsen{factor=4,along=x,loads=once}"),
        ("gemm", "gemm_naive", "coarsen{factor=8,along=y,layout=strided,loads=once}"),
        ("matvec", "matvec_naive", "coarsen{factor=4,layout=strided,loads=once}"),
        ("syrk", "syrk_naive", "coarsen{factor=2,along=y,loads=once}"),
        ("gemm", "gemm_naive", "launch{GEMM_NAIVE_BLOCK_X=64},coarsen{factor=2,along=x,loads=once}"),
    ],
)
def test_applied_factors_verify_bit_exact_on_the_cpu_runtime(  # type: ignore[no-untyped-def]
    cpu, name: str, kernel: str, spec: str
) -> None:
    report, _ = _verify(cpu, NAIVE / name / "naive.cu", kernel, spec)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["guard", "output"])
def test_a_thread_skipping_its_last_output_or_guard_fails(cpu, plant: str) -> None:  # type: ignore[no-untyped-def]
    """gemm's `ragged` size has N = 100 columns, not a multiple of 32 x 4: without its
    guard a thread's last output writes into the next row of C (or past it)."""
    spec = "coarsen{factor=4,along=x,layout=contiguous}"
    good = rewrite(GEMM.read_bytes(), spec, path=str(GEMM)).new_data
    if plant == "guard":
        broken = good.replace(
            b"        if (i < M && j < N) {", b"        if (i < M && (j < N || kx_f == GEMM_NAIVE_COARSEN - 1)) {"
        )
    else:
        broken = good.replace(b"kx_f < GEMM_NAIVE_COARSEN;", b"kx_f < GEMM_NAIVE_COARSEN - 1;")
    assert broken != good
    report, _ = _verify(cpu, GEMM, "gemm_naive", spec, new=broken)
    assert not report.ok


def test_the_tuning_space_spans_launch_vectorize_and_coarsen() -> None:
    """`kxform tune --pass launch,vectorize,coarsen`: one space, and each point a pipeline
    that writes a stage only where it differs from the code as it is."""
    from kxform.search.kernel_space import kernel_space, parse_passes

    gelu = NAIVE / "gelu_f32" / "naive.cu"
    space = kernel_space(
        gelu.read_bytes(), "gelu_f32_naive", parse_passes("coarsen,vectorize,launch"), path=str(gelu), hw="h100"
    )
    assert space.passes == ("launch", "vectorize", "coarsen")  # the order `requires` gives
    assert space.space.names == (
        "launch",
        "launch.GELU_F32_NAIVE_BLOCK_X",
        "launch.GELU_F32_NAIVE_MIN_BLOCKS",
        "vectorize",
        "vectorize.width",
        "coarsen",
        "coarsen.factor",
        "coarsen.along",
        "coarsen.layout",
    )
    point = {
        **space.defaults(),
        "vectorize": True,
        "vectorize.width": 4,
        "coarsen": True,
        "coarsen.factor": 2,
        "coarsen.layout": "strided",
    }
    assert space.spec(point) == "vectorize{width=4},coarsen{factor=2,along=x,layout=strided}"
    assert space.spec(space.defaults()) == ""  # every pass off: the code as it is


def test_factor_one_is_not_a_point_of_the_tuning_space() -> None:
    """Factor 1 is the kernel as it is under either layout: the "off" point times it once,
    so while coarsen is on it offers 2, 4 and 8 along each axis and layout only."""
    from kxform.hw import load_profile
    from kxform.search.kernel_space import kernel_space, parse_passes

    gelu = NAIVE / "gelu_f32" / "naive.cu"
    h100 = load_profile("h100")

    def points(passes: str) -> list[str]:
        space = kernel_space(gelu.read_bytes(), "gelu_f32_naive", parse_passes(passes), path=str(gelu), hw="h100")
        valid = space.search(h100)
        return [space.spec(valid.config(r)) for r in range(len(valid))]

    alone = points("coarsen")
    assert alone[0] == "" and len(alone) == 1 + 3 * 2  # off, then factors 2, 4, 8 x two layouts along x
    assert not any("factor=1," in p for p in alone)
    others, composed = points("vectorize,launch"), points("coarsen,vectorize,launch")
    assert len(composed) == len(others) * len(alone) and len(set(composed)) == len(composed)
    assert not any("coarsen{factor=1," in p for p in composed)


def test_after_a_new_block_size_the_launch_keeps_its_original_values() -> None:
    """coarsen after launch{..._BLOCK_Y=4}: the rewritten launch names the block sizes too,
    and the pipeline's policy takes their original values from the launch pass (at which
    the verifier checks that the expressions give the spec's launch)."""
    result = rewrite(
        JACOBI.read_bytes(), "launch{JACOBI2D_NAIVE_BLOCK_Y=4},coarsen{factor=4,along=y}", path=str(JACOBI)
    )
    first, second = result.results
    assert dict(second.policy.launch.defaults)["JACOBI2D_NAIVE_BLOCK_Y"] == 4  # all the coarsen pass can see
    launch = first.policy.then(second.policy).launch
    assert dict(launch.values) == {
        "JACOBI2D_NAIVE_BLOCK_Y": 4,
        "JACOBI2D_NAIVE_COARSEN": 4,
        "JACOBI2D_NAIVE_BLOCK_X": 32,
    }
    assert dict(launch.defaults) == {
        "JACOBI2D_NAIVE_BLOCK_Y": 8,
        "JACOBI2D_NAIVE_COARSEN": 1,
        "JACOBI2D_NAIVE_BLOCK_X": 32,
    }


# -- loads=once: an element two of a thread's outputs read is loaded once ------------------------------------------


def _reuse(text: str | bytes, kernel: str, axis: str, path: str = "k.cu"):  # type: ignore[no-untyped-def]
    from kxform.analysis.access import analyse_function
    from kxform.analysis.reuse import analyse_reuse
    from kxform.frontend.cuda import parse_model

    model = parse_model(validate_bytes(path, text.encode() if isinstance(text, str) else text))
    fn = next(k for k in model.kernels if k.name == kernel)
    return analyse_reuse(model, fn, analyse_function(model, fn), axis)


def test_the_groups_of_a_stencil_are_its_rows_or_columns() -> None:
    """Along y, jacobi's centre, upper and lower loads are one column of A (shifts 0, 1, -1,
    and the boundary copy's centre again); the left and right loads are other columns,
    read once each. Along x the row (left, centre, right) is the group."""
    along_y = _reuse(JACOBI.read_bytes(), "jacobi2d_naive", "y")
    shifts = [sorted(load.shift for load in g.loads) for g in along_y.groups]
    assert shifts == [[-1, 0, 0, 1], [0], [0]]
    assert [g.shares(4) for g in along_y.groups] == [True, False, False]
    assert along_y.groups[0].slots(4) == 6 and str(along_y.groups[0].step) == "N"
    assert [s.access.text for s in along_y.stores] == ["B[i * N + j]"] * 2 and along_y.scalars == {"N"}
    along_x = _reuse(JACOBI.read_bytes(), "jacobi2d_naive", "x")
    assert sorted(load.shift for load in along_x.groups[0].loads) == [-1, 0, 0, 1]
    assert "no load outside a loop" in _reuse(GEMM.read_bytes(), "gemm_naive", "x")


STENCIL = """__global__ void k(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i > 0 && i < n - 1)
        out[i] = in[i - 1] + in[i] + in[i + 1];
}
void run(float* o, const float* x, int n) { k<<<(n + 127) / 128, 128>>>(o, x, n); }
"""


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("out[i] = in[i - 1] + in[i] + in[i + 1];", None),
        ("out[i] = in[i - 1] + in[i] + in[i + 1] + use(in);", "escapes"),
        ("{ float* p = out; p[i] = in[i - 1] + in[i] + in[i + 1]; }", "not a subscript of a pointer parameter"),
        ("for (int r = 0; r < 2; ++r) out[i + r] = in[i - 1] + in[i] + in[i + 1];", "inside a loop"),
        ("out[i * i] = in[i - 1] + in[i] + in[i + 1];", "not affine"),
        ("out[i] = in[i - 1] + *(&in[i]) + in[i + 1];", "address"),
    ],
)
def test_what_may_share_a_register_and_what_may_not(change: str, why: str | None) -> None:
    """A loaded buffer that escapes (passed to a call) or whose element's address is taken
    is not cached; a store the analysis cannot bound per thread (through a local pointer,
    in a loop, not affine) leaves nothing cached."""
    text = STENCIL.replace("out[i] = in[i - 1] + in[i] + in[i + 1];", change)
    if "use(" in text:
        text = "__device__ float use(const float* p) { return p[0]; }\n" + text
    reuse = _reuse(text, "k", "x")
    if why is None:
        assert [sorted(x.shift for x in g.loads) for g in reuse.groups] == [[0, 1, 2]]  # relative to in[i - 1]
    elif why == "escapes":
        assert isinstance(reuse, str)  # `in` is passed to use(): no load of it is cached
    elif why == "address":
        assert [sorted(x.shift for x in g.loads) for g in reuse.groups] == [[0, 2]]  # &in[i] is a pointer
    else:
        assert isinstance(reuse, str) and why in reuse, reuse


def test_loads_once_golden_rewrite_and_its_space() -> None:
    spec = "coarsen{factor=4,along=y,loads=once}"
    result = rewrite(JACOBI.read_bytes(), spec, path=str(JACOBI))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == (GOLDEN / "jacobi2d.coarsen4y.once.cu").read_bytes()
    assert any(c.name == "loads" and "runs the plain loop" in c.detail for c in kernel.checks)
    again = rewrite(result.new_data, spec, path=str(JACOBI))
    assert not again.changed
    strided = rewrite(JACOBI.read_bytes(), "coarsen{factor=4,along=y,layout=strided,loads=once}", path=str(JACOBI))
    assert "CheckFailed" in remark_names(strided) and not strided.changed
    space = space_of(JACOBI.read_bytes(), "jacobi2d_naive", "coarsen", path=str(JACOBI))
    assert not space.is_valid({"factor": "4", "along": "y", "layout": "strided", "loads": "once"})
    assert space.is_valid({"factor": "4", "along": "y", "layout": "contiguous", "loads": "once"})


def test_restrict_on_both_buffers_needs_no_run_time_check() -> None:
    restricted = STENCIL.replace("float* out, const float* in", "float* __restrict__ out, const float* __restrict__ in")
    text = rewrite(restricted, "coarsen{factor=4,loads=once}").new_data.decode()
    assert "kx_overlap" not in text and "kx_r0[K_COARSEN + 2]" in text
    text = rewrite(STENCIL, "coarsen{factor=4,loads=once}").new_data.decode()
    assert "if (!kx_overlap) {" in text and text.count("for (int kx_f = 0;") == 2


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["register", "flag"])
def test_a_wrong_register_or_a_flag_never_set_fails(cpu, plant: str) -> None:  # type: ignore[no-untyped-def]
    """The register of the row below taken for the centre, or a flag that stays unset
    after the load (the register read before it holds anything): the differential run
    must reject both."""
    spec = "coarsen{factor=4,along=y,loads=once}"
    good = rewrite(JACOBI.read_bytes(), spec, path=str(JACOBI)).new_data
    if plant == "register":
        broken = good.replace(b"kx_r0[kx_f + 1] = A[i * N + j]", b"kx_r0[kx_f + 2] = A[i * N + j]", 1)
    else:
        broken = good.replace(b"(kx_h0[kx_f + 2] = true)", b"(kx_h0[kx_f + 2] = true) && false", 1)
    assert broken != good
    report, _ = _verify(cpu, JACOBI, "jacobi2d_naive", spec, new=broken)
    assert not report.ok


TWICE = """__global__ void twice(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * 2.0f;
        out[i] += in[i];
    }
}
void run(float* o, const float* x, int n) { twice<<<(n + 63) / 64, 64>>>(o, x, n); }
"""


@pytest.mark.slow
@pytest.mark.parametrize("check", [True, False])
def test_buffers_that_overlap_at_run_time_take_the_plain_loop(cpu, check: bool) -> None:  # type: ignore[no-untyped-def]
    """In place (`out == in`), `in[i]` read after `out[i] = ...` is the stored value: a
    register filled before the store would give 3a where the code gives 4a. The overlap
    check sends such a thread to the plain loop; with the check planted away the result
    must differ, so the test can tell."""
    import numpy as np

    from kxform.runtime.base import BufferArg, LaunchRequest, ScalarArg

    text = rewrite(TWICE, "coarsen{factor=4,loads=once}").new_data.decode()
    assert "kx_overlap = kx_overlap ||" in text
    if not check:
        text = text.replace("kx_overlap = kx_overlap ||", "kx_overlap = false &&")
    driver = text.replace("__global__ void twice(", "__device__ void twice(").split("void run(")[0] + (
        "__global__ void in_place(float* buf, int n) { twice(buf, buf, n); }\n"
    )
    n = 1000
    data = np.random.default_rng(7).standard_normal(n).astype(np.float32)
    grid = (((n + 63) // 64 + 3) // 4, 1, 1)
    result = cpu.run(
        LaunchRequest(
            source=driver,
            kernel="in_place",
            params=(),
            args=(BufferArg("buf", data.copy(), "inout"), ScalarArg("n", np.int32(n))),
            grid=grid,
            block=(64, 1, 1),
            label="in_place[loads=once]",
        )
    )
    expected = data * np.float32(2) + data * np.float32(2)
    assert np.array_equal(result.outputs["buf"], expected) is check


def test_the_tuning_space_times_loads_once_only_where_no_run_time_check_is_needed() -> None:
    """With the overlap check and the plain loop beside it, `loads=once` lost to `each` at
    every factor of jacobi2d on an H200; `kxform tune` times it only where every cached and
    stored buffer is `__restrict__`, while the pass's own space (apply) always offers it."""
    from kxform.search.kernel_space import kernel_space

    restricted = STENCIL.replace("float* out, const float* in", "float* __restrict__ out, const float* __restrict__ in")
    plain = kernel_space(STENCIL.encode(), "k", ("coarsen",), path="k.cu", hw="h100")
    promised = kernel_space(restricted.encode(), "k", ("coarsen",), path="k.cu", hw="h100")
    assert "coarsen.loads" not in plain.space.names and "coarsen.loads" in promised.space.names
    assert "loads" in space_of(STENCIL, "k", "coarsen").names


# -- loads=once with one loop: the outputs' loops run as one -------------------------------------------------------


def test_jammed_gemm_golden_rewrite_and_its_record() -> None:
    """Along x, a naive GEMM's outputs share the row of A: one load of `A[i * K + k]` per
    iteration serves the F outputs; their accumulators become an array."""
    spec = "coarsen{factor=4,along=x,loads=once}"
    result = rewrite(GEMM.read_bytes(), spec, path=str(GEMM))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == (GOLDEN / "gemm_naive.coarsen4x.once.cu").read_bytes()
    (record,) = [c for c in kernel.checks if c.name == "loads"]
    assert "loops run as one; 1 loads" in record.detail and "no check is needed" in record.detail
    assert not rewrite(result.new_data, spec, path=str(GEMM)).changed
    along_y = rewrite(GEMM.read_bytes(), "coarsen{factor=4,along=y,layout=strided,loads=once}", path=str(GEMM))
    assert "const float kx_s0 = B[(size_t)k * N + j];" in along_y.new_data.decode()
    space = space_of(GEMM.read_bytes(), "gemm_naive", "coarsen", path=str(GEMM))
    assert space.names[-1] == "loads" and not space.constraints  # every axis and layout


LOOP = """__global__ void k(float* out, const float* a, const float* w, int n, int m)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        for (int r = 0; r < m; ++r)
            acc += a[(size_t)r * n + i] * w[r];
        out[i] = acc;
    }
}
void run(float* o, const float* a, const float* w, int n, int m) { k<<<(n + 127) / 128, 128>>>(o, a, w, n, m); }
"""


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ("", None),
        ("acc += a[(size_t)r * n + i] * w[r];", None),
        ("{ if (r == 3) continue; acc += a[(size_t)r * n + i] * w[r]; }", "continue"),
        ("{ acc += a[(size_t)r * n + i] * w[r]; out[i] = acc; }", "before the loop's end"),
        ("if (r % 2) acc += a[(size_t)r * n + i] * w[r];", "no load in the loop"),
    ],
)
def test_what_the_jam_takes_and_refuses(change: str, why: str | None) -> None:
    """`w[r]` is the same element for every output, so it is hoisted, unless it is read
    under a condition of the loop's own (the original might not load it at that
    iteration); a `continue` or a store inside the loop refuses the jam."""
    from kxform.passes.coarsen.shape import Shape
    from kxform.passes.coarsen.jam import Jam

    text = LOOP.replace("acc += a[(size_t)r * n + i] * w[r];", change) if change else LOOP
    from kxform.api import kernel_context

    ctx = kernel_context(text, "k", path="k.cu")
    jam = ctx.analysis(Shape, ctx.model.kernels[0]).jam_along("x")
    if why is None:
        assert isinstance(jam, Jam) and [h.text for h in jam.hoisted] == ["w[r]"]
    else:
        assert isinstance(jam, str) and why in jam, jam
    bounded = LOOP.replace("r < m", "r < i")
    ctx = kernel_context(bounded, "k", path="k.cu")
    assert "bounds read an output's own values" in ctx.analysis(Shape, ctx.model.kernels[0]).jam_along("x")


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["element", "guard"])
def test_a_hoisted_load_of_the_wrong_element_or_an_output_past_its_guard_fails(  # type: ignore[no-untyped-def]
    cpu, plant: str
) -> None:
    """The hoisted register loaded from the next element of A's row, or the epilogue run
    for an output whose guard failed (gemm's ragged N = 100 is no multiple of 32 x 4: it
    writes past the row): the differential run must reject both."""
    spec = "coarsen{factor=4,along=x,loads=once}"
    good = rewrite(GEMM.read_bytes(), spec, path=str(GEMM)).new_data
    if plant == "element":
        broken = good.replace(b"kx_s0 = A[(size_t)i * K + k];", b"kx_s0 = A[(size_t)i * K + (k + 1) % K];")
    else:
        broken = good.replace(
            b"        if (kx_ok[kx_f]) {\n            float acc = kx_acc[kx_f];\n            C[",
            b"        if (i < M) {\n            float acc = kx_acc[kx_f];\n            C[",
        )
    assert broken != good
    report, _ = _verify(cpu, GEMM, "gemm_naive", spec, new=broken)
    assert not report.ok


@pytest.mark.parametrize(
    ("alias", "shared"),
    [
        ("typedef float DATA_TYPE;", True),
        ("#define DATA_TYPE double", True),
        ("using DATA_TYPE = int;", True),
        ("struct DATA_TYPE { float v[8]; };", False),
    ],
)
def test_an_element_type_named_by_the_file_is_looked_through(alias: str, shared: bool) -> None:
    """PolyBench's `typedef float DATA_TYPE;`: a register holds the value; a struct it would
    copy whole is not cached."""
    text = alias + "\n" + STENCIL.replace("float* out, const float* in", "DATA_TYPE* out, const DATA_TYPE* in")
    if not shared:
        text = text.replace("in[i - 1] + in[i] + in[i + 1]", "in[i - 1].v[0] + in[i].v[0] + in[i + 1].v[0]").replace(
            "out[i] =", "out[i].v[0] ="
        )
    reuse = _reuse(text, "k", "x")
    assert (not isinstance(reuse, str) and bool(reuse.shared(4))) is shared, reuse


def test_a_called_function_that_stores_leaves_nothing_cached() -> None:
    """A device function of the file that stores to memory (through a pointer the analysis
    cannot follow) might write an element a register holds: neither the registers across
    outputs nor the jam is offered; a pure helper changes nothing."""
    from kxform.api import kernel_context
    from kxform.passes.coarsen.shape import Shape
    from kxform.passes.coarsen.jam import Jam

    for helper, blocked in [
        ("__device__ float twice(float v) { return 2.0f * v; }\n", False),
        ("__device__ float twice(float v) { g_log[0] = v; return 2.0f * v; }\n", True),
    ]:
        stencil = "__device__ float* g_log;\n" + helper + STENCIL.replace("in[i - 1] +", "twice(in[i - 1]) +")
        reuse = _reuse(stencil, "k", "x")
        assert isinstance(reuse, str) is blocked and (not blocked or "calls `twice`" in reuse), reuse
        loop = "__device__ float* g_log;\n" + helper + LOOP.replace("acc += a[", "acc += twice(w[r]) * a[")
        ctx = kernel_context(loop, "k", path="k.cu")
        jam = ctx.analysis(Shape, ctx.model.kernels[-1]).jam_along("x")
        assert isinstance(jam, Jam) is not blocked, jam
