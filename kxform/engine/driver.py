"""The pure core: source text in, rewritten text plus per-kernel results and remarks out.

No files, no nvcc, no GPU: those are layers above (kxform.orchestrate.runner). For each pass of
the pipeline: parse, analyse, propose, check, collect edits for all kernels, apply them in
one step, re-parse, and confirm that a second run proposes nothing. Stage errors are
typed exceptions turned into frozen `KernelResult`s here, in one place; this function
only raises for input errors that concern the whole file.

The candidate stage: the proposer offers a ranked list per kernel; up to
`RunOptions.max_candidates` (in all, over the rounds) that pass the pass's checks are
kept, the first is applied
and the others ride along as `alternates`. When a later stage (compile, verify, measure)
refuses the applied one, the runner calls this function again with the refusal as
`feedback`: the proposer hears the reason and the refused proposal is never applied
again, so the next alternate takes its place. "Applied" remarks are held back
(`FileTransform.pending`) until the later stages have decided: `final_remarks` reports
the outcome that stands.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kxform.analysis.manager import AnalysisManager
from kxform.engine.edits import check_reparse, unified_diff
from kxform.engine.pass_api import (
    FORCED_REFUSED,
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
from kxform.engine.proposer import DeterministicProposer, Proposer
from kxform.engine.rewritten import edited_file
from kxform.engine.status import UNVERIFIED, VERIFY_INCONCLUSIVE, Status
from kxform.errors import CheckFailed, EditConflict
from kxform.frontend.cuda import parse_model
from kxform.frontend.markers import disabled_at
from kxform.frontend.model import Function, FunctionKind, SourceModel
from kxform.frontend.source import SourceText
from kxform.hw import HwProfile
from kxform.engine.remarks import Remark, RemarkKind, RemarkSink

SemanticProvider = Callable[[SourceModel], object]
"""Given a model, return a semantic-layer object (kxform.frontend.semantic) or None."""

Feedback = Mapping[tuple[str, str], tuple[Rejection, ...]]
"""(pass name, kernel) -> proposals the later stages refused, with their reasons."""


@dataclass(frozen=True)
class FileTransform:
    source: SourceText
    new_data: bytes
    results: tuple[KernelResult, ...]
    remarks: tuple[Remark, ...]
    line_map: tuple[int, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
    pending: tuple[Remark, ...] = ()
    """"Applied" remarks held back until the later stages decide (see `final_remarks`)."""
    syntax_errors: tuple[tuple[str, int], ...] = ()
    """(kernel, offset of its first syntax error) of each selected kernel whose own
    definition does not parse: the command line reports the file as an input error."""
    input_maps: tuple[tuple[str, tuple[int, ...]], ...] = ()
    """(pass, line map) of each pass that ran on a file an earlier pass had changed: the
    map takes a line of what the pass read (its remarks' and results' lines) to the line
    of the original (as `line_map`), so a viewer can show them on the file as it was."""

    @property
    def changed(self) -> bool:
        return self.new_data != self.source.data

    def diff(self) -> str:
        return unified_diff(self.source.path, self.source.data, self.new_data)


@dataclass(frozen=True)
class _Run:
    """What every pass of one transform shares."""

    hw: HwProfile
    options: RunOptions
    proposer: Proposer
    semantic: SemanticProvider | None
    sink: RemarkSink
    feedback: Feedback
    toolchain: Any
    pending: list[Remark]
    analyses: AnalysisManager = field(default_factory=AnalysisManager)


def syntax_gate(model: SourceModel) -> set[str]:
    """Functions that cannot be trusted: their definition overlaps a syntax error, or lies
    inside an error region (an unbalanced brace before it swallowed it). Errors in host
    code outside every function block nothing: a kernel is analysed when its own
    definition and the functions it reaches parse (`unparsable`)."""
    broken: set[str] = set()
    for function in model.functions:
        if any(
            issue.span.start < function.span.end and function.span.start < issue.span.end
            for issue in model.syntax_issues
        ):
            broken.add(function.name)
            continue
        node = model.tree.root_node.descendant_for_byte_range(function.span.start, function.span.end)
        while node is not None:
            if node.is_error:
                broken.add(function.name)
                break
            node = node.parent
    return broken


def unparsable(model: SourceModel, kernel: str, broken: set[str] | None = None) -> str | None:
    """Why `kernel` cannot be analysed for syntax reasons (None: it can): its definition,
    or a function it calls, does not parse."""
    broken = syntax_gate(model) if broken is None else broken
    if kernel in broken:
        return "the kernel's definition does not parse (macro-wrapped attribute or syntax error)"
    reach = sorted((model.closure(kernel) & broken) - {kernel})
    return f"'{reach[0]}', which it calls, does not parse" if reach else None


def broken_kernels(model: SourceModel, options: RunOptions) -> tuple[tuple[str, int], ...]:
    """Selected kernels whose own definition does not parse, each with the offset of the
    first syntax error in it (or of the definition, when an error before it swallowed it)."""
    broken = syntax_gate(model)
    out = []
    for kernel in model.kernels:
        if kernel.name in broken and options.selects(kernel.name):
            inside = [
                i.span.start
                for i in model.syntax_issues
                if i.span.start < kernel.span.end and kernel.span.start < i.span.end
            ]
            out.append((kernel.name, max(min(inside), kernel.span.start) if inside else kernel.span.start))
    return tuple(out)


def host_syntax_issue(model: SourceModel) -> int | None:
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
    feedback: Feedback | None = None,
    toolchain: Any = None,
    finalize: bool = True,
) -> FileTransform:
    """Run `passes` over `source`. With `finalize` (the pure core on its own) the held-back
    "Applied" remarks are emitted at once; the runner passes False and emits them after
    its later stages (`final_remarks`)."""
    run = _Run(hw, options, proposer or DeterministicProposer(), semantic, RemarkSink(), feedback or {}, toolchain, [])
    results: list[KernelResult] = []
    current = source
    line_map: tuple[int, ...] = ()
    timings: dict[str, float] = {}
    model: SourceModel | None = parse_model(source)
    assert model is not None
    syntax_errors = broken_kernels(model, options)
    input_maps: list[tuple[str, tuple[int, ...]]] = []
    for pass_ in passes:
        if line_map:
            input_maps.append((pass_.name, line_map))
        start = time.perf_counter()
        current, pass_results, pass_map = _run_pass(current, pass_, run, model)
        model = None  # the next pass parses the rewritten source
        timings[pass_.name] = time.perf_counter() - start
        results.extend(pass_results)
        if pass_map:
            line_map = pass_map if not line_map else tuple(line_map[i - 1] for i in pass_map)
    transform = FileTransform(
        source,
        current.data,
        tuple(results),
        tuple(run.sink),
        line_map,
        timings,
        tuple(run.pending),
        syntax_errors,
        tuple(input_maps),
    )
    if finalize:
        transform = replace(
            transform, remarks=transform.remarks + final_remarks(transform, transform.results), pending=()
        )
    return transform


COULD_NOT_TELL = (VERIFY_INCONCLUSIVE, UNVERIFIED)
"""Remark names of kernels verification could not decide (not a failure: nothing proven wrong)."""


def final_remarks(transform: FileTransform, results: Sequence[KernelResult]) -> tuple[Remark, ...]:
    """The remarks of the outcome that stands: "Applied" for kernels still applied
    ("AppliedUnconfirmed", with the check's words, where a later check could not tell,
    as the compile check when the original does not compile either), and a "Missed"
    remark naming the stage and reason for those a later stage took back
    ("<Stage>Unconfirmed" when that stage could not tell and a failure was required)."""
    final = {(r.pass_name, r.kernel): r for r in results}
    out: list[Remark] = []
    for remark in transform.pending:
        result = final.get((remark.pass_name, remark.function or ""))
        if result is None or result.proposal is None:
            out.append(remark)
            continue
        if result.outcome is Outcome.APPLIED:
            applied = _applied(remark, result.proposal)
            doubt = next((c for c in result.checks if c.status is Status.UNCONFIRMED), None)
            if doubt is not None:
                applied = replace(
                    applied,
                    name="AppliedUnconfirmed",
                    message=f"{applied.message}; {doubt.name} check {doubt.detail}",
                    args={**applied.args, "confirmed": False},
                )
            out.append(applied)
            continue
        why = result.reasons[0] if result.reasons else "refused by a later stage"
        undecided = result.undecided()
        verdict = "Unconfirmed" if undecided is not None and undecided.status is Status.UNCONFIRMED else "Failed"
        name = result.key if result.key in COULD_NOT_TELL else f"{result.stage.capitalize() or 'Later'}{verdict}"
        out.append(
            replace(
                remark,
                kind=RemarkKind.MISSED,
                name=name,
                message=f"{remark.pass_name} not applied to '{remark.function}': {result.stage or 'later'} "
                f"stage: {why}",
            )
        )
    return tuple(out)


def _applied(remark: Remark, proposal: Proposal) -> Remark:
    return replace(
        remark,
        message=f"{proposal.pass_name} applied to '{proposal.kernel}': {proposal.label()} ({proposal.rationale})",
        args={"proposer": proposal.proposer, "measured": proposal.measured, **proposal.options},
    )


def _run_pass(
    source: SourceText, pass_: Pass, run: _Run, model: SourceModel | None = None, dry_run: bool = False
) -> tuple[SourceText, list[KernelResult], tuple[int, ...]]:
    """One pass over one file. `dry_run` (the idempotence check) stops before editing:
    the result then tells only whether some proposal would be accepted (the source comes
    back unchanged, the accepted kernels are APPLIED results without edits)."""
    model = model or parse_model(source)
    broken = syntax_gate(model)
    duplicates = _duplicates(model)
    ctx = PassContext(
        model, run.hw, run.options, run.sink, run.semantic(model) if run.semantic else None, run.toolchain, run.analyses
    )
    host_issue = host_syntax_issue(model)
    if host_issue is not None and not dry_run:
        ctx.remark(
            RemarkKind.ANALYSIS,
            pass_.name,
            "HostSyntaxError",
            host_issue,
            None,
            f"host code does not parse at line {source.line_col(host_issue)[0]} (tree-sitter-cuda); kernels "
            "whose own definitions and callees parse are analysed as usual",
        )
    analyses = pass_.analyse(ctx)
    results: list[KernelResult] = []
    accepted: list[KernelResult] = []
    reported: set[str] = set()
    for kernel in model.kernels:
        if kernel.name in duplicates and run.options.selects(kernel.name):
            if kernel.name not in reported:
                reported.add(kernel.name)
                at = ", ".join(map(str, duplicates[kernel.name]))
                results.append(
                    _missed(
                        ctx,
                        pass_,
                        kernel,
                        "DuplicateDefinition",
                        f"'{kernel.name}' is defined "
                        f"{len(duplicates[kernel.name])} times (lines {at}: #if variants?); kxform "
                        "rewrites a kernel only when it has one definition",
                        kernel.span.start,
                    )
                )
            continue
        analysis = analyses.get(kernel.name)
        result = _kernel(ctx, pass_, run, kernel, analysis, unparsable(model, kernel.name, broken))
        if result is not None:
            (accepted if result.outcome is Outcome.APPLIED else results).append(result)
    if not accepted or dry_run:
        return source, results + accepted, ()
    return _apply(ctx, pass_, run, accepted, results)


def _kernel(
    ctx: PassContext, pass_: Pass, run: _Run, kernel: Function, analysis: KernelAnalysis | None, broken: str | None
) -> KernelResult | None:
    path = ctx.model.source.path
    line = ctx.model.source.line_col(kernel.span.start)[0]
    if not run.options.selects(kernel.name):
        return KernelResult(path, kernel.name, pass_.name, Outcome.SKIPPED, line, ("not selected",), key="NotSelected")
    marker = disabled_at(ctx.model.source, kernel)
    if marker is not None:
        return _missed(
            ctx,
            pass_,
            kernel,
            "DisabledInSource",
            f"'kxform: off' at line {ctx.model.source.line_col(marker)[0]}; left unchanged",
            marker,
        )
    if broken is not None:
        return _missed(ctx, pass_, kernel, "SyntaxError", f"{broken}; left unchanged", kernel.span.start)
    if analysis is None:
        return None
    if analysis.already_applied:
        ctx.remark(
            RemarkKind.ANALYSIS,
            pass_.name,
            "AlreadyApplied",
            kernel.span.start,
            kernel.name,
            f"{pass_.name} already applied to '{kernel.name}'; nothing to do",
        )
        return KernelResult(
            path, kernel.name, pass_.name, Outcome.UNCHANGED, line, ("already applied",), key="AlreadyApplied"
        )
    if analysis.blockers:
        for blocker in analysis.blockers:
            ctx.remark(
                RemarkKind.MISSED,
                pass_.name,
                blocker.key,
                blocker.offset,
                kernel.name,
                f"{pass_.name} not applied to '{kernel.name}': {blocker.message}",
            )
        # stage FORCED_REFUSED: a configuration the user fixed, refused (the report's exit 1, not "nothing to do")
        return KernelResult(
            path,
            kernel.name,
            pass_.name,
            Outcome.MISSED,
            line,
            tuple(f"{b.key}: {b.message}" for b in analysis.blockers),
            stage=FORCED_REFUSED if pass_.explicit else "",
            key=analysis.blockers[0].key,
        )
    return _propose_and_check(ctx, pass_, run, analysis, line)


def _missed(ctx: PassContext, pass_: Pass, kernel: Function, key: str, message: str, offset: int) -> KernelResult:
    ctx.remark(
        RemarkKind.MISSED,
        pass_.name,
        key,
        offset,
        kernel.name,
        f"{pass_.name} not applied to '{kernel.name}': {message}",
    )
    line = ctx.model.source.line_col(kernel.span.start)[0]
    return KernelResult(
        ctx.model.source.path, kernel.name, pass_.name, Outcome.MISSED, line, (f"{key}: {message}",), key=key
    )


def _propose_and_check(ctx: PassContext, pass_: Pass, run: _Run, analysis: KernelAnalysis, line: int) -> KernelResult:
    """Checked candidates, best first: the first is applied, the rest are alternates."""
    kernel = analysis.kernel
    path = ctx.model.source.path
    earlier = run.feedback.get((pass_.name, kernel.name), ())
    refused = {r.label for r in earlier}
    budget = max(1, run.options.max_candidates) - len(earlier)
    proposals = (
        [p for p in run.proposer.propose(pass_, ctx, analysis, earlier) if p.label() not in refused]
        if budget > 0
        else []
    )
    if not proposals and earlier:
        last = earlier[-1]
        ctx.remark(
            RemarkKind.MISSED,
            pass_.name,
            f"{last.stage.capitalize()}Failed",
            kernel.span.start,
            kernel.name,
            f"{pass_.name} not applied to '{kernel.name}': {last.stage} stage: {last.reason} "
            f"({len(earlier)} candidate(s) refused)",
        )
        return KernelResult(
            path,
            kernel.name,
            pass_.name,
            Outcome.FAILED,
            line,
            tuple(f"{r.label}: {r.stage}: {r.reason}" for r in earlier),
            stage=last.stage,
            rejected=earlier,
            key=last.key or f"{last.stage.capitalize()}Failed",
        )
    for rejection in earlier:
        ctx.remark(
            RemarkKind.ANALYSIS,
            pass_.name,
            "CandidateRefused",
            kernel.span.start,
            kernel.name,
            f"{pass_.name} candidate {rejection.label} for '{kernel.name}' refused by the {rejection.stage} "
            f"stage: {rejection.reason}",
            stage=rejection.stage,
        )
    if not proposals:
        key, message = _nothing_proposed(run.proposer, pass_, analysis, ctx)
        return _missed(ctx, pass_, kernel, key, message, kernel.span.start)
    checked: list[tuple[Proposal, tuple[CheckRecord, ...]]] = []
    rejected: list[Rejection] = list(earlier)
    for proposal in proposals:
        if len(checked) >= budget:
            break
        if proposal.kernel != kernel.name or proposal.pass_name != pass_.name:
            rejected.append(
                Rejection(proposal.label(), "check", f"proposal for {proposal.pass_name}:{proposal.kernel} ignored")
            )
            continue
        try:
            checked.append((proposal, tuple(pass_.check(ctx, proposal))))
        except CheckFailed as exc:
            rejected.append(Rejection(proposal.label(), "check", str(exc), exc.key))
            ctx.remark(
                RemarkKind.MISSED,
                pass_.name,
                "CheckFailed",
                kernel.span.start,
                kernel.name,
                f"{pass_.name} proposal {proposal.label()} for '{kernel.name}' rejected: {exc.cause}",
                check=exc.check,
                proposer=proposal.proposer,
            )
    if not checked:
        return KernelResult(
            path,
            kernel.name,
            pass_.name,
            Outcome.FAILED,
            line,
            tuple(r.reason for r in rejected[len(earlier) :]) or ("no proposal passed the checks",),
            stage="check",
            rejected=tuple(rejected),
            key=next((r.key for r in rejected[len(earlier) :] if r.key), "CheckFailed"),
        )
    (chosen, records), *rest = checked
    return KernelResult(
        path,
        kernel.name,
        pass_.name,
        Outcome.APPLIED,
        line,
        (chosen.rationale,),
        chosen,
        records,
        alternates=tuple(p for p, _ in rest),
        rejected=tuple(rejected),
    )


def _nothing_proposed(proposer: Proposer, pass_: Pass, analysis: KernelAnalysis, ctx: PassContext) -> tuple[str, str]:
    """Why no proposal came: the proposer's own reason when it has one (`why_nothing`: a
    lockfile entry that leaves the kernel alone, a record without the kernel), else the pass's."""
    explain = getattr(proposer, "why_nothing", None)
    found = explain(pass_, analysis) if explain is not None else None
    return found or pass_.missed_reason(analysis, ctx)


