"""What a model is told when asked for a refactoring (`kxform inspect --prompt FILE
--kernel K --pass refactor` prints it).

The kernel's shared context (context.py: the source with what it reaches, launches,
the memory-access analysis, the hardware profile, ptxas resources), then what the
deterministic passes make of the kernel (each pass's rewrite or its refusal, so the
model proposes what they cannot), the Nsight Compute summary when a profiler hook is
given (only on a GPU; empty otherwise), and the rules and verification a template
meets. The tool is `template.refactor_tool`.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from kxform.build.toolchain import Toolchain
from kxform.engine.pass_api import KernelAnalysis, PassContext, RunOptions
from kxform.errors import KxformError, UsageError
from kxform.frontend.model import FunctionKind, SourceModel
from kxform.harness.model import KernelSpec
from kxform.hw import HwProfile
from kxform.log.remarks import RemarkSink
from kxform.propose.context import KernelContext, Section, build_context
from kxform.propose.template import refactor_tool
from kxform.propose.tools import Tool
from kxform.propose.template_rules import MAX_CODE_CHARS, MAX_CONFIGS, MAX_PARAMS, MAX_VALUES

DETERMINISTIC = ("launch", "rows", "tile", "unroll")
Profile = Callable[[], str]
"""A short Nsight Compute summary of the original and the best so far (a GPU hook)."""

SYSTEM = """\
You are the proposer inside kxform, a checked source-to-source optimizer for CUDA and HIP kernels. You never \
edit files: you answer only by calling the tool you are given, once per turn, with one refactoring of the kernel \
described: its definition rewritten as a template over integer parameters that a tuner then searches. kxform \
treats every answer as untrusted input: it checks the template's rules, verifies it against the original over a \
covering sample of your parameter space at every check size, and only then tunes and keeps it. After each \
attempt you get its result and, for a rejection, the stable reason key and the cause: use them. Propose what the \
deterministic passes cannot do (a different work decomposition, a warp or block per row, vector accesses, \
shared-memory staging, fused loops), keep every edge case the original handles, and say in `expectation` why \
it should be faster."""

RULES_TEXT = f"""\
Answer with a new definition of the kernel written as a template over integer parameters, its launch as \
expressions, and the parameter space. kxform refuses, before anything runs: code over {MAX_CODE_CHARS} characters; \
more than {MAX_PARAMS} parameters, more than {MAX_VALUES} values per parameter, values outside 1..4096 or more \
than {MAX_CONFIGS} configurations; parameter names that are not new upper-case identifiers; constraints or launch \
expressions that do not parse in kxform's expression language or name anything but the parameters (and hw.* fields \
in constraints; the kernel's scalar parameters in the launch); code that does not parse; anything besides the one \
definition (#include, #define, other functions, globals, host code, launches); a changed name or parameter list; \
asm, printf, allocation; atomics on a buffer the original never updates atomically; casts into another address \
space; calls other than the device functions the original reaches and CUDA's intrinsics.
Then kxform verifies against the original, at every check size of the harness spec (ragged sizes included), a \
covering sample of your space: every value of every parameter, the all-low and all-high corners, and every pair of \
extremes; on a GPU also compute-sanitizer memcheck and racecheck. Outputs compare bit-exact unless the original \
sums floats in a loop (then twice the spec's tolerance, the reordered-sum bound). Any failure rejects the template, \
and you get the configuration, size and cause. A verified template is tuned over its verified sample, starting at \
the configuration you mark as reproducing the original (`original` of each parameter)."""


def passes_text(model: SourceModel, kernel: str) -> str:
    """Each deterministic pass's rewrite of the kernel, or why it refuses."""
    from kxform.core import rewrite

    lines = []
    for name in DETERMINISTIC:
        try:
            result = rewrite(model.source.data, name, path=model.source.path)
        except KxformError as exc:
            lines.append(f"- {name}: could not run ({exc})")
            continue
        mine = [r for r in result.results if r.kernel == kernel]
        if result.changed and mine and mine[0].proposal is not None:
            lines.append(f"- {name}: rewrites it as {mine[0].proposal.label()} (unmeasured here)")
        else:
            why = "; ".join(r.format() for r in result.remarks if kernel in r.format())[:300]
            lines.append(f"- {name}: no rewrite" + (f" ({why})" if why else ""))
    return "\n".join(lines)


def refactor_context(
    ctx: PassContext,
    kernel: str,
    spec: KernelSpec | None,
    runtime: object | None,
    measure: bool,
    profile: Profile | None = None,
) -> tuple[KernelContext, Tool]:
    function = next((f for f in ctx.model.functions if f.name == kernel and f.kind is FunctionKind.KERNEL), None)
    if function is None:
        known = ", ".join(k.name for k in ctx.model.kernels) or "none"
        raise UsageError(f"{ctx.model.source.path}: no kernel {kernel!r} (kernels: {known})")
    signature = ctx.model.source.data[function.params_span.start : function.params_span.end].decode("utf-8", "replace")
    tool = refactor_tool(kernel, signature)
    base = build_context(ctx, KernelAnalysis(function), spec, runtime, measure, RULES_TEXT)
    nsight = profile() if profile is not None else ""
    extra = (
        Section("What the deterministic passes do with it", passes_text(ctx.model, kernel)),
        Section("Nsight Compute", nsight or "No Nsight Compute summary: no GPU profile in this run."),
    )
    sections = tuple(s for s in base.sections if s.title not in ("L2 model",)) + extra
    return KernelContext(base.path, kernel, sections, base.footprint, base.ranking), tool


def refactor_prompt(path: str, kernel: str, hw: HwProfile, attempts: int = 4, build_dir: str | None = None) -> str:
    """The whole refactoring prompt for `kernel` of `path` (system, first message, tool)."""
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.propose.prompt import first_message
    from kxform.verify.stage import spec_for_file

    model = parse_model(read_source(path))
    ctx = PassContext(
        model, hw, RunOptions(kernels=(kernel,), arch=hw.arch), RemarkSink(), toolchain=Toolchain.create(build_dir)
    )
    try:
        file_spec = spec_for_file(path)
    except KxformError:
        file_spec = None
    spec = file_spec.find(kernel) if file_spec is not None else None
    context, tool = refactor_context(ctx, kernel, spec, None, False)
    return "\n".join(
        [
            "=== system ===",
            SYSTEM,
            "",
            "=== first message (later turns: each attempt's result) ===",
            first_message(context, tool, attempts),
            "=== tool (forced, strict) ===",
            json.dumps(tool.to_param(), indent=2),
            "",
        ]
    )
