"""`swizzle`: remap the block index so blocks that run together share data in L2.

For each kernel the logical block index is computed once at entry by a small
`__device__ __forceinline__` helper, and every read of blockIdx.x/.y in the kernel, in
the device functions it reaches (which get the index as a new first parameter) and in
the macros it expands is rewritten to use it. blockIdx.z and gridDim are left alone.

Default choice (no --pattern), unmeasured and reported as such:
  chiplet GPU (hw profile xcds > 1): 2-D grid -> xcd-grouped(xcds=X, group=8), 1-D -> xcd(xcds=X)
  monolithic L2:                     2-D grid -> grouped(group=8, along=y), 1-D -> nothing
(group 8 is the Triton matmul tutorial's GROUP_M; on a monolithic L2 a 1-D raster is
already the order that streams best, so no 1-D pattern is proposed there.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kxform.passes.swizzle.bijection import check_helper
from kxform.passes.swizzle.confirm import confirm_coverage, foreign_through_local
from kxform.passes.swizzle.opaque import structural_blockers
from kxform.passes.swizzle.order_safety import order_blockers
from kxform.engine.edits import Edit
from kxform.errors import CheckFailed, UsageError
from kxform.frontend.model import Function, IndexRead, SourceModel, Span
from kxform.passes.swizzle.index_usage import IndexUsage, index_usage
from kxform.engine.pass_api import Blocker, CheckRecord, KernelAnalysis, Pass, PassContext, Proposal
from kxform.passes.swizzle.patterns import PATTERNS, RemapConfig, get_pattern

BLOCK_VAR = "kxform_block"
"""The logical block index: a local in kernels, the first parameter of device functions."""
GROUP_DEFAULT = 8
PROLOGUE_MARK = f"{BLOCK_VAR} = kxform_swizzle_".encode()
"""How a rewritten kernel's prologue starts: marks it as done (idempotence) and bounds it (coverage)."""