def _apply(
    ctx: PassContext, pass_: Pass, run: _Run, accepted: list[KernelResult], results: list[KernelResult]
) -> tuple[SourceText, list[KernelResult], tuple[int, ...]]:
    model = ctx.model
    source = model.source
    proposals = [r.proposal for r in accepted if r.proposal is not None]
    try:
        edited = edited_file(ctx, pass_, proposals)
        new_source, new_model = edited.source, edited.model
        check_reparse(len(model.syntax_issues), len(new_model.syntax_issues), source.path)
        extra = [
            CheckRecord(
                "reparse",
                Status.PASSED,
                f"rewritten file re-parses with {len(new_model.syntax_issues)} "
                "syntax error region(s), as many as the original",
            )
        ]
        extra.extend(pass_.check_result(new_model, proposals, ctx=ctx))
        run.analyses.carry(model, new_model, pass_.preserves)
        extra.append(_idempotent(pass_, new_model, run, proposals))
        policies = {r.kernel: pass_.verify_policy(ctx, r.proposal, new_model) for r in accepted if r.proposal}
    except (CheckFailed, EditConflict) as exc:
        stage = exc.check if isinstance(exc, CheckFailed) else "edit"
        for result in accepted:
            ctx.remark(
                RemarkKind.MISSED,
                pass_.name,
                "CheckFailed",
                0,
                result.kernel,
                f"{pass_.name} {result.proposal.label() if result.proposal else ''} for '{result.kernel}' "
                f"rejected: {exc}",
            )
            key = exc.key if isinstance(exc, CheckFailed) else "EditConflict"
            results.append(replace(result, outcome=Outcome.FAILED, reasons=(str(exc),), stage=stage, key=key))
        return source, results, ()
    for result in accepted:
        kernel = next(k for k in model.kernels if k.name == result.kernel)
        line, col = source.line_col(kernel.span.start)
        assert result.proposal is not None
        run.pending.append(
            _applied(
                Remark(RemarkKind.PASSED, pass_.name, "Applied", source.path, line, col, kernel.name, ""),
                result.proposal,
            )
        )
        results.append(replace(result, checks=result.checks + tuple(extra), policy=policies[result.kernel]))
    return new_source, results, edited.line_map


def _idempotent(pass_: Pass, new_model: SourceModel, run: _Run, proposals: list[Proposal]) -> CheckRecord:
    """Check (e): running the same pass again on the output changes nothing. Semantics are
    not consulted again: the question is only whether the pass would propose and have a
    proposal accepted, so the second run stops before editing (no recursion)."""
    kernels = tuple(p.kernel for p in proposals)
    source = new_model.source
    again_run = _Run(
        run.hw,
        replace(run.options, kernels=kernels),
        DeterministicProposer(),
        None,
        RemarkSink(),
        {},
        run.toolchain,
        [],
        run.analyses,
    )
    _, again, _ = _run_pass(source, pass_, again_run, new_model, dry_run=True)
    if any(r.outcome is Outcome.APPLIED for r in again):
        raise CheckFailed("idempotence", "a second run of the pass would change the output again")
    return CheckRecord("idempotence", Status.PASSED, "a second run proposes no change")
