"""smem-tile's checks against planted bugs: the structural barrier check (stages, when
asynchronous copies land) on the rewritten text, and the CPU differential run on both
ways a pipelined slice reaches shared memory (cp.async on sm_80+, registers elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.api import _analysed
from kxform.passes.smem_tile.smem_tile import barrier_problems
from smem_tile_helpers import older_gpu, verify
from swizzle_helpers import rewrite

NAIVE = CORPORA / "naive"
GEMM = NAIVE / "gemm" / "naive.cu"
GOLDEN = Path(__file__).parents[1] / "golden" / "gemm_naive.smem-tile.cu"
PIPELINED = "smem-tile{STAGES=2}"
"""The defaults: 128 x 128 x 8, 8 x 8 per thread, two stages (the golden on sm_90)."""
LOAD = b"(kx_t + GEMM_NAIVE_STAGES - 1) % GEMM_NAIVE_STAGES"
USE = b"kx_t % GEMM_NAIVE_STAGES"
SAME = b"(kx_t + GEMM_NAIVE_STAGES) % GEMM_NAIVE_STAGES"
"""The stage being read, written so that it is never negative (kx_t starts at 1 - STAGES)."""
BARRIER = b"        __syncthreads();  // every thread's slice"


def _problems(data: bytes) -> list[str]:
    _, ctx, analysis = _analysed(data, "gemm_naive", "smem-tile", str(GEMM), "h100", None)
    return barrier_problems(ctx, analysis.kernel)


STRUCTURAL = {
    "no barrier in the slice loop": (BARRIER, b"        // every thread's slice", "no __syncthreads() between them"),
    "a barrier only some iterations run": (BARRIER, b"        if (kx_t >= 0) __syncthreads();  //", "in the next"),
    "a warp barrier for a block barrier": (BARRIER, b"        __syncwarp();  // every thread's slice", "in the next"),
    "registers stored into the stage being read": (
        b"kx_s0[" + LOAD + b"][kx_kk + ",
        b"kx_s0[" + SAME + b"][kx_kk + ",
        "same iteration",
    ),
    "a copy into the stage being read": (
        b"&kx_s1[" + LOAD + b"]",
        b"&kx_s1[" + SAME + b"]",
        "before this thread waits",
    ),
    "the stage being loaded read": (
        b"&kx_s1[" + USE + b"][kx_kk][kx_tn0",
        b"&kx_s1[(kx_t + 1) % GEMM_NAIVE_STAGES][kx_kk][kx_tn0",
        "same iteration",
    ),
    "a wait for too few groups": (
        b"__pipeline_wait_prior(GEMM_NAIVE_STAGES - 2)",
        b"__pipeline_wait_prior(GEMM_NAIVE_STAGES - 1)",
        "before this thread waits for the copy",
    ),
    "no commit": (b"        __pipeline_commit();\n", b"", "no __pipeline_commit() and __pipeline_wait_prior()"),
    "the wait after the barrier": (
        b"        __pipeline_wait_prior(GEMM_NAIVE_STAGES - 2);  // this thread's copies of slice kx_t have landed\n"
        b"        __syncthreads();",
        b"        __syncthreads();\n        __pipeline_wait_prior(GEMM_NAIVE_STAGES - 2);",
        "no __syncthreads() between them",
    ),
    "a stage index of another form": (
        b"kx_s0[" + USE + b"][kx_kk][kx_tm0",
        b"kx_s0[kx_t & 1][kx_kk][kx_tm0",
        "between them",
    ),
}


def test_the_golden_passes_the_barrier_check() -> None:
    assert _problems(GOLDEN.read_bytes()) == []


@pytest.mark.parametrize("name", list(STRUCTURAL))
def test_the_barrier_check_rejects_a_planted_pipeline_bug(name: str) -> None:
    old, new, words = STRUCTURAL[name]
    golden = GOLDEN.read_bytes()
    planted = golden.replace(old, new)
    assert planted != golden
    problems = _problems(planted)
    assert any(words in p for p in problems), problems


PLANTS = {
    "no barrier in the slice loop": ("h100", (BARRIER, b"        // every thread's slice"), "differ"),
    "registers stored into the stage being read": (
        "h100",
        (b"kx_s0[" + LOAD + b"][kx_kk + ", b"kx_s0[" + SAME + b"][kx_kk + "),
        "differ",
    ),
    "a wait for too few groups": (
        "h100",
        (b"__pipeline_wait_prior(GEMM_NAIVE_STAGES - 2)", b"__pipeline_wait_prior(GEMM_NAIVE_STAGES - 1)"),
        "differ",
    ),
    "a misaligned vector path": (
        "h100",
        (b"if (i < M && k + 3 < K && ((size_t)&A[(size_t)i * K + k] & 15) == 0)", b"if (i < M && k + 3 < K)"),
        "misaligned address: __ldg",
    ),
    "a ragged edge of K unguarded": ("h100", (b"if (j < N && k < K)", b"if (j < N)"), "out-of-bounds read"),
    "a ragged edge of M unguarded": (
        "h100",
        (b"kx_x[kx_v] = (i < M && k < K) ?", b"kx_x[kx_v] = (k < K) ?"),
        "out-of-bounds read",
    ),
    "a lane reading another lane's rows": ("h100", (b"kx_g * (4 * kx_lanes_m)", b"kx_g * 4"), "differ"),
    "two lanes of a vector swapped": (
        "h100",
        (b"[kx_kk + 1][kx_m] = kx_r0[kx_l].y", b"[kx_kk + 1][kx_m] = kx_r0[kx_l].z"),
        "differ",
    ),
    "no barrier (registers only)": ("sm75", (BARRIER, b"        // every thread's slice"), "differ"),
    "registers stored into the stage being read (registers only)": (
        "sm75",
        (b"*reinterpret_cast<float4*>(&kx_s1[" + LOAD, b"*reinterpret_cast<float4*>(&kx_s1[" + SAME),
        "differ",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PLANTS))
def test_planted_bugs_are_caught_by_the_cpu_verification(name: str, cpu, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hw, plant, words = PLANTS[name]
    profile = older_gpu(tmp_path) if hw == "sm75" else hw
    ok, summary = verify(GEMM, "gemm_naive", PIPELINED, cpu, profile, plant)
    assert not ok and words in summary[0], summary


@pytest.mark.slow
@pytest.mark.parametrize("hw", ["h100", "sm75"])
def test_the_pipelined_gemm_verifies_on_both_routes(hw: str, cpu, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    profile = older_gpu(tmp_path) if hw == "sm75" else hw
    result = rewrite(GEMM.read_bytes(), PIPELINED, path=str(GEMM), hw=profile)
    asynchronous = b"__pipeline_memcpy_async" in result.new_data
    assert asynchronous == (hw == "h100") and (b"cuda_pipeline_primitives.h" in result.new_data) == asynchronous
    ok, summary = verify(GEMM, "gemm_naive", PIPELINED, cpu, profile, sizes=("ragged", "square"))
    assert ok, summary


TN_FIXTURE = Path(__file__).parents[1] / "fixtures" / "smem_tile" / "gemm_tn" / "gemm_tn.cu"

SHAPES = (
    PIPELINED,
    "smem-tile{BM=64,BN=32,BK=16,TM=4,TN=2,STAGES=3,PAD=1}",  # odd pitch: element-wise copies and stores
    "smem-tile{BM=32,BN=16,BK=8,TM=4,TN=1,PAD=1,STAGES=1,VEC=1}",  # one stage, scalar loads, strided lanes
)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("path", "kernel"),
    [
        (GEMM, "gemm_naive"),
        (NAIVE / "mm2" / "naive.cu", "mm2_kernel2"),
        (NAIVE / "syrk" / "naive.cu", "syrk_naive"),
        (TN_FIXTURE, "gemm_tn"),
    ],
)
def test_the_nests_verify_on_the_cpu_runtime_at_every_shape_kind(path: Path, kernel: str, cpu) -> None:  # type: ignore[no-untyped-def]
    for spec in SHAPES:
        ok, summary = verify(path, kernel, spec, cpu)
        assert ok, (spec, summary)
