"""`swizzle`: remap the block index so blocks that run together share data in L2.

For each kernel the logical block index is computed once at entry by a small
`__device__ __forceinline__` helper, and every read of blockIdx.x/.y in the kernel, in
the device functions it reaches (which get the index as a new first parameter) and in
the macros it expands is rewritten to use it. blockIdx.z and gridDim are left alone.

Default choice (no --pattern, lock or model decision): the locality model
(kxform.locality, docs/locality-model.md) ranks every pattern at a timing size of its own,
on the kernel's harness spec or, without one, on a spec it drafts, and a remap is
proposed only when it beats row-major by the model's margins. Where the model cannot
judge the kernel, nothing is proposed and the Missed remark (`NotModelled`) says why:
a remap nobody measured or predicted can make a kernel slower (a 9-point stencil and a
batched transpose lost 15% and 36% on an H200 to a grouped order written by rule).

A proposer may also propose `pattern=custom` with a remap written in kxform's formula
language as the proposal's payload (formula.py): it is parsed, checked for wrap-around
and division by zero on sampled grids, emitted as the helper, enumerated like the library
patterns, proven by the solver (proof.py) a bijection on every grid the GPU allows, and
verified bit-exact like them. A library pattern is proven through its formula twin, to
which the enumeration holds its emitted helper block for block.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kxform.passes.swizzle.bijection import check_helper
from kxform.passes.swizzle.confirm import confirm_coverage
from kxform.passes.swizzle.opaque import file_facts, structural_blockers
from kxform.passes.swizzle.order_safety import order_blockers
from kxform.engine.edits import Edit
from kxform.errors import CheckFailed, KxformError, UsageError
from kxform.log.remarks import RemarkKind
from kxform.frontend.model import Function, IndexRead, SourceModel, Span
from kxform.passes.swizzle.index_usage import IndexUsage, index_usage
from kxform.passes.swizzle.judgement import LocalityJudgement, prediction_remark
from kxform.engine.params import Config, Param, ParamSpace, ParamValue
from kxform.engine.pass_api import (
    BlockOrder,
    Blocker,
    CheckRecord,
    KernelAnalysis,
    Pass,
    PassContext,
    Proposal,
    Provenance,
)
from kxform.engine.policy import EXACT, OutputCompare, VerifyPolicy
from kxform.engine.rewrite import Helper, insert_at_entry, place_helpers
from kxform.passes.swizzle.patterns import PATTERNS, RemapConfig, get_pattern
from kxform.passes.swizzle.formula import FormulaError, FormulaRemap, formula_remap
from kxform.engine.tool_shape import ToolShape
from kxform.passes.swizzle import tool, tuning
from kxform.passes.swizzle.semantic_checks import foreign_through_local, semantic_blockers

BLOCK_VAR = "kxform_block"
"""The logical block index: a local in kernels, the first parameter of device functions."""
GROUP_DEFAULT = 8
"""The Triton matmul tutorial's GROUP_M: `group`'s default when a pattern is forced."""
OPTIONS = ParamSpace(
    (
        Param.enum("pattern", tuple(PATTERNS), "grouped", doc="default: the locality model's choice, else none"),
        Param.int_range("group", 1, 64, GROUP_DEFAULT, doc="rows (or columns) per group"),
        Param.enum("along", ("y", "x"), "y", doc="group rows (y) or columns (x)"),
        Param.int_range("xcds", 1, 64, 8, doc="chiplets blocks are dispatched over (default: the hardware profile's)"),
    )
)
CUSTOM = "custom"
"""The pattern of a remap written in kxform's formula language (the proposal's payload is its text)."""
PROLOGUE_MARK = f"{BLOCK_VAR} = kxform_swizzle_".encode()
"""How a rewritten kernel's prologue starts: marks it as done (idempotence) and bounds it (coverage)."""


