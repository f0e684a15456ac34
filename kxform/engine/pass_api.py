"""The pass interface: what every pass in `passes/` implements, and the records it returns.

A pass is a frozen dataclass: a class-level `name`, typed option fields, and the
methods analyse -> candidates/propose -> check -> edit. Passes never touch files or
print: they read the `PassContext`, return proposals, check records and edits, and
emit remarks into the context's sink. Only the edit engine changes bytes.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kxform.engine.edits import Edit
from kxform.errors import UsageError
from kxform.frontend.model import Function, SourceModel
from kxform.hw import HwProfile
from kxform.log.remarks import Remark, RemarkKind, RemarkSink


@dataclass(frozen=True)
class Proposal:
    """One parameterised instance of a pass for one kernel. Deterministic and LLM
    proposers return this same type; every proposal is untrusted until checked."""

    pass_name: str
    kernel: str
    params: tuple[tuple[str, str], ...]
    rationale: str
    proposer: str = "deterministic"
    measured: bool = False

    @property
    def options(self) -> dict[str, str]:
        return dict(self.params)

    def label(self) -> str:
        inner = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.pass_name}{{{inner}}}" if inner else self.pass_name


@dataclass(frozen=True)
class CheckRecord:
    """The result of one check, as logged: name, passed or not, and what it established."""

    name: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class Blocker:
    """Why a pass must not touch a kernel: a stable key, a sentence, and where."""

    key: str
    message: str
    offset: int


@dataclass(frozen=True)
class KernelAnalysis:
    """What a pass learned about one kernel before proposing anything."""

    kernel: Function
    blockers: tuple[Blocker, ...] = ()
    facts: Mapping[str, Any] = field(default_factory=dict)
    already_applied: bool = False

    @property
    def applicable(self) -> bool:
        return not self.blockers and not self.already_applied


@dataclass(frozen=True)
class RunOptions:
    """Options of one run that passes may read (kernel filter, user pattern, hardware)."""

    kernels: tuple[str, ...] = ()
    arch: str = "sm_90"

    def selects(self, kernel: str) -> bool:
        return not self.kernels or kernel in self.kernels


@dataclass(frozen=True)
class PassContext:
    """Everything a pass may read, passed explicitly (no globals)."""

    model: SourceModel
    hw: HwProfile
    options: RunOptions
    remarks: RemarkSink
    semantic: Any = None  # kxform.frontend.semantic.SemanticInfo | None

    def remark(self, kind: RemarkKind, pass_name: str, name: str, offset: int, function: str | None,
               message: str, **args: Any) -> None:
        line, col = self.model.source.line_col(offset)
        self.remarks.emit(Remark(kind, pass_name, name, self.model.source.path, line, col, function, message, args))


class Pass(abc.ABC):
    """Base class of every pass. Subclasses are frozen dataclasses whose fields are options."""

    name: ClassVar[str]
    description: ClassVar[str]
    requires: ClassVar[tuple[str, ...]] = ()
    """Passes that must run before this one when both are in a pipeline."""

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Pass:
        """Build the pass from string options (a spec or --param), rejecting unknown ones."""
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(options) - names)
        if unknown:
            raise UsageError(f"pass {cls.name}: unknown option {unknown[0]!r} (options: {', '.join(sorted(names))})")
        return cls(**dict(options))  # type: ignore[call-arg]

    def spec(self) -> str:
        """The `name{k=v,...}` spec that parses back to this pass."""
        items = self.spec_items()
        return f"{self.name}{{{','.join(f'{k}={v}' for k, v in items)}}}" if items else self.name

    def spec_items(self) -> list[tuple[str, str]]:
        out = []
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value != f.default and value is not None:
                out.append((f.name, str(value)))
        return out

    @abc.abstractmethod
    def analyse(self, ctx: PassContext) -> dict[str, KernelAnalysis]:
        """Per kernel: can this pass apply, and what it needs to know to propose."""

    @abc.abstractmethod
    def candidates(self, ctx: PassContext, analysis: KernelAnalysis) -> list[Proposal]:
        """Every parameterised instance of this pass that would change the kernel."""

    @abc.abstractmethod
    def default_proposal(self, ctx: PassContext, analysis: KernelAnalysis) -> Proposal | None:
        """The deterministic choice (documented rule); None when the pass has nothing to offer."""

    def missed_reason(self, analysis: KernelAnalysis) -> tuple[str, str]:
        """Remark key and sentence when no proposal was made for an applicable kernel."""
        return ("NoProposal", "the proposer offered nothing for this kernel")

    @abc.abstractmethod
    def check(self, ctx: PassContext, proposal: Proposal) -> list[CheckRecord]:
        """Pre-edit checks of a proposal; raise CheckFailed on the first failure."""

    @abc.abstractmethod
    def edit(self, ctx: PassContext, proposals: Sequence[Proposal]) -> list[Edit]:
        """The byte edits that apply all accepted proposals of one file."""

    def check_result(self, new_model: SourceModel, proposals: Sequence[Proposal]) -> list[CheckRecord]:
        """Checks of the rewritten file itself (after re-parsing it); raise CheckFailed.

        The driver adds the generic ones (re-parse, idempotence); a pass adds what only
        it can know, such as swizzle's coverage of every index read."""
        return []


_SPEC_RE = re.compile(r"^\s*([A-Za-z][\w-]*)\s*(?:\{(.*)\})?\s*$", re.S)


def parse_pass_spec(text: str) -> tuple[str, dict[str, str]]:
    """Parse `name` or `name{k=v,k2=v2}` into the name and its options (order kept)."""
    match = _SPEC_RE.match(text)
    if match is None:
        raise UsageError(f"malformed pass spec {text!r}: expected NAME or NAME{{key=value,...}}")
    name, inner = match.group(1), match.group(2)
    options: dict[str, str] = {}
    if inner and inner.strip():
        for item in inner.split(","):
            key, sep, value = item.partition("=")
            if not sep or not key.strip() or not value.strip():
                raise UsageError(f"malformed option {item.strip()!r} in pass spec {text!r}: expected key=value")
            if key.strip() in options:
                raise UsageError(f"option {key.strip()!r} given twice in pass spec {text!r}")
            options[key.strip()] = value.strip()
    return name, options


def split_pipeline(text: str) -> list[str]:
    """Split `a,b{x=1,y=2},c` at top-level commas (commas inside braces stay)."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    if depth != 0:
        raise UsageError(f"unbalanced braces in pass list {text!r}")
    return [p.strip() for p in parts if p.strip()]


class Outcome(enum.Enum):
    APPLIED = "applied"
    MISSED = "missed"  # not applicable or refused, with reasons
    UNCHANGED = "unchanged"  # already transformed
    FAILED = "failed"  # a check failed after proposing
    SKIPPED = "skipped"  # filtered out (--kernel)


@dataclass(frozen=True)
class KernelResult:
    """What happened to one kernel in one pass: frozen and picklable, for logs and reports."""

    path: str
    kernel: str
    pass_name: str
    outcome: Outcome
    line: int
    reasons: tuple[str, ...] = ()
    proposal: Proposal | None = None
    checks: tuple[CheckRecord, ...] = ()
    stage: str = ""
