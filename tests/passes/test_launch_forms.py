"""Launch geometry the caller decides, and every launcher form read back: the table of
docs/launch.md ("Launcher forms and the passes that accept them") checked cell by cell
(each rewrite in the fast tier; verified on the CPU runtime, and again from the two
files, in the slow one), the launch reading each form needs, and the verifier's run-time
inputs with planted wrong launches it must not accept."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, needs_nvcc
from kxform.engine.launch_site import launch_binding, parameter_name, run_time_inputs
from kxform.engine.pass_api import Outcome
from kxform.engine.policy import LaunchBinding
from kxform.frontend.c_expr import c_to_expr
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import launch_configs
from kxform.frontend.source import validate_bytes
from kxform.frontend.signature import KernelParam
from kxform.harness.launch import ResolvedArg, ResolvedLaunch
from kxform.verify.versions import LaunchUndecided, rewritten_launch
from swizzle_helpers import outcomes, remark_names, rewrite

FORMS = ROOT / "tests" / "fixtures" / "launch_forms"
DOC = ROOT / "docs" / "launch.md"
PASSES = ("rows", "vectorize", "coarsen", "launch", "smem-tile")


def _spec(pass_name: str, kernel: str) -> str:
    return {
        "rows": "rows{lanes=8}",
        "vectorize": "vectorize{width=4}",
        "coarsen": "coarsen{factor=2}",
        "launch": f"launch{{{parameter_name(kernel, 'BLOCK_X')}=64}}",
        "smem-tile": "smem-tile{BM=32,BN=32,BK=8,TM=2,TN=2}",
    }[pass_name]


def _table() -> list[tuple[str, Path, str, str]]:
    """(form, fixture, pass, cell) of every cell of the doc's table."""
    text = DOC.read_text(encoding="utf-8").split("## Launcher forms and the passes that accept them", 1)[1]
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 + len(PASSES) or not cells[1].startswith("`") or "/" not in cells[1]:
            continue
        path = FORMS / cells[1].strip("`")
        out += [(cells[0][:40], path, p, cell) for p, cell in zip(PASSES, cells[2:])]
    return out


TABLE = _table()


def _kernel(path: Path) -> str:
    (kernel,) = parse_model(validate_bytes(str(path), path.read_bytes())).kernels
    return kernel.name


def test_the_table_covers_every_form_and_fixture() -> None:
    fixtures = {p for _, p, _, _ in TABLE}
    assert fixtures == set(FORMS.rglob("*.cu")) and len(fixtures) == 7
    assert all(cell == "yes" or re.fullmatch(r"[A-Z]\w+", cell) for _, _, _, cell in TABLE)
    assert sum(cell == "yes" for *_, cell in TABLE) == 18


@pytest.mark.parametrize(
    ("form", "path", "pass_name", "cell"),
    [
        # a block size checked by ptxas (launch) or a tile compiled for its resources: nvcc, seconds each
        pytest.param(*row, marks=pytest.mark.slow) if row[2] in ("launch", "smem-tile") and row[3] == "yes" else row
        for row in TABLE
    ],
    ids=[f"{p.parent.name}-{n}" for _, p, n, _ in TABLE],
)
def test_each_cell_of_the_table_is_what_the_pass_does(form: str, path: Path, pass_name: str, cell: str) -> None:
    kernel = _kernel(path)
    result = rewrite(path.read_bytes(), _spec(pass_name, kernel), path=str(path))
    if cell == "yes":
        assert outcomes(result)[kernel] is Outcome.APPLIED and result.changed, [r.format() for r in result.remarks]
        assert not rewrite(result.new_data, _spec(pass_name, kernel), path=str(path)).changed  # read back as done
    else:
        assert outcomes(result)[kernel] is not Outcome.APPLIED and not result.changed
        keys = remark_names(result) | {r.key for r in result.results}  # a refusal, or a rejected proposal's key
        assert cell in keys, [r.format() for r in result.remarks]


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize(
    ("form", "path", "pass_name"),
    [(f, p, n) for f, p, n, c in TABLE if c == "yes"],
    ids=[f"{p.parent.name}-{n}" for _, p, n, c in TABLE if c == "yes"],
)
def test_each_accepted_form_verifies_and_verifies_again_from_the_two_files(
    form: str, path: Path, pass_name: str
) -> None:
    from kxform.bench.corpus import apply_config, reverify

    kernel = _kernel(path)
    applied = apply_config(path, _spec(pass_name, kernel), kernel, "h100")
    assert applied.verified and applied.rewritten, applied.line()
    ok, detail = reverify(path, kernel, applied.rewritten)
    assert ok, detail