@dataclass(frozen=True)
class Swizzle(Pass):
    name = "swizzle"
    description = "remap blockIdx.x/.y through a checked bijection (grouped, Hilbert, XCD-aware, ...)"
    requires = ("tile", "smem-tile", "launch", "coarsen")
    """The remap is laid over the final grid: after every pass of a pipeline that changes the
    tiling, the block or the blocks' work (a tiled kernel's block order matters only once it is tiled)."""

    pattern: str | None = None
    group: int | None = None
    along: str | None = None
    xcds: int | None = None

    @classmethod
    def option_space(cls) -> ParamSpace:
        return OPTIONS

    @classmethod
    def from_options(cls, options: Mapping[str, str | ParamValue]) -> Pass:
        if "pattern" in options:
            get_pattern(str(options["pattern"]))  # names the known patterns when it is not one
        return super().from_options(options)

    def config(self, pattern: str, defaults: Mapping[str, int | str]) -> RemapConfig:
        """The remap for `pattern`: the rule's defaults that the pattern takes, overridden by
        this pass's options (an option the pattern does not take is a user error)."""
        takes = {p.name for p in get_pattern(pattern).params}
        raw: dict[str, str | int] = {k: v for k, v in defaults.items() if k in takes}
        raw.update({k: getattr(self, k) for k in ("group", "along", "xcds") if getattr(self, k) is not None})
        return get_pattern(pattern).resolve(raw)

    @classmethod
    def describe_options(cls) -> list[str]:
        """The options, then every pattern with the grids it applies to and its parameters."""
        lines = super().describe_options()
        for pattern in PATTERNS.values():
            params = ", ".join(f"{p.name}={p.default}" for p in pattern.params)
            dims = "1-D/2-D" if 1 in pattern.dims else "2-D"
            lines.append(f"  {pattern.name:<12} {dims:<8} {pattern.summary}" + (f" [{params}]" if params else ""))
        return lines

    # -- analyse ----------------------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        model = ctx.model
        results: dict[str, KernelAnalysis] = {}
        usages = {k.name: ctx.analysis(IndexUsage, k) for k in model.kernels}
        facts = file_facts(model)  # once per file: per kernel, the pass was quadratic in kernels
        for kernel in model.kernels:
            usage = usages[kernel.name]
            blockers = list(usage.blockers) + order_blockers(model, usage.functions)
            blockers += structural_blockers(model, usage, facts) + _semantic_blockers(ctx, usage)
            if not usage.remapped_reads:
                blockers.append(
                    Blocker("NoBlockIndexRead", "the kernel does not read blockIdx.x or blockIdx.y", kernel.span.start)
                )
            blockers += _name_collisions(ctx, usage)
            results[kernel.name] = KernelAnalysis(
                kernel, tuple(blockers), already_applied=_already_swizzled(ctx, kernel)
            )
        _refuse_shared(ctx, results)
        return results

    # -- propose ----------------------------------------------------------------------

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        usage = ctx.analysis(IndexUsage, analysis.kernel)
        out = []
        for pattern in PATTERNS.values():
            if pattern.name == "row" or min(usage.dims, 2) not in pattern.dims or pattern.formula is None:
                continue  # row is the identity; z is never remapped, so 3-D grids take 2-D patterns;
                # a pattern without a formula cannot be proven
            config = pattern.resolve({"xcds": ctx.hw.xcds} if "xcds" in {p.name for p in pattern.params} else {})
            out.append(_proposal(analysis.kernel, config, "candidate"))
        judged = ctx.analyses.cached(LocalityJudgement, ctx.model, analysis.kernel)
        if judged is not None and judged.verdict is not None:  # the model judged it: its ranking orders the fallbacks
            return judged.verdict.rank_candidates(out)
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        usage = ctx.analysis(IndexUsage, analysis.kernel)
        two_d = usage.dims >= 2
        if self.pattern is not None:
            config = self.config(self.pattern, {"xcds": ctx.hw.xcds})
            if not two_d and 1 not in config.pattern.dims:
                return None
            return _proposal(analysis.kernel, config, f"pattern {config.label()} requested by the user")
        if not two_d and ctx.hw.xcds <= 1:
            return None  # a 1-D raster on one L2 is already the order that streams best
        verdict = ctx.analysis(LocalityJudgement, analysis.kernel).verdict  # the locality model
        if verdict is None:  # not modelled: no evidence, no rewrite (missed_reason says why)
            return None
        prediction_remark(ctx, analysis.kernel, verdict)  # the figures, for the log and the report
        if verdict.config is None:
            return None
        return _proposal(analysis.kernel, verdict.config, verdict.rationale, verdict.provenance)

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        judged = ctx.analyses.cached(LocalityJudgement, ctx.model, analysis.kernel) if ctx is not None else None
        if judged is not None and judged.verdict is not None:
            return ("NoPredictedGain", judged.verdict.rationale)
        usage = ctx.analysis(IndexUsage, analysis.kernel) if ctx is not None else None
        if self.pattern is not None and usage is not None and usage.dims < 2:
            return (
                "PatternNeeds2DGrid",
                f"pattern {self.pattern} needs a 2-D grid; the kernel reads only blockIdx.x (1-D patterns: row, xcd)",
            )
        if judged is not None and judged.not_modelled:
            return (
                "NotModelled",
                f"left alone: no evidence that a remap helps ({judged.not_modelled}); --pattern NAME forces one",
            )
        return (
            "NoProfitablePattern",
            "1-D grid on a monolithic L2: the hardware raster order is already the "
            "best known; no pattern proposed (use --pattern xcd to force one)",
        )

    def space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """What a proposer may choose for this kernel: a pattern that changes a grid of its
        dimensionality, or `custom` (a remap in kxform's formula language, carried as the
        proposal's payload); `xcds` defaults to the hardware profile's."""
        usage = ctx.analysis(IndexUsage, analysis.kernel)
        dims = min(usage.dims, 2)
        names = [p.name for p in PATTERNS.values() if p.name != "row" and dims in p.dims] + [CUSTOM]
        default = "grouped" if "grouped" in names else names[0]
        return ParamSpace(
            (
                Param.enum(
                    "pattern", names, default, doc="a library pattern, or `custom` for a remap written as a formula"
                ),
                OPTIONS.param("group"),
                OPTIONS.param("along"),
                Param.int_range(
                    "xcds", 1, 64, max(1, min(ctx.hw.xcds, 64)), doc="chiplets blocks are dispatched round-robin to"
                ),
            )
        )

    def tool_shape(self, space: ParamSpace) -> ToolShape:
        """Patterns described, parameters a pattern does not take nullable, `formula` the payload."""
        return tool.tool_shape(space)

    def read_answer(
        self, data: Mapping[str, Any], space: ParamSpace, hw: object
    ) -> tuple[dict[str, ParamValue], str | None]:
        return tool.read_answer(data, space, hw)

    def answer_values(self, config: Mapping[str, ParamValue], payload: str | None) -> dict[str, ParamValue]:
        """A custom remap is proposed as its pattern and the formula's digest (the text rides as payload)."""
        return custom_values(payload) if payload is not None else dict(config)

    def tuning_space(self, ctx: PassContext, analysis: KernelAnalysis) -> ParamSpace:
        """Every library remap of the kernel's grid with its parameters bound (tuning.py)."""
        return tuning.tuning_space(self.space(ctx, analysis).param("pattern").values, ctx.hw.xcds)

    def configured(self, config: Config) -> Pass:
        """A tuned `pattern` label (`grouped(along=y,group=4)`) as the pass's options."""
        options: dict[str, str | ParamValue] = dict(config)
        if isinstance(options.get("pattern"), str):
            options.update(tuning.label_options(str(options["pattern"])))
        return type(self).from_options(options)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        """For `kxform inspect`: the grid dimensionality, the index reads and the verdict."""
        usage = ctx.analysis(IndexUsage, analysis.kernel)
        source = ctx.model.source
        return {
            **super().describe(ctx, analysis),
            "status": "already applied" if analysis.already_applied else "safe" if analysis.applicable else "refused",
            "grid_dims": usage.dims,
            "device_functions": [f.name for f in usage.functions[1:]],
            "index_reads": [
                {"read": r.spelling, "line": source.line_col(r.span.start)[0], "function": r.function, "macro": r.macro}
                for r in usage.reads
            ],
        }

    # -- check ------------------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        try:
            config = config_of(proposal)
        except UsageError as exc:
            raise CheckFailed("proposal", exc.cause) from None
        records = [_formula_record(config)] if isinstance(config, FormulaRemap) else []
        stages = _proof_stages(config)
        reference = (
            () if isinstance(config, FormulaRemap) else tuple((s.helper_source(), s.helper_name()) for s in stages)
        )
        report = check_helper(config.helper_source(), config.helper_name(), reference)
        records.append(
            CheckRecord(
                "bijection",
                True,
                f"emitted helper is a bijection on {report.detail}" + (" (cached)" if report.cached else ""),
            )
        )
        return records + [_proof_record(stages)] + _moves_record(ctx, proposal, config)

    def check_result(
        self, new_model: SourceModel, proposals: Sequence[Proposal], ctx: PassContext | None = None
    ) -> list[CheckRecord]:
        """Check (b): no blockIdx.x/.y read is left unmapped in a rewritten kernel's closure,
        by the source analysis and, where nvcc exists, confirmed on the compiled PTX."""
        usages = {}
        for proposal in proposals:
            kernel = next(k for k in new_model.kernels if k.name == proposal.kernel)
            # the rewritten file's usage, through the run's manager: the idempotence run reuses it
            usage = (
                ctx.analyses.get(IndexUsage, replace(ctx, model=new_model), kernel)
                if ctx is not None
                else index_usage(new_model, kernel)
            )
            usages[proposal.kernel] = usage
            reads = unmapped_reads(new_model, proposal.kernel, usage)
            if reads:
                where = new_model.source.location(reads[0].span.start)
                raise CheckFailed(
                    "coverage", f"'{proposal.kernel}' still reads {reads[0].spelling} at {where} after the rewrite"
                )
        return [
            confirm_coverage(
                new_model,
                [p.kernel for p in proposals],
                PROLOGUE_MARK,
                ctx.toolchain if ctx is not None else None,
                usages,
            )
        ]

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """A remap changes which block computes which tile, never the arithmetic: bit-exact,
        unless the kernel accumulates floats with atomics (then block order changes rounding)."""
        if uses_float_atomics(ctx.model.source.text):
            return VerifyPolicy(compare=OutputCompare("spec", reason="float atomics: block order changes rounding"))
        return VerifyPolicy(compare=EXACT)

    # -- edit -------------------------------------------------------------------------

    def verify_warnings(self, rewritten: SourceModel, kernel: str, spec: Any) -> list[str]:
        """The remaps `kernel` calls that move no block at any check size of `spec`."""
        from kxform.passes.swizzle.vacuity import vacuous_remaps

        function = next((k for k in rewritten.kernels if k.name == kernel.split("<")[0].strip()), None)
        if function is None:
            return []
        data = rewritten.source.data
        return vacuous_remaps(
            data.decode("utf-8", "replace"),
            data[function.span.start : function.span.end].decode("utf-8", "replace"),
            spec,
        )

    def block_order(self, proposal: Proposal) -> BlockOrder:
        """The remap the proposal asks for, vectorised (what the predictions rank by)."""
        from kxform.passes.swizzle.block_order import vectorised

        return vectorised(config_of(proposal))

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        model = ctx.model
        source = model.source
        newline = source.newline
        edits: list[Edit] = []
        helpers: list[tuple[Helper, int]] = []
        for proposal in proposals:
            kernel = next(k for k in model.kernels if k.name == proposal.kernel)
            usage = ctx.analysis(IndexUsage, kernel)
            config = config_of(proposal)
            origin = f"swizzle: {kernel.name}"
            helpers.append(
                (
                    Helper(config.helper_name(), config.helper_source(newline)),
                    min(f.span.start for f in usage.functions),
                )
            )
            edits.append(_prologue(ctx, kernel, usage, config, origin))
            for read in usage.remapped_reads:
                edits.append(
                    Edit(
                        read.span.start,
                        read.span.end,
                        f"{BLOCK_VAR}.{read.axis}",
                        f"{origin}: {read.spelling} at {source.location(read.span.start)}",
                    )
                )
            edits.extend(_pass_down(ctx, usage, origin))
        edits += place_helpers(model, helpers, "swizzle")
        return _dedupe(edits)


