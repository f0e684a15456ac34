"""The edit engine: the only code that changes source bytes.

Edits are clang-style replacements (offset, length, text) on one file's bytes. All edits
of a file are validated together (overlaps are a conflict naming both origins) and
applied in one step; every byte outside the edited ranges is kept. The result must
re-parse with no new syntax errors.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from kxform.errors import CheckFailed, EditConflict
from kxform.frontend.source import SourceText


@dataclass(frozen=True, order=True)
class Edit:
    """Replace bytes [start, end) with `text` (insertion when start == end).

    `origin` says who asked for the edit, for conflict messages and logs
    ("swizzle: gemm: blockIdx.y at 42:17").
    """

    start: int
    end: int
    text: str
    origin: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise ValueError(f"bad edit range [{self.start}, {self.end}) from {self.origin}")

    @property
    def is_insertion(self) -> bool:
        return self.start == self.end


@dataclass(frozen=True)
class EditResult:
    """New bytes plus, for each line of the new text, the original line it came from."""

    data: bytes
    line_map: tuple[int, ...]
    """line_map[i] is the 1-based original line of new line i+1 (inserted lines map to the
    line they were inserted at)."""


def spliced(data: bytes, start: int, end: int, replacements: Iterable[tuple[int, int, str]]) -> str:
    """`data[start:end]` as text with each `(from, to, text)` replacement (file offsets
    inside the range, none overlapping) made: new code a rewrite builds from a piece of the
    file, some of its expressions replaced."""
    out = bytearray(data[start:end])
    for begin, stop, text in sorted(replacements, reverse=True):
        out[begin - start : stop - start] = text.encode("utf-8")
    return out.decode("utf-8")


def _check_conflicts(source: SourceText, edits: list[Edit]) -> None:
    for before, after in zip(edits, edits[1:]):
        overlap = after.start < before.end or (
            after.start == before.start and not (before.is_insertion or after.is_insertion)
        )
        if before.end == after.start == after.end and before.start < before.end:
            overlap = False  # an insertion right after a replacement touches, not overlaps
        if overlap:
            where = source.location(after.start)
            raise EditConflict(
                f"overlapping edits: [{before.origin or 'unnamed'}] and [{after.origin or 'unnamed'}]", where
            )


def apply_edits(source: SourceText, edits: Iterable[Edit]) -> EditResult:
    """Apply all `edits` to `source` at once. Raise EditConflict on overlap.

    Insertions at the same offset keep the order they were given in.
    """
    ordered = sorted(enumerate(edits), key=lambda pair: (pair[1].start, pair[1].end, pair[0]))
    plain = [edit for _, edit in ordered]
    _check_conflicts(source, plain)
    data = source.data
    pieces: list[bytes] = []
    line_map: list[int] = []
    cursor = 0
    for edit in plain:
        kept = data[cursor : edit.start]
        pieces.append(kept)
        _extend_line_map(line_map, source, cursor, kept)
        new = edit.text.encode("utf-8")
        pieces.append(new)
        anchor = source.line_col(edit.start)[0]
        line_map.extend([anchor] * new.count(b"\n"))
        cursor = edit.end
    tail = data[cursor:]
    pieces.append(tail)
    _extend_line_map(line_map, source, cursor, tail)
    line_map.append(source.line_col(len(data))[0])
    return EditResult(b"".join(pieces), tuple(line_map))


def _extend_line_map(line_map: list[int], source: SourceText, start: int, kept: bytes) -> None:
    if not kept:
        return
    first = source.line_col(start)[0]
    line_map.extend(range(first, first + kept.count(b"\n")))


def check_reparse(before_errors: int, after_errors: int, path: str) -> None:
    """Refuse output that parses worse than the input did."""
    if after_errors > before_errors:
        raise CheckFailed(
            "reparse",
            f"rewritten file has {after_errors} syntax error region(s), the original had {before_errors}",
        )


def unified_diff(path: str, old: bytes, new: bytes) -> str:
    """A `diff -u` style patch from `a/path` to `b/path` (empty when nothing changed)."""
    if old == new:
        return ""
    old_lines = old.decode("utf-8").splitlines(keepends=True)
    new_lines = new.decode("utf-8").splitlines(keepends=True)
    lines = difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)
