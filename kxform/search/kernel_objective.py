"""The objective that measures real code: rewrite, compile, verify, time.

For one configuration of a kernel's tuning space (`kxform.search.kernel_space`):

* **prepare** (worker threads, CPU only): the pass pipeline rewrites the file through
  `kxform.core` (the passes' own checks: derived constraints, ptxas resources, the
  rewritten launch, re-parse, idempotence), and the kernel's unit is compiled by the
  runtime that will run it (nvcc to a cubin on a GPU; cached by content);
* **evaluate** (one thread, the device): the rewritten kernel is verified against the
  original at every check size of the harness spec under the pipeline's verification
  policy (the launch the pass derived, the tolerance it states), once per distinct code;
  then timed at the timing size by `kxform.verify.measure.timed_and_checked` (CUDA
  events, warm-up, median of repetitions, persisting L2 capped at zero, the last timed
  launch's outputs re-checked against a single launch).

Before a configuration is built its time is predicted (kxform.search.predictor, the
cost model of kxform.search.cost), and the prediction travels with its evaluation into
the log. Two ways of spending less on configurations that cannot win:

* **pruning** (kxform.search.cost.Pruning): once the model has ranked this kernel's
  measured configurations well, a configuration predicted several times slower than
  the prediction of the best configuration measured so far is not built, verified nor
  timed (`pruned`);
* **early cut-off**: timing starts with FIRST_LAUNCHES launches
  (kxform.verify.measure.timed_and_checked), and a configuration whose first launches are
  slower than the best time so far by more than CUT_MARGIN plus both spreads is stopped
  there (`cut_off`: its time is the median of those launches).

A configuration that fails any step is a failure with its class and reason (`invalid`:
a pass refused it; `compile_failed`; `verification_failed`, also when the timed launches
did not reproduce a single launch or the rewritten launch could not be told;
`runtime_failed`: a fault, a timeout, a runtime that cannot time), never a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kxform.build.diagnostics import environment_failure
from kxform.build.ptxas import KernelResources
from kxform.engine.params import Config
from kxform.engine.policy import VerifyPolicy
from kxform.engine.status import BUILD_ENVIRONMENT, DOES_NOT_COMPILE
from kxform.errors import BuildFailed, KxformError, Location, UsageError
from kxform.frontend.source import SourceText, validate_bytes
from kxform.runtime.base import LaunchRequest, Runtime, RuntimeError_, Unsupported
from kxform.search.cost import Prediction, Pruning
from kxform.search.kernel_space import KernelSpace, label
from kxform.search.kernel_target import MEASURED, MeasureOptions, Phases, TuneTarget, timing_size
from kxform.search.objective import Evaluation, Failure, Objective, Prepared
from kxform.search.predictor import cost_model, kernel_hints
from kxform.search.space import SearchSpace
from kxform.search.strategy import SearchHints
from kxform.verify.measure import MeasurementError, Timing, launches_to_fill, timed_and_checked

__all__ = ["KernelObjective", "MeasureOptions", "Phases", "TuneTarget", "gpu_runtime", "timing_size"]

MIN_REPEAT = 5
CUT_MARGIN = 0.10
"""How much slower than the best so far (besides both spreads) the first launches must be
for a configuration to be cut off."""


@dataclass(frozen=True)
class _Candidate:
    """What `prepare` hands to `evaluate`."""

    source: SourceText
    policy: VerifyPolicy
    extracted: Any
    phases: Phases
    prediction: Prediction | None = None


class KernelObjective(Objective):
    """Rewrites, compiles, verifies and times configurations of one kernel on `runtime`
    (the GPU runtime; the CPU runtime verifies but cannot time)."""

    def __init__(
        self, target: TuneTarget, space: KernelSpace, runtime: Runtime, options: MeasureOptions = MEASURED
    ) -> None:
        from kxform.build.extract import extract_kernel
        from kxform.verify.differential import UnitFlags, check_signature

        self.target = target
        self.space = space
        self.runtime = runtime
        self.options = options
        self.size = options.size or timing_size(target.spec, None)
        self.name = runtime.name if options.recorded is None else f"{runtime.name}+replay"
        self.hardware = _hardware(runtime)
        self.measures = (
            f"passes {','.join(space.passes)}; size {json.dumps(self.size.values, sort_keys=True)}; "
            f"checks {','.join(options.check_sizes) or 'all'}"
            + (f"; times recorded in {options.recorded.path}" if options.recorded else "")
        )
        self.original = validate_bytes(target.path, target.data)
        self._original_unit = extract_kernel(self.original, target.spec.name)
        check_signature(target.spec, self._original_unit)
        self._flags = UnitFlags.from_build_dir(target.build_dir, target.path)
        self._check_environment()
        self._lock = threading.Lock()
        self._verdicts: dict[str, str | None] = {}
        self._inputs: dict[str, Any] | None = None
        self._baseline: Timing | None = None
        self.phases: dict[str, Phases] = {}
        """Per configuration (its label), the seconds each step took."""
        self.predictor = cost_model(target, space, self.size) if options.cost_model else None
        self._best: Evaluation | None = None
        """The fastest evaluation observed (what the cut-off compares with)."""
        self._pruning = Pruning()

    # -- prepare: CPU work, on worker threads -----------------------------------------

    def prepare(self, config: Config) -> Prepared:
        items = tuple(config.items())
        started = time.perf_counter()
        try:
            new, policy = self._rewrite(config)
        except _Refused as refused:
            if refused.key == BUILD_ENVIRONMENT:
                self._environment(refused.reason)
            return self._failed(items, Phases(time.perf_counter() - started), refused.failure, refused.reason)
        rewritten = time.perf_counter()
        prediction = self.predictor.of_source(new, policy) if self.predictor is not None else None
        predicted = time.perf_counter()
        phases = Phases(rewritten - started, predict_s=predicted - rewritten)
        pruned = self._pruned(prediction)
        if pruned:
            return self._failed(items, phases, Failure.PRUNED, pruned, prediction)
        try:
            extracted, resources = self._compile(new)
        except (RuntimeError_, KxformError) as exc:
            if environment_failure(f"{exc}\n{getattr(exc, 'log', '')}"):  # the compiler's own output
                self._environment(str(exc))
            phases = replace(phases, compile_s=time.perf_counter() - predicted)
            return self._failed(items, phases, Failure.COMPILE, f"compile: {exc}", prediction)
        phases = replace(phases, compile_s=time.perf_counter() - predicted)
        if resources is not None and self.predictor is not None:  # ptxas's registers and shared memory
            prediction = self.predictor.of_source(new, policy, resources)
            pruned = self._pruned(prediction)
            if pruned:
                return self._failed(items, phases, Failure.PRUNED, pruned, prediction)
        code = hashlib.sha256(extracted.source.encode() + json.dumps(policy.to_json(), sort_keys=True).encode())
        return Prepared(items, code.hexdigest(), _Candidate(new, policy, extracted, phases, prediction))

    # -- the bar a configuration is measured against ----------------------------------

    def observe(self, evaluation: Evaluation) -> None:
        """Remember the fastest evaluation so far, and each prediction beside its measurement."""
        if evaluation.time_ms is None:
            return
        predicted = evaluation.prediction.estimate_ms if evaluation.prediction is not None else None
        with self._lock:
            self._pruning.observe(predicted, evaluation.time_ms, evaluation.cut_off)
            if self._best is None or evaluation.time_ms < (self._best.time_ms or math.inf):
                self._best = evaluation

    def _pruned(self, prediction: Prediction | None) -> str:
        """Why `prediction` is not worth building ("": it is), once the model is trusted."""
        if prediction is None:
            return ""
        with self._lock:
            return self._pruning.why(prediction.estimate_ms)

    def _cut(self, early: Timing) -> bool:
        """Whether the first launches are clearly slower than the best time so far."""
        with self._lock:
            best = self._best
        if best is None or best.time_ms is None:
            return False
        bar = best.time_ms * (1.0 + CUT_MARGIN) + best.spread_ms + early.spread_ms
        return early.median_ms > bar

    def features(self) -> dict[str, float] | None:
        """What the original kernel is like, for the tuning database (kxform.search.transfer);
        None without a cost model."""
        return self.predictor.features() if self.predictor is not None else None

    def hints(self, search: SearchSpace) -> SearchHints:
        """What the strategy may know of this kernel's space (`kernel_hints`)."""
        return kernel_hints(self.space, search, self.predictor)

    def _rewrite(self, config: Config) -> tuple[SourceText, VerifyPolicy]:
        """The file rewritten at `config` and the composed verification policy of its passes."""
        from kxform.core import rewrite_passes
        from kxform.engine.pass_api import Outcome

        passes = self.space.pipeline(config)
        if not passes:
            return self.original, VerifyPolicy()
        target = self.target
        try:
            result = rewrite_passes(
                target.data,
                passes,
                path=target.path,
                hw=target.hw,
                kernels=(target.kernel,),
                build_dir=target.build_dir,
            )
        except KxformError as exc:
            raise _Refused(Failure.INVALID, f"{self.space.spec(config)}: {exc}") from None
        policy: VerifyPolicy | None = None
        for r in result.results:
            if r.kernel != target.kernel:
                continue
            if r.outcome in (Outcome.FAILED, Outcome.MISSED, Outcome.SKIPPED):
                why = r.reasons[0] if r.reasons else r.outcome.value
                # the tile pass compiles every candidate for ptxas's resources: a build error there is a compile failure
                failure = (
                    Failure.COMPILE
                    if r.stage == "compile" or r.key in (DOES_NOT_COMPILE, BUILD_ENVIRONMENT)
                    else Failure.INVALID
                )
                raise _Refused(failure, f"{r.pass_name}: {r.stage or r.outcome.value}: {why}", r.key)
            if r.outcome is Outcome.APPLIED:
                policy = r.policy if policy is None else policy.then(r.policy)
        return validate_bytes(target.path, result.new_data, rewritten=True), policy or VerifyPolicy()

    def _compile(self, new: SourceText) -> tuple[Any, KernelResources | None]:
        """Extract the kernel's unit and build it the way the runtime will launch it; what
        ptxas reported for the kernel when the build was nvcc's (None otherwise)."""
        from kxform.build.extract import extract_kernel
        from kxform.runtime.cpu import CpuRuntime
        from kxform.runtime.gpu import GpuRuntime

        extracted = extract_kernel(new, self.target.spec.name)
        request = LaunchRequest(
            extracted.source,
            extracted.entry,
            extracted.params,
            (),
            (1, 1, 1),
            (1, 1, 1),
            label=f"{self.target.kernel} build",
            filename=extracted.path,
            defines=self._flags.defines,
            include_dirs=self._flags.for_unit(extracted.path),
        )
        resources = None
        if isinstance(self.runtime, GpuRuntime):
            resources = self.runtime.compile(request).resources
        elif isinstance(self.runtime, CpuRuntime):
            self.runtime.builder().binary(self.runtime.unit_for(request), extracted.path or self.target.kernel)
        return extracted, resources

    def _check_environment(self) -> None:
        """The original builds here the way every configuration will be built (the file's
        directory, the build directory's and the configuration's flags): else no
        configuration's failure would say anything about the configuration, so the run
        stops before any is evaluated or stored."""
        try:
            self._compile(self.original)
        except (RuntimeError_, KxformError) as exc:
            raise BuildFailed(
                f"the original '{self.target.kernel}' does not build here, so no configuration can be "
                f"judged (include paths, defines, toolchain: -I, -D, [tool.kxform], -p): {exc}",
                Location(self.target.path),
            ) from None

    def _environment(self, reason: str) -> None:
        """BuildFailed (the run stops): a build failed for a cause of the machine, not of
        the configuration, so the failure is never stored as the configuration's."""
        raise BuildFailed(
            f"the build environment failed while tuning '{self.target.kernel}' (the original "
            f"built at the start): {reason}",
            Location(self.target.path),
        )

    def _failed(
        self,
        items: tuple[Any, ...],
        phases: Phases,
        failure: Failure,
        reason: str,
        prediction: Prediction | None = None,
    ) -> Prepared:
        self._record(dict(items), phases)
        return Prepared(items, failure=Evaluation.failed(failure, phases.total_s, reason, prediction))

    # -- evaluate: the device, one configuration at a time -----------------------------

    def evaluate(self, prepared: Prepared) -> Evaluation:
        candidate: _Candidate = prepared.payload
        config = prepared.as_dict()
        started = time.perf_counter()
        problem = self._verify(prepared.code_key, candidate)
        verified = time.perf_counter()
        phases = replace(candidate.phases, verify_s=verified - started)
        if problem is not None:
            self._record(config, phases)
            return Evaluation.failed(Failure.VERIFY, phases.total_s, problem, candidate.prediction)
        try:
            timing = self._time(candidate, config)
        except MeasurementError as exc:
            failure, reason = Failure.VERIFY, f"measure: {exc}"
        except RuntimeError_ as exc:
            failure, reason = Failure.RUNTIME, f"time: {exc}"
        else:
            phases = replace(phases, time_s=time.perf_counter() - verified)
            self._record(config, phases)
            what = "cut off after the first" if timing.cut_off else "median of"
            return Evaluation(
                timing.median_ms,
                timing.spread_ms,
                cost_s=phases.total_s,
                detail=f"size {self.size.name}: {what} {timing.samples} launches",
                cut_off=timing.cut_off,
                prediction=candidate.prediction,
            )
        phases = replace(phases, time_s=time.perf_counter() - verified)
        self._record(config, phases)
        return Evaluation.failed(failure, phases.total_s, reason, candidate.prediction)

    def check(self, config: Config) -> tuple[Failure | None, str]:
        """`config` rewritten, built and verified, not timed (what a CPU checker answers):
        (None, "") when it verified, else its failure class and the reason."""
        prepared = self.prepare(config)
        if prepared.failure is not None:
            return prepared.failure.failure, prepared.failure.detail
        problem = self._verify(prepared.code_key, prepared.payload)
        return (None, "") if problem is None else (Failure.VERIFY, problem)

    def _verify(self, code_key: str, candidate: _Candidate) -> str | None:
        """None when the code verified (once per distinct code), else the reason it did not."""
        from kxform.verify.differential import verify_pair

        if code_key in self._verdicts:
            return self._verdicts[code_key]
        spec = self.target.spec
        try:
            report = verify_pair(
                self.original,
                candidate.source,
                spec,
                self.runtime,
                sizes=self.options.check_sizes,
                timeout_s=self.options.verify_timeout_s,
                flags=self._flags,
                policy=candidate.policy,
            )
        except KxformError as exc:
            verdict: str | None = f"verify: {exc}"
        else:
            bad = next((s for s in report.sizes if not s.ok), None)
            verdict = (
                None
                if report.ok
                else f"verify: {bad.summary() if bad else 'no size was checked'}; policy: {candidate.policy.describe()}"
            )
        self._verdicts[code_key] = verdict
        return verdict

    def _time(self, candidate: _Candidate, config: Config) -> Timing:
        from kxform.verify.versions import rewritten_launch

        if self.options.recorded is not None:
            return self._recorded(config)
        resolved = self.target.spec.launch(self.size)
        launch = rewritten_launch(resolved, self._original_unit.params, candidate.policy.launch)
        return self._timed(candidate.extracted, candidate.source, launch, "rewritten", cut=True)

    def _timed(self, extracted: Any, source: SourceText, launch: Any, version: str, cut: bool = False) -> Timing:
        from kxform.harness.inputs import make_inputs
        from kxform.verify.differential import EXACT, launch_request, uses_float_atomics

        spec = self.target.spec
        if type(self.runtime).time is Runtime.time:  # before making inputs at the timing size (GBs at times)
            raise Unsupported(f"the {self.runtime.name} runtime does not time kernels")
        if self._inputs is None:
            self._inputs = make_inputs(spec, spec.launch(self.size))
        request = launch_request(
            extracted,
            launch,
            self._inputs,
            f"{spec.name}[{self.size.name}] {version}",
            self.options.time_timeout_s,
            self._flags,
        )
        dtypes = {arg.name: arg.dtype for arg in launch.args}
        mode = spec.compare if uses_float_atomics(source) else EXACT
        cutting = self._cut if cut and self.options.cut_off else None
        return timed_and_checked(self.runtime, request, dtypes, mode, self._repeat, cutting)

    def _repeat(self, probe_ms: float) -> int:
        """Timed launches for a kernel whose single launch took `probe_ms`: enough to fill
        the launch budget (at least MIN_REPEAT, at most `repeat`)."""
        budget = self.options.launch_budget_s
        if budget is None:
            return self.options.repeat
        return launches_to_fill(budget, probe_ms, MIN_REPEAT, self.options.repeat)

    def _recorded(self, config: Config, cut: bool = True) -> Timing:
        """The time a GPU run recorded for `config`; marked cut off where the GPU objective
        would have stopped it (its recorded median clearly slower than the best so far)."""
        assert self.options.recorded is not None
        timing = self.options.recorded.timing(config)
        if timing is None:
            raise Unsupported(f"no recorded time in {self.options.recorded.path}")
        if cut and self.options.cut_off and self._cut(timing):
            return replace(timing, cut_off=True)
        return timing

    def baseline(self) -> Timing:
        """The unmodified kernel's time at the timing size, on the same inputs (once)."""
        if self._baseline is None and self.options.recorded is not None:
            self._baseline = self.options.recorded.original or self._recorded(self.space.defaults(), cut=False)
        if self._baseline is None:
            resolved = self.target.spec.launch(self.size)
            self._baseline = self._timed(self._original_unit, self.original, resolved, "original")
        return self._baseline

    def _record(self, config: Mapping[str, Any], phases: Phases) -> None:
        with self._lock:
            self.phases[label(config)] = phases

    def close(self) -> None:
        self._inputs = None
        close = getattr(self.runtime, "close", None)
        if close is not None:
            close()


class _Refused(Exception):
    """A pass refused the configuration (or its build failed in the pass's checks)."""

    def __init__(self, failure: Failure, reason: str, key: str = "") -> None:
        super().__init__(reason)
        self.failure = failure
        self.reason = reason
        self.key = key
        """The stable reason key of the result that refused it (kxform.engine.status)."""


def _hardware(runtime: Runtime) -> str:
    """What the database keys results by: the GPU's name, or the runtime's."""
    from kxform.runtime.gpu import GpuRuntime

    if isinstance(runtime, GpuRuntime):
        return runtime.device_info().name
    return runtime.name


def gpu_runtime() -> Runtime:
    """This machine's GPU runtime; UsageError (one line, exit 2) when there is none."""
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        raise UsageError(f"tuning needs a GPU or a recorded space (--objective replay:FILE); no GPU here: {why}")
    return runtime