def _proposal(kernel: Function, config: RemapConfig, why: str, provenance: Provenance | None = None) -> Proposal:
    values = (("pattern", config.pattern.name),) + config.values
    return Proposal("swizzle", kernel.name, values, why, provenance or Provenance())


FLOAT_ATOMIC_RE = re.compile(r"\batomic(Add|Sub)\s*\(\s*[^,]*,\s*[^)]*\)")


@functools.lru_cache(maxsize=8)
def uses_float_atomics(text: str) -> bool:
    """Whether the file accumulates with atomicAdd/atomicSub and mentions float (once per
    file text: asked per proposal, a scan each time made the pass quadratic in kernels)."""
    return bool(FLOAT_ATOMIC_RE.search(text)) and "float" in text


def unmapped_reads(model: SourceModel, kernel_name: str, usage: IndexUsage | None = None) -> list[IndexRead]:
    """blockIdx.x/.y reads left in the kernel's closure outside its prologue."""
    kernel = next(k for k in model.kernels if k.name == kernel_name)
    usage = usage or index_usage(model, kernel)
    body = model.source.data[kernel.body.start : kernel.body.end]
    start = body.find(PROLOGUE_MARK)
    end = body.find(b";", start) if start >= 0 else -1
    prologue = Span(kernel.body.start + start, kernel.body.start + end) if start >= 0 else None
    return [r for r in usage.remapped_reads if prologue is None or not prologue.contains(r.span)]