@dataclass(frozen=True)
class Swizzle(Pass):
    name = "swizzle"
    description = "remap blockIdx.x/.y through a checked bijection (grouped, Hilbert, XCD-aware, ...)"

    pattern: str | None = None
    group: str | None = None
    along: str | None = None
    xcds: str | None = None

    def config(self, pattern: str, defaults: Mapping[str, int | str]) -> RemapConfig:
        """The remap for `pattern`: the rule's defaults that the pattern takes, overridden by
        this pass's options (an option the pattern does not take is a user error)."""
        takes = {p.name for p in get_pattern(pattern).params}
        raw: dict[str, str | int] = {k: v for k, v in defaults.items() if k in takes}
        raw.update({k: getattr(self, k) for k in ("group", "along", "xcds") if getattr(self, k) is not None})
        return get_pattern(pattern).resolve(raw)

    # -- analyse ----------------------------------------------------------------------

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        model = ctx.model
        results: dict[str, KernelAnalysis] = {}
        usages = {k.name: index_usage(model, k) for k in model.kernels}
        for kernel in model.kernels:
            usage = usages[kernel.name]
            blockers = list(usage.blockers) + order_blockers(model, usage.functions)
            blockers += structural_blockers(model, usage) + _semantic_blockers(ctx, usage)
            if not usage.remapped_reads:
                blockers.append(Blocker("NoBlockIndexRead", "the kernel does not read blockIdx.x or blockIdx.y",
                                        kernel.span.start))
            blockers += _name_collisions(ctx, usage)
            results[kernel.name] = KernelAnalysis(kernel, tuple(blockers), {"usage": usage},
                                                  already_applied=_already_swizzled(ctx, kernel))
        _refuse_shared(ctx, results)
        return results

    # -- propose ----------------------------------------------------------------------

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        usage: IndexUsage = analysis.facts["usage"]
        out = []
        for pattern in PATTERNS.values():
            if pattern.name == "row" or min(usage.dims, 2) not in pattern.dims:
                continue  # row is the identity; z is never remapped, so 3-D grids take 2-D patterns
            config = pattern.resolve({"xcds": ctx.hw.xcds} if "xcds" in {p.name for p in pattern.params} else {})
            out.append(_proposal(analysis.kernel, config, "candidate", measured=False))
        return out

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        usage: IndexUsage = analysis.facts["usage"]
        two_d = usage.dims >= 2
        if self.pattern is not None:
            config = self.config(self.pattern, {"xcds": ctx.hw.xcds})
            if not two_d and 1 not in config.pattern.dims:
                return None
            return _proposal(analysis.kernel, config, f"pattern {config.label()} requested by the user")
        defaults: dict[str, int | str]
        if ctx.hw.xcds > 1:
            name, defaults = ("xcd-grouped", {"xcds": ctx.hw.xcds, "group": GROUP_DEFAULT}) if two_d else \
                ("xcd", {"xcds": ctx.hw.xcds})
            why = f"{ctx.hw.name} dispatches blocks round-robin over {ctx.hw.xcds} XCDs with separate L2s"
        elif two_d:
            name, defaults = "grouped", {"group": GROUP_DEFAULT, "along": "y"}
            why = f"grouping {GROUP_DEFAULT} tile rows lets blocks that run together share L2 lines on {ctx.hw.name}"
        else:
            return None
        config = self.config(name, defaults)
        return _proposal(analysis.kernel, config, f"default rule (unmeasured): {why}")

    def missed_reason(self, analysis: KernelAnalysis) -> tuple[str, str]:
        usage: IndexUsage = analysis.facts["usage"]
        if self.pattern is not None and usage.dims < 2:
            return ("PatternNeeds2DGrid", f"pattern {self.pattern} needs a 2-D grid; the kernel reads only "
                    "blockIdx.x (1-D patterns: row, xcd)")
        return ("NoProfitablePattern", "1-D grid on a monolithic L2: the hardware raster order is already the "
                "best known; no pattern proposed (use --pattern xcd to force one)")

    # -- check ------------------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        try:
            config = config_of(proposal)
        except UsageError as exc:
            raise CheckFailed("proposal", exc.cause) from None
        report = check_helper(config.helper_source(), config.helper_name())
        return [CheckRecord("bijection", True, f"emitted helper is a bijection on {report.detail}"
                            + (" (cached)" if report.cached else ""))]

    def check_result(self, new_model: SourceModel, proposals: Sequence[Proposal]) -> list[CheckRecord]:
        """Check (b): no blockIdx.x/.y read is left unmapped in a rewritten kernel's closure,
        by the source analysis and, where nvcc exists, confirmed on the compiled PTX."""
        for proposal in proposals:
            reads = unmapped_reads(new_model, proposal.kernel)
            if reads:
                where = new_model.source.location(reads[0].span.start)
                raise CheckFailed("coverage", f"'{proposal.kernel}' still reads {reads[0].spelling} at {where} "
                                  "after the rewrite")
        return [confirm_coverage(new_model, [p.kernel for p in proposals], PROLOGUE_MARK)]

    # -- edit -------------------------------------------------------------------------

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        model = ctx.model
        source = model.source
        newline = source.newline
        edits: list[Edit] = []
        helper_first_use: dict[str, tuple[int, RemapConfig]] = {}
        for proposal in proposals:
            kernel = next(k for k in model.kernels if k.name == proposal.kernel)
            usage = index_usage(model, kernel)
            config = config_of(proposal)
            origin = f"swizzle: {kernel.name}"
            first = min(f.span.start for f in usage.functions)
            known = helper_first_use.get(config.helper_name())
            if known is None or first < known[0]:
                helper_first_use[config.helper_name()] = (first, config)
            edits.append(_prologue(ctx, kernel, usage, config, origin))
            for read in usage.remapped_reads:
                edits.append(Edit(read.span.start, read.span.end, f"{BLOCK_VAR}.{read.axis}",
                                  f"{origin}: {read.spelling} at {source.location(read.span.start)}"))
            edits.extend(_pass_down(ctx, usage, origin))
        for name, (offset, config) in helper_first_use.items():
            if f" {name}(".encode() in source.data:
                continue  # helper already present from an earlier run
            at = source.line_start(offset)
            edits.append(Edit(at, at, config.helper_source(newline) + newline, f"swizzle: helper {name}"))
        return _dedupe(edits)


def _proposal(kernel: Function, config: RemapConfig, why: str, measured: bool = False) -> Proposal:
    params = (("pattern", config.pattern.name),) + tuple((k, str(v)) for k, v in config.values)
    return Proposal("swizzle", kernel.name, params, why, measured=measured)


def unmapped_reads(model: SourceModel, kernel_name: str) -> list[IndexRead]:
    """blockIdx.x/.y reads left in the kernel's closure outside its prologue."""
    kernel = next(k for k in model.kernels if k.name == kernel_name)
    body = model.source.data[kernel.body.start:kernel.body.end]
    start = body.find(PROLOGUE_MARK)
    end = body.find(b";", start) if start >= 0 else -1
    prologue = Span(kernel.body.start + start, kernel.body.start + end) if start >= 0 else None
    return [r for r in index_usage(model, kernel).remapped_reads if prologue is None or not prologue.contains(r.span)]


def _already_swizzled(ctx: PassContext, kernel: Function) -> bool:
    body = ctx.model.source.data[kernel.body.start:kernel.body.end]
    return PROLOGUE_MARK in body


