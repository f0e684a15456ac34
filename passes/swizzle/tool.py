"""The swizzle pass's proposal tool: a library pattern with its parameters, or a custom
remap written in kxform's formula language (the `formula` field, the proposal's payload).

Parameters the chosen pattern does not take must be null; `custom` takes only its
formula, which must parse (its arithmetic safety and bijection are the pass's checks,
later). These are the swizzle-only parts of `Pass.tool_shape` and `Pass.read_answer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kxform.engine.params import ParamSpace, ParamValue
from kxform.engine.tool_shape import AnswerRejected, ToolShape
from kxform.errors import UsageError

FORMULA = "formula"

FORMULA_HELP = (
    "A custom remap (only with pattern = custom; null otherwise), in kxform's formula language, not C: "
    "statements `name = expr` separated by new lines or `;`, assigning `lx` and `ly`, the logical tile of "
    "physical block (bx, by) in a gx x gy grid. Inputs: bx, by, gx, gy, pid (= by*gx + bx), total (= gx*gy). "
    "Operators: + - * / % << >> & | ^ ~ ! < <= > >= == != && || and c ? a : b; functions min(a, b), max(a, b), "
    "select(c, a, b). Integer constants only. Unsigned 32-bit values: a subtraction below zero, a result of 2^32 "
    "or more, a division or modulo by zero or a shift by 32 or more at any grid shape rejects the formula. It must "
    "be a bijection on every grid CUDA allows (gx < 2^31, gy <= 65535, gx*gy < 2^32): an SMT solver proves it, "
    "and a step that wraps at any such grid (8 * gx, for one) is refused: guard it, as in "
    "gx <= 536870911 ? 8 * gx : 4294967295. No comments, no C, at most 2000 characters and 24 statements."
)


def tool_shape(space: ParamSpace) -> ToolShape:
    from kxform.passes.swizzle.patterns import get_pattern
    from kxform.passes.swizzle.swizzle import CUSTOM

    lines = [
        "Propose one block-index remap (swizzle) for this kernel: a library pattern with its parameters, or "
        "pattern = custom with a formula. Parameters a pattern does not take must be null. Patterns:"
    ]
    for name in space.param("pattern").values:
        if name == CUSTOM:
            lines.append("- custom: your own remap, written in `formula`")
            continue
        pattern = get_pattern(str(name))
        takes = ", ".join(p.name for p in pattern.params) or "no parameters"
        lines.append(f"- {name}: {pattern.summary} (takes {takes})")
    nullable = frozenset(p.name for p in space.params if p.name != "pattern")
    return ToolShape("\n".join(lines), nullable, FORMULA, FORMULA_HELP)


def read_answer(data: Mapping[str, Any], space: ParamSpace, hw: object) -> tuple[dict[str, ParamValue], str | None]:
    from kxform.passes.swizzle.formula import FormulaError, parse_formula
    from kxform.passes.swizzle.swizzle import CUSTOM, pattern_params

    pattern = str(_parse(space, "pattern", data["pattern"]))
    formula = data.get(FORMULA)
    takes = pattern_params(pattern)
    nullable = [p.name for p in space.params if p.name != "pattern"]
    stray = [n for n in nullable if n not in takes and data.get(n) is not None]
    if stray:
        what = "takes only its formula" if pattern == CUSTOM else f"takes {', '.join(takes) or 'no parameters'}"
        raise AnswerRejected("parameter", f"`{stray[0]}` must be null: pattern {pattern} {what}")
    if pattern == CUSTOM:
        if not isinstance(formula, str) or not formula.strip():
            raise AnswerRejected("formula-missing", "pattern custom needs a formula")
        try:
            parse_formula(formula)
        except FormulaError as exc:
            raise AnswerRejected(f"formula-{exc.kind}", str(exc)) from None
        return {"pattern": CUSTOM}, formula
    if formula is not None:
        raise AnswerRejected("parameter", f"`formula` must be null with pattern {pattern} (use pattern = custom)")
    config: dict[str, ParamValue] = {"pattern": pattern}
    for name in takes:
        value = data.get(name)
        default = getattr(hw, "xcds", None) if name == "xcds" else None
        config[name] = _parse(
            space, name, value if value is not None else (default if default is not None else space.param(name).default)
        )
    return config, None


def _parse(space: ParamSpace, name: str, value: Any) -> ParamValue:
    try:
        return space.param(name).parse(value)
    except UsageError as exc:
        raise AnswerRejected("parameter", exc.cause) from None
