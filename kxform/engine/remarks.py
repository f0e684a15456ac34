"""Optimization remarks in the style of LLVM's: Passed / Missed / Analysis.

Passes never print; they emit remarks into a sink, and the CLI decides how to show them
(clang style: `file:line:col: remark: message [-Rpass=swizzle]`) and the pass log
stores them. On a terminal a remark is one short line (`Remark.format`: its first
clause, under `SHORT_LINE` characters); the log keeps the whole message and its
arguments, and `kxform log show` prints them.
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

    def format(self, full: bool = False) -> str:
        """clang's remark line; unless `full`, the message is shortened to fit `SHORT_LINE`."""
        where = f"{self.path}:{self.line}:{self.col}" if self.line else self.path
        tag = f"[{self.kind.flag}={self.pass_name}]"
        room = SHORT_LINE - len(where) - len(": remark:  ") - len(tag)
        message = self.message if full else shorten(self.message, max(room, 100))
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
"""The length a terminal remark line aims for (the location and tag included)."""


def shorten(message: str, room: int) -> str:
    """`message` within `room` characters: whole if it fits, else its first clause (up
    to a `; ` or `. ` outside parentheses), cut at a word if that is still too long; a
    shortened message ends in `...`."""
    if len(message) <= room:
        return message
    depth, text = 0, message
    for i, ch in enumerate(message):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and message.startswith(("; ", ". "), i):
            text = message[:i]
            break
    if len(text) + 4 > room:
        text = text[: room - 4].rsplit(" ", 1)[0]
    return text.rstrip(" :;,.(") + " ..."


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
