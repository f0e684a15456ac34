"""One tool per pass, its input schema generated from the pass's typed parameter space.

The model answers by calling the tool (forced, with strict schema adherence), so an
answer is a JSON object, never free text or a file. The schema carries the types and
the small finite domains (enums); ranges, divisibility and resource limits are stated
in the descriptions but checked by kxform (answer.py), never trusted to the schema.
Besides the parameters, every tool takes two reasoning fields: why the last attempt
was slow or rejected, and why this one should be better (forcing a tool call leaves no
room for free text, so the reasoning lives in the answer). What only the pass knows
(its description, nullable parameters, a payload field such as swizzle's `formula`)
comes from the pass itself (`Pass.tool_shape`): no pass is named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kxform.engine.params import Param, ParamSpace
from kxform.engine.pass_api import Pass

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


@dataclass(frozen=True)
class Tool:
    """The tool a pass's proposals are asked through."""

    name: str
    pass_: Pass
    space: ParamSpace
    schema: dict[str, Any]
    description: str
    nullable: frozenset[str]
    """Parameters that may be null (swizzle: those the chosen pattern does not take)."""
    payload: str | None = None
    """The field whose text is the proposal's payload (swizzle: `formula`), or None."""
    payload_help: str = ""

    @property
    def pass_name(self) -> str:
        return self.pass_ if isinstance(self.pass_, str) else self.pass_.name

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


def tool_for(pass_: Pass | str, space: ParamSpace) -> Tool:
    """The tool for `pass_` (an instance, or a registered pass's name) over `space`."""
    if isinstance(pass_, str):
        from kxform.engine.registry import default_registry

        pass_ = default_registry().get(pass_)()
    shape = pass_.tool_shape(space)
    props: dict[str, Any] = {name: {"type": "string", "description": text} for name, text in REASONING_FIELDS.items()}
    props.update({p.name: param_schema(p, p.name in shape.nullable) for p in space.params})
    if shape.payload is not None:
        props[shape.payload] = {"anyOf": [{"type": "string"}, {"type": "null"}], "description": shape.payload_help}
    return Tool(
        f"propose_{pass_.name.replace('-', '_')}",
        pass_,
        space,
        _object(props),
        shape.description,
        shape.nullable,
        shape.payload,
        shape.payload_help,
    )
