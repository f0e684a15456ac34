"""Optimization remarks in the style of LLVM's: Passed / Missed / Analysis.

Passes never print; they emit remarks into a sink, and the CLI decides how to show them
(clang style: `file:line:col: remark: message [-Rpass=swizzle]`) and the pass log
stores them. Shown, a remark is one line (`Remark.format`: as wide as the terminal,
`SHORT_LINE` characters elsewhere; a long message keeps its first clause, or its verdict
and its end); the log keeps the whole message and its arguments, and `kxform log show`
prints them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kxform.errors import printable


class RemarkKind(enum.Enum):
    PASSED = "Passed"
    MISSED = "Missed"
    ANALYSIS = "Analysis"

    @property
    def flag(self) -> str:
        return {"Passed": "-Rpass", "Missed": "-Rpass-missed", "Analysis": "-Rpass-analysis"}[self.value]


@dataclass(frozen=True)
class Remark:
    """One remark. `name` is a stable CamelCase identifier (`SwizzleApplied`, `SpinWait`)
    that scripts can match on; `message` is for people; `args` carries the details."""

    kind: RemarkKind
    pass_name: str
    name: str
    path: str
    line: int
    col: int
    function: str | None
    message: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def format(self, full: bool = False, width: int = 0) -> str:
        """clang's remark line; unless `full`, the message is shortened to fit `width`
        characters (a terminal's columns; 0: `SHORT_LINE`)."""
        where = f"{self.path}:{self.line}:{self.col}" if self.line else self.path
        tag = f"[{self.kind.flag}={self.pass_name}]"
        room = (width or SHORT_LINE) - len(where) - len(": remark:  ") - len(tag)
        message = self.message if full else shorten(self.message, max(room, MIN_ROOM))
        return printable(f"{where}: remark: {message} {tag}")

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "pass": self.pass_name,
            "name": self.name,
            "file": self.path,
            "line": self.line,
            "column": self.col,
            "function": self.function,
            "message": self.message,
            "args": dict(self.args),
        }


SHORT_LINE = 160
"""The length a remark line aims for (the location and tag included) where the width
of the terminal is not known (a pipe, a CI log)."""
MIN_ROOM = 100
"""Characters of message a remark keeps however long its location (or narrow the terminal)."""
MIN_TAIL = 20
"""Characters of a cut message's end a remark keeps: the particular reason is there."""


def shorten(message: str, room: int) -> str:
    """`message` within `room` characters: whole if it fits, else its first clause (up
    to a `; ` or `. ` outside parentheses) and ` ...`, cut at a word where it is a little
    too long. A first clause far too long keeps its start (the verdict and what it rests
    on) and its end, where the most particular reason is (`... source file 'g.cu' not
    found`), the middle left out."""
    if len(message) <= room:
        return message
    depth, clause = 0, message
    for i, ch in enumerate(message):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and message.startswith(("; ", ". "), i):
            clause = message[:i]
            break
    if len(clause) + 4 <= room:
        return clause.rstrip(" :;,.(") + " ..."
    more = " ..." if clause != message else ""
    if len(clause) <= room * 3 // 2:  # only its end is left out: the start, as far as it goes
        return _words(clause, room - 4).rstrip(" :;,.(") + " ..."
    tail_room = max(MIN_TAIL, room // 5)
    head = _words(clause, room - tail_room - len(" ... ") - len(more)).rstrip(" :;,.(")
    tail = clause[len(clause) - tail_room :].split(" ", 1)[-1]
    while tail.count(")") > tail.count("(") and tail.endswith(")"):  # its "(" went with the middle
        tail = tail[:-1]
    return f"{head} ... {tail}".rstrip() + more


def _words(text: str, room: int) -> str:
    """`text` cut at the last word boundary within `room` characters ("" when its first
    word is longer)."""
    if len(text) <= room:
        return text
    cut = text[: room + 1]
    return cut.rsplit(" ", 1)[0] if " " in cut else ""


@dataclass(frozen=True)
class RemarkFilter:
    """clang's `-Rpass=REGEX`, `-Rpass-missed=REGEX`, `-Rpass-analysis=REGEX`: with any of
    them given, a remark is shown only when the filter of its kind is given and matches
    its pass name (searched, as clang does); with none, every remark is shown."""

    passed: re.Pattern[str] | None = None
    missed: re.Pattern[str] | None = None
    analysis: re.Pattern[str] | None = None

    def shows(self, remark: Remark) -> bool:
        if self.passed is None and self.missed is None and self.analysis is None:
            return True
        pattern = {RemarkKind.PASSED: self.passed, RemarkKind.MISSED: self.missed, RemarkKind.ANALYSIS: self.analysis}[
            remark.kind
        ]
        return pattern is not None and pattern.search(remark.pass_name) is not None


class RemarkSink:
    """Collects remarks in emission order."""

    def __init__(self) -> None:
        self._remarks: list[Remark] = []

    def emit(self, remark: Remark) -> None:
        self._remarks.append(remark)

    def __iter__(self) -> Iterator[Remark]:
        return iter(self._remarks)

    def __len__(self) -> int:
        return len(self._remarks)

    def for_function(self, function: str) -> list[Remark]:
        return [r for r in self._remarks if r.function == function]
