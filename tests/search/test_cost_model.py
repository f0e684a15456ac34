"""The tuner's cost model: what one thread moves (kxform.analysis.footprint), the predicted
time (kxform.search.cost), the predictions of a kernel's configurations
(kxform.search.predictor) and when the model may prune (kxform.search.cost.Pruning)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from conftest import CORPORA, needs_nvcc
from kxform.analysis.access import analyse_function
from kxform.analysis.footprint import footprint
from kxform.errors import SpecError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText, read_source
from kxform.harness.spec import load_spec
from kxform.hw import load_profile, parse_profile
from kxform.search.cost import PRUNE_FACTOR, TRUST_PAIRS, Launch, Pruning, launch_values, predict, rank_agreement
from kxform.search.kernel_space import kernel_space
from kxform.search.predictor import Predictor

COPY = b"""
__global__ void copy(float* out, const float* in, const float* scale, int n, int stride)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i] * scale[0];
        out[i * stride] = in[i * stride];
    }
}
"""

ROWS = b"""
__global__ void rowsum(float* out, const float* x, int n, int c)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= n) return;
    float s = 0.0f;
    for (int i = 0; i < c; i++)
        s += x[row * c + i];
    out[row] = s;
}
"""


def _footprint(code: bytes, values: dict[str, int]):  # type: ignore[no-untyped-def]
    model = parse_model(SourceText("k.cu", code))
    return footprint(model, analyse_function(model, model.kernels[0]), values)


def test_sector_bytes_follow_the_stride_in_the_thread_index() -> None:
    """Coalesced: 4 bytes a thread; a broadcast: one sector a warp; a stride of 8 floats:
    a sector a lane (the uncoalesced access costs 8x the coalesced one)."""
    base = {"n": 1 << 20, "blockDim.x": 256, "gridDim.x": 4096}
    coalesced = _footprint(COPY, {**base, "stride": 1})
    strided = _footprint(COPY, {**base, "stride": 8})
    # in[i], out[i]: 4 + 4; scale[0]: 1 (32 B per warp); in/out at the stride: 4 + 4 or 32 + 32
    assert coalesced.sector_bytes == pytest.approx(4 + 4 + 1 + 4 + 4)
    assert strided.sector_bytes == pytest.approx(4 + 4 + 1 + 32 + 32)
    assert coalesced.loads == 3 and coalesced.stores == 2 and coalesced.useful_bytes == 20


def test_loop_counts_are_evaluated_at_the_launch() -> None:
    fp = _footprint(ROWS, {"n": 4096, "c": 1000, "blockDim.x": 128, "gridDim.x": 32})
    assert fp.loads == 1000 and fp.stores == 1 and not fp.unresolved
    assert fp.sector_bytes == pytest.approx(1000 * 32 + 4)  # one thread per row: a sector per lane
    unknown = _footprint(ROWS, {"n": 4096, "blockDim.x": 128, "gridDim.x": 32})  # no value for c
    assert unknown.loads == 1 and unknown.unresolved


def test_few_long_threads_are_latency_bound_and_predicted_slower() -> None:
    """One thread per row of 4096 rows: a single wave, each thread a chain of loads; the
    same work over 32 times the threads (as a block per row does) is predicted faster."""
    hw = load_profile("h200")
    values = {"n": 4096, "c": 4096}
    few = Launch((32, 1, 1), (128, 1, 1), least_bytes=4096 * 4096 * 4)
    fp = _footprint(ROWS, launch_values(few, values))
    slow = predict(fp, few, hw)
    assert slow.limiter == "latency" and slow.lower_ms < slow.estimate_ms
    spread = replace(fp, loads=fp.loads / 32, sector_bytes=fp.loads / 32 * 4, ops=fp.ops / 32)
    many = Launch((4096, 1, 1), (32 * 4, 1, 1), least_bytes=few.least_bytes)
    fast = predict(spread, many, hw)
    assert fast.estimate_ms < slow.estimate_ms / 4
    assert fast.lower_ms == pytest.approx(slow.lower_ms)  # the roofline bound is the problem's


def test_a_block_that_does_not_fit_is_predicted_infinite() -> None:
    hw = load_profile("h200")
    fp = _footprint(ROWS, {"n": 4096, "c": 16, "blockDim.x": 1024, "gridDim.x": 4})
    fat = predict(fp, Launch((4, 1, 1), (1024, 1, 1)), hw, registers=255)
    assert math.isinf(fat.estimate_ms) and fat.limiter == "occupancy"


def test_rank_agreement_is_kendalls_tau_b() -> None:
    assert rank_agreement([(1, 1), (2, 2), (3, 3)]) == pytest.approx(1.0)
    assert rank_agreement([(1, 3), (2, 2), (3, 1)]) == pytest.approx(-1.0)
    assert rank_agreement([(1, 1), (1, 2), (1, 3)]) is None  # constant predictions say nothing
    assert rank_agreement([(1, 1), (2, 2)]) is None
    assert rank_agreement([(1, 1), (2, 3), (3, 2), (4, 4)]) == pytest.approx(2 / 3)


def test_pruning_waits_for_trust_and_prunes_only_far_slower_predictions() -> None:
    pruning = Pruning()
    for i in range(TRUST_PAIRS - 1):
        pruning.observe(1.0 + i, 1.0 + i)
    assert pruning.why(100.0) == ""  # not enough evidence yet
    pruning.observe(float(TRUST_PAIRS), float(TRUST_PAIRS))
    assert pruning.why(PRUNE_FACTOR * 1.0 + 0.01).startswith("pruned: predicted")
    assert pruning.why(PRUNE_FACTOR * 1.0 - 0.01) == ""
    # planted: a model that ranks the measurements the wrong way round never prunes
    wrong = Pruning()
    for i in range(2 * TRUST_PAIRS):
        wrong.observe(1.0 + i, 100.0 - i)
    assert wrong.why(1e9) == ""
    # a cut-off time counts for the best, not as evidence of the ranking
    cut = Pruning()
    for i in range(TRUST_PAIRS):
        cut.observe(1.0 + i, 1.0 + i, cut_off=True)
    assert cut.why(1e9) == ""


def test_profiles_name_the_source_of_their_fp32_peak() -> None:
    data = {
        "name": "x",
        "vendor": "nvidia",
        "arch": "sm_90",
        "sm_count": 132,
        "l2_bytes": 1 << 20,
        "xcds": 1,
        "smem_per_sm": 1 << 17,
        "smem_per_block": 1 << 16,
        "regs_per_sm": 65536,
        "regs_per_block": 65536,
        "max_threads_per_block": 1024,
        "max_threads_per_sm": 2048,
        "warp_size": 32,
        "mem_bandwidth_gbs": 1000.0,
        "fp32_tflops": 50.0,
    }
    sources = {k: "test" for k in data if k not in ("name", "vendor", "arch", "xcds")}
    assert parse_profile({**data, "sources": sources}, "x.toml").fp32_tflops == 50.0
    with pytest.raises(SpecError, match="fp32_tflops"):  # planted: the figure without its source
        parse_profile({**data, "sources": {k: v for k, v in sources.items() if k != "fp32_tflops"}}, "x.toml")
    with pytest.raises(SpecError, match="fp32_tflops"):
        parse_profile({**data, "fp32_tflops": -1.0, "sources": sources}, "x.toml")


@pytest.mark.slow
def test_layer_norm_structures_are_ranked_as_measured_on_an_h200() -> None:
    """docs/data/pipeline-h200.json: the naive layer norm took 1.9 ms on an H200, a block
    of 128 lanes per row 0.14 ms; coarsening a kernel of one thread per row makes it
    slower still (fewer threads for the same loads). The predictions order them so."""
    folder = CORPORA / "naive" / "layernorm"
    source = read_source(str(folder / "naive.cu"))
    spec = load_spec(folder / "naive.kxspec.toml").kernel("layernorm_naive")
    space = kernel_space(source.data, "layernorm_naive", ("rows", "coarsen"), path=source.path, hw="h200")
    predictor = Predictor(source, "layernorm_naive", spec, spec.bench_sizes[0], space, load_profile("h200"))
    defaults = space.defaults()

    def predicted(**values: object) -> float:
        prediction = predictor.of_config({**defaults, **values})
        assert prediction is not None, values
        return prediction.estimate_ms

    original = predicted()
    rows = predicted(**{"rows": True, "rows.lanes": 128, "rows.rows": 1})
    coarse = predicted(**{"coarsen": True, "coarsen.factor": "8"})
    assert rows < original / 2 and coarse > 2 * original
    assert predictor.of_config({**defaults, "rows": True, "rows.lanes": 128, "rows.rows": 1}) is not None


def test_the_predictor_answers_for_the_kernel_s_own_space_only() -> None:
    folder = CORPORA / "naive" / "layernorm"
    source = read_source(str(folder / "naive.cu"))
    spec = load_spec(folder / "naive.kxspec.toml").kernel("layernorm_naive")
    space = kernel_space(source.data, "layernorm_naive", ("rows",), path=source.path, hw="h200")
    predictor = Predictor(source, "layernorm_naive", spec, spec.check_sizes[0], space, load_profile("h200"))
    assert predictor.of_config(space.defaults()) is not None  # the original
    refused = {**space.defaults(), "rows": True, "rows.lanes": 1, "rows.rows": 128}  # the original's shape again
    assert predictor.of_config(refused) is None
    with pytest.raises(ValueError, match="not in this tuning space"):
        predictor.of_config({**space.defaults(), "tile.TILE": 8})


@needs_nvcc
def test_a_prediction_s_rewrite_builds_nothing() -> None:
    """The predictor rewrites with `compiles=False`: the tile pass's ptxas check is skipped
    (the configuration is built later, once, by the objective); `apply`'s rewrite runs it."""
    from kxform.core import rewrite_passes
    from kxform.engine.registry import default_registry

    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    tile = default_registry().get("tile").from_options({"TILE": "32"})

    def resources(compiles: bool) -> str:
        result = rewrite_passes(path.read_bytes(), [tile], path=str(path), kernels=("sgemm_tiled",), compiles=compiles)
        check = next(c for r in result.results for c in r.checks if c.name == "resources")
        return str(check.status)

    assert "skipped" in resources(False).lower()
    assert "skipped" not in resources(True).lower()
