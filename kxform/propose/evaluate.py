"""One attempt through the whole pipeline: check -> apply -> compile -> verify -> measure
(or predict). The same stages `kxform apply` runs, for one proposal on one kernel, so a
model's answer earns nothing the heuristic's would not.

The result names the stage that stopped it and why, in one line that goes back to the
model. Only a verified attempt (a harness spec exists and original and rewritten agree
at every size) can be kept; one that is only compile-checked is reported as unverified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from kxform.engine.driver import FileTransform, transform_source
from kxform.engine.pass_api import (
    CheckRecord,
    KernelAnalysis,
    KernelResult,
    Outcome,
    Pass,
    PassContext,
    Proposal,
    RunOptions,
)
from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec
from kxform.hw import HwProfile
from kxform.propose.predict import Prediction, WaveFootprint, locality_predictor, pattern_remap


@dataclass(frozen=True)
class Evaluation:
    """What became of one proposal."""

    verified: bool
    stage: str
    """Where it stopped: check, apply, compile, verify, measure, or `done`."""
    reason: str
    checks: tuple[CheckRecord, ...] = ()
    time_ms: float | None = None
    baseline_ms: float | None = None
    spread_ms: float | None = None
    prediction: Prediction | None = None
    transform: FileTransform | None = None

    @property
    def score(self) -> float | None:
        """Lower is better: measured milliseconds, else predicted bytes per wave."""
        if self.time_ms is not None:
            return self.time_ms
        return self.prediction.value if self.prediction is not None else None

    def summary(self) -> str:
        if not self.verified:
            return f"rejected at {self.stage}: {self.reason}"
        if self.time_ms is not None and self.baseline_ms:
            return (f"verified; measured {self.time_ms:.4f} ms (+-{self.spread_ms or 0:.4f}) vs original "
                    f"{self.baseline_ms:.4f} ms: {self.baseline_ms / self.time_ms:.3f}x")
        if self.prediction is not None:
            return f"verified; not timed; {self.prediction.describe()}"
        return f"verified; not timed and no prediction ({self.reason})"


@dataclass
class Evaluator:
    """Runs proposals for the kernels of one file (the runtime and checker are reused)."""

    source: SourceText
    pass_: Pass
    hw: HwProfile
    spec: KernelSpec | None
    runtime: object | None
    measure: bool
    build_dir: str | None = None
    semantic: Callable[..., object] | None = None
    footprint: WaveFootprint | None = None

    def evaluate(self, analysis: KernelAnalysis, proposal: Proposal) -> Evaluation:
        kernel = analysis.kernel.name
        options = RunOptions(kernels=(kernel,), arch=self.hw.arch)
        transform = transform_source(self.source, [self.pass_], self.hw, options, proposer=_Fixed(proposal),
                                     semantic=self.semantic)
        result = next((r for r in transform.results if r.kernel == kernel), None)
        if result is None or result.outcome is not Outcome.APPLIED:
            reason = "; ".join(result.reasons) if result is not None else "the pass did not consider the kernel"
            return Evaluation(False, (result.stage if result else "") or "check", reason,
                              result.checks if result else ())
        checks = result.checks
        compiled = self._compile(transform)
        if compiled is not None:
            checks += (compiled,)
            if not compiled.ok:
                return Evaluation(False, "compile", compiled.detail, checks, transform=transform)
        return self._verify(transform, result, checks, proposal)

    def _compile(self, transform: FileTransform) -> CheckRecord | None:
        from kxform.build.compile_check import CompileChecker

        checker = CompileChecker.create(self.build_dir, self.hw.arch, 1)
        return None if checker is None else checker.check_many([transform])[0]

    def _verify(self, transform: FileTransform, result: KernelResult, checks: tuple[CheckRecord, ...],
                proposal: Proposal) -> Evaluation:
        from kxform.verify.stage import verify_file

        if self.spec is None or self.runtime is None:
            why = "no harness spec for this kernel" if self.spec is None else "no runtime to verify on"
            return Evaluation(False, "verify", f"{why}: compile-checked only, so it cannot be kept", checks,
                              transform=transform)
        updated, keep = verify_file(transform.source.data, transform.new_data, transform.source.path,
                                    [replace(result, checks=checks)], self.runtime, False,  # type: ignore[arg-type]
                                    self.build_dir)
        mine = next(r for r in updated if r.kernel == result.kernel)
        record = next((c for c in reversed(mine.checks) if c.name == "verify"), None)
        if not keep or mine.outcome is not Outcome.APPLIED or record is None or record.detail.startswith("skipped"):
            return Evaluation(False, "verify", record.detail if record else "verification did not run", mine.checks,
                              transform=transform)
        if self.measure and getattr(self.runtime, "name", "") == "gpu":
            return self._timed(transform, mine.checks)
        return Evaluation(True, "done", "verified", mine.checks, prediction=self._predict(proposal),
                          transform=transform)

    def _timed(self, transform: FileTransform, checks: tuple[CheckRecord, ...]) -> Evaluation:
        from kxform.runtime.base import RuntimeError_
        from kxform.verify.measure import measure_pair
        from kxform.frontend.source import validate_bytes

        assert self.spec is not None
        try:
            before, after, size = measure_pair(transform.source, validate_bytes(transform.source.path,
                                                                                transform.new_data),
                                               self.spec, self.runtime)  # type: ignore[arg-type]
        except RuntimeError_ as exc:
            return Evaluation(False, "measure", f"timing failed: {exc}", checks, transform=transform)
        record = CheckRecord("measure", True, f"size {size}: original {before.median_ms:.4f} ms, rewritten "
                             f"{after.median_ms:.4f} ms (+-{after.spread_ms:.4f})")
        return Evaluation(True, "done", "verified and timed", checks + (record,), after.median_ms,
                          before.median_ms, after.spread_ms, transform=transform)

    def _predict(self, proposal: Proposal) -> Prediction | None:
        from kxform.passes.swizzle.swizzle import config_of

        if self.pass_.name != "swizzle":
            return None
        remap = config_of(proposal)
        model = locality_predictor()
        if model is not None:
            predicted = model.predict(self, remap)  # type: ignore[attr-defined]
            if isinstance(predicted, Prediction):
                return predicted
        return None if self.footprint is None else self.footprint.predict(pattern_remap(remap))


class _Fixed:
    """A proposer that offers exactly one proposal (the one being evaluated)."""

    name = "fixed"

    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal

    def propose(self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return [self.proposal] if analysis.kernel.name == self.proposal.kernel else []
