"""`kxform tune --write`: the chosen values become the new defaults in the source.

A parameter reaches the code as a `#define NAME value` (Kernel Tuner's convention and
the tile pass's lifted macros); the value part of each such definition in the file is
replaced, through the edit engine (every other byte kept), and the file is written
atomically. Parameters with no object-like `#define` in the file are reported, not
invented.
"""

from __future__ import annotations

from collections.abc import Mapping

from kxform.engine.edits import Edit, apply_edits
from kxform.engine.params import ParamValue
from kxform.workspace.files import write_atomic
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText


def _text(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def write_defaults(source: SourceText, config: Mapping[str, ParamValue]) -> dict[str, list[str]]:
    """Rewrite the `#define`s of `config`'s parameters; returns what was written and
    which parameters have no definition to rewrite."""
    model = parse_model(source)
    edits = []
    written, missing = [], []
    for name, value in config.items():
        macro = model.macro(name)
        if macro is None or macro.is_function_like or macro.body_span is None:
            missing.append(name)
            continue
        if macro.body.strip() != _text(value):
            edits.append(Edit(macro.body_span.start, macro.body_span.end, _text(value), f"tune: {name}"))
        written.append(f"{name}={_text(value)}")
    if edits:
        result = apply_edits(source, edits)
        write_atomic(source.path, result.data)
    return {"written": written, "no_define": missing}
