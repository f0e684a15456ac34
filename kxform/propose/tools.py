"""One tool per pass, its input schema generated from the pass's typed parameter space.

The model answers by calling the tool (forced, with strict schema adherence), so an
answer is a JSON object, never free text or a file. The schema carries the types and
the small finite domains (enums); ranges, divisibility and resource limits are stated
in the descriptions but checked by kxform (answer.py), never trusted to the schema.
Besides the parameters, every tool takes two reasoning fields: why the last attempt
was slow or rejected, and why this one should be better (forcing a tool call leaves no
room for free text, so the reasoning lives in the answer). Swizzle's tool also takes
`formula`: a custom remap in kxform's formula language, used with `pattern = custom`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kxform.engine.params import Param, ParamSpace
from kxform.passes.swizzle.swizzle import CUSTOM

REASONING_LIMIT = 2000
"""Characters per reasoning field (longer answers are rejected, and told so)."""
ENUM_LIMIT = 64
"""Integer domains up to this size become an enum in the schema; larger ones a plain
integer whose range kxform checks."""

REASONING_FIELDS: dict[str, str] = {
    "last_attempt": "Why the last attempt was slow or was rejected, from the figures and reasons kxform returned "
                    "(on the first attempt: what the memory-access analysis suggests). At most "
                    f"{REASONING_LIMIT} characters.",
    "expectation": "Why this proposal should beat the best verified result so far: which blocks run together "
                   f"and which data they share in L2. At most {REASONING_LIMIT} characters.",
}

FORMULA_HELP = (
    "A custom remap (only with pattern = custom; null otherwise), in kxform's formula language, not C: "
    "statements `name = expr` separated by new lines or `;`, assigning `lx` and `ly`, the logical tile of "
    "physical block (bx, by) in a gx x gy grid. Inputs: bx, by, gx, gy, pid (= by*gx + bx), total (= gx*gy). "
    "Operators: + - * / % << >> & | ^ ~ ! < <= > >= == != && || and c ? a : b; functions min(a, b), max(a, b), "
    "select(c, a, b). Integer constants only. Unsigned 32-bit values: a subtraction below zero, a result of 2^32 "
    "or more, a division or modulo by zero or a shift by 32 or more at any grid shape rejects the formula. It must "
    "be a bijection on every grid CUDA allows (gx < 2^31, gy <= 65535, gx*gy < 2^32): an SMT solver proves it, "
    "and a step that wraps at any such grid (8 * gx, for one) is refused: guard it, as in "
    "gx <= 536870911 ? 8 * gx : 4294967295. No comments, no C, at most 2000 characters and 24 statements.")


@dataclass(frozen=True)
class Tool:
    """The tool a pass's proposals are asked through."""

    name: str
    pass_name: str
    space: ParamSpace
    schema: dict[str, Any]
    description: str
    nullable: frozenset[str]
    """Parameters that may be null (swizzle: those the chosen pattern does not take)."""
    formula: bool

    def to_param(self) -> dict[str, Any]:
        """The `tools` entry of a Messages request."""
        return {"name": self.name, "description": self.description, "input_schema": self.schema, "strict": True}

    def choice(self) -> dict[str, Any]:
        """`tool_choice` forcing this tool."""
        return {"type": "tool", "name": self.name}


def param_schema(param: Param, nullable: bool) -> dict[str, Any]:
    """The JSON schema of one typed parameter; its domain also in words."""
    schema: dict[str, Any]
    if param.kind == "bool":
        schema = {"type": "boolean"}
    elif param.kind == "enum":
        schema = {"type": "string", "enum": [str(v) for v in param.values]}
    else:
        schema = {"type": "integer"}
        if len(param.values) <= ENUM_LIMIT:
            schema["enum"] = [int(v) for v in param.values]
    words = f"{param.doc}. " if param.doc else ""
    words += f"One of {param.describe_values()} (checked by kxform)."
    if nullable:
        return {"anyOf": [schema, {"type": "null"}], "description": words + " Null when it does not apply."}
    return {**schema, "description": words}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def tool_for(pass_name: str, space: ParamSpace) -> Tool:
    """The tool for `pass_name` over `space` (swizzle adds the formula and pattern help)."""
    reasoning = {name: {"type": "string", "description": text} for name, text in REASONING_FIELDS.items()}
    if pass_name == "swizzle":
        nullable = frozenset(p.name for p in space.params if p.name != "pattern")
        props = {**reasoning, **{p.name: param_schema(p, p.name in nullable) for p in space.params},
                 "formula": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": FORMULA_HELP}}
        return Tool(f"propose_{pass_name}", pass_name, space, _object(props), _swizzle_description(space), nullable,
                    True)
    props = {**reasoning, **{p.name: param_schema(p, False) for p in space.params}}
    constraints = "; ".join(c.describe() for c in space.constraints)
    description = (f"Propose one configuration of the `{pass_name}` pass for this kernel. Every parameter is "
                   "required." + (f" Constraints kxform checks: {constraints}." if constraints else ""))
    return Tool(f"propose_{pass_name.replace('-', '_')}", pass_name, space, _object(props), description, frozenset(),
                False)


def _swizzle_description(space: ParamSpace) -> str:
    from kxform.passes.swizzle.patterns import get_pattern

    lines = ["Propose one block-index remap (swizzle) for this kernel: a library pattern with its parameters, or "
             "pattern = custom with a formula. Parameters a pattern does not take must be null. Patterns:"]
    for name in space.param("pattern").values:
        if name == CUSTOM:
            lines.append("- custom: your own remap, written in `formula`")
            continue
        pattern = get_pattern(str(name))
        takes = ", ".join(p.name for p in pattern.params) or "no parameters"
        lines.append(f"- {name}: {pattern.summary} (takes {takes})")
    return "\n".join(lines)
