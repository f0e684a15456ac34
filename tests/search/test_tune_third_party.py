"""A pass kxform has never heard of, registered through the registry API, is tuned like
the built-in ones: its space composes with tile's, and the objective rewrites, checks,
verifies (on the CPU runtime) and "times" (times recorded for its configurations) it,
with no engine or search code naming it.

The pass, `loop-hint`, puts `#pragma unroll F` before a kernel's first loop. At F=8 it
also starts that loop one tile late: the planted bug only the differential run can see,
and whose recorded time is the fastest of all. The tuner must reject it and keep the
fastest configuration that verified.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc
from kxform.engine.edits import Edit
from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.engine.pass_api import Blocker, CheckRecord, KernelAnalysis, Pass, PassContext, Proposal
from kxform.engine.registry import Registry, default_registry
from kxform.harness.spec import find_spec_for, load_spec
from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget
from kxform.search.kernel_space import kernel_space
from kxform.search.objective import Failure
from kxform.search.recorded_times import RecordedTimes, config_key
from kxform.search.tuner import TuneOptions, tune
from kxform.verify.measure import Timing

LOOP = re.compile(rb"for \(int (\w+) = 0;")
BUGGY = 8


@dataclass(frozen=True)
class LoopHint(Pass):
    name = "loop-hint"
    description = "#pragma unroll F before a kernel's first loop (a test pass)"
    requires = ("tile",)  # orders it after tile, though its name sorts first

    factor: int | None = None

    @classmethod
    def option_space(cls) -> ParamSpace:
        return ParamSpace(
            (Param.ints("factor", (1, 2, 4, 8), 1, doc="unroll factor"),),
            (Constraint.parse("factor <= 8", "a test constraint"),),
        )

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        out = {}
        data = ctx.model.source.data
        for kernel in ctx.model.kernels:
            body = data[kernel.body.start : kernel.body.end]
            found = LOOP.search(body)
            blockers = () if found else (Blocker("NoLoop", "the kernel has no loop", kernel.span.start),)
            at = kernel.body.start + found.start() if found else 0
            done = data[:at].rstrip().rsplit(b"\n", 1)[-1].strip().startswith(b"#pragma unroll") if found else False
            out[kernel.name] = KernelAnalysis(kernel, blockers, {"at": at}, already_applied=done)
        return out

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        if self.factor is None:
            return None
        return Proposal.of(self.name, analysis.kernel.name, {"factor": self.factor}, "requested")

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        return [CheckRecord("factor", True, f"factor {proposal.options['factor']}")]

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits = []
        data = ctx.model.source.data
        for proposal in proposals:
            kernel = next(k for k in ctx.model.kernels if k.name == proposal.kernel)
            found = LOOP.search(data, kernel.body.start, kernel.body.end)
            assert found is not None
            factor = int(proposal.options["factor"])
            edits.append(Edit(found.start(), found.start(), f"#pragma unroll {factor}\n    ", "loop-hint"))
            if factor == BUGGY:  # the plant: the loop starts one step late
                start = found.end() - 2
                edits.append(Edit(start, start + 1, "TILE", "loop-hint: planted"))
        return edits


def _registry() -> Registry:
    """tile from kxform's own modules, and the test's pass: no engine code names it."""
    registry = Registry()
    registry.register("tile", lambda: default_registry().get("tile"), "kxform.passes.tile")
    registry.register("loop-hint", lambda: LoopHint, "tests.test_tune_third_party")
    return registry


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm")
    return tmp_path / "sgemm" / "sgemm_tiled.cu"


def _profile():  # type: ignore[no-untyped-def]
    from kxform.hw import load_profile

    return load_profile("h100")


def test_a_registered_pass_composes_with_tile_without_being_named() -> None:
    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    space = kernel_space(path.read_bytes(), "sgemm_tiled", None, path=str(path), hw="h100", registry=_registry())
    assert space.passes == ("tile", "loop-hint")
    assert space.space.names == ("tile", "tile.TILE", "loop_hint", "loop_hint.factor")
    assert "not (loop_hint) or (loop_hint.factor <= 8)" in [c.text for c in space.space.constraints]
    rows = space.search(_profile())
    assert len(rows) == 6 * 5  # tile off or at one of 5 sizes but its own; the hint off or at one of 4 factors
    assert space.spec({**space.defaults(), "loop_hint": True, "loop_hint.factor": 4}) == "loop-hint{factor=4}"
    with pytest.raises(Exception, match="unknown pass 'loop-hint'"):
        kernel_space(path.read_bytes(), "sgemm_tiled", ("loop-hint",), path=str(path), hw="h100")


def _objective(path: Path, times: dict[int | None, float], cpu) -> KernelObjective:  # type: ignore[no-untyped-def]
    data = path.read_bytes()
    spec_path = find_spec_for(str(path))
    assert spec_path is not None
    space = kernel_space(data, "sgemm_tiled", ("loop-hint",), path=str(path), hw="h100", registry=_registry())
    recorded = {}
    for factor, ms in times.items():
        config = {**space.defaults(), "loop_hint": factor is not None}
        if factor is not None:
            config["loop_hint.factor"] = factor
        recorded[config_key(config)] = Timing(ms, 0.05)
    target = TuneTarget(str(path), data, "sgemm_tiled", load_spec(spec_path).kernel("sgemm_tiled"), "h100")
    return KernelObjective(
        target,
        space,
        cpu,
        MeasureOptions(check_sizes=("tiles", "ragged"), recorded=RecordedTimes("recorded", "sgemm_tiled", recorded)),
    )


@pytest.mark.slow
@needs_nvcc
def test_the_registered_pass_is_tuned_and_its_planted_bug_rejected(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    from kxform.orchestrate.tune_summary import pipeline_result

    path = _copy(tmp_path)
    objective = _objective(path, {None: 10.0, 1: 12.0, 2: 9.0, 4: 6.0, BUGGY: 1.0}, cpu)
    space = objective.space.search(_profile())
    result = tune(space, objective, TuneOptions(strategy="exhaustive", budget=10, start_at_defaults=True))
    by_factor = {s.config["loop_hint.factor"] if s.config["loop_hint"] else None: s.evaluation for s in result.steps}
    assert result.steps[0].config == objective.space.defaults()  # the original first
    assert set(by_factor) == {None, 1, 2, 4, BUGGY}
    assert by_factor[BUGGY].failure is Failure.VERIFY and "elements differ" in by_factor[BUGGY].detail
    assert by_factor[4].time_ms == 6.0 and by_factor[None].time_ms == 10.0
    won = pipeline_result(objective, result, None)
    assert won["kept_original"] is False and won["pipeline"] == "loop-hint{factor=4}"
    assert won["values"] == {"loop_hint.factor": 4} and won["speedup"] == pytest.approx(10.0 / 6.0, rel=1e-3)


@pytest.mark.slow
@needs_nvcc
def test_the_original_is_kept_when_nothing_verified_is_faster_beyond_the_spread(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    from kxform.orchestrate.tune_summary import pipeline_result

    path = _copy(tmp_path)
    objective = _objective(path, {None: 10.0, 1: 12.0, 2: 9.97, 4: 10.5, BUGGY: 1.0}, cpu)
    result = tune(
        objective.space.search(_profile()),
        objective,
        TuneOptions(strategy="exhaustive", budget=10, start_at_defaults=True),
    )
    kept = pipeline_result(objective, result, None)
    assert result.best is not None and result.best.config["loop_hint.factor"] == 2  # faster, inside the noise
    assert kept["kept_original"] is True and kept["pipeline"] == "" and kept["speedup"] == 1.0
    assert "not faster than the original (10 ms) by more than the spread" in kept["reason"]


def test_the_llm_tool_and_the_lockfile_take_the_registered_pass() -> None:
    """The proposal tool and a recorded decision work for a pass they have never heard of."""
    from kxform.api import analyse_kernel, kernel_context
    from kxform.engine.proposal import Provenance
    from kxform.propose.answer import Answer, BadAnswer, read_tool_input
    from kxform.propose.lock import Decision, replay
    from kxform.propose.tools import tool_for

    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    ctx = kernel_context(path.read_bytes(), "sgemm_tiled", path=str(path))
    hint = LoopHint()
    analysis = analyse_kernel(hint, ctx, "sgemm_tiled")
    tool = tool_for(hint, hint.space(ctx, analysis))
    assert tool.name == "propose_loop_hint" and tool.payload is None
    assert tool.schema["properties"]["factor"]["enum"] == [1, 2, 4, 8]
    assert "`loop-hint` pass" in tool.description and "factor <= 8" in tool.description
    who = Provenance("claude", model="test")
    answer = read_tool_input({"last_attempt": "a", "expectation": "b", "factor": 4}, tool, "sgemm_tiled", ctx.hw, who)
    assert isinstance(answer, Answer) and answer.proposal.label() == "loop-hint{factor=4}"
    wrong = read_tool_input({"last_attempt": "a", "expectation": "b", "factor": 3}, tool, "sgemm_tiled", ctx.hw, who)
    assert isinstance(wrong, BadAnswer) and wrong.kind == "schema" and "is not one of" in wrong.reason
    recorded = Decision("sgemm_tiled", "loop-hint", (("factor", "4"),), proposer="claude")  # as TOML may spell it
    replayed = replay(recorded, hint, ctx, analysis, "lock")
    assert [p.options for p in replayed] == [{"factor": 4}] and replayed[0].pass_name == "loop-hint"


def test_a_pass_whose_space_has_no_valid_point_is_left_out_with_its_reason() -> None:
    @dataclass(frozen=True)
    class Impossible(LoopHint):
        name = "impossible"

        @classmethod
        def option_space(cls) -> ParamSpace:
            return ParamSpace((Param.ints("factor", (1, 2), 1),), (Constraint.parse("factor > 2"),))

    registry = _registry()
    registry.register("impossible", lambda: Impossible, "tests.test_tune_third_party")
    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    space = kernel_space(path.read_bytes(), "sgemm_tiled", None, path=str(path), hw="h100", registry=registry)
    assert space.passes == ("tile", "loop-hint")
    assert space.not_offered == (("impossible", "no configuration of its space meets its constraints"),)
    with pytest.raises(Exception, match="nothing to tune under impossible: no configuration of its space"):
        kernel_space(path.read_bytes(), "sgemm_tiled", ("impossible",), path=str(path), hw="h100", registry=registry)
