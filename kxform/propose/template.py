"""A model-written refactoring: one kernel's definition as a template over named integer
parameters, its launch as expressions, and the space of those parameters.

The `refactor` tool's input carries the new definition (`code`, the kernel's name and
signature unchanged, parameters used as plain identifiers), the launch geometry (`grid`,
`block`: expressions in kxform's expression language over the kernel's scalar
parameters, the problem's sizes, and the template's parameters), the parameters with
their finite integer values, the constraints (kxform's logic expressions), optionally
the configuration that reproduces the original, and the two reasoning fields. This
module only turns the JSON into a typed `Template` (or a `Refusal`); whether it may run
is `template_rules`, whether it is right is `template_verify`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kxform.engine.params import Constraint, Param, ParamSpace, ParamValue, UnknownName
from kxform.errors import SpecError
from kxform.propose.tools import REASONING_FIELDS, Tool

PASS_NAME = "refactor"
TOOL_NAME = "propose_refactor"


@dataclass(frozen=True)
class Refusal:
    """Why a template is not accepted: a stable key and one line (for the log and the model)."""

    key: str
    message: str


@dataclass(frozen=True)
class Template:
    """A parsed answer, still untrusted: nothing in it has been checked but its shape."""

    kernel: str
    code: str
    params: tuple[tuple[str, tuple[int, ...]], ...]
    constraints: tuple[str, ...]
    grid: tuple[str, ...]
    block: tuple[str, ...]
    original: tuple[tuple[str, int], ...] | None
    """The configuration the model says reproduces the original (checked, never trusted)."""

    def space(self) -> ParamSpace:
        """The typed space (raises SpecError on a malformed parameter or constraint); each
        default is the parameter's original value when the template states one."""
        start = dict(self.original or ())
        params = tuple(
            Param.ints(
                name,
                values,
                start.get(name, min(values)) if start.get(name) in values else min(values),
                doc="template parameter",
            )
            for name, values in self.params
        )
        constraints = tuple(Constraint.parse(text, "stated by the template") for text in self.constraints)
        return ParamSpace(params, constraints)

    def payload(self) -> str:
        """The template as canonical JSON: what a proposal carries and a lockfile records."""
        return json.dumps(
            {
                "kernel": self.kernel,
                "code": self.code,
                "params": {n: list(v) for n, v in self.params},
                "constraints": list(self.constraints),
                "grid": list(self.grid),
                "block": list(self.block),
                "original": dict(self.original) if self.original is not None else None,
            },
            sort_keys=True,
        )

    @classmethod
    def from_payload(cls, text: str) -> Template:
        data = json.loads(text)
        original = data.get("original")
        return cls(
            data["kernel"],
            data["code"],
            tuple((n, tuple(v)) for n, v in data["params"].items()),
            tuple(data["constraints"]),
            tuple(data["grid"]),
            tuple(data["block"]),
            tuple(original.items()) if original is not None else None,
        )


CODE_HELP = (
    "The kernel's complete new definition, CUDA C++: the same name and the same parameter list, written as a "
    "template over the integer parameters you declare in `params` (use each as a plain identifier: kxform defines "
    "it as a constant before the definition). Only this one definition: no #include, #define, other functions, "
    "globals, host code, asm, printf; calls only to the device functions the original reaches and CUDA's "
    "documented intrinsics (math, warp shuffles and votes, __syncthreads, __ldg, make_<vector>)."
)
LAUNCH_HELP = (
    "Launch dimensions (1 to 3, x first) as expressions in kxform's expression language (+ - * / % // "
    "ceil_div(a, b) min max, integers) over the kernel's scalar parameters (its problem sizes) and your parameters."
)


def refactor_tool(kernel: str, signature: str) -> Tool:
    """The strict tool a refactoring is asked through (its space is the template's own)."""
    reasoning = {name: {"type": "string", "description": text} for name, text in REASONING_FIELDS.items()}
    dims = {"type": "array", "items": {"type": "string"}, "description": LAUNCH_HELP}
    param = {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "values"],
        "properties": {
            "name": {"type": "string", "description": "An upper-case identifier new to the file."},
            "values": {
                "type": "array",
                "items": {"type": "integer"},
                "description": "Every value the tuner may try (1 to 16 positive integers).",
            },
            "original": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "description": "The value at which the template does what the original "
                "does, block for block; null if none does.",
            },
        },
    }
    props = {
        **reasoning,
        "code": {"type": "string", "description": CODE_HELP},
        "params": {"type": "array", "items": param, "description": "The template's parameters (at most 4)."},
        "constraints": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Conditions every configuration must meet, kxform's logic expressions "
            "over the parameters and hw.* fields (`BLOCK % 32 == 0`).",
        },
        "grid": dims,
        "block": dims,
    }
    schema = {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}
    description = (
        f"Propose a refactoring of `{kernel}`: a new definition of it as a template over integer "
        f"parameters, its launch and its parameter space. The signature stays `{signature}`. kxform "
        "validates it, verifies it against the original on a covering sample of configurations at every "
        "check size, then tunes the space."
    )
    return Tool(TOOL_NAME, PASS_NAME, ParamSpace(()), schema, description, frozenset(), False)


def read_template(data: dict[str, Any], kernel: str) -> Template | Refusal:
    """The typed template of a schema-valid tool input (shape only; values are judged later)."""
    names = [p["name"] for p in data["params"]]
    if len(set(names)) != len(names):
        return Refusal("param-name", f"parameter names repeat: {', '.join(names)}")
    originals = [p.get("original") for p in data["params"]]
    if any(v is None for v in originals) and any(v is not None for v in originals):
        return Refusal("original", "give every parameter's original value, or none")
    original = None if not names or originals[0] is None else tuple(zip(names, (int(v) for v in originals)))
    for p in data["params"]:
        if not p["values"]:
            return Refusal("space-unbounded", f"parameter `{p['name']}` has no values")
    params = tuple((p["name"], tuple(sorted(set(int(v) for v in p["values"])))) for p in data["params"])
    return Template(
        kernel, data["code"], params, tuple(data["constraints"]), tuple(data["grid"]), tuple(data["block"]), original
    )


def typed_space(template: Template) -> ParamSpace | Refusal:
    try:
        return template.space()
    except UnknownName as exc:
        return Refusal("constraint-name", exc.cause)
    except SpecError as exc:
        return Refusal("space-type", exc.cause)


def config_label(config: dict[str, ParamValue]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "no parameters"
