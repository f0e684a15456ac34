"""`--proposer claude` over files: one attempt loop per applicable kernel, then decisions.

The search writes nothing. It returns, per kernel, the decision its best verified
attempt earned; `kxform apply` then runs its ordinary pipeline with those decisions
replayed (the `lock` proposer), so what is written went through every check and the
verification once more, exactly like any other rewrite. For `--pass refactor` the
session is a refactoring session (kxform.propose.refactor_run): its decision carries the
kept template and its configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kxform.build.toolchain import Toolchain
from kxform.engine.pass_api import Pass, PassContext, RunOptions
from kxform.engine.registry import default_registry
from kxform.orchestrate.runner import ApplyConfig
from kxform.workspace.tree import collect_files
from kxform.errors import KxformError, UsageError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source
from kxform.log.remarks import RemarkSink
from kxform.propose.client import ClaudeClient
from kxform.propose.context import build_context
from kxform.propose.evaluate import Evaluator
from kxform.propose.lock import Decision
from kxform.propose.prompt import space_text
from kxform.propose.session import KernelSession, Record, SessionOptions, run_kernel
from kxform.propose.tools import tool_for


@dataclass(frozen=True)
class SearchResult:
    sessions: tuple[KernelSession, ...]

    @property
    def decisions(self) -> tuple[Decision, ...]:
        return tuple(s.decision for s in self.sessions if s.decision is not None)


def pick_verify_runtime(verify: str) -> object | None:
    """The runtime attempts are verified on (as `apply --verify` picks it), or None."""
    from kxform.verify.differential import pick_runtime

    if verify in ("static", "compile"):
        return None
    try:
        return pick_runtime(verify)
    except UsageError:
        if verify != "auto":
            raise
        return None


def search(
    paths: Sequence[str], config: ApplyConfig, options: SessionOptions, client: ClaudeClient, record: Record
) -> SearchResult:
    passes = default_registry().pipeline(config.pipeline, dict(config.extra_options))
    if len(passes) != 1:
        raise UsageError("--proposer claude takes one pass at a time (--pass NAME)")
    pass_ = passes[0]
    assert config.hw is not None
    runtime = pick_verify_runtime(config.verify)
    if options.measure and getattr(runtime, "name", "") != "gpu":
        raise UsageError(
            "--measure needs the GPU runtime, and there is none here; leave --measure out and attempts "
            "are ranked by prediction (and say so)"
        )
    sessions: list[KernelSession] = []
    for path in collect_files(list(paths)).files:
        try:
            sessions.extend(_search_file(path, pass_, config, options, client, runtime, record))
        except UsageError:
            raise
        except KxformError as exc:  # reported again, the usual way, by the apply run that follows
            record({"type": "llm_skipped", "file": path, "reason": str(exc)})
    return SearchResult(tuple(sessions))


def _search_file(
    path: str,
    pass_: Pass,
    config: ApplyConfig,
    options: SessionOptions,
    client: ClaudeClient,
    runtime: object | None,
    record: Record,
) -> list[KernelSession]:
    from kxform.build.semantic import semantic_provider
    from kxform.verify.stage import spec_for_file

    assert config.hw is not None
    source = read_source(path)
    model = parse_model(source)
    semantic = semantic_provider(path, config.build_dir) if config.semantic else None
    run_options = RunOptions(kernels=config.kernels, arch=config.hw.arch)
    ctx = PassContext(
        model,
        config.hw,
        run_options,
        RemarkSink(),
        semantic(model) if semantic else None,
        Toolchain.create(config.build_dir),
    )
    analyses = pass_.analyse(ctx)
    try:
        file_spec = spec_for_file(path)
    except KxformError:
        file_spec = None
    out = []
    for kernel in model.kernels:
        analysis = analyses.get(kernel.name)
        if analysis is None or not analysis.applicable or not run_options.selects(kernel.name):
            continue  # the apply run reports why (blockers, already applied, not selected)
        spec = file_spec.find(kernel.name) if file_spec is not None else None
        if pass_.name == "refactor":  # the answer is a template, not a point of the pass's space
            out.extend(_refactor(ctx, kernel.name, spec, runtime, client, options, record))
            continue
        space = pass_.space(ctx, analysis)
        if not len(space):
            record(
                {
                    "type": "llm_skipped",
                    "file": path,
                    "kernel": kernel.name,
                    "reason": f"pass {pass_.name} has no parameters to propose for this kernel",
                }
            )
            continue
        tool = tool_for(pass_, space)
        context = build_context(ctx, analysis, spec, runtime, options.measure, space_text(tool, space))
        evaluator = Evaluator(source, pass_, replace(config, measure=options.measure), runtime, spec, context.footprint)
        out.append(run_kernel(ctx, analysis, pass_, tool, context, evaluator, client, options, record))
    return out


def _refactor(
    ctx: PassContext,
    kernel: str,
    spec: object,
    runtime: object | None,
    client: ClaudeClient,
    options: SessionOptions,
    record: Record,
) -> list[KernelSession]:
    """A refactoring session (kxform.propose.refactor_run): its decision carries the kept
    template and its configuration, which the apply run replays through passes/refactor.py."""
    from kxform.errors import CheckFailed
    from kxform.propose.refactor_run import refactor_kernel

    if runtime is None:
        record(
            {
                "type": "llm_skipped",
                "file": ctx.model.source.path,
                "kernel": kernel,
                "reason": "refactor: a template is verified on a runtime before it is kept (not with --verify static "
                "or compile)",
            }
        )
        return []
    try:
        session, done = refactor_kernel(ctx, kernel, spec, runtime, client, options, record)  # type: ignore[arg-type]
    except CheckFailed as exc:  # the kept template did not verify again at its tuned configuration
        record({"type": "llm_skipped", "file": ctx.model.source.path, "kernel": kernel, "reason": str(exc)})
        return []
    return [replace(session, decision=done.decision if done is not None else None)]
