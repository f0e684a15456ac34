"""Predicted times of one kernel's configurations at its timing size (kxform.search.cost).

A configuration is rewritten by its passes through the pure core, without the checks
that build it (ptxas's registers: the build comes later, and reports them); the
rewritten kernel's footprint is taken at the launch its passes say it runs with (the
verification policy's launch at the timing size), and the cost model predicts its time on the run's hardware profile. Predictions are cached
by the rewritten code, so configurations that produce the same code are predicted once;
a configuration the passes refuse, or whose launch cannot be told, has no prediction.
Thread-safe: the objective predicts on its prepare threads, the strategy on the tuner's.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from dataclasses import replace

from kxform.analysis.access import analyse_function
from kxform.analysis.footprint import footprint
from kxform.build.ptxas import KernelResources
from kxform.engine.params import Config
from kxform.engine.policy import VerifyPolicy
from kxform.errors import KxformError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText, validate_bytes
from kxform.harness.launch import ResolvedLaunch
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.hw import HwProfile, load_profile
from kxform.search.cost import Launch, Prediction, launch_values, predict
from kxform.search.kernel_space import KernelSpace
from kxform.search.kernel_target import TuneTarget
from kxform.search.space import SearchSpace
from kxform.search.strategy import SearchHints
from kxform.verify.versions import LaunchUndecided, rewritten_launch, scalars


class Predictor:
    """The cost model of one kernel at one timing size on one hardware profile."""

    def __init__(
        self,
        original: SourceText,
        kernel: str,
        spec: KernelSpec,
        size: SizeSpec,
        space: KernelSpace,
        hw: HwProfile,
        build_dir: str | None = None,
    ) -> None:
        from kxform.build.extract import extract_kernel

        self.original = original
        self.kernel = kernel
        self.space = space
        self.hw = hw
        self.build_dir = build_dir
        self.resolved: ResolvedLaunch = spec.launch(size)
        self._params = extract_kernel(original, spec.name).params
        self._scalars = scalars(self.resolved, self._params)
        self._least = sum(a.nbytes * (2 if a.role == "inout" else 1) for a in self.resolved.args if a.kind == "buffer")
        self._lock = threading.Lock()
        self._by_code: dict[tuple[str, tuple[int, int] | None], Prediction | None] = {}
        self._by_config: dict[str, Prediction | None] = {}

    def of_source(
        self, source: SourceText, policy: VerifyPolicy, resources: KernelResources | None = None
    ) -> Prediction | None:
        """The prediction for the kernel in `source` launched as `policy` says; `resources`:
        what ptxas reported for it when it was built (registers, static shared memory)."""
        digest = hashlib.sha256(source.data + repr(policy.launch).encode()).hexdigest()
        key = (digest, None if resources is None else (resources.registers, resources.shared_bytes))
        with self._lock:
            if key in self._by_code:
                return self._by_code[key]
        prediction = self._predict(source, policy, resources)
        with self._lock:
            self._by_code[key] = prediction
        return prediction

    def of_config(self, config: Config) -> Prediction | None:
        """The prediction for `config`, rewritten here (no build); None when its passes
        refuse it or its launch cannot be told."""
        label = repr(sorted(config.items()))
        with self._lock:
            if label in self._by_config:
                return self._by_config[label]
        prediction = self._rewritten(config)
        with self._lock:
            self._by_config[label] = prediction
        return prediction

    def _rewritten(self, config: Config) -> Prediction | None:
        from kxform.core import rewrite_passes
        from kxform.engine.pass_api import Outcome

        passes = self.space.pipeline(config)
        if not passes:
            return self.of_source(self.original, VerifyPolicy())
        try:
            result = rewrite_passes(
                self.original.data,
                passes,
                path=self.original.path,
                hw=self.hw.name,
                kernels=(self.kernel,),
                build_dir=self.build_dir,
                compiles=False,  # a prediction is made before the configuration is built
            )
        except KxformError:
            return None
        policy: VerifyPolicy | None = None
        for r in result.results:
            if r.kernel != self.kernel:
                continue
            if r.outcome is not Outcome.APPLIED:
                return None
            policy = r.policy if policy is None else policy.then(r.policy)
        source = SourceText(self.original.path, result.new_data)
        return self.of_source(source, policy or VerifyPolicy())

    def features(self) -> dict[str, float] | None:
        """What one thread of the original kernel does at the timing size
        (kxform.search.transfer.kernel_features); None when its footprint cannot be taken."""
        from kxform.search.transfer import kernel_features

        model = parse_model(self.original)
        function = next((k for k in model.kernels if k.name == self.kernel), None)
        if function is None:
            return None
        r = self.resolved
        shape = Launch(r.grid, r.block, r.shared_bytes, self._least)
        access = analyse_function(model, function)
        return kernel_features(access, footprint(model, access, launch_values(shape, self._scalars)), shape)

    def _predict(
        self, source: SourceText, policy: VerifyPolicy, resources: KernelResources | None
    ) -> Prediction | None:
        try:
            launch = rewritten_launch(self.resolved, self._params, policy.launch)
        except (LaunchUndecided, KxformError):
            return None
        try:
            model = parse_model(source)
        except KxformError:
            return None
        function = next((k for k in model.kernels if k.name == self.kernel), None)
        if function is None:
            return None
        shape = Launch(launch.grid, launch.block, launch.shared_bytes, self._least)
        values: Mapping[str, int] = launch_values(shape, self._scalars)
        fp = footprint(model, analyse_function(model, function), values)
        if resources is not None:  # ptxas's figure replaces the analysis's count of shared arrays
            fp = replace(fp, shared_bytes=resources.shared_bytes)
        return predict(fp, shape, self.hw, resources.registers if resources is not None else None)


def cost_model(target: TuneTarget, space: KernelSpace, size: SizeSpec) -> Predictor | None:
    """The kernel's cost model at the timing size; None where the size cannot be resolved
    here (its buffers exceed this machine's memory: a replayed run times nothing itself),
    and the run goes on without predictions."""
    try:
        original = validate_bytes(target.path, target.data)
        return Predictor(original, target.kernel, target.spec, size, space, load_profile(target.hw), target.build_dir)
    except KxformError:
        return None


def kernel_hints(space: KernelSpace, search: SearchSpace, predictor: Predictor | None) -> SearchHints:
    """What the strategy may know of a kernel's space beyond the rows: which parameters
    change the parallel structure (kxform.engine.pass_api.Pass.structural) and the
    cost model's prediction of a row (None without a model)."""
    structural = {part.name for part in space.composed.parts if type(part.pass_).structural}
    mask = tuple(name.split(".")[0] in structural for name in search.names)
    if predictor is None:
        return SearchHints(structure=mask)

    def predicted(row: int) -> float | None:
        prediction = predictor.of_config(search.config(row))
        return None if prediction is None else prediction.estimate_ms

    return SearchHints(structure=mask, predict=predicted)
