"""Read a model's answer like hostile input: the response, then the tool call, then every value.

In order: the response must be a message that stopped to call the tool (a refusal, a
truncated answer, text instead of a call, a call to another tool or several calls are
rejections); the call's input must be small, match the tool's JSON schema and keep its
reasoning fields short; then every parameter is parsed by its typed `Param` (domain,
type), parameters the chosen pattern does not take must be null, a formula must parse
in kxform's formula language, and the configuration must meet the space's constraints
under the hardware profile. A refused answer is a `BadAnswer`: a stable `kind` and a
one-line reason that goes back to the model. What passes becomes the engine's
`Proposal` (a custom formula as its payload, who asked whom at what cost as its
provenance), still untrusted: the pass's checks (arithmetic safety, bijection), the
compile, verification and measurement come after.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kxform.engine.params import ParamValue
from kxform.engine.pass_api import Proposal, Provenance, Rejection
from kxform.engine.tool_shape import AnswerRejected
from kxform.propose.tools import REASONING_FIELDS, REASONING_LIMIT, Tool

MAX_INPUT_CHARS = 16_000
"""Largest tool input accepted (JSON text): a remap and two paragraphs fit easily."""
ACCEPTED_STOPS = ("tool_use", "end_turn")


@dataclass(frozen=True)
class BadAnswer:
    """Why an answer was not accepted: a stable key and one line for the log and the model."""

    kind: str
    reason: str
    tool_use_id: str | None = None
    tool_input: Any = None

    def rejection(self) -> Rejection:
        """As the engine records a refusal: no proposal (`-`), refused at the `answer` stage."""
        return Rejection("-", "answer", f"{self.kind}: {self.reason}")


@dataclass(frozen=True)
class Answer:
    """An accepted answer: the proposal and the model's own reasoning."""

    proposal: Proposal
    tool_use_id: str
    config: Mapping[str, ParamValue]
    formula: str | None
    last_attempt: str
    expectation: str
    tool_input: Mapping[str, Any]


def read_response(
    body: Mapping[str, Any], tool: Tool, kernel: str, hw: object, provenance: Provenance
) -> Answer | BadAnswer:
    """The answer in `body` (a Messages response in wire format), or why it is rejected."""
    if not isinstance(body, Mapping) or body.get("type") != "message":
        return BadAnswer("not-a-message", "the response is not a Messages API message")
    stop = body.get("stop_reason")
    if stop == "refusal":
        details = body.get("stop_details") if isinstance(body.get("stop_details"), Mapping) else {}
        why = " ".join(str(v) for v in details.values() if isinstance(v, str))[:200] if details else ""
        return BadAnswer("refusal", "the model declined to answer" + (f" ({why})" if why else ""))
    if stop == "max_tokens":
        return BadAnswer(
            "truncated",
            "the answer was cut off at max_tokens before the tool call was complete; keep the reasoning fields short",
        )
    if stop not in ACCEPTED_STOPS:
        return BadAnswer("stop-reason", f"the answer stopped with {str(stop)[:40]!r}, not a tool call")
    content = body.get("content")
    if not isinstance(content, list):
        return BadAnswer("not-a-message", "the response has no content list")
    calls = [b for b in content if isinstance(b, Mapping) and b.get("type") == "tool_use"]
    if not calls:
        return BadAnswer("no-tool-call", f"the answer holds no call of {tool.name}; answer only by calling it")
    if len(calls) > 1:
        return BadAnswer(
            "several-calls",
            f"the answer calls tools {len(calls)} times; call {tool.name} exactly once",
            str(calls[0].get("id", "")),
        )
    call = calls[0]
    use_id = str(call.get("id", ""))
    if call.get("name") != tool.name:
        return BadAnswer("wrong-tool", f"the answer calls {str(call.get('name'))[:40]!r}, not {tool.name}", use_id)
    return read_tool_input(call.get("input"), tool, kernel, hw, provenance, use_id)


def read_tool_input(
    data: Any, tool: Tool, kernel: str, hw: object, provenance: Provenance, use_id: str = ""
) -> Answer | BadAnswer:
    """Validate one tool input against the schema, then kxform's own checks; an accepted
    one becomes a proposal of `tool.pass_name` for `kernel` carrying `provenance`."""

    def reject(kind: str, reason: str) -> BadAnswer:
        return BadAnswer(kind, reason, use_id, data)

    try:
        size = len(json.dumps(data))
    except (TypeError, ValueError):
        return reject("schema", "the tool input is not JSON data")
    if size > MAX_INPUT_CHARS:
        return reject("too-large", f"the tool input is {size} characters of JSON (at most {MAX_INPUT_CHARS})")
    problem = schema_problem(data, tool.schema)
    if problem:
        return reject("schema", problem)
    for name in REASONING_FIELDS:
        if len(data[name]) > REASONING_LIMIT:
            return reject("too-large", f"`{name}` is {len(data[name])} characters (at most {REASONING_LIMIT})")
    if tool.pass_name == "refactor":
        return _template_answer(data, tool, kernel, provenance, use_id)
    try:
        config, formula = tool.pass_.read_answer(data, tool.space, hw)
    except AnswerRejected as exc:
        return reject(exc.kind, exc.reason)
    broken = tool.space.violations(config, hw)
    if broken:
        return reject("constraint", f"the configuration breaks {broken[0].describe()}")
    values = tool.pass_.answer_values(config, formula)  # swizzle: a formula's digest; the text is the payload
    who = provenance.proposer + (f" ({provenance.model})" if provenance.model else "")
    rationale = f"proposed by {who}: " + " ".join(data["expectation"].split())[:300]
    proposal = Proposal.of(tool.pass_name, kernel, values, rationale, provenance, formula)
    return Answer(proposal, use_id, config, formula, data["last_attempt"], data["expectation"], data)


def _template_answer(
    data: Mapping[str, Any], tool: Tool, kernel: str, provenance: Provenance, use_id: str
) -> Answer | BadAnswer:
    """A refactoring's answer: its shape read into a `Template` (the payload); its rules,
    verification and tuning run as the attempt's evaluation (template_session.py)."""
    import hashlib

    from kxform.propose.template import Refusal, read_template

    template = read_template(dict(data), kernel)
    if isinstance(template, Refusal):
        return BadAnswer(template.key, template.message, use_id, data)
    payload = template.payload()
    values: dict[str, ParamValue] = {"template": hashlib.sha256(payload.encode()).hexdigest()[:10]}
    who = provenance.proposer + (f" ({provenance.model})" if provenance.model else "")
    rationale = f"proposed by {who}: " + " ".join(data["expectation"].split())[:300]
    proposal = Proposal.of(tool.pass_name, kernel, values, rationale, provenance, payload)
    return Answer(proposal, use_id, values, None, data["last_attempt"], data["expectation"], data)


def schema_problem(data: Any, schema: Mapping[str, Any]) -> str | None:
    """The first way `data` breaks `schema` (jsonschema, draft 2020-12), or None."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "the input"
    return f"at {where}: {' '.join(error.message.split())[:200]}"