def _name_collisions(ctx: PassContext, usage: IndexUsage) -> list[Blocker]:
    if _already_swizzled(ctx, usage.kernel):
        return []
    for function in usage.functions:
        text = ctx.model.source.data[function.span.start:function.span.end]
        if BLOCK_VAR.encode() in text:
            return [Blocker("NameCollision", f"'{function.name}' already uses the name {BLOCK_VAR}",
                            function.span.start)]
    return []


def config_of(proposal: Proposal) -> RemapConfig:
    """The remap a proposal asks for; its parameters are validated like user input."""
    options = proposal.options
    if "pattern" not in options:
        raise UsageError("swizzle proposal names no pattern")
    return get_pattern(options["pattern"]).resolve({k: v for k, v in options.items() if k != "pattern"})


def _semantic_blockers(ctx: PassContext, usage: IndexUsage) -> list[Blocker]:
    """Index reads libclang found that the syntax cannot see (foreign macros, other files),
    including a foreign macro reached through a macro of this file."""
    if ctx.semantic is None:
        return []
    return ctx.semantic.blockers_for(usage) + foreign_through_local(ctx.model, usage, ctx.semantic)


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
            target_scope |= {f.name for f in results[name].facts["usage"].functions}
        for name in targets:
            usage: IndexUsage = results[name].facts["usage"]
            problem = None
            for carrier in usage.carriers:
                callers = {c.caller for c in model.calls if c.callee == carrier.name}
                outside = sorted(callers - target_scope)
                if outside:
                    problem = Blocker("SharedDeviceFunction", f"device function '{carrier.name}' reads the block "
                                      f"index and is also called from '{outside[0]}', which is not rewritten",
                                      carrier.span.start)
                    break
                if carrier.host_too:
                    problem = Blocker("HostDeviceCarrier", f"'{carrier.name}' is __host__ __device__ and reads the "
                                      "block index; its host callers cannot pass one", carrier.span.start)
                    break
            for macro in usage.macros:
                users = {u.function for u in model.macro_uses if u.name == macro}
                outside = sorted(users - target_scope)
                if problem is None and outside:
                    definition = model.macro(macro)
                    problem = Blocker("SharedMacro", f"macro '{macro}' reads the block index and is also used in "
                                      f"'{outside[0]}', which is not rewritten",
                                      definition.span.start if definition else 0)
            if problem is not None:
                old = results[name]
                results[name] = KernelAnalysis(old.kernel, old.blockers + (problem,), old.facts, old.already_applied)
                changed = True


def _prologue(ctx: PassContext, kernel: Function, usage: IndexUsage, config: RemapConfig, origin: str) -> Edit:
    source = ctx.model.source
    body = source.data[kernel.body.start:kernel.body.end]
    rest = body[1:]
    stripped = rest.lstrip(b" \t\r\n")
    first_stmt = kernel.body.start + 1 + (len(rest) - len(stripped))
    indent = source.indent_at(first_stmt) if stripped and not stripped.startswith(b"}") else \
        source.indent_at(kernel.body.start) + "    "
    if not indent:
        indent = "    "
    names = ("hipBlockIdx_x", "hipBlockIdx_y", "hipGridDim_x", "hipGridDim_y") if usage.uses_hip_spelling else \
        ("blockIdx.x", "blockIdx.y", "gridDim.x", "gridDim.y")
    statement = f"const uint2 {BLOCK_VAR} = {config.helper_name()}({', '.join(names)});"
    return Edit(kernel.body.start + 1, kernel.body.start + 1, f"{source.newline}{indent}{statement}",
                f"{origin}: prologue")


def _pass_down(ctx: PassContext, usage: IndexUsage, origin: str) -> list[Edit]:
    """Give each carrier device function the logical index as its first parameter, and
    pass it at every call site inside the kernel's closure."""
    model = ctx.model
    edits = []
    carriers = {c.name for c in usage.carriers}
    scope = {f.name for f in usage.functions}
    for carrier in usage.carriers:
        span = carrier.params_span
        inner = model.source.data[span.start + 1:span.end - 1].decode("utf-8")
        if inner.strip() in ("", "void"):
            edits.append(Edit(span.start + 1, span.end - 1, f"const uint2 {BLOCK_VAR}", f"{origin}: {carrier.name}"))
        else:
            edits.append(Edit(span.start + 1, span.start + 1, f"const uint2 {BLOCK_VAR}, ",
                              f"{origin}: {carrier.name}"))
    for call in model.calls:
        if call.callee in carriers and call.caller in scope:
            text = f"{BLOCK_VAR}, " if call.arg_count else BLOCK_VAR
            edits.append(Edit(call.args_span.start + 1, call.args_span.start + 1, text,
                              f"{origin}: call of {call.callee}"))
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
