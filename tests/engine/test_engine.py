"""The generalised engine: typed pass options, proposals with provenance, per-pass
verification policies, and the candidate stage (later-stage refusals go back to the
proposer; remarks report the outcome that stands)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.engine.driver import final_remarks, transform_source
from kxform.engine.edits import Edit
from kxform.engine.pass_api import Outcome, PassContext, Proposal, Provenance, Rejection, RunOptions
from kxform.engine.policy import EXACT, LaunchBinding, OutputCompare, VerifyPolicy
from kxform.engine.registry import default_registry
from kxform.orchestrate.runner import ApplyConfig, FileOutcome, verify_stage
from kxform.engine.stages import run_later_stages
from kxform.errors import UsageError
from kxform.frontend.source import read_source
from kxform.hw import load_profile
from kxform.log.passlog import kernel_record
from kxform.passes.swizzle import Swizzle


@pytest.mark.parametrize(
    "spec",
    [
        "swizzle{pattern=grouped,group=8}",
        "swizzle{pattern=xcd-grouped,group=4,along=x,xcds=8}",
        "swizzle{pattern=hilbert}",
        "swizzle",
    ],
)
def test_swizzle_spec_parses_typed_and_prints_back_unchanged(spec: str) -> None:
    parsed = default_registry().parse(spec)
    assert parsed.spec() == spec
    if "group=" in spec:
        assert isinstance(parsed.group, int)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("swizzle{group=many}", "group=many: expected an integer"),
        ("swizzle{group=0}", r"group=0: not one of 1\.\.64"),
        ("swizzle{along=z}", r"along=z: not one of \{y, x\}"),
    ],
)
def test_typed_options_refuse_bad_values(spec: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        default_registry().parse(spec)


def test_options_describe_themselves() -> None:
    lines = Swizzle.describe_options()
    assert lines[0].startswith("pattern (enum): {row, column, grouped")
    assert any(line.startswith("group (int): 1..64") for line in lines)


def test_proposal_carries_typed_values_payload_and_provenance_into_the_log() -> None:
    proposal = Proposal.of(
        "tile",
        "gemm",
        {"TILE": 32, "vec": True},
        "predicted faster",
        Provenance("llm", model="m-1", cost_usd=0.002, tokens=812, evidence="predicted"),
        payload="lx = bx ^ by",
    )
    assert proposal.label() == "tile{TILE=32,vec=true}"
    data = proposal.to_json()
    assert data["params"] == {"TILE": 32, "vec": True} and data["payload"] == "lx = bx ^ by"
    assert data["provenance"] == {
        "proposer": "llm",
        "evidence": "predicted",
        "model": "m-1",
        "cost_usd": 0.002,
        "tokens": 812,
    }
    assert not proposal.measured
    json.dumps(data)  # serialisable as it is


def test_policies_compose_in_pipeline_order() -> None:
    tile = VerifyPolicy(
        LaunchBinding(grid=("ceil_div(N, T)",), values=(("T", 32),), defaults=(("T", 16),)),
        OutputCompare("spec", 2.0, "summation order changes"),
        required=True,
    )
    swizzle = VerifyPolicy(compare=EXACT)
    both = tile.then(swizzle)
    assert both.launch == tile.launch and both.compare.scale == 2.0 and both.required
    assert swizzle.then(tile) == both
    assert VerifyPolicy().then(VerifyPolicy()) == VerifyPolicy()
    # a later launch that reads an earlier rewrite's parameter keeps that parameter's original value
    block = VerifyPolicy(LaunchBinding(block=("B",), values=(("B", 64),), defaults=(("B", 128),)))
    vector = VerifyPolicy(
        LaunchBinding(
            grid=("ceil_div(ceil_div(N, W), B)",),
            block=("B",),
            values=(("B", 64), ("W", 4)),
            defaults=(("B", 64), ("W", 1)),
        )
    )
    assert dict(block.then(vector).launch.defaults) == {"B": 128, "W": 1}
    assert block.then(vector).launch.grid == vector.launch.grid


def test_scratch_buffers_are_sized_at_the_rewritten_launch_and_kept_through_a_pipeline() -> None:
    """A rewrite that takes a workspace states it in its launch; the verifier appends it to
    the rewritten kernel's arguments, sized at the rewritten launch, and the request
    builder fills it with zeros."""
    import numpy as np

    from kxform.build.extract import ExtractedKernel
    from kxform.engine.policy import Scratch
    from kxform.harness.launch import ResolvedArg, ResolvedLaunch
    from kxform.harness.request import launch_request
    from kxform.runtime.base import KernelParam
    from kxform.verify.versions import LaunchUndecided, rewritten_launch

    split = LaunchBinding(
        grid=(None, "S"),
        block=(None, "T"),
        values=(("S", 8), ("T", 4)),
        defaults=(("S", 1), ("T", 1)),
        scratch=(
            Scratch("part", "float32", "grid_x * block_x * grid_y * block_y"),
            Scratch("n", "uint32", "grid_x * block_x", True),
        ),
    )
    assert not LaunchBinding(scratch=split.scratch).is_spec
    resolved = ResolvedLaunch(
        "k", "s", {"C": 300}, (3, 1, 1), (128, 1, 1), 0, (ResolvedArg("C", "scalar", "int32", "in", (), np.int32(300)),)
    )
    params = (KernelParam("int", "C"),)
    launch = rewritten_launch(resolved, params, split)
    assert launch.grid == (3, 8, 1) and launch.block == (128, 4, 1)
    assert [(a.name, a.shape, a.dtype, a.scratch) for a in launch.args[1:]] == [
        ("part", (3 * 128 * 8 * 4,), "float32", True),
        ("n", (3 * 128,), "uint32", True),
    ]
    unit = ExtractedKernel("", "k", "k", params, None, "k.cu")
    request = launch_request(unit, launch, {"C": np.int32(300)}, "k", 1.0)
    assert not request.args[2].data.any() and request.args[2].data.dtype == np.uint32
    with pytest.raises(LaunchUndecided, match="scratch 'part'"):
        rewritten_launch(resolved, params, LaunchBinding(scratch=(Scratch("part", "float32", "M * grid_x"),)))
    later = VerifyPolicy(LaunchBinding(block=("B",), values=(("B", 64),), defaults=(("B", 128),)))
    assert VerifyPolicy(split).then(later).launch.scratch == split.scratch
    assert VerifyPolicy(later.launch).then(VerifyPolicy(split)).launch.scratch == split.scratch


def test_a_measured_bound_composes_only_where_its_probe_describes_the_pair() -> None:
    from kxform.engine.policy import LaunchBinding
    from kxform.engine.reorder_probe import ProbedSum, ReorderProbe
    from kxform.harness.model import CompareSpec
    from kxform.verify.versions import comparison

    probe = ReorderProbe("/* instrumented */", "k", (ProbedSum("acc", "float", 12, "KX_PROBE_0"),))
    rows = OutputCompare("bound", reason="sum of C", probe=probe)
    spec = CompareSpec("allclose", rtol=2e-4, atol=1e-3)
    assert comparison(spec, OutputCompare("spec", 2.0)) == CompareSpec("allclose", rtol=4e-4, atol=2e-3)
    assert comparison(CompareSpec("exact"), rows).mode == "exact"
    # exact after a bound keeps it (the probe instruments the original, run at the spec's launch) ...
    assert VerifyPolicy(compare=rows).then(VerifyPolicy()).compare == rows
    # ... and a bound after an exact rewrite at the spec's launch keeps it too ...
    assert VerifyPolicy().then(VerifyPolicy(compare=rows)).compare == rows
    # ... but not after one that changed the launch, nor after another bound: the spec's, doubled
    moved = VerifyPolicy(LaunchBinding(grid=("n / 4",)))
    after_move = moved.then(VerifyPolicy(compare=rows)).compare
    twice = VerifyPolicy(compare=rows).then(VerifyPolicy(compare=rows)).compare
    assert after_move.mode == twice.mode == "spec" and after_move.scale == twice.scale == 2.0
    spec_wide = OutputCompare("spec", 2.0)
    assert VerifyPolicy(compare=rows).then(VerifyPolicy(compare=spec_wide)).compare == spec_wide
    logged = VerifyPolicy(compare=rows).to_json()["compare"]
    assert logged["probe"] == {"kernel": "k", "sums": [{"var": "acc", "ctype": "float", "line": 12}]}
    assert "instrumented" not in json.dumps(logged)  # the probe's text stays out of the log


@dataclass(frozen=True)
class _Planted(Swizzle):
    """Swizzle with a planted bug: its column remap drops every odd tile column."""

    name = "swizzle"  # type: ignore[assignment]

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits = super().edit(ctx, proposals)
        if any(p.options.get("pattern") == "column" for p in proposals):
            return [
                Edit(e.start, e.end, e.text.replace("kxform_block.x", "(kxform_block.x / 2u * 2u)"), e.origin)
                for e in edits
            ]
        return edits

    def default_proposal(self, ctx: PassContext, analysis):  # type: ignore[no-untyped-def]
        return next(p for p in self.candidates(ctx, analysis) if p.options["pattern"] == "column")


def _run(tmp_path: Path, max_candidates: int, cpu, monkeypatch) -> FileOutcome:  # type: ignore[no-untyped-def]
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    path = str(tmp_path / "sgemm_tiled" / "sgemm_tiled.cu")
    hw = load_profile("h100")
    heard: list[tuple[Rejection, ...]] = []

    class Listening:
        name = "listening"

        def propose(self, pass_, ctx, analysis, rejected=()):  # type: ignore[no-untyped-def]
            heard.append(tuple(rejected))
            from kxform.engine.proposer import DeterministicProposer

            return DeterministicProposer().propose(pass_, ctx, analysis, rejected)

    def transform(file: str, feedback: dict) -> FileOutcome:  # type: ignore[type-arg]
        result = transform_source(
            read_source(file),
            [_Planted()],
            hw,
            RunOptions(max_candidates=max_candidates),
            proposer=Listening(),
            feedback=feedback,
            finalize=False,
        )
        return FileOutcome(file, result, results=list(result.results))

    config = ApplyConfig(pipeline="swizzle", hw=hw, verify="cpu")
    import kxform.verify.differential as differential

    monkeypatch.setattr(differential, "pick_runtime", lambda name: cpu)  # the session's CPU runtime and its cache
    (done,) = run_later_stages([transform(path, {})], [lambda batch: verify_stage(batch, config)], transform)
    done.heard = heard  # type: ignore[attr-defined]
    return done


def test_a_verify_failure_goes_back_to_the_proposer_and_the_next_candidate_is_kept(
    tmp_path: Path, cpu, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    done = _run(tmp_path, 3, cpu, monkeypatch)
    assert done.transform is not None and done.transform.changed
    (result,) = done.results
    assert result.outcome is Outcome.APPLIED and result.proposal is not None
    assert result.proposal.options["pattern"] != "column"
    assert [r.label for r in result.rejected] == ["swizzle{pattern=column}"]
    assert result.rejected[0].stage == "verify" and "MISMATCH" in result.rejected[0].reason
    assert done.heard[-1] and done.heard[-1][0].label == "swizzle{pattern=column}"  # type: ignore[attr-defined]
    passed = [r for r in done.transform.remarks if r.kind.value == "Passed"]
    assert len(passed) == 1 and "column" not in passed[0].message
    record = kernel_record("run", result)
    assert record["rejected"][0]["stage"] == "verify" and record["verify_policy"]["compare"]["mode"] == "exact"


def test_with_no_candidate_left_the_file_is_not_written_and_no_remark_says_applied(
    tmp_path: Path, cpu, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    done = _run(tmp_path, 1, cpu, monkeypatch)
    assert done.transform is not None and not done.transform.changed
    remarks = done.transform.remarks
    assert not [r for r in remarks if r.kind.value == "Passed"]
    failed = [r for r in remarks if r.name == "VerifyFailed"]
    assert failed and "not applied to 'sgemm_tiled': verify stage" in failed[0].message


def test_final_remarks_follow_the_final_outcome() -> None:
    src = "__global__ void k(float* o) { o[blockIdx.y * 9 + blockIdx.x] = 1; }\n"
    from kxform.frontend.source import validate_bytes

    held = transform_source(
        validate_bytes("k.cu", src.encode()),
        [Swizzle(pattern="grouped")],
        load_profile("h100"),
        RunOptions(),
        finalize=False,
    )
    assert not [r for r in held.remarks if r.kind.value == "Passed"] and len(held.pending) == 1
    from dataclasses import replace

    reverted = [replace(r, outcome=Outcome.FAILED, stage="compile", reasons=("nvcc: error",)) for r in held.results]
    (remark,) = final_remarks(held, reverted)
    assert remark.kind.value == "Missed" and remark.name == "CompileFailed" and "nvcc: error" in remark.message
    (applied,) = final_remarks(held, held.results)
    assert applied.kind.value == "Passed" and applied.message.startswith("swizzle applied to 'k'")
