"""smem-tile: the naive nests it rewrites (golden), the ones it refuses and why, its barrier
check, and its rewrites verified on the CPU runtime with planted bugs rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc
from kxform.engine.pass_api import Outcome
from kxform.harness.spec import find_spec_for, load_spec
from kxform.hw import load_profile
from smem_tile_helpers import verify
from swizzle_helpers import outcomes, rewrite

NAIVE = CORPORA / "naive"
GEMM = NAIVE / "gemm" / "naive.cu"
GOLDEN = Path(__file__).parents[1] / "golden" / "gemm_naive.smem-tile.cu"
DEFAULT = "smem-tile{BM=128,BN=128,BK=8,TM=8,TN=8,WM=32,WN=64,STAGES=2,PAD=4,VEC=4}"
"""The defaults, the shape of a hand-written SGEMM: what the golden holds (a bare `smem-tile`
proposes nothing)."""

NEST = """__global__ void k(float* C, const float* A, const float* B, const int* idx, int M, int N, int K)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < M && j < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += A[i * K + k] * B[k * N + j];
        C[i * N + j] = acc;
    }
}

void run(float* C, const float* A, const float* B, const int* idx, int M, int N, int K)
{
    dim3 block(32, 8);
    dim3 grid((N + 31) / 32, (M + 7) / 8);
    k<<<grid, block>>>(C, A, B, idx, M, N, K);
}
"""


def _refusal(text: str) -> str:
    result = rewrite(text, "smem-tile")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.MISSED and not result.changed
    return kernel.reasons[0]


def test_golden_naive_gemm_and_a_second_run_changes_nothing() -> None:
    result = rewrite(GEMM.read_bytes(), DEFAULT, path=str(GEMM))
    assert outcomes(result)["gemm_naive"] is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == GOLDEN.read_bytes()
    (kernel,) = result.results
    assert {c.name for c in kernel.checks} >= {"constraints", "barriers", "idempotence"}
    assert (
        kernel.proposal is not None
        and kernel.proposal.options
        == rewrite(GEMM.read_bytes(), "smem-tile{STAGES=2}", path=str(GEMM)).results[0].proposal.options
    )  # the defaults
    policy = kernel.policy
    assert policy.required and policy.compare.mode == "spec" and policy.compare.scale == 2.0
    assert "'acc' (line 13)" in policy.compare.reason
    assert policy.launch.grid == ("ceil_div(N, GEMM_NAIVE_BN)", "ceil_div(M, GEMM_NAIVE_BM)")
    assert dict(policy.launch.defaults)["GEMM_NAIVE_BN"] == 32 and dict(policy.launch.defaults)["GEMM_NAIVE_BM"] == 8
    again = rewrite(result.new_data, DEFAULT, path=str(GEMM))
    assert not again.changed and outcomes(again)["gemm_naive"] is Outcome.UNCHANGED


def test_the_synthetic_nest_is_recognised() -> None:  # the refusals below are one change away from it
    result = rewrite(NEST, "smem-tile{BM=32,BN=32,TM=2,TN=2,BK=8}")
    assert outcomes(result)["k"] is Outcome.APPLIED, result.results[0].reasons
    assert b"dim3(K_BN / K_TN, K_BM / K_TM)" in result.new_data and b"#define K_BK 8\n" in result.new_data


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        (("A[i * K + k]", "A[idx[i] * K + k]"), "NonAffine", "not affine"),
        (
            ("acc += A[i * K + k] * B[k * N + j];", "{ acc += A[i * K + k] * B[k * N + j]; C[k] = acc; }"),
            "Dependence",
            "depend on each other",
        ),
        (("acc += A[i * K + k]", "acc += C[i * K + k]"), "InPlaceAlias", "output `C` is also read"),
        (("k<<<grid, block>>>(C, A,", "k<<<grid, block>>>(C, C,"), "InPlaceAlias", "in-place"),
        (("float acc = 0.0f;", "__shared__ float s[32]; s[0] = 0; float acc = 0.0f;"), "AlreadyShared", "shared"),
        (("B[k * N + j]", "B[k * N + j + i]"), "NotATileOperand", "exactly one of the output row and column"),
        (("i < M && j < N", "i < M || j < N"), "GuardBounds", "does not bound"),
    ],
)
def test_refusals_name_their_reason(change: tuple[str, str], key: str, words: str) -> None:
    text = NEST.replace(*change)
    assert text != NEST
    reason = _refusal(text)
    assert reason.startswith(f"{key}:") and words in reason, reason


def test_the_convolution_is_refused_with_its_reason() -> None:
    path = NAIVE / "conv2d" / "naive.cu"
    result = rewrite(path.read_bytes(), DEFAULT, path=str(path))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.MISSED and "LoopNest" in kernel.reasons[0] and "2 loops" in kernel.reasons[0]


TN_FIXTURE = Path(__file__).parents[1] / "fixtures" / "smem_tile" / "gemm_tn" / "gemm_tn.cu"
"""A^T B with A stored K x M: the row operand is not contiguous in k (its slice loads along m)."""


def test_a_transposed_operand_is_staged_along_its_contiguous_axis() -> None:
    result = rewrite(TN_FIXTURE.read_bytes(), DEFAULT, path=str(TN_FIXTURE))
    assert outcomes(result)["gemm_tn"] is Outcome.APPLIED, result.results[0].reasons
    text = result.new_data.decode()
    # A: stride 1 along m, so consecutive threads (and a vector load) run along m, and the slice
    # keeps its layout: copied by cp.async, 16 bytes where whole and aligned
    assert "const int kx_m = (kx_e % (GEMM_TN_BM / GEMM_TN_VEC)) * GEMM_TN_VEC, kx_kk = kx_e / (GEMM_TN_BM" in text
    assert "if (k < K && row + 3 < M && ((size_t)&A[(size_t)k * M + row] & 15) == 0)" in text
    assert "__pipeline_memcpy_async(&kx_s0[(kx_t + GEMM_TN_STAGES - 1) % GEMM_TN_STAGES][kx_kk][kx_m + 0], &A[" in text
    assert "float4 kx_r" not in text  # no operand goes through registers
    assert "gemm_tn<<<dim3((n + GEMM_TN_BN - 1) / GEMM_TN_BN, (m + GEMM_TN_BM - 1) / GEMM_TN_BM)" in text  # host names
    assert dict(result.results[0].policy.launch.defaults)["GEMM_TN_BM"] == 16


def test_the_tuning_space_is_small_its_default_the_known_good_shape_and_a_point_becomes_a_pipeline() -> None:
    from kxform.search.kernel_space import kernel_space, parse_passes

    space = kernel_space(GEMM.read_bytes(), "gemm_naive", parse_passes("swizzle,smem-tile"), path=str(GEMM), hw="h200")
    assert space.passes == ("smem-tile", "swizzle")  # swizzle requires the tiling first
    names = ("BM", "BN", "BK", "TM", "TN", "WM", "WN", "STAGES", "PAD", "VEC")
    assert [n for n in space.space.names if n.startswith("smem_tile.")] == [f"smem_tile.{n}" for n in names]
    defaults = {**space.defaults(), "smem_tile": True}
    assert space.spec(defaults) == "smem-tile{BM=128,BN=128,BK=8,TM=8,TN=8,WM=32,WN=64,STAGES=2,PAD=4,VEC=4}"
    hw = load_profile("h200")
    assert space.space.is_valid(defaults, hw)
    assert not space.space.is_valid({**defaults, "smem_tile.TM": 4, "smem_tile.TN": 4}, hw)  # 1024 threads
    assert not space.space.is_valid({**defaults, "smem_tile.BK": 16, "smem_tile.STAGES": 3}, hw)  # 51 KiB of slices
    alone = kernel_space(GEMM.read_bytes(), "gemm_naive", ("smem-tile",), path=str(GEMM), hw="h200").search(hw)
    assert 50 <= len(alone) <= 100  # dense: 128 or 256 threads of 4 x 4 to 8 x 8, lanes 4 x 8
    both = kernel_space(GEMM.read_bytes(), "gemm_naive", ("launch", "coarsen", "smem-tile"), path=str(GEMM), hw="h100")
    valid = both.search(hw)
    specs = [both.spec(valid.config(r)) for r in range(len(valid))]
    assert not any("launch" in s and "smem-tile" in s for s in specs)  # both set the block: never together
    assert not any("coarsen" in s and "smem-tile" in s for s in specs)  # both set the outputs per thread
    assert any("coarsen" in s for s in specs) and any("smem-tile" in s for s in specs)


def test_the_candidates_start_with_the_defaults_and_a_warp_tile_is_derived_where_not_given() -> None:
    from kxform.api import _analysed

    pass_, ctx, analysis = _analysed(GEMM.read_bytes(), "gemm_naive", "smem-tile", str(GEMM), "h100", None)
    first = pass_.candidates(ctx, analysis)[0]
    assert dict(first.options) == {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "WM": 32, "WN": 64,
                                   "STAGES": 2, "PAD": 4, "VEC": 4}  # fmt: skip
    small = rewrite(GEMM.read_bytes(), "smem-tile{BM=32,BN=16,TM=4,TN=1}", path=str(GEMM))
    (kernel,) = small.results
    assert kernel.outcome is Outcome.APPLIED, kernel.reasons  # 8 x 16 threads: lanes 4 x 8, warp tile 16 x 8
    assert (kernel.proposal.options["WM"], kernel.proposal.options["WN"]) == (16, 8)


@pytest.mark.slow
def test_the_tuning_objective_verifies_a_shape_on_the_cpu_runtime(cpu) -> None:  # type: ignore[no-untyped-def]
    from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget
    from kxform.search.kernel_space import kernel_space
    from kxform.search.objective import Failure

    data = GEMM.read_bytes()
    space = kernel_space(data, "gemm_naive", ("smem-tile",), path=str(GEMM), hw="h100")
    shape = {"smem_tile": True, "smem_tile.BM": 64, "smem_tile.BN": 64, "smem_tile.TM": 4, "smem_tile.TN": 8}
    shape |= {"smem_tile.WM": 16, "smem_tile.WN": 64}
    found = find_spec_for(GEMM)
    assert found is not None
    objective = KernelObjective(
        TuneTarget(str(GEMM), data, "gemm_naive", load_spec(found).kernel("gemm_naive"), "h100"),
        space,
        cpu,
        MeasureOptions(check_sizes=("ragged",)),
    )
    prepared = objective.prepare({**space.defaults(), **shape})
    result = prepared.failure or objective.evaluate(prepared)
    assert result.failure is Failure.RUNTIME and result.detail == "time: the cpu runtime does not time kernels"


def test_a_triangular_guard_skips_the_blocks_past_the_diagonal() -> None:
    path = NAIVE / "syrk" / "naive.cu"
    result = rewrite(path.read_bytes(), DEFAULT, path=str(path))
    assert outcomes(result)["syrk_naive"] is Outcome.APPLIED
    assert b"if (kx_col0 > kx_row0 + SYRK_NAIVE_BM - 1)" in result.new_data
    assert b"kx_row0 > kx_col0" not in GOLDEN.read_bytes() and b"return;" not in GOLDEN.read_bytes()


@pytest.mark.slow
def test_a_skip_that_drops_the_diagonal_block_is_caught(cpu) -> None:  # type: ignore[no-untyped-def]
    plant = (b"if (kx_col0 > kx_row0 + SYRK_NAIVE_BM - 1)", b"if (kx_col0 >= kx_row0)")
    ok, summary = verify(NAIVE / "syrk" / "naive.cu", "syrk_naive", DEFAULT, cpu, plant=plant)
    assert not ok and "differ" in summary[0], summary


@pytest.mark.slow
def test_swizzle_runs_after_the_tiling_whatever_the_order_given() -> None:
    result = rewrite(GEMM.read_bytes(), f"swizzle{{pattern=grouped}},{DEFAULT}", path=str(GEMM))
    assert [(r.pass_name, r.outcome) for r in result.results] == [
        ("smem-tile", Outcome.APPLIED),
        ("swizzle", Outcome.APPLIED),
    ]
    text = result.new_data.decode()
    assert (
        "const int kx_row0 = (int)kxform_block.y * GEMM_NAIVE_BM, kx_col0 = (int)kxform_block.x * GEMM_NAIVE_BN;"
        in text
    )  # the tiled grid's blocks are the ones remapped


@pytest.fixture(scope="module")
def gpu():  # type: ignore[no-untyped-def]
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    return runtime


@pytest.mark.gpu
@pytest.mark.parametrize(
    "spec",
    [
        DEFAULT,
        "smem-tile{BM=128,BN=64,BK=8,TM=8,TN=4,PAD=0,VEC=4}",
        "smem-tile{BM=64,BN=128,BK=16,TM=4,TN=8,STAGES=3}",
        "smem-tile{BM=64,BN=64,BK=16,TM=4,TN=4,STAGES=1,PAD=1,VEC=1}",
    ],
)
@pytest.mark.parametrize(
    ("path", "kernel"), [(GEMM, "gemm_naive"), (NAIVE / "syrk" / "naive.cu", "syrk_naive"), (TN_FIXTURE, "gemm_tn")]
)
def test_the_tiled_nests_verify_on_the_gpu(path: Path, kernel: str, spec: str, gpu) -> None:  # type: ignore[no-untyped-def]
    """The tolerance (the spec's x2) holds for the GPU's own contraction into FMAs, vector loads
    and cp.async stages included (one, two and three stages; the pitch of PAD 1 copies element
    by element)."""
    ok, summary = verify(path, kernel, spec, gpu, sizes=("ragged", "square"))
    assert ok, summary


@pytest.mark.slow
def test_apply_verifies_on_the_cpu_and_writes_the_golden(tmp_path: Path) -> None:
    import json
    import shutil

    from conftest import run_cli

    shutil.copytree(NAIVE / "gemm", tmp_path / "gemm")
    path = tmp_path / "gemm" / "naive.cu"
    log = tmp_path / "run.jsonl"
    proc = run_cli("apply", "--pass", DEFAULT, "--verify", "cpu", "--log", str(log), str(path))
    assert proc.returncode == 0, proc.stderr
    assert path.read_bytes() == GOLDEN.read_bytes()
    (record,) = [json.loads(line) for line in log.read_text().splitlines() if '"type": "kernel"' in line]
    (verify,) = [c for c in record["checks"] if c["name"] == "verify"]
    assert record["outcome"] == "applied" and verify["ok"] and "GEMM_NAIVE_BM=128" in verify["detail"]
    assert "within twice it of each other" in record["verify_policy"]["compare"]["reason"]


@pytest.mark.slow
@needs_nvcc
def test_the_heaviest_points_of_the_tuning_space_build_for_sm_90_without_spills() -> None:
    """Every point of the tuning space builds without spills (tools/corpus.py smem-tile
    --only naive/gemm --space --hw h200 sweeps all 69); here the points with the most live state: 8 x 8
    outputs per thread, slices of 16, pipelined (256 x 64 x 16 took the most registers, 141)."""
    from kxform.search.kernel_space import kernel_space

    hw = load_profile("h200")
    space = kernel_space(GEMM.read_bytes(), "gemm_naive", ("smem-tile",), path=str(GEMM), hw="h200")
    valid = space.search(hw)
    configs = [valid.config(r) for r in range(len(valid))]
    heavy = [c for c in configs if c["smem_tile"] and c["smem_tile.TM"] * c["smem_tile.TN"] == 64]
    heavy = [c for c in heavy if c["smem_tile.BK"] == 16 and c["smem_tile.STAGES"] >= 2]
    assert len(heavy) >= 5
    for config in heavy:
        result = rewrite(GEMM.read_bytes(), space.spec(config), path=str(GEMM), hw="h200")
        (kernel,) = result.results
        assert kernel.outcome is Outcome.APPLIED, (space.spec(config), kernel.reasons)
        record = next(c for c in kernel.checks if c.name == "resources")
        registers = record.figure("registers")
        assert isinstance(registers, int) and registers * int(record.figure("threads") or 0) <= hw.regs_per_block
