"""Times of a template's configurations on a GPU: the `Timing` a `TemplateEvaluator` ranks
and tunes by, measured as the tuner measures every pass's configuration.

One set of inputs at the spec's timing size (its first bench size, else its largest
check size) serves the original and every configuration, so the figures compare; each
version is timed with kxform's timer (`kxform.verify.measure.timed_and_checked`: CUDA
events, warm-up, median, the persisting-L2 carveout capped, the last timed launch
checked against a single launch), its launch count filling `launch_budget_s`. A
configuration's launch is the template's (grid and block as expressions of the sizes
and the parameters), exactly as its verification launched it. A configuration that
fails to build or measure has no time (None): the tuner records it as a failure, and it
is never kept. The same object profiles the original and a configuration with Nsight
Compute (`kxform.profile.nsight`) for the refactoring prompt and its feedback.
"""

from __future__ import annotations

from collections.abc import Mapping

from kxform.engine.params import ParamValue
from kxform.engine.policy import VerifyPolicy
from kxform.frontend.model import Function
from kxform.frontend.source import SourceText
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.propose.template import Template
from kxform.runtime.base import Runtime
from kxform.verify.measure import Timing, launches_to_fill

LEAST_LAUNCHES, MOST_LAUNCHES = 5, 50


class GpuTemplateTiming:
    """Milliseconds (median) of the original kernel and of a template's configurations."""

    def __init__(
        self,
        original: SourceText,
        kernel: Function,
        spec: KernelSpec,
        runtime: Runtime,
        size: SizeSpec | None = None,
        launch_budget_s: float = 0.25,
        timeout_s: float = 120.0,
    ) -> None:
        from kxform.harness.inputs import make_inputs

        self.original = original
        self.kernel = kernel
        self.spec = spec
        self.runtime = runtime
        self.size = size or (spec.bench_sizes or spec.check_sizes[-1:])[0]
        self.resolved = spec.launch(self.size)
        self.inputs = make_inputs(spec, self.resolved)
        self.launch_budget_s = launch_budget_s
        self.timeout_s = timeout_s
        self.failures: dict[str, str] = {}
        """Configuration label -> why it has no time (a build or measurement failure)."""
        self._original: Timing | None = None

    def original_timing(self) -> Timing:
        """The unmodified kernel at the timing size (measured once)."""
        if self._original is None:
            self._original = self._timed(self.original, self.resolved, "original")
        return self._original

    def __call__(self, template: Template, config: Mapping[str, ParamValue]) -> float | None:
        from kxform.propose.template import config_label

        label = config_label(dict(config))
        try:
            source, launch = self._version(template, config)
            return self._timed(source, launch, label).median_ms
        except Exception as exc:  # noqa: BLE001 - one configuration's failure is its own, never the run's
            self.failures[label] = " ".join(str(exc).split())[:300]
            return None

    def profile_original(self) -> str:
        """Nsight Compute's summary of the original at the timing size (the prompt's section)."""
        from kxform.build.extract import extract_kernel
        from kxform.profile.nsight import summary_text

        return "The original: " + summary_text(extract_kernel(self.original, self.spec.name), self.spec, self.size)

    def profile_configuration(self, template: Template, config: Mapping[str, ParamValue]) -> str:
        """Nsight Compute's summary of the template at `config` (a kept attempt's feedback)."""
        from kxform.build.extract import extract_kernel
        from kxform.profile.nsight import summary_text

        source, launch = self._version(template, config)
        return summary_text(extract_kernel(source, self.spec.name), self.spec, self.size, launch)

    def _version(self, template: Template, config: Mapping[str, ParamValue]) -> tuple[SourceText, object]:
        """The file with the template at `config`, and its launch at the timing size."""
        from kxform.build.extract import extract_kernel
        from kxform.propose.template_verify import instantiate, launch_of
        from kxform.verify.versions import rewritten_launch

        source = instantiate(self.original, self.kernel, template, dict(config))
        params = extract_kernel(self.original, self.spec.name).params
        policy = VerifyPolicy(launch_of(template, dict(config)), required=True)
        return source, rewritten_launch(self.resolved, params, policy.launch)

    def _timed(self, source: SourceText, launch: object, version: str) -> Timing:
        from kxform.build.extract import extract_kernel
        from kxform.harness.request import launch_request
        from kxform.verify.differential import EXACT, uses_float_atomics
        from kxform.verify.measure import timed_and_checked

        request = launch_request(
            extract_kernel(source, self.spec.name),
            launch,
            self.inputs,  # type: ignore[arg-type]
            f"{self.spec.name}[{self.size.name}] {version}",
            self.timeout_s,
        )
        dtypes = {arg.name: arg.dtype for arg in self.resolved.args}
        mode = self.spec.compare if uses_float_atomics(source) else EXACT
        budget = self.launch_budget_s
        return timed_and_checked(
            self.runtime,
            request,
            dtypes,
            mode,
            lambda probe_ms: launches_to_fill(budget, probe_ms, LEAST_LAUNCHES, MOST_LAUNCHES),
        )
