"""`kxform inspect --prompt`: the context a model would see for one kernel, without asking it.

The same assembly as the attempt loop (context.py, prompt.py, tools.py): the standing
instructions, the first message and the tool with its schema, so a user can read what
would be sent and judge it before spending anything.
"""

from __future__ import annotations

import json

from kxform.build.toolchain import Toolchain
from kxform.engine.pass_api import PassContext, RunOptions
from kxform.engine.registry import default_registry
from kxform.errors import KxformError, UsageError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source
from kxform.hw import HwProfile
from kxform.log.remarks import RemarkSink
from kxform.propose.context import build_context
from kxform.propose.prompt import SYSTEM, first_message, space_text
from kxform.propose.tools import tool_for


def prompt_for(
    path: str,
    kernel: str,
    hw: HwProfile,
    pass_spec: str = "swizzle",
    attempts: int = 4,
    verify: str = "auto",
    measure: bool = False,
    build_dir: str | None = None,
) -> str:
    """The whole prompt for `kernel` of `path` as text (system, first message, tool)."""
    from kxform.propose.search import pick_verify_runtime
    from kxform.verify.stage import spec_for_file

    if pass_spec == "refactor":
        from kxform.propose.refactor_prompt import refactor_prompt

        return refactor_prompt(path, kernel, hw, attempts, build_dir)
    passes = default_registry().pipeline(pass_spec)
    if len(passes) != 1:
        raise UsageError("--prompt shows what one pass asks (--pass NAME)")
    pass_ = passes[0]
    model = parse_model(read_source(path))
    ctx = PassContext(
        model, hw, RunOptions(kernels=(kernel,), arch=hw.arch), RemarkSink(), toolchain=Toolchain.create(build_dir)
    )
    analyses = pass_.analyse(ctx)
    analysis = analyses.get(kernel)
    if analysis is None:
        known = ", ".join(k.name for k in model.kernels) or "none"
        raise UsageError(f"{path}: no kernel {kernel!r} (kernels: {known})")
    if not analysis.applicable:
        why = "; ".join(b.message for b in analysis.blockers) or "already applied"
        raise UsageError(f"{path}: {pass_.name} does not apply to {kernel!r} ({why}); nothing would be asked")
    space = pass_.space(ctx, analysis)
    if not len(space):
        raise UsageError(f"pass {pass_.name} has no parameters to propose for {kernel!r}; no model is asked")
    tool = tool_for(pass_, space)
    try:
        file_spec = spec_for_file(path)
    except KxformError:
        file_spec = None
    spec = file_spec.find(kernel) if file_spec is not None else None
    runtime = pick_verify_runtime(verify)
    context = build_context(ctx, analysis, spec, runtime, measure, space_text(tool, space))
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
