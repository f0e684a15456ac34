"""The swizzle pass's default writes a remap only on the locality model's evidence.

Held-out kernels nobody here tuned (tests/fixtures/heldout, each with the host code
that launches it and no harness spec): a grouped order written by rule made the 9-point
box stencil 15% and the batched 32x32 transpose 36% slower on an H200. Without a spec
the model drafts one and judges at a timing size of its own; where it cannot judge, the
kernel is left alone with the reason.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from kxform.engine.pass_api import Outcome
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.locality.sizing import L2_MULTIPLE, WAVES, timing_size

from conftest import CORPORA
from swizzle_helpers import rewrite
from swizzle_helpers import needs_cpu

HELD_OUT = Path(__file__).parents[1] / "fixtures" / "heldout"


def _default(name: str) -> tuple[Outcome, str, str]:
    path = HELD_OUT / f"{name}.cu"
    result = rewrite(path.read_bytes(), path=str(path), hw="h200", pattern=None)
    (kernel,) = result.results
    remark = next(
        r for r in result.remarks if r.function == name and r.name != "LocalityPrediction"
    )  # the kernel's verdict, not the figures
    evidence = kernel.proposal.provenance.evidence if kernel.proposal is not None else ""
    assert result.changed == (kernel.outcome is Outcome.APPLIED)
    return kernel.outcome, remark.name, evidence


def test_the_timing_size_is_no_check_size_and_streams_through_the_l2() -> None:
    spec = load_spec(CORPORA / "stencil5" / "stencil5.kxspec.toml").kernel("jacobi5")
    no_bench = dataclasses.replace(spec, sizes=spec.check_sizes)
    hw = load_profile("h200")
    size = timing_size(no_bench, hw)
    assert size.values not in [s.values for s in spec.check_sizes]
    launch = no_bench.launch(size)
    resident = min(hw.max_threads_per_sm // math.prod(launch.block), hw.max_blocks_per_sm or 1 << 30)
    assert math.prod(launch.grid) >= WAVES * resident * hw.sm_count
    assert launch.total_bytes >= L2_MULTIPLE * hw.l2_bytes
    assert timing_size(spec, hw) == spec.bench_sizes[0]  # a size a person chose for timing is kept


QUERIED_GRID = """__global__ void scale_2d(const float* in, float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 2.0f * in[y * n + x];
}
void run(const float* in, float* out, int n) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    scale_2d<<<dim3(sms, sms), dim3(16, 16)>>>(in, out, n);
}
"""


@needs_cpu
def test_a_kernel_whose_spec_cannot_be_drafted_is_left_alone_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "queried.cu"  # a grid from a device query: the draft cannot say it
    path.write_text(QUERIED_GRID)
    result = rewrite(path.read_bytes(), path=str(path), hw="h200", pattern=None)
    (kernel,) = result.results
    assert (kernel.outcome, next(r.name for r in result.remarks if r.function == "scale_2d")) == (
        Outcome.MISSED,
        "NotModelled",
    )


@needs_cpu
@pytest.mark.slow
@pytest.mark.parametrize("name", ["box9", "naive_transpose", "batched_transpose"])
def test_memory_bound_held_out_kernels_are_left_alone(name: str) -> None:
    assert _default(name)[:2] == (Outcome.MISSED, "NoPredictedGain")


@needs_cpu
@pytest.mark.slow
def test_the_naive_gemm_is_rewritten_only_on_a_prediction() -> None:
    outcome, _, evidence = _default("naive_gemm")
    assert outcome is Outcome.APPLIED and evidence == "predicted"


@needs_cpu
def test_a_drafted_spec_from_the_cache_serves_the_same_kernel_in_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drafted-spec cache is keyed by what the draft depends on, never by where the
    file is: a tree moved between runs (a second clone, a temporary copy, CI) is served
    by the same entries, which name no directory (the first tree's draft named its
    absolute path: the moved GEMM's draft did not load, and the default swizzle left it
    alone)."""
    import shutil

    from kxform.cache import SOURCE_MARK
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.locality.sizing import drafted_spec
    from kxform.locality.trace import ModelRefused

    monkeypatch.setenv("KXFORM_CACHE_DIR", str(tmp_path / "cache"))
    first = tmp_path / "first"
    first.mkdir()
    (first / "g.cu").write_text((HELD_OUT / "naive_gemm.cu").read_text())
    (first / "q.cu").write_text(QUERIED_GRID)  # a draft refused: the refusal is cached too

    def judged(folder: Path) -> tuple[object, str]:
        gemm, queried = read_source(str(folder / "g.cu")), read_source(str(folder / "q.cu"))
        spec, _ = drafted_spec(gemm, "naive_gemm", parse_model(gemm))
        with pytest.raises(ModelRefused) as refused:
            drafted_spec(queried, "scale_2d", parse_model(queried))
        return spec, str(refused.value)

    spec, refusal = judged(first)
    assert spec.name == "naive_gemm" and str(first / "q.cu") in refusal
    moved = tmp_path / "moved"
    shutil.move(str(first), moved)  # the first tree is gone
    again, refusal_again = judged(moved)
    assert (again.sizes, again.args) == (spec.sizes, spec.args)  # the entry served: same draft, loaded here
    assert refusal_again == refusal.replace(str(first), str(moved))
    entries = sorted(p for p in (tmp_path / "cache" / "drafts").rglob("*") if p.is_file())
    assert [p.suffix for p in entries] == [".toml", ".refused"] or [p.suffix for p in entries] == [".refused", ".toml"]
    for entry in entries:
        text = entry.read_text(encoding="utf-8")
        assert str(tmp_path) not in text and "/" not in text.split("file = ", 1)[-1].split("\n", 1)[0], text
    assert SOURCE_MARK in next(p for p in entries if p.suffix == ".refused").read_text()
