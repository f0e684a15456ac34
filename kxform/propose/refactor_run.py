"""One refactoring session end to end, and its replay without calls.

`refactor_kernel` runs the attempt loop (session.run_kernel: cached by prompt hash,
logged through `record`) with the refactoring context and tool, the template evaluator
(validate, verify on the CPU runtime or the GPU, tune), and returns the kept decision
with its tuned configuration (`params`: the template's digest and each parameter's
value; `payload`: the template) and the rewritten file, re-verified at that
configuration. `replay` takes such a decision (from `write_decisions`' record) and
does the same without a model: validate, verify, rewrite. `lock_entry` is the kept
decision as a `kxform.lock` entry (the kernel's digests before and after, the hardware
profile, this kxform), which `kxform apply --pass refactor --proposer lock` replays
through the ordinary pipeline (passes/refactor.py). Nothing here writes a file: the
caller writes `Rewritten.data` atomically, or prints the diff.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from kxform.engine.params import ParamValue
from kxform.engine.pass_api import KernelAnalysis, PassContext
from kxform.engine.policy import VerifyPolicy
from kxform.errors import CheckFailed
from kxform.frontend.model import SourceModel
from kxform.frontend.source import validate_bytes
from kxform.harness.model import KernelSpec
from kxform.propose.client import ClaudeClient
from kxform.propose.lock import Decision
from kxform.propose.refactor_prompt import refactor_context
from kxform.propose.session import KernelSession, Record, SessionOptions, run_kernel
from kxform.propose.template import PASS_NAME, Template, config_label
from kxform.propose.template_rules import Original, validate
from kxform.propose.template_session import TemplateEvaluator, Timing, rewrite
from kxform.propose.template_timing import GpuTemplateTiming
from kxform.propose.template_verify import comparison, launch_of
from kxform.runtime.base import Runtime


@dataclass(frozen=True)
class Rewritten:
    decision: Decision
    data: bytes
    detail: str


@dataclass(frozen=True)
class _Name:
    name: str = PASS_NAME


def refactor_kernel(
    ctx: PassContext,
    kernel: str,
    spec: KernelSpec | None,
    runtime: Runtime,
    client: ClaudeClient,
    options: SessionOptions,
    record: Record,
    timing: Timing | None = None,
    profiler: GpuTemplateTiming | None = None,
) -> tuple[KernelSession, Rewritten | None]:
    """`timing` ranks and tunes verified templates; `profiler` (on a GPU) gives the prompt
    Nsight Compute's summary of the original and each kept configuration's feedback."""
    context, tool = refactor_context(
        ctx, kernel, spec, runtime, options.measure, profiler.profile_original if profiler is not None else None
    )
    if timing is not None:  # verified attempts are ranked by their tuned times
        context = replace(context, ranking="time")
    evaluator = TemplateEvaluator(
        ctx.model,
        kernel,
        spec,
        runtime,
        ctx.hw,
        timing,
        profiler=profiler.profile_configuration if profiler is not None else None,
    )
    function = next(f for f in ctx.model.functions if f.name == kernel)
    session = run_kernel(
        ctx,
        KernelAnalysis(function),
        _Name(),
        tool,
        context,
        evaluator,
        client,  # type: ignore[arg-type]
        options,
        record,
    )
    if session.decision is None or session.best is None:
        return session, None
    template, config = evaluator.kept[session.best.label]
    decision = replace(session.decision, params=session.decision.params + tuple(config.items()))
    return session, _written(ctx.model, template, config, spec, runtime, decision)


def replay(model: SourceModel, decision: Decision, spec: KernelSpec | None, runtime: Runtime, hw: object) -> Rewritten:
    """A recorded refactoring applied again, without a model: the same rules and checks."""
    template = Template.from_payload(decision.payload)
    config = {k: v for k, v in decision.params if k != "template"}
    refusal = validate(template, Original.of(model, template.kernel, hw))
    if refusal is not None:
        raise CheckFailed(
            "template", f"{decision.kernel}: the recorded template is refused: {refusal.key}: {refusal.message}"
        )
    return _written(model, template, config, spec, runtime, decision)


def lock_entry(path: str, lock_path: Path, model: SourceModel, done: Rewritten, hw: str) -> Decision:
    """The lockfile entry of a kept refactoring of `path` (docs/lockfile.md): replayed
    while the kernel's text is the one it was decided on, `as locked` once rewritten."""
    from kxform import __version__
    from kxform.propose.lockfile import kernel_digests, lock_key

    kernel = done.decision.kernel
    before = kernel_digests(model.source)[kernel]
    after = kernel_digests(validate_bytes(model.source.path, done.data)).get(kernel, "")
    return replace(
        done.decision,
        file=lock_key(path, lock_path.parent),
        source=before,
        result=after if after != before else "",
        hw=hw,
        kxform=__version__,
        outcome="applied",
    )


def _written(
    model: SourceModel,
    template: Template,
    config: dict[str, ParamValue],
    spec: KernelSpec | None,
    runtime: Runtime,
    decision: Decision,
) -> Rewritten:
    """The file at `config`, verified against the original at every check size."""
    from kxform.verify.differential import verify_pair

    if spec is None:
        raise CheckFailed("verify", f"{template.kernel}: no harness spec: nothing unverified is written")
    data = rewrite(model, template, config)
    function = next(f for f in model.functions if f.name == template.kernel)
    policy = VerifyPolicy(launch_of(template, config), comparison(model, function), True)
    report = verify_pair(
        model.source,
        validate_bytes(model.source.path, data),
        spec,
        runtime,
        sizes=tuple(s.name for s in spec.check_sizes),
        policy=policy,
    )
    if not report.ok:
        raise CheckFailed(
            "verify",
            f"{template.kernel} at {config_label(config)}: the rewritten file does not verify: {report.reason}",
        )
    return Rewritten(
        decision,
        data,
        f"{template.kernel} at {config_label(config)}: verified ({runtime.name}) at "
        f"{', '.join(s.name for s in spec.check_sizes)}",
    )
