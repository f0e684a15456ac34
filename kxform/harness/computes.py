"""What a kernel computes, for the comparison a drafted spec proposes.

A kernel whose every stored value is an element it loaded (a copy, a transpose, a gather,
an embedding) moves data: any correct rewrite gives the same bits, so the draft compares
exactly, and a rewrite that drops or misplaces one element cannot hide in a tolerance. A
kernel that computes with floats gets a small ulp tolerance for what compilers may do to
an unchanged expression (contracting `a * b + c` into one rounding); a rewrite that
reorders its sums is held to the bound it measures itself (docs/trust.md), whatever the
draft says, unless the spec asks for bit-exact outputs. Integer outputs compare exactly.

The reading is syntactic and errs towards arithmetic: a store is data movement only when
its value is a load, a parameter, a literal, or a local assigned only such values, at
most through a cast.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.frontend.lexical import blank_comments_and_strings

_NAME = r"[A-Za-z_]\w*"
_CAST = r"(?:\(\s*(?:const\s+)?[A-Za-z_][\w\s:<>]*\**\s*\)\s*|static_cast\s*<[^>]*>\s*)?"
_DEREF = rf"\*\s*(?:{_NAME}|\(\s*{_NAME}\s*[-+]\s*[\w\s*+-]*\))"
_VALUE = re.compile(
    rf"^\s*{_CAST}\(?\s*(?:{_NAME}(?:\s*\[[^\]]*\])*|{_DEREF}|[-+]?[\d.]+(?:e[-+]?\d+)?[fFuUlL]*)\s*\)?\s*$"
)
_STORE = re.compile(
    rf"(?P<target>{_NAME}\s*\[[^;=]*\]|(?:^|(?<=[;{{}})]))\s*{_DEREF})\s*(?P<op>[-+*/%&|^]|<<|>>)?=(?!=)(?P<value>[^;]*);",
    re.M,
)
_ASSIGN = re.compile(rf"(?<![\w.\]>])(?P<name>{_NAME})\s*(?P<op>[-+*/%&|^]|<<|>>)?=(?!=)(?P<value>[^;,)]*)[;,)]")
_STEP = re.compile(rf"(?:\+\+|--)\s*(?P<pre>{_NAME})|(?P<post>{_NAME})\s*(?:\+\+|--)")


@dataclass(frozen=True)
class Computes:
    """What the kernel's stores hold: `moves` when every one is a loaded element."""

    moves: bool
    arithmetic_line: int = 0
    """The line of the first store whose value is computed (0 when it only moves data)."""


def what_it_computes(body: str, first_line: int) -> Computes:
    """Read the stores of a kernel body (`first_line`: the body's line in its file)."""
    text = blank_comments_and_strings(body)
    computed = {m.group("name") for m in _ASSIGN.finditer(text) if m.group("op") or not _VALUE.match(m.group("value"))}
    computed |= {m.group("pre") or m.group("post") for m in _STEP.finditer(text)}
    for match in _STORE.finditer(text):
        value = match.group("value")
        if match.group("op") or not _VALUE.match(value) or _reads_computed(value, computed):
            return Computes(False, first_line + text.count("\n", 0, match.start()))
    return Computes(True)


def _reads_computed(value: str, computed: set[str]) -> bool:
    """The stored value names a local computed by arithmetic, other than as the base of a
    load (`src[d]` through a pointer computed from an index is still a loaded element)."""
    outside = re.sub(rf"{_NAME}\s*\[[^\]]*\]", "", value)
    return any(name in computed for name in re.findall(_NAME, outside))


def compare_line(computes: Computes, integer_outputs: bool) -> str:
    """The draft's `compare = ...` line with what a reviewer should check."""
    if integer_outputs:
        return 'compare = { mode = "exact" }  # review: the outputs are integers'
    if computes.moves:
        return (
            'compare = { mode = "exact" }  # review: data movement (every stored value is a loaded element), '
            "so any correct rewrite gives the same bits"
        )
    return (
        f'compare = {{ mode = "ulp", ulps = 2 }}  # review: arithmetic on floats (from line {computes.arithmetic_line}); '
        "a rewrite that reorders sums is held to the bound it measures, the spec only if it asks for exact"
    )
