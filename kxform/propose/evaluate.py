"""One attempt through the engine's own stages: the candidate stage (the pass's checks,
the edit, re-parse, coverage, idempotence), then the later stages `kxform apply` runs
(compile, verify under the pass's verification policy), then a timing or a prediction.

Nothing here is a second pipeline: the proposal is handed to `transform_source` by a
proposer that offers exactly it, and the runner's compile and verify stages run over the
result through `run_later_stages`, so a model's answer earns nothing the heuristic's
would not, and a custom formula is verified bit-exact like any swizzle. What the loop
adds is only what ranking attempts needs: an attempt counts only when a differential run
confirmed it (a harness spec exists and original and rewritten agree at every size);
then it is timed on a GPU (`--measure`) or, without one, given a prediction. A refusal
is the engine's `Rejection` (the stage and the reason), which goes back to the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kxform.build.toolchain import Toolchain
from kxform.engine.driver import Feedback, FileTransform, transform_source
from kxform.engine.pass_api import (
    CheckRecord,
    KernelAnalysis,
    KernelResult,
    Outcome,
    Pass,
    PassContext,
    Proposal,
    Rejection,
    RunOptions,
)
from kxform.orchestrate.runner import ApplyConfig, FileOutcome, compile_stage, verify_stage
from kxform.engine.stages import run_later_stages
from kxform.engine.status import Status
from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec
from kxform.propose.predict import Prediction, WaveFootprint, locality_predictor

DONE = "done"


@dataclass(frozen=True)
class Evaluation:
    """What became of one proposal: refused (the engine's `Rejection`) or verified, with
    its figures."""

    rejection: Rejection | None
    checks: tuple[CheckRecord, ...] = ()
    time_ms: float | None = None
    baseline_ms: float | None = None
    spread_ms: float | None = None
    prediction: Prediction | None = None
    transform: FileTransform | None = field(default=None, compare=False)

    @property
    def verified(self) -> bool:
        return self.rejection is None

    @property
    def stage(self) -> str:
        """Where it stopped: check, compile, verify, ... or `done`."""
        return self.rejection.stage if self.rejection is not None else DONE

    @property
    def reason(self) -> str:
        if self.rejection is not None:
            return self.rejection.reason
        return "verified and timed" if self.time_ms is not None else "verified"

    @property
    def score(self) -> float | None:
        """Lower is better: measured milliseconds, else predicted bytes per wave."""
        if self.time_ms is not None:
            return self.time_ms
        return self.prediction.value if self.prediction is not None else None

    def summary(self) -> str:
        if not self.verified:
            return f"rejected at {self.stage}: {self.reason}"
        tuned = "".join(f"; {c.detail}" for c in self.checks if c.name in ("tune", "nsight"))
        if self.time_ms is not None and self.baseline_ms:
            return (
                f"verified; measured {self.time_ms:.4f} ms (+-{self.spread_ms or 0:.4f}) vs original "
                f"{self.baseline_ms:.4f} ms: {self.baseline_ms / self.time_ms:.3f}x{tuned}"
            )
        if self.time_ms is not None:
            return f"verified; {self.time_ms:.4f} ms (no time of the original to compare){tuned}"
        if self.prediction is not None:
            return f"verified; not timed; {self.prediction.describe()}"
        return "verified; not timed and no prediction"


def rejection_of(result: KernelResult) -> Rejection:
    """Why the engine did not keep `result`: the refusal it recorded for the stage that
    stopped it, else the stage and reasons of the result."""
    label = result.proposal.label() if result.proposal is not None else "-"
    for rejection in reversed(result.rejected):
        if rejection.stage == result.stage or not result.stage:
            return rejection
    return Rejection(label, result.stage or "check", "; ".join(result.reasons) or result.outcome.value, result.key)


@dataclass
class Evaluator:
    """Runs proposals for the kernels of one file through the engine's stages.

    `config`: the run's options that the stages read (hardware, `verify` mode, build
    directory, libclang, `measure`); `runtime`: where attempts are verified (None: none
    here, so no attempt can be kept); `spec`: the kernel's harness spec (the bench size
    for timing); `footprint`: the fallback predictor without a GPU."""

    source: SourceText
    pass_: Pass
    config: ApplyConfig
    runtime: object | None
    spec: KernelSpec | None = None
    footprint: WaveFootprint | None = None

    def evaluate(self, analysis: KernelAnalysis, proposal: Proposal) -> Evaluation:
        kernel = analysis.kernel.name
        first = self._transform(proposal, {})
        stages = (
            lambda batch: compile_stage(batch, self.config),
            lambda batch: verify_stage(batch, self.config, self.runtime),
        )
        (done,) = run_later_stages([first], stages, lambda _path, feedback: self._transform(proposal, feedback))
        result = next((r for r in done.results if r.kernel == kernel and r.pass_name == self.pass_.name), None)
        if result is None:
            return Evaluation(
                Rejection(proposal.label(), "check", "the pass did not consider the kernel"), transform=done.transform
            )
        if result.outcome is not Outcome.APPLIED:
            return Evaluation(rejection_of(result), result.checks, transform=done.transform)
        record = next((c for c in reversed(result.checks) if c.name == "verify"), None)
        if record is None or record.status is not Status.PASSED:
            why = record.detail if record is not None else "no differential run (--verify static or compile)"
            return Evaluation(
                Rejection(proposal.label(), "verify", f"{why}: only a verified attempt can be kept"),
                result.checks,
                transform=done.transform,
            )
        assert done.transform is not None
        if self.config.measure and getattr(self.runtime, "name", "") == "gpu":
            return self._timed(done.transform, result)
        return Evaluation(None, result.checks, prediction=self._predict(proposal), transform=done.transform)

    def _transform(self, proposal: Proposal, feedback: Feedback) -> FileOutcome:
        """The candidate stage for exactly `proposal` (`feedback`: what the later stages refused)."""
        assert self.config.hw is not None
        semantic = None
        if self.config.semantic:
            from kxform.build.semantic import semantic_provider

            semantic = semantic_provider(self.source.path, self.config.build_dir)
        options = RunOptions(kernels=(proposal.kernel,), arch=self.config.hw.arch, max_candidates=1)
        transform = transform_source(
            self.source,
            [self.pass_],
            self.config.hw,
            options,
            proposer=_Fixed(proposal),
            semantic=semantic,
            feedback=feedback,
            toolchain=Toolchain.create(self.config.build_dir),
            finalize=False,
        )
        return FileOutcome(self.source.path, transform, results=list(transform.results))

    def _timed(self, transform: FileTransform, result: KernelResult) -> Evaluation:
        """Time original and rewritten as `kxform apply --measure` does (the pass's launch
        policy, outputs re-checked after timing); the numbers rank the attempt."""
        from kxform.frontend.source import validate_bytes
        from kxform.runtime.base import RuntimeError_
        from kxform.verify.measure import measure_pair

        label = result.proposal.label() if result.proposal is not None else "-"
        if self.spec is None:
            return Evaluation(
                Rejection(label, "measure", "no harness spec to time"), result.checks, transform=transform
            )
        try:
            before, after, size = measure_pair(
                transform.source,
                validate_bytes(transform.source.path, transform.new_data),
                self.spec,
                self.runtime,
                policy=result.policy,
            )  # type: ignore[arg-type]
        except RuntimeError_ as exc:
            return Evaluation(Rejection(label, "measure", f"timing failed: {exc}"), result.checks, transform=transform)
        record = CheckRecord(
            "measure",
            Status.PASSED,
            f"size {size}: original {before.median_ms:.4f} ms, rewritten "
            f"{after.median_ms:.4f} ms (+-{after.spread_ms:.4f})",
            figures=(
                ("original_ms", before.median_ms),
                ("rewritten_ms", after.median_ms),
                ("rewritten_spread_ms", after.spread_ms),
                ("size", size),
            ),
        )
        return Evaluation(
            None, result.checks + (record,), after.median_ms, before.median_ms, after.spread_ms, transform=transform
        )

    def _predict(self, proposal: Proposal) -> Prediction | None:
        """The prediction of an attempt whose pass reorders the grid's blocks (the pass says
        how: `Pass.block_order`); None for a pass that keeps the hardware's order."""
        order = self.pass_.block_order(proposal)
        if order is None:
            return None
        model = locality_predictor()
        if model is not None:
            predicted = model.predict(self, order)  # type: ignore[attr-defined]
            if isinstance(predicted, Prediction):
                return predicted
        return None if self.footprint is None else self.footprint.predict(order)


class _Fixed:
    """A proposer that offers exactly one proposal (the one being evaluated)."""

    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal
        self.name = proposal.proposer

    def propose(
        self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, rejected: Sequence[Rejection] = ()
    ) -> list[Proposal]:
        return [self.proposal] if analysis.kernel.name == self.proposal.kernel else []