# -- reading each form ------------------------------------------------------------------


def test_conditions_min_max_and_template_arguments_are_read() -> None:
    assert c_to_expr("n < 1024 ? n : 1024", {"n"}, logic=True) == "((n) if (n < 1024) else (1024))"
    assert c_to_expr("n < 1024 ? n : 1024", {"n"}) is None  # a spec's size grammar stays arithmetic
    assert c_to_expr("std::min<int>(n, 1024)", {"n"}) == "min(n, 1024)"
    nested = c_to_expr("a > 0 && b > 0 ? (a > 1 ? a : 2) : b", {"a", "b"}, logic=True)
    assert nested is not None and "and" in nested
    assert c_to_expr("n ? m : ", {"n", "m"}, logic=True) is None  # a `?` without its `:`


LAUNCHER = """#include <algorithm>
template <class T> T cdiv_t(T a, T b) { return (a + b - 1) / b; }
static inline int blocks_for(int n, int per) { return n > 0 ? (n + per - 1) / per : 1; }
__global__ void k(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
void run(float* y, const float* x, int n, int block_size, cudaStream_t s) {
    const int grid = std::min<int>(blocks_for(n, block_size), 65535);
    k<<<grid, block_size, 0, s>>>(y, x, n);
    k<<<cdiv_t<int>(n, 128), 128>>>(y, x, n);
    void* args[] = {&y, (void*)&x, &n};
    cudaLaunchKernel((const void*)k, dim3(cdiv_t(n, 64)), dim3(64), args, 0, s);
}
"""


def _resolved(n: int, grid: int, block: int, shared: int = 0) -> ResolvedLaunch:
    buffers = tuple(ResolvedArg(name, "buffer", "float32", "in", (1,)) for name in ("y", "x"))
    args = (*buffers, ResolvedArg("n", "scalar", "int32", "in", (), np.int32(n)))
    return ResolvedLaunch("k", "s", {"n": n}, (grid, 1, 1), (block, 1, 1), shared, args)


PARAMS = (KernelParam("float*", "y"), KernelParam("const float*", "x"), KernelParam("int", "n"))


def test_helpers_templates_caps_streams_and_cuda_launch_kernel_are_read_back() -> None:
    model = parse_model(validate_bytes("k.cu", LAUNCHER.encode()))
    kernel = model.kernels[0]
    caller, literal, api = launch_configs(model, "k")
    assert api.site.args == ("y", "x", "n") and api.site.config[2:] == ("0", "s")
    assert run_time_inputs(model, caller) == (("block_size", "block.x"),)
    assert run_time_inputs(model, literal) == ()
    for config, block, grid in ((caller, 96, 11), (literal, 128, 8), (api, 64, 16)):
        binding = launch_binding(model, kernel, config, (), {}, {}, every=True)
        assert binding is not None, config.grid
        resolved = _resolved(1001, grid, block)
        assert rewritten_launch(resolved, PARAMS, binding).grid == (grid, 1, 1)  # anchored at the spec's


def test_a_run_time_input_is_read_from_the_spec_and_a_wrong_reading_is_not_trusted() -> None:
    binding = LaunchBinding(
        grid=("ceil_div(n, block_size // L)",),
        block=("block_size // L * L",),
        values=(("L", 32),),
        defaults=(("L", 1),),
        origin="k.cu:9",
        inputs=(("block_size", "block.x"),),
    )
    launched = rewritten_launch(_resolved(1000, 8, 128), PARAMS, binding)
    assert launched.grid == (250, 1, 1) and launched.block == (128, 1, 1)  # 4 rows of 32 lanes per block
    with pytest.raises(LaunchUndecided, match="could not tell"):  # the spec's grid disagrees with the reading
        rewritten_launch(_resolved(1000, 9, 128), PARAMS, binding)
    wrong = LaunchBinding(grid=binding.grid, block=binding.block, values=binding.values, defaults=binding.defaults)
    with pytest.raises(LaunchUndecided, match="block_size"):  # the input not declared: never guessed
        rewritten_launch(_resolved(1000, 8, 128), PARAMS, wrong)
    elsewhere = LaunchBinding(
        grid=binding.grid, defaults=(("L", 1),), values=(("L", 2),), inputs=(("block_size", "warp"),)
    )
    with pytest.raises(LaunchUndecided, match="no launch dimension"):
        rewritten_launch(_resolved(1000, 8, 128), PARAMS, elsewhere)