def _already_swizzled(ctx: PassContext, kernel: Function) -> bool:
    body = ctx.model.source.data[kernel.body.start : kernel.body.end]
    return PROLOGUE_MARK in body


def _name_collisions(ctx: PassContext, usage: IndexUsage) -> list[Blocker]:
    if _already_swizzled(ctx, usage.kernel):
        return []
    for function in usage.functions:
        text = ctx.model.source.data[function.span.start : function.span.end]
        if BLOCK_VAR.encode() in text:
            return [
                Blocker("NameCollision", f"'{function.name}' already uses the name {BLOCK_VAR}", function.span.start)
            ]
    return []


def config_of(proposal: Proposal) -> RemapConfig | FormulaRemap:
    """The remap a proposal asks for; its parameters are validated like user input.
    `pattern=custom` takes its remap from the proposal's payload (formula.py)."""
    options = proposal.options
    if "pattern" not in options:
        raise UsageError("swizzle proposal names no pattern")
    if options["pattern"] == CUSTOM:
        return _custom_remap(proposal)
    return get_pattern(options["pattern"]).resolve({k: v for k, v in options.items() if k != "pattern"})


def custom_values(formula: str) -> dict[str, ParamValue]:
    """The values of a proposal for the custom remap `formula` (which rides as its payload):
    the pattern and the formula's digest, so two formulas give two specs. FormulaError when
    the text does not parse."""
    from kxform.passes.swizzle.formula import parse_formula

    return {"pattern": CUSTOM, "formula": parse_formula(formula).digest}


