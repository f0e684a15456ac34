"""Optimization remarks in the style of LLVM's: Passed / Missed / Analysis.

Passes never print; they emit remarks into a sink, and the CLI decides how to show them
(clang style: `file:line:col: remark: message [-Rpass=swizzle]`) and the pass log
stores them.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


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

    def format(self) -> str:
        where = f"{self.path}:{self.line}:{self.col}" if self.line else self.path
        return f"{where}: remark: {self.message} [{self.kind.flag}={self.pass_name}]"

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
