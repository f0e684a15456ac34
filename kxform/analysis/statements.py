"""The top-level statements of a block: what a pass that restructures a kernel's body
(the index first, then the guard, then the work) reads it as.

`statements(text)` splits the inside of a block (without its braces) at the `;` and
the closing `}` of its top level, an `if` with its `else` kept together, comments
dropped; `body_statements(model, function)` gives a function body's statements with
their byte offsets in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.frontend.model import Function, SourceModel


@dataclass(frozen=True)
class Statement:
    """One top-level statement: where it starts in the file (a byte offset) and its text."""

    offset: int
    text: str


def statements(text: str) -> list[tuple[int, str]]:
    """Top-level statements of a block's inside, with their offsets (characters of `text`;
    comments dropped)."""
    out, depth, start, i = [], 0, None, 0
    while i < len(text):
        two = text[i : i + 2]
        if two == "//":
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        if two == "/*":
            i = text.find("*/", i) + 2
            continue
        char = text[i]
        if start is None and not char.isspace():
            start = i
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
            if char == "}" and depth == 0 and not re.match(r"\s*else\b", text[i + 1 :]):
                out.append((start, text[start : i + 1].strip()))
                start = None
        elif char == ";" and depth == 0:
            out.append((start, text[start : i + 1].strip()))
            start = None
        i += 1
    if start is not None and text[start:].strip():
        out.append((start, text[start:].strip()))
    return out


def body_text(model: SourceModel, function: Function) -> str:
    """The inside of `function`'s body, without its braces."""
    return model.source.data[function.body.start + 1 : function.body.end - 1].decode("utf-8")


def body_statements(model: SourceModel, function: Function) -> tuple[Statement, ...]:
    """The top-level statements of `function`'s body, each at its byte offset in the file."""
    body = body_text(model, function)
    base = function.body.start + 1
    return tuple(Statement(base + len(body[:at].encode("utf-8")), text) for at, text in statements(body))