def pattern_params(pattern: str) -> tuple[str, ...]:
    """The options a pattern takes (`custom` takes none: its remap is the payload)."""
    return () if pattern == CUSTOM else tuple(p.name for p in get_pattern(pattern).params)


def _custom_remap(proposal: Proposal) -> FormulaRemap:
    text = proposal.payload
    if not text:
        raise UsageError("swizzle pattern custom needs a formula (the proposal carries none)")
    try:
        remap = formula_remap(text)
    except FormulaError as exc:
        raise UsageError(f"custom formula rejected: {exc}") from None
    extra = sorted(set(proposal.options) - {"pattern", "formula"})
    if extra:
        raise UsageError(f"custom formula: unexpected parameter {extra[0]!r} (a custom remap takes only its formula)")
    named = proposal.options.get("formula", remap.formula.digest)
    if named != remap.formula.digest:
        raise UsageError(
            f"custom formula: the proposal names formula {named} but carries formula {remap.formula.digest}"
        )
    return remap


def _formula_record(remap: FormulaRemap) -> CheckRecord:
    """Arithmetic safety of a custom formula: no wrap-around or division by zero anywhere."""
    from kxform.passes.swizzle.formula_eval import check_arithmetic

    try:
        report = check_arithmetic(remap.formula)
    except FormulaError as exc:
        raise CheckFailed("formula", str(exc)) from None
    return CheckRecord("formula", True, report.detail)


