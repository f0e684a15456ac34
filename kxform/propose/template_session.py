"""A template in the attempt loop: validate -> verify -> tune -> (the loop reflects), and
the rewrite of the file at the kept configuration.

`TemplateEvaluator` has the attempt loop's evaluator interface (`evaluate(analysis,
proposal) -> Evaluation`), so `session.run_kernel` drives refactorings as it drives
every pass: the answer arrives as a proposal whose payload is the template; a rule's
refusal, a failed verification or a sanitizer finding is the engine's `Rejection`
(stage `validate`, `verify`, `memcheck`/`racecheck`), with the stable key first in its
reason, and goes back to the model. A verified template is tuned by kxform's tuner
(`kxform.search.tune`) over its space, starting at the configuration that reproduces
the original when there is one; a configuration outside the verified sample is verified
before its time counts. Times come from `timing` (a GPU measurement, or a recorded
times file replayed); without any, the reproducing (else the first sampled)
configuration is kept unranked. The file is rewritten
(`rewrite`) by replacing the kernel's definition and, through the launch-site
primitive, each launch's grid and block.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kxform.engine.edits import Edit, apply_edits
from kxform.engine.launch_site import replace_config
from kxform.engine.pass_api import CheckRecord, KernelAnalysis, Proposal, Rejection
from kxform.engine.params import ParamValue
from kxform.engine.policy import OutputCompare
from kxform.frontend.model import SourceModel
from kxform.harness.model import KernelSpec
from kxform.propose.evaluate import Evaluation
from kxform.propose.template import Refusal, Template, config_label
from kxform.propose.template_rules import Original, validate
from kxform.propose.template_verify import (
    comparison,
    covering_sample,
    ragged_problem,
    sanitize_template,
    verify_template,
)
from kxform.runtime.base import Runtime
from kxform.search.objective import Evaluation as TuneEvaluation
from kxform.search.objective import Failure, Objective, Prepared

Timing = Callable[[Template, Mapping[str, ParamValue]], float | None]
"""Milliseconds of one configuration (None: not timed)."""
Profiler = Callable[[Template, Mapping[str, ParamValue]], str]
"""A profiler's summary of one configuration (kxform.propose.template_timing on a GPU)."""


@dataclass
class TemplateEvaluator:
    model: SourceModel
    kernel: str
    spec: KernelSpec | None
    runtime: Runtime
    hw: object
    timing: Timing | None = None
    compare: OutputCompare | None = None
    """How a template's outputs compare with the original's (None: from the original's
    sums, kxform.propose.template_verify.comparison)."""
    budget: int = 24
    """Tuning evaluations at most (each outside the verified sample is verified first)."""
    kept: dict[str, tuple[Template, dict[str, ParamValue]]] = field(default_factory=dict)
    """Proposal label -> the template and its tuned configuration (for the rewrite)."""
    profiler: Profiler | None = None
    """Profiles the kept configuration (its summary goes back to the model as a check)."""

    def evaluate(self, analysis: KernelAnalysis, proposal: Proposal) -> Evaluation:
        label = proposal.label()
        template = Template.from_payload(proposal.payload or "")
        original = Original.of(self.model, self.kernel, self.hw)
        refusal = validate(template, original)
        if refusal is not None:
            return Evaluation(_rejection(label, "validate", refusal))
        if self.spec is None:
            return Evaluation(
                Rejection(label, "verify", "could-not-tell: no harness spec: a template is kept only when verified")
            )
        refusal = ragged_problem(self.spec, template)
        if refusal is not None:
            return Evaluation(_rejection(label, "verify", refusal))
        space = template.space()
        start = dict(template.original) if template.original is not None else None
        sample = covering_sample(space, self.hw, start)
        compare = self.compare if self.compare is not None else comparison(self.model, original.kernel, self.hw)
        done = verify_template(self.model.source, original.kernel, template, self.spec, self.runtime, compare, sample)
        if isinstance(done, Refusal):
            return Evaluation(_rejection(label, "verify", done))
        checks = [
            CheckRecord(
                "verify",
                True,
                f"{len(sample)} configurations at sizes {', '.join(done.sizes)}; outputs {compare.describe()}",
            )
        ]
        if self.runtime.name == "gpu":
            found = sanitize_template(self.model.source, original.kernel, template, self.spec, sample)
            if found is not None:
                return Evaluation(_rejection(label, found.key, found))
            checks.append(CheckRecord("sanitize", True, "memcheck and racecheck clean on the sample"))
        best, time_ms, baseline = self._tune(template, sample, start)
        self.kept[label] = (template, best)
        checks.append(
            CheckRecord(
                "tune",
                True,
                f"kept {config_label(best)}" + (f": {time_ms:.4f} ms" if time_ms is not None else " (not timed)"),
            )
        )
        if self.profiler is not None:
            checks.append(
                CheckRecord("nsight", True, f"Nsight Compute of {config_label(best)}: {self.profiler(template, best)}")
            )
        return Evaluation(None, tuple(checks), time_ms, baseline)

    def _tune(
        self, template: Template, sample: list[dict[str, ParamValue]], start: dict[str, ParamValue] | None
    ) -> tuple[dict[str, ParamValue], float | None, float | None]:
        """kxform's tuner over the template's space, from the reproducing configuration:
        a configuration outside the verified sample is verified before its time counts."""
        from kxform.search.space import SearchSpace
        from kxform.search.tuner import TuneOptions, tune

        first = start if start in sample else sample[0]
        if self.timing is None:
            return first, None, None
        objective = _TemplateObjective(self, template, sample)
        result = tune(
            SearchSpace.build(template.space(), self.hw),
            objective,
            TuneOptions(budget=self.budget, start_at_defaults=start is not None),
        )
        if result.best is None or result.best.evaluation.time_ms is None:
            return first, None, None
        baseline = next((s.evaluation.time_ms for s in result.steps if start is not None and s.config == start), None)
        return dict(result.best.config), result.best.evaluation.time_ms, baseline


