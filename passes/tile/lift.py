"""The edits that lift a kernel's tile sizes into parameters and set them to a configuration.

A macro is wrapped in an include guard of its own name, so a build can override it
(`-DTILE=32`) and every launch, which already spells the macro, stays consistent:

    #ifndef TILE
    #define TILE 16
    #endif

A file-scope `constexpr` is already a named parameter: it is left as it is at the
original value, and its initializer is set at another. At the original values the
rewrite adds the guards and nothing else; at another configuration it also replaces
each literal value (and only that literal).

The guard wraps the definition's own lines only, so it nests inside whatever
conditional block holds the definition (`#if A / #define TILE 16 / #else ...`), and
never lands before a UTF-8 byte order mark.
"""

from __future__ import annotations

import re

from kxform.engine.edits import Edit
from kxform.engine.params import Config
from kxform.frontend.model import SourceModel
from kxform.passes.tile.quantities import Quantity, Tiling

_LITERAL = re.compile(r"\d+[uUlL]*")


def lift_edits(model: SourceModel, tiling: Tiling, config: Config) -> list[Edit]:
    source = model.source
    newline = source.newline
    edits: list[Edit] = []
    for quantity in tiling.quantities:
        definition = quantity.definition
        origin = f"tile: {tiling.kernel.name}: {quantity.name}"
        if quantity.kind == "macro" and not quantity.guarded:
            start = source.insertion_point(definition.span.start)  # after a byte order mark
            end = definition.span.end if source.data[definition.span.end - 1 : definition.span.end] == b"\n" else None
            close = f"#endif{newline}" if end is not None else f"{newline}#endif"
            edits.append(Edit(start, start, f"#ifndef {quantity.name}{newline}", f"{origin}: guard"))
            edits.append(
                Edit(
                    end if end is not None else definition.span.end,
                    end if end is not None else definition.span.end,
                    close,
                    f"{origin}: guard end",
                )
            )
        value = int(config.get(quantity.name, quantity.value))
        if value != quantity.value:
            edits.append(_value_edit(model, quantity, value, origin))
    return edits


def _value_edit(model: SourceModel, quantity: Quantity, value: int, origin: str) -> Edit:
    span = quantity.definition.value_span
    text = model.source.data[span.start : span.end].decode("utf-8")
    match = _LITERAL.search(text)
    assert match is not None, f"{quantity.name}: no literal in {text!r}"  # quantities are literal-valued
    start = span.start + len(text[: match.start()].encode("utf-8"))
    end = span.start + len(text[: match.end()].encode("utf-8"))
    return Edit(start, end, str(value), f"{origin}: {quantity.value} -> {value}")