# -- the passes in the caller's terms -----------------------------------------------------


def test_rows_shares_the_callers_block_among_rows_and_reads_its_launch_back() -> None:
    path = FORMS / "layernorm_caller" / "layernorm.cu"
    result = rewrite(path.read_bytes(), "rows{lanes=32}", path=str(path))
    text = result.new_data.decode()
    # mean and rstd may alias out and inp: the row's lanes meet after its last loop, once
    assert text.count(_SYNC) == 1 and text.index("out_idx[i] = o;") < text.index(_SYNC) < text.index("mean[idx] = m;")
    restricted = re.sub(r"(float\*) (out|mean|rstd|inp|weight|bias)\b", r"\1 __restrict__ \2", path.read_text())
    assert _SYNC not in rewrite(restricted.encode(), "rows{lanes=32}", path=str(path)).new_data.decode()
    assert outcomes(result) == {"layernorm_forward_kernel1": Outcome.APPLIED}
    assert "ceil_div(N, LAYERNORM_FORWARD_KERNEL1_ROWS_OF(block_size))" in text
    assert "<<<grid_size, LAYERNORM_FORWARD_KERNEL1_ROWS_OF(block_size) * LAYERNORM_FORWARD_KERNEL1_LANES>>>" in text
    launch = result.results[0].policy.launch
    assert launch.inputs == (("block_size", "block.x"),)
    for block, rows in ((128, 4), (33, 1), (16, 1), (1024, 32)):  # whole warps, at least one, 32 lanes a row
        spec = ResolvedLaunch("k", "s", {}, (-(-300 // block), 1, 1), (block, 1, 1), 0, _layernorm_args(300, 77))
        got = rewritten_launch(spec, _LAYERNORM_PARAMS, launch)
        assert got.block[0] == rows * 32 and got.grid[0] == -(-300 // rows), (block, got)
    assert not rewrite(result.new_data, "rows{lanes=32}", path=str(path)).changed


_SYNC = "kxform_rows_warp_sync<LAYERNORM_FORWARD_KERNEL1_LANES>();"


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize(
    ("spec", "barrier"),
    [
        ("rows{lanes=32}", f"        {_SYNC}\n"),
        (
            "rows{lanes=256}",
            "        __syncthreads();  // the row's lanes: what each did before is seen by all after\n",
        ),
    ],
    ids=["group", "block"],
)
def test_rows_on_layernorm_caller_without_its_barrier_is_rejected_where_mean_lies_in_inp(
    cpu,  # type: ignore[no-untyped-def]
    spec: str,
    barrier: str,
) -> None:
    """The spec's `mean-in-inp` size places mean[0] over inp[5]: written after the row's
    last loop, it is read there by lane 5 first. Without the barrier over the row's lanes,
    lane 0 writes it before lane 5 reads it (thread order); with it, the rewrite verifies."""
    from kxform.harness.spec import load_spec
    from kxform.verify.differential import verify_pair

    path = FORMS / "layernorm_caller" / "layernorm.cu"
    spec_of = load_spec(path.with_suffix(".kxspec.toml")).kernel("layernorm_forward_kernel1")
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, spec, path=str(path))
    policy = result.results[0].policy
    sizes = tuple(s.name for s in spec_of.check_sizes)
    assert "mean-in-inp" in sizes and barrier.encode() in result.new_data
    good = verify_pair(original, validate_bytes(str(path), result.new_data), spec_of, cpu, sizes=sizes, policy=policy)
    assert good.ok, [s.summary() for s in good.sizes]
    planted = validate_bytes(str(path), result.new_data.replace(barrier.encode(), b"", 1))
    bad = verify_pair(original, planted, spec_of, cpu, sizes=sizes, policy=policy)
    assert {s.size: s.status for s in bad.sizes}["mean-in-inp"] == "mismatch", [s.summary() for s in bad.sizes]


_LAYERNORM_PARAMS = tuple(
    KernelParam("int" if n in "NC" else "float*", n) for n in ("out", "mean", "rstd", "inp", "weight", "bias", "N", "C")
)


def _layernorm_args(n: int, c: int) -> tuple[ResolvedArg, ...]:
    buffers = tuple(ResolvedArg(p.name, "buffer", "float32", "in", (1,)) for p in _LAYERNORM_PARAMS[:6])
    return buffers + (
        ResolvedArg("N", "scalar", "int32", "in", (), np.int32(n)),
        ResolvedArg("C", "scalar", "int32", "in", (), np.int32(c)),
    )


def test_rows_on_dim3_variables_multiplies_the_launch_not_the_variable() -> None:
    path = FORMS / "softmax_dim3" / "softmax_dim3.cu"
    result = rewrite(path.read_bytes(), "rows{lanes=32,rows=4}", path=str(path))
    text = result.new_data.decode()
    assert "dim3 block(SOFTMAX_ROWS_DIM3_ROWS);" in text and "dim3 grid((N + block.x - 1) / block.x);" in text
    assert "<<<grid, block.x * SOFTMAX_ROWS_DIM3_LANES, 0, stream>>>" in text
    assert result.results[0].policy.launch.grid == ("(N + (SOFTMAX_ROWS_DIM3_ROWS) - 1) / (SOFTMAX_ROWS_DIM3_ROWS)",)


def test_rows_refuses_a_kernel_that_spells_its_block_size_instead_of_reading_blockdim() -> None:
    from kxform.engine.rewrite import RewriteRefused
    from kxform.passes.rows.rewrite import launch_sites

    path = FORMS / "softmax_dim3" / "softmax_dim3.cu"
    spelled = path.read_text().replace("blockIdx.x * blockDim.x + threadIdx.x", "blockIdx.x * 128 + threadIdx.x")
    result = rewrite(spelled, "rows{lanes=32,rows=4}", path=str(path))
    # the row index is not counted from blockDim.x: refused by the plan before the launch is read
    assert not result.changed and remark_names(result) == {"NotThreadPerRow"}
    assert any(
        "'x[j]' is not counted from `blockIdx.x * blockDim.x + threadIdx.x`" in r.message for r in result.remarks
    )
    model = parse_model(validate_bytes(str(path), spelled.encode()))
    with pytest.raises(RewriteRefused, match="spells its block size '128' at line 8"):
        launch_sites(model, model.kernels[0])


def test_rows_rewrites_every_launch_and_refuses_launches_that_disagree() -> None:
    path = FORMS / "template_launcher" / "rmsnorm_template.cu"
    text = rewrite(path.read_bytes(), "rows{lanes=8}", path=str(path)).new_data.decode()
    assert text.count("RMSNORM_ROWS_ROWS_OF(BLOCK)") == 3 and text.count("RMSNORM_ROWS_ROWS_OF(block_size)") == 3
    mixed = path.read_text().replace("(N + block_size - 1) / block_size, block_size", "(N + 63) / 64, 64")
    result = rewrite(mixed, "rows{lanes=8}", path=str(path))
    assert not result.changed and "Launch" in remark_names(result)
    assert any("write the block size differently" in r.message for r in result.remarks)


def test_vectorize_keeps_constants_before_the_guard_and_refuses_what_they_cannot_be() -> None:
    path = FORMS / "gelu_caller" / "gelu_caller.cu"
    result = rewrite(path.read_bytes(), "vectorize{width=4}", path=str(path))
    body = result.new_data.decode().split("gelu_forward_kernel(", 1)[1]
    assert body.index("const float sqrt_2_over_pi") < body.index("kx_v =")  # once per thread, before the vector
    assert (
        "div_up(((N + GELU_FORWARD_KERNEL_VEC - 1) / GELU_FORWARD_KERNEL_VEC), block_size)" in result.new_data.decode()
    )
    per_element = path.read_text().replace("float cubic = 0.044715f;", "float cubic = 0.044715f * (i % 3);")
    text = rewrite(per_element, "vectorize{width=4}", path=str(path)).new_data.decode()
    assert text.count("float cubic = 0.044715f * (i % 3);") == 2  # per element: in the lanes, under the guard
    reads = path.read_text().replace("float cubic = 0.044715f;", "float cubic = inp[0];")
    refused = rewrite(reads, "vectorize{width=4}", path=str(path))
    assert not refused.changed
    assert any("declaration of `cubic` before the bounds guard reads memory" in r.message for r in refused.remarks)
    lane = path.read_text().replace("out[i] = 0.5f", "out[i] = threadIdx.x * 0.5f")
    assert "NotElementwise" in remark_names(rewrite(lane, "vectorize{width=4}", path=str(path)))


@pytest.mark.slow
@needs_nvcc
def test_launch_overrides_the_callers_block_size_and_follows_the_shared_memory() -> None:
    path = FORMS / "rowsum_smem" / "rowsum_smem.cu"
    result = rewrite(path.read_bytes(), "launch{ROW_SUM_BLOCK_BLOCK_X=64}", path=str(path))
    text = result.new_data.decode()
    over = "(ROW_SUM_BLOCK_BLOCK_X > 0 ? ROW_SUM_BLOCK_BLOCK_X : block_size)"
    assert f"<<<N, {over}, {over} * sizeof(float), stream>>>" in text
    assert "#define ROW_SUM_BLOCK_BLOCK_X 64" in text
    lifted = rewrite(path.read_bytes(), "launch", path=str(path))
    assert "#define ROW_SUM_BLOCK_BLOCK_X 0" in lifted.new_data.decode()
    assert not rewrite(lifted.new_data, "launch", path=str(path)).changed  # read back as lifted
    odd = rewrite(path.read_bytes(), "launch{ROW_SUM_BLOCK_BLOCK_X=48}", path=str(path))
    assert not odd.changed and "is_pow2(ROW_SUM_BLOCK_BLOCK_X)" in odd.results[0].reasons[0]  # the halving loop


def test_tune_leaves_out_a_named_pass_with_nothing_to_tune_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    from kxform.api import Listeners, TuneRequest
    from kxform.cli.tune_print import print_left_out
    from kxform.search.kernel_space import NothingToTune, kernel_space

    path = ROOT / "corpora" / "naive" / "layernorm" / "naive.cu"
    space = kernel_space(
        path.read_bytes(), "layernorm_naive", ("rows", "launch", "vectorize"), path=str(path), hw="h100"
    )
    assert set(space.passes) == {"launch", "rows"}
    (left,) = space.not_offered
    assert left[0] == "vectorize" and "stride C in threadIdx.x" in left[1]
    listeners = Listeners(on_left_out=print_left_out)
    listeners.left_out(TuneRequest(str(path), "layernorm_naive", ("rows", "launch", "vectorize")), space)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("kxform: vectorize left out of the tuning of 'layernorm_naive': the write `o[i]`")
    listeners.left_out(TuneRequest(str(path), "layernorm_naive"), space)  # every pass: those left out are no news
    assert not capsys.readouterr().err
    with pytest.raises(NothingToTune, match="nothing to tune under any pass named .*vectorize: .*smem-tile: "):
        kernel_space(path.read_bytes(), "layernorm_naive", ("vectorize", "smem-tile"), path=str(path), hw="h100")


@pytest.mark.slow
@needs_nvcc
def test_smem_tile_keeps_a_constant_before_the_guard_and_refuses_a_value_of_the_coordinates() -> None:
    path = FORMS / "gemm_caller" / "gemm_caller.cu"
    result = rewrite(path.read_bytes(), "smem-tile{BM=32,BN=32,BK=8,TM=2,TN=2}", path=str(path), semantic=False)
    body = result.new_data.decode().split("sgemm_naive(", 1)[1]
    assert body.count("const float alpha = 1.0f;") == 1  # once per thread
    assert body.index("const float alpha = 1.0f;") < body.index("kx_slices")  # before the tiles
    coords = path.read_text().replace("const float alpha = 1.0f;", "const int base = row * N;")
    refused = rewrite(coords, "smem-tile{BM=32,BN=32,BK=8,TM=2,TN=2}", path=str(path))
    assert not refused.changed and "Prelude" in remark_names(refused)
