"""`refactor`: a kernel's definition replaced by a template over integer parameters at
one configuration (a model's refactoring: kxform/propose/template.py), each launch of it
given the template's grid and block.

The pass has no rule of its own, so its default proposes nothing: a template comes from
a model (tools/refactor_session.py, `kxform apply --pass refactor --proposer claude`) or
from a lock that recorded one (`--proposer lock --lock kxform.lock`). The proposal is
`refactor{template=<digest>,NAME=value,...}` with the template (canonical JSON) as its
payload. Everything in it is input, a lock entry as much as an answer: the check runs
the template's rules (template_rules, the same as for an answer), confirms that the
digest names the payload and that the values are a valid point of the template's space,
and, where the harness spec beside the file is found, that its check sizes can show an
edge error and an error between blocks at that point (else "could not tell", refused).
The edit is template_session's rewrite. The verification is required (nothing
unverified is written) and runs the template's launch at the recorded configuration,
bit-exact unless the original sums floats in a loop (template_verify.comparison).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kxform.engine.edits import Edit
from kxform.engine.params import ParamValue
from kxform.engine.pass_api import (
    CheckRecord,
    KernelAnalysis,
    Pass,
    PassContext,
    Proposal,
)
from kxform.engine.policy import VerifyPolicy
from kxform.errors import CheckFailed, KxformError
from kxform.frontend.model import SourceModel
from kxform.propose.template import Template, config_label
from kxform.propose.template_rules import Original, validate
from kxform.propose.template_session import rewrite_edits
from kxform.propose.template_verify import (
    blocks_problem,
    comparison,
    launch_of,
    ragged_problem,
)

DIGEST_KEY = "template"
"""The proposal value naming the payload (the first 10 hex digits of its SHA-256)."""

NO_TEMPLATE = (
    "a refactoring comes only from a model (--proposer claude, tools/refactor_session.py) or from a lock "
    "that records one (--proposer lock --lock kxform.lock); none was given for this kernel"
)


def template_digest(template: Template) -> str:
    return hashlib.sha256(template.payload().encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Refactor(Pass):
    name = "refactor"
    description = (
        "replace a kernel by a template over integer parameters at one configuration, from a model or a "
        "lock (no rule of its own); verified at that configuration before it is written"
    )
    falls_back = False

    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        return {k.name: KernelAnalysis(k) for k in ctx.model.kernels}

    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        return []

    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        return None

    def missed_reason(self, analysis: KernelAnalysis, ctx: PassContext | None = None) -> tuple[str, str]:
        return ("NoTemplate", NO_TEMPLATE)

    def describe(self, ctx: PassContext, analysis: KernelAnalysis) -> dict[str, Any]:
        return {"status": "needs a template", "reasons": [NO_TEMPLATE]}

    # -- check, edit, verify ------------------------------------------------------------

    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        template, config = read_proposal(proposal)
        refusal = validate(template, Original.of(ctx.model, template.kernel, ctx.hw))
        if refusal is not None:
            raise CheckFailed("template", f"{refusal.key}: {refusal.message}", key="TemplateRefused")
        space = template.space()
        if not space.is_valid(config, ctx.hw):
            broken = space.violations(config, ctx.hw)
            domains = ", ".join(f"{p.name}: {list(p.values)}" for p in space.params)
            why = f"breaks {broken[0].describe()}" if broken else f"is not a point of the template's space ({domains})"
            raise CheckFailed("configuration", f"{config_label(config)} {why}", key="TemplateRefused")
        records = [
            CheckRecord("template", True, f"the template's rules hold; digest {template_digest(template)}"),
            CheckRecord("configuration", True, f"{config_label(config)} is a valid point of its space"),
        ]
        return records + _sizes_can_tell(ctx, template, config)

    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        edits: list[Edit] = []
        for proposal in proposals:
            template, config = read_proposal(proposal)
            edits.extend(rewrite_edits(ctx.model, template, config))
        return edits

    def verify_policy(self, ctx: PassContext, proposal: Proposal, rewritten: SourceModel) -> VerifyPolicy:
        """The template's launch at the recorded configuration; exact unless the original
        sums floats in a loop; required: a rewrite no differential run confirmed is refused."""
        template, config = read_proposal(proposal)
        function = Original.of(ctx.model, template.kernel, ctx.hw).kernel
        return VerifyPolicy(launch_of(template, config), comparison(ctx.model, function, ctx.hw), required=True)


def read_proposal(proposal: Proposal) -> tuple[Template, dict[str, ParamValue]]:
    """The template a proposal carries and its configuration; CheckFailed naming what is
    malformed (no payload, not a template, a digest that names another, another kernel)."""
    if not proposal.payload:
        raise CheckFailed("template", "the proposal carries no template (payload)", key="TemplateRefused")
    try:
        template = Template.from_payload(proposal.payload)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckFailed(
            "template", f"the payload is not a template: {type(exc).__name__}: {exc}", key="TemplateRefused"
        ) from None
    wrong = _shape_problem(template)
    if wrong:
        raise CheckFailed("template", f"the payload is not a template: {wrong}", key="TemplateRefused")
    options = proposal.options
    named = options.get(DIGEST_KEY)
    if named != template_digest(template):
        raise CheckFailed(
            "template",
            f"`{DIGEST_KEY}={named}` does not name the payload (its digest is {template_digest(template)})",
            key="TemplateRefused",
        )
    if template.kernel != proposal.kernel:
        raise CheckFailed(
            "template", f"the template is for '{template.kernel}', not '{proposal.kernel}'", key="TemplateRefused"
        )
    config = {k: v for k, v in options.items() if k != DIGEST_KEY}
    wrong = next((k for k, v in config.items() if isinstance(v, bool) or not isinstance(v, int)), None)
    if wrong is not None:
        raise CheckFailed(
            "configuration", f"`{wrong}` must be an integer, not {json.dumps(config[wrong])}", key="TemplateRefused"
        )
    return template, config


def _shape_problem(template: Template) -> str:
    """What in a payload has the wrong type (the rules judge the values), or ""."""
    texts = {
        "kernel": (template.kernel,),
        "code": (template.code,),
        "grid": template.grid,
        "block": template.block,
        "constraints": template.constraints,
        "params": tuple(n for n, _ in template.params),
    }
    for key, items in texts.items():
        if not all(isinstance(t, str) for t in items):
            return f"`{key}` must hold strings"
    values = [v for _, vs in template.params for v in vs] + [v for _, v in template.original or ()]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "parameter values must be integers"
    return ""


def _sizes_can_tell(ctx: PassContext, template: Template, config: dict[str, ParamValue]) -> list[CheckRecord]:
    """Whether the harness spec beside the file can show an edge or between-block error at
    `config` (template_verify's rules, for this one point). Without a spec here the
    required verification decides (a spec elsewhere, or none: then nothing is written)."""
    from kxform.verify.stage import spec_for_file

    try:
        file_spec = spec_for_file(ctx.model.source.path)
    except KxformError:
        file_spec = None
    spec = file_spec.find(template.kernel) if file_spec is not None else None
    if spec is None:
        return []
    point = Template(
        template.kernel,
        template.code,
        tuple((k, (int(v),)) for k, v in config.items()),
        template.constraints,
        template.grid,
        template.block,
        None,
    )
    refusal = ragged_problem(spec, point) or blocks_problem(spec, template, [config])
    if refusal is not None:
        raise CheckFailed("sizes", f"{refusal.key}: {refusal.message}", key="TemplateCouldNotTell")
    return [
        CheckRecord(
            "sizes",
            True,
            f"check sizes {', '.join(s.name for s in spec.check_sizes)} are ragged and "
            f"launch several blocks per dimension at {config_label(config)}",
        )
    ]


PASS = Refactor