def _moves_record(ctx: PassContext, proposal: Proposal, config: RemapConfig | FormulaRemap) -> list[CheckRecord]:
    """A warning (remark and record) when the remap moves no block at any check size of
    the kernel's spec: verification would compare the original with itself."""
    from kxform.passes.swizzle.vacuity import identity_everywhere
    from kxform.verify.stage import spec_for_file

    try:
        found = spec_for_file(ctx.model.source.path) if ctx.model.source.path else None
    except KxformError:
        return []  # the verify stage reports an unusable spec
    specs = found.instantiations(proposal.kernel) if found is not None else ()
    warnings = [w for spec in specs if (w := identity_everywhere(config.apply, spec)) is not None]
    if not specs or len(warnings) < len(specs):
        return []
    kernel = next(k for k in ctx.model.kernels if k.name == proposal.kernel)
    ctx.remark(
        RemarkKind.ANALYSIS,
        "swizzle",
        "VerifyVacuous",
        kernel.span.start,
        kernel.name,
        f"warning: '{kernel.name}': {warnings[0]}",
    )
    return [CheckRecord("moves", True, f"warning: {warnings[0]}")]


def _proof_stages(config: RemapConfig | FormulaRemap) -> tuple[FormulaRemap, ...]:
    """The remap as formulas the solver can prove (a custom remap is its own formula)."""
    if isinstance(config, FormulaRemap):
        return (config,)
    try:
        return tuple(formula_remap(text) for text in config.stages())
    except FormulaError as exc:  # a library formula outside the language is a defect of the library
        raise CheckFailed("proof", f"{config.label()}: its formula does not parse: {exc}") from None


def _proof_record(stages: tuple[FormulaRemap, ...]) -> CheckRecord:
    """The solver's proof that the remap is a bijection onto every grid the GPU allows;
    "not proven" (refuted, or undecided in the time limit) refuses the remap."""
    from kxform.passes.swizzle.proof import ProofFailed, prove_stages

    try:
        report = prove_stages(tuple(s.formula for s in stages))
    except ProofFailed as exc:
        raise CheckFailed("proof", str(exc)) from None
    return CheckRecord("proof", True, report.detail + (" (cached)" if report.cached else ""))


def _semantic_blockers(ctx: PassContext, usage: IndexUsage) -> list[Blocker]:
    """Index reads libclang found that the syntax cannot see (foreign macros, other files),
    including a foreign macro reached through a macro of this file."""
    if ctx.semantic is None:
        return []
    return semantic_blockers(ctx.semantic, usage) + foreign_through_local(ctx.model, usage, ctx.semantic)


