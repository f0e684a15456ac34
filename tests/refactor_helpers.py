"""A refactoring session on a corpus naive kernel, driven by the real anthropic client
over recorded wire-format replies (tests/llm_replies.py)."""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.engine.pass_api import PassContext, RunOptions
from kxform.log.remarks import RemarkSink
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.propose.context import KernelContext, Section
from kxform.propose.session import SessionOptions, run_kernel
from kxform.propose.template import refactor_tool
from kxform.propose.template_session import TemplateEvaluator
from kxform.runtime.cpu import CpuRuntime
from llm_replies import client, message, tool_use
from template_inputs import template_input  # noqa: F401 - the tests import it from here too

NAIVE = Path(__file__).resolve().parent.parent / "corpora" / "naive"


@dataclass(frozen=True)
class RefactorPass:
    """The pass name the loop records (the template is the whole proposal)."""

    name: str = "refactor"


def reply(data: dict[str, Any]):  # type: ignore[no-untyped-def]
    return message([tool_use(data, name="propose_refactor")])


def session(family: str, replies: list, timing=None, attempts: int = 1, compare=None, placed: bool = True):  # type: ignore[no-untyped-def]
    """A refactoring session on the naive kernel of `family`. `placed=False` leaves out the
    spec's sizes that place buffers misaligned or overlapping (`layout`): for a template
    written for aligned, distinct buffers, which those sizes rightly reject."""
    path = NAIVE / family / "naive.cu"
    kernel = f"{family}_naive"
    model = parse_model(read_source(path))
    hw = load_profile("h100")
    spec = load_spec(NAIVE / family / "naive.kxspec.toml").kernel(kernel)
    if not placed:
        spec = dataclasses.replace(spec, sizes=tuple(s for s in spec.sizes if not s.layout))
    function = next(f for f in model.functions if f.name == kernel)
    signature = model.source.data[function.params_span.start : function.params_span.end].decode()
    tool = refactor_tool(kernel, signature)
    ctx = PassContext(model, hw, RunOptions(arch=hw.arch), RemarkSink())
    context = KernelContext(str(path), kernel, (Section("Source", model.source.text),))
    evaluator = TemplateEvaluator(model, kernel, spec, CpuRuntime(), hw, timing, compare)
    claude, _ = client(replies, retries=0, use_cache=False)
    records: list[dict] = []
    result = run_kernel(
        ctx,
        None,
        RefactorPass(),
        tool,
        context,
        evaluator,
        claude,  # type: ignore[arg-type]
        SessionOptions(attempts, 2),
        records.append,
    )
    return result, evaluator, model, records