class _TemplateObjective(Objective):
    """Times of a template's configurations; each verified first (the sample already is)."""

    name = "refactor-template"

    def __init__(self, owner: TemplateEvaluator, template: Template, verified: list[dict[str, ParamValue]]) -> None:
        self.owner = owner
        self.template = template
        self.verified = list(verified)
        self.hardware = getattr(owner.hw, "name", "")

    def evaluate(self, prepared: Prepared) -> TuneEvaluation:
        config = prepared.as_dict()
        owner = self.owner
        if config not in self.verified:
            assert owner.spec is not None
            original = Original.of(owner.model, owner.kernel, owner.hw)
            compare = owner.compare if owner.compare is not None else comparison(owner.model, original.kernel, owner.hw)
            done = verify_template(
                owner.model.source,
                original.kernel,
                self.template,
                owner.spec,
                owner.runtime,
                compare,
                [config],
            )
            if isinstance(done, Refusal):
                return TuneEvaluation.failed(Failure.VERIFY, detail=f"{done.key}: {done.message}")
            self.verified.append(config)
        assert owner.timing is not None
        time_ms = owner.timing(self.template, config)
        return (
            TuneEvaluation(time_ms)
            if time_ms is not None
            else TuneEvaluation.failed(Failure.RUNTIME, detail="no time for this configuration")
        )


def _rejection(label: str, stage: str, refusal: Refusal) -> Rejection:
    return Rejection(label, stage, f"{refusal.key}: {refusal.message}")


def c_expression(text: str, names: Mapping[str, str]) -> str:
    """A launch expression in C, each name replaced by `names` (values or argument text)."""

    def emit(node: ast.AST) -> str:
        if isinstance(node, ast.Expression):
            return emit(node.body)
        if isinstance(node, ast.Constant):
            return str(int(node.value))
        if isinstance(node, ast.Name):
            return f"({names[node.id]})"
        if isinstance(node, ast.BinOp):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "/", ast.Mod: "%"}[
                type(node.op)
            ]
            return f"({emit(node.left)} {op} {emit(node.right)})"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            a, b = (emit(arg) for arg in node.args)
            if node.func.id == "ceil_div":
                return f"(({a} + {b} - 1) / {b})"
            if node.func.id in ("min", "max"):
                return f"({a} {'<' if node.func.id == 'min' else '>'} {b} ? {a} : {b})"
        raise ValueError(f"cannot write `{text}` in C")

    return emit(ast.parse(text, mode="eval"))


def rewrite(model: SourceModel, template: Template, config: Mapping[str, ParamValue]) -> bytes:
    """The file with the kernel at `config` and every launch of it given the template's
    grid and block (as `dim3(...)` over the launch's own arguments)."""
    return apply_edits(model.source, rewrite_edits(model, template, config)).data


def rewrite_edits(model: SourceModel, template: Template, config: Mapping[str, ParamValue]) -> list[Edit]:
    """The edits of `rewrite`: the kernel's definition, and each launch's grid and block."""
    original = Original.of(model, template.kernel, None)
    defines = "".join(f"#define {k} {v}\n" for k, v in config.items())
    undefs = "".join(f"\n#undef {k}" for k in config)
    span = original.kernel.span
    edits = [Edit(span.start, span.end, defines + template.code.strip() + undefs, "refactor")]
    for site in model.launches:
        if site.kernel != template.kernel:
            continue
        names = {k: str(v) for k, v in config.items()}
        names.update({p.name: a for p, a in zip(original.kernel.params, site.args)})
        for index, dims in ((0, template.grid), (1, template.block)):
            text = ", ".join(c_expression(d, names) for d in dims)
            edits.append(replace_config(site, index, f"dim3({text})", "refactor"))
    return edits