def _refuse_shared(ctx: PassContext, results: dict[str, KernelAnalysis]) -> None:
    """A device function or macro that carries the index must only be reached from kernels
    that are rewritten together; otherwise refuse every kernel that reaches it."""
    model = ctx.model
    changed = True
    while changed:
        changed = False
        targets = {name for name, a in results.items() if a.applicable and ctx.options.selects(name)}
        target_scope = set()
        for name in targets:
            target_scope |= {f.name for f in ctx.analysis(IndexUsage, results[name].kernel).functions}
        for name in targets:
            usage = ctx.analysis(IndexUsage, results[name].kernel)
            problem = None
            for carrier in usage.carriers:
                callers = {c.caller for c in model.calls_to(carrier.name)}
                outside = sorted(callers - target_scope)
                if outside:
                    problem = Blocker(
                        "SharedDeviceFunction",
                        f"device function '{carrier.name}' reads the block "
                        f"index and is also called from '{outside[0]}', which is not rewritten",
                        carrier.span.start,
                    )
                    break
                if carrier.host_too:
                    problem = Blocker(
                        "HostDeviceCarrier",
                        f"'{carrier.name}' is __host__ __device__ and reads the "
                        "block index; its host callers cannot pass one",
                        carrier.span.start,
                    )
                    break
            for macro in usage.macros:
                users = {u.function for u in model.macro_uses if u.name == macro}
                outside = sorted(users - target_scope)
                if problem is None and outside:
                    definition = model.macro(macro)
                    problem = Blocker(
                        "SharedMacro",
                        f"macro '{macro}' reads the block index and is also used in "
                        f"'{outside[0]}', which is not rewritten",
                        definition.span.start if definition else 0,
                    )
            if problem is not None:
                old = results[name]
                results[name] = KernelAnalysis(old.kernel, old.blockers + (problem,), old.facts, old.already_applied)
                changed = True


def _prologue(
    ctx: PassContext, kernel: Function, usage: IndexUsage, config: RemapConfig | FormulaRemap, origin: str
) -> Edit:
    names = (
        ("hipBlockIdx_x", "hipBlockIdx_y", "hipGridDim_x", "hipGridDim_y")
        if usage.uses_hip_spelling
        else ("blockIdx.x", "blockIdx.y", "gridDim.x", "gridDim.y")
    )
    statement = f"const uint2 {BLOCK_VAR} = {config.helper_name()}({', '.join(names)});"
    return insert_at_entry(ctx.model, kernel, [statement], f"{origin}: prologue")


def _pass_down(ctx: PassContext, usage: IndexUsage, origin: str) -> list[Edit]:
    """Give each carrier device function the logical index as its first parameter, and
    pass it at every call site inside the kernel's closure."""
    model = ctx.model
    edits = []
    carriers = {c.name for c in usage.carriers}
    scope = {f.name for f in usage.functions}
    for carrier in usage.carriers:
        span = carrier.params_span
        inner = model.source.data[span.start + 1 : span.end - 1].decode("utf-8")
        if inner.strip() in ("", "void"):
            edits.append(Edit(span.start + 1, span.end - 1, f"const uint2 {BLOCK_VAR}", f"{origin}: {carrier.name}"))
        else:
            edits.append(
                Edit(span.start + 1, span.start + 1, f"const uint2 {BLOCK_VAR}, ", f"{origin}: {carrier.name}")
            )
    for call in model.calls:
        if call.callee in carriers and call.caller in scope:
            text = f"{BLOCK_VAR}, " if call.arg_count else BLOCK_VAR
            edits.append(
                Edit(call.args_span.start + 1, call.args_span.start + 1, text, f"{origin}: call of {call.callee}")
            )
    return edits


def _dedupe(edits: list[Edit]) -> list[Edit]:
    """Kernels that share a device function ask for the same edit; keep one of each."""
    seen: set[tuple[int, int, str]] = set()
    out = []
    for edit in edits:
        key = (edit.start, edit.end, edit.text)
        if key not in seen:
            seen.add(key)
            out.append(edit)
    return out


PASS = Swizzle
