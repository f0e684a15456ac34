"""The pure core: source text in, rewritten text plus per-kernel results and remarks out.

No files, no nvcc, no GPU: those are layers above (kxform.engine.runner). For each pass of the
pipeline: parse, analyse, propose, check, collect edits for all kernels, apply them in
one step, re-parse, and confirm that a second run proposes nothing. Stage errors are
typed exceptions turned into frozen `KernelResult`s here, in one place; this function
only raises for input errors that concern the whole file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from kxform.engine.edits import Edit, apply_edits, check_reparse, unified_diff
from kxform.errors import CheckFailed, EditConflict, InputError
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import Function, FunctionKind, SourceModel
from kxform.hw import HwProfile
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
from kxform.engine.proposer import DeterministicProposer, Proposer
from kxform.log.remarks import Remark, RemarkKind, RemarkSink
from kxform.frontend.source import SourceText, validate_bytes

SemanticProvider = Callable[[SourceModel], object]
"""Given a model, return a semantic-layer object (with `blockers_for`) or None."""


@dataclass(frozen=True)
class FileTransform:
    source: SourceText
    new_data: bytes
    results: tuple[KernelResult, ...]
    remarks: tuple[Remark, ...]
    line_map: tuple[int, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.new_data != self.source.data

    def diff(self) -> str:
        return unified_diff(self.source.path, self.source.data, self.new_data)


def _syntax_gate(model: SourceModel) -> set[str]:
    """Functions that cannot be trusted: their definition overlaps a syntax error, or lies
    inside an error region (an unbalanced brace before it swallowed it). Errors in host
    code outside every function block nothing: a kernel is analysed when its own
    definition and the functions it reaches parse (the driver checks the closure)."""
    broken: set[str] = set()
    for function in model.functions:
        if any(issue.span.start < function.span.end and function.span.start < issue.span.end
               for issue in model.syntax_issues):
            broken.add(function.name)
            continue
        node = model.tree.root_node.descendant_for_byte_range(function.span.start, function.span.end)
        while node is not None:
            if node.is_error:
                broken.add(function.name)
                break
            node = node.parent
    return broken


def _host_syntax_issue(model: SourceModel) -> int | None:
    """Offset of the first syntax error in host code (outside every kernel and device
    function: those are reported with the kernels they block), if any."""
    device = [f for f in model.functions if f.kind is not FunctionKind.HOST]
    for issue in model.syntax_issues:
        if not any(f.span.start <= issue.span.start < f.span.end for f in device):
            return issue.span.start
    return None


def _duplicates(model: SourceModel) -> dict[str, list[int]]:
    """Kernels defined more than once (`#if` variants): name -> line of each definition."""
    lines: dict[str, list[int]] = {}
    for kernel in model.kernels:
        lines.setdefault(kernel.name, []).append(model.source.line_col(kernel.span.start)[0])
    return {name: found for name, found in lines.items() if len(found) > 1}


def transform_source(
    source: SourceText,
    passes: Sequence[Pass],
    hw: HwProfile,
    options: RunOptions,
    proposer: Proposer | None = None,
    semantic: SemanticProvider | None = None,
) -> FileTransform:
    proposer = proposer or DeterministicProposer()
    sink = RemarkSink()
    results: list[KernelResult] = []
    current = source
    line_map: tuple[int, ...] = ()
    timings: dict[str, float] = {}
    for pass_ in passes:
        start = time.perf_counter()
        current, pass_results, pass_map = _run_pass(current, source.path, pass_, hw, options, proposer, semantic, sink)
        timings[pass_.name] = time.perf_counter() - start
        results.extend(pass_results)
        if pass_map:
            line_map = pass_map if not line_map else tuple(line_map[i - 1] for i in pass_map)
    return FileTransform(source, current.data, tuple(results), tuple(sink), line_map, timings)


def _run_pass(source: SourceText, path: str, pass_: Pass, hw: HwProfile, options: RunOptions,
              proposer: Proposer, semantic: SemanticProvider | None, sink: RemarkSink,
              model: SourceModel | None = None,
              dry_run: bool = False) -> tuple[SourceText, list[KernelResult], tuple[int, ...]]:
    """One pass over one file. `dry_run` (the idempotence check) stops before editing:
    the result then tells only whether some proposal would be accepted (the source comes
    back unchanged, the accepted kernels are APPLIED results without edits)."""
    model = model or parse_model(source)
    broken = _syntax_gate(model)
    duplicates = _duplicates(model)
    ctx = PassContext(model, hw, options, sink, semantic(model) if semantic else None)
    host_issue = _host_syntax_issue(model)
    if host_issue is not None and not dry_run:
        where = source.line_col(host_issue)
        ctx.remark(RemarkKind.ANALYSIS, pass_.name, "HostSyntaxError", host_issue, None,
                   f"host code does not parse at line {where[0]} (tree-sitter-cuda); kernels whose own "
                   "definitions and callees parse are analysed as usual")
    analyses = pass_.analyse(ctx)
    results: list[KernelResult] = []
    accepted: list[tuple[Proposal, tuple[CheckRecord, ...]]] = []
    reported: set[str] = set()
    for kernel in model.kernels:
        line = source.line_col(kernel.span.start)[0]
        analysis = analyses.get(kernel.name)
        if not options.selects(kernel.name):
            results.append(KernelResult(path, kernel.name, pass_.name, Outcome.SKIPPED, line, ("not selected",)))
            continue
        if kernel.name in duplicates:
            if kernel.name not in reported:
                reported.add(kernel.name)
                at = ", ".join(map(str, duplicates[kernel.name]))
                results.append(_missed(ctx, pass_, kernel, "DuplicateDefinition", f"'{kernel.name}' is defined "
                                       f"{len(duplicates[kernel.name])} times (lines {at}: #if variants?); kxform "
                                       "rewrites a kernel only when it has one definition", kernel.span.start))
            continue
        broken_reach = sorted((model.closure(kernel.name) & broken) - {kernel.name})
        if kernel.name in broken or broken_reach:
            what = "the kernel's definition does not parse (macro-wrapped attribute or syntax error)" \
                if kernel.name in broken else f"'{broken_reach[0]}', which it calls, does not parse"
            results.append(_missed(ctx, pass_, kernel, "SyntaxError", f"{what}; left unchanged", kernel.span.start))
            continue
        if analysis is None:
            continue
        if analysis.already_applied:
            ctx.remark(RemarkKind.ANALYSIS, pass_.name, "AlreadyApplied", kernel.span.start, kernel.name,
                       f"{pass_.name} already applied to '{kernel.name}'; nothing to do")
            results.append(KernelResult(path, kernel.name, pass_.name, Outcome.UNCHANGED, line, ("already applied",)))
            continue
        if analysis.blockers:
            for blocker in analysis.blockers:
                ctx.remark(RemarkKind.MISSED, pass_.name, blocker.key, blocker.offset, kernel.name,
                           f"{pass_.name} not applied to '{kernel.name}': {blocker.message}")
            results.append(KernelResult(path, kernel.name, pass_.name, Outcome.MISSED, line,
                                        tuple(f"{b.key}: {b.message}" for b in analysis.blockers)))
            continue
        result = _propose_and_check(ctx, pass_, proposer, analysis, line)
        if isinstance(result, KernelResult):
            results.append(result)
        else:
            accepted.append(result)
    if not accepted or dry_run:
        results += [KernelResult(path, p.kernel, pass_.name, Outcome.APPLIED, 0, (p.rationale,), p)
                    for p, _ in accepted]
        return source, results, ()
    return _apply(ctx, pass_, accepted, results, source, path, hw, options, semantic)


def _missed(ctx: PassContext, pass_: Pass, kernel: Function, key: str, message: str, offset: int) -> KernelResult:
    ctx.remark(RemarkKind.MISSED, pass_.name, key, offset, kernel.name,
               f"{pass_.name} not applied to '{kernel.name}': {message}")
    line = ctx.model.source.line_col(kernel.span.start)[0]
    return KernelResult(ctx.model.source.path, kernel.name, pass_.name, Outcome.MISSED, line, (f"{key}: {message}",))


def _propose_and_check(ctx: PassContext, pass_: Pass, proposer: Proposer, analysis: KernelAnalysis,
                       line: int) -> KernelResult | tuple[Proposal, tuple[CheckRecord, ...]]:
    kernel = analysis.kernel
    path = ctx.model.source.path
    proposals = proposer.propose(pass_, ctx, analysis)
    if not proposals:
        key, message = pass_.missed_reason(analysis)
        return _missed(ctx, pass_, kernel, key, message, kernel.span.start)
    failures: list[str] = []
    for proposal in proposals:
        if proposal.kernel != kernel.name or proposal.pass_name != pass_.name:
            failures.append(f"proposal for {proposal.pass_name}:{proposal.kernel} ignored")
            continue
        try:
            records = tuple(pass_.check(ctx, proposal))
        except CheckFailed as exc:
            failures.append(str(exc))
            ctx.remark(RemarkKind.MISSED, pass_.name, "CheckFailed", kernel.span.start, kernel.name,
                       f"{pass_.name} proposal {proposal.label()} for '{kernel.name}' rejected: {exc.cause}",
                       check=exc.check, proposer=proposal.proposer)
            continue
        return proposal, records
    return KernelResult(path, kernel.name, pass_.name, Outcome.FAILED, line, tuple(failures), stage="check")


def _apply(ctx: PassContext, pass_: Pass, accepted: list[tuple[Proposal, tuple[CheckRecord, ...]]],
           results: list[KernelResult], source: SourceText, path: str, hw: HwProfile, options: RunOptions,
           semantic: SemanticProvider | None) -> tuple[SourceText, list[KernelResult], tuple[int, ...]]:
    model = ctx.model
    proposals = [p for p, _ in accepted]
    line_of = {k.name: source.line_col(k.span.start)[0] for k in model.kernels}
    try:
        edits: list[Edit] = pass_.edit(ctx, proposals)
        edited = apply_edits(source, edits)
        try:
            new_source = validate_bytes(path, edited.data, rewritten=True)
        except InputError as exc:
            raise CheckFailed("size", exc.cause) from None
        new_model = parse_model(new_source)
        check_reparse(len(model.syntax_issues), len(new_model.syntax_issues), path)
        extra = [CheckRecord("reparse", True, f"rewritten file re-parses with {len(new_model.syntax_issues)} "
                             "syntax error region(s), as many as the original")]
        extra.extend(pass_.check_result(new_model, proposals))
        extra.append(_idempotent(pass_, new_model, hw, options, proposals))
    except (CheckFailed, EditConflict) as exc:
        stage = exc.check if isinstance(exc, CheckFailed) else "edit"
        for proposal in proposals:
            ctx.remark(RemarkKind.MISSED, pass_.name, "CheckFailed", 0, proposal.kernel,
                       f"{pass_.name} {proposal.label()} for '{proposal.kernel}' rejected: {exc}")
            results.append(KernelResult(path, proposal.kernel, pass_.name, Outcome.FAILED, line_of[proposal.kernel],
                                        (str(exc),), proposal, stage=stage))
        return source, results, ()
    for proposal, records in accepted:
        kernel = next(k for k in model.kernels if k.name == proposal.kernel)
        ctx.remark(RemarkKind.PASSED, pass_.name, "Applied", kernel.span.start, kernel.name,
                   f"{pass_.name} applied to '{kernel.name}': {proposal.label()} ({proposal.rationale})",
                   proposer=proposal.proposer, measured=proposal.measured, **dict(proposal.params))
        results.append(KernelResult(path, proposal.kernel, pass_.name, Outcome.APPLIED, line_of[proposal.kernel],
                                    (proposal.rationale,), proposal, records + tuple(extra)))
    return new_source, results, edited.line_map


def _idempotent(pass_: Pass, new_model: SourceModel, hw: HwProfile, options: RunOptions,
                proposals: list[Proposal]) -> CheckRecord:
    """Check (e): running the same pass again on the output changes nothing. Semantics are
    not consulted again: the question is only whether the pass would propose."""
    kernels = tuple(p.kernel for p in proposals)
    source = new_model.source
    _, again, _ = _run_pass(source, source.path, pass_, hw, replace(options, kernels=kernels),
                            DeterministicProposer(), None, RemarkSink(), new_model, dry_run=True)
    if any(r.outcome is Outcome.APPLIED for r in again):
        raise CheckFailed("idempotence", "a second run of the pass would change the output again")
    return CheckRecord("idempotence", True, "a second run proposes no change")
