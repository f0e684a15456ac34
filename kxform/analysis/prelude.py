"""The declarations a kernel writes between its thread index and its bounds guard.

Real kernels declare their constants there (`float eps = 1e-5f;`, `const int lda = K;`)
and values of the index (`int t = idx % T;`). A pass that rebuilds the body around the
guard (vectorize's lanes, smem-tile's tiles) keeps them: those that read no index (nor a
name that does) once per thread, before anything else; those that do, per index, where
the index is set. A declaration that reads memory, assigns, or reads a thread or block
index is not such a declaration: the pass refuses it with its line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_DECLARATION_RE = re.compile(
    r"^(?:const\s+|constexpr\s+)*(?:unsigned\s+|signed\s+|long\s+)*[A-Za-z_]\w*\s+(?P<var>[A-Za-z_]\w*)\s*="
    r"(?P<init>[^;]*);$",
    re.S,
)
THREAD_BUILTINS_RE = re.compile(r"\b(?:threadIdx|blockIdx|blockDim|gridDim|warpSize)\b")
_ASSIGNS_RE = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--")


@dataclass(frozen=True)
class Prelude:
    """The declarations before the guard, split; and where the statements after them start."""

    once: tuple[str, ...]
    """Read no index: kept once per thread."""
    per_index: tuple[str, ...]
    """Read an index, or a name declared from one: per index, where it is set."""
    rest: int
    """The position, in the statements given, of the first that is no such declaration."""
    refused: tuple[str, int] | None = None
    """(why, the statement's offset) of a declaration that cannot stand there."""


def split_prelude(statements: Sequence[tuple[int, str]], indices: Iterable[str]) -> Prelude:
    """`statements` (offset, text) from just after the index declarations: the leading
    declarations, split by whether they read one of `indices`. A statement reading a thread
    or block index (a second index) ends them, as any other statement does."""
    once: list[str] = []
    per_index: list[str] = []
    dependent = set(indices)
    for position, (at, text) in enumerate(statements):
        found = _DECLARATION_RE.match(text)
        if found is None or THREAD_BUILTINS_RE.search(text):
            return Prelude(tuple(once), tuple(per_index), position)
        init = found.group("init")
        why = "reads memory" if "[" in init or "->" in init else "assigns" if _ASSIGNS_RE.search(init) else None
        if why is not None:
            return Prelude(
                tuple(once),
                tuple(per_index),
                position,
                (f"the declaration of `{found.group('var')}` before the bounds guard {why}", at),
            )
        if set(re.findall(r"[A-Za-z_]\w*", init)) & dependent:
            dependent.add(found.group("var"))
            per_index.append(text)
        else:
            once.append(text)
    return Prelude(tuple(once), tuple(per_index), len(statements))


def leading_statements(text: str, start: int) -> list[tuple[int, str]]:
    """The `;`-terminated statements of `text` from `start` that are not blocks or control
    statements (comments skipped), up to the first that is: what `split_prelude` reads."""
    out: list[tuple[int, str]] = []
    i = start
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        if text.startswith("/*", i):
            i = text.find("*/", i) + 2
            continue
        if i >= len(text) or re.match(r"(?:if|for|while|do|switch|return)\b|\{", text[i:]):
            return out
        depth, end = 0, None
        for j in range(i, len(text)):
            depth += text[j] in "([{"
            depth -= text[j] in ")]}"
            if text[j] == ";" and depth == 0:
                end = j
                break
            if depth < 0:
                return out
        if end is None:
            return out
        out.append((i, text[i : end + 1].strip()))
        i = end + 1
