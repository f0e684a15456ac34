"""`lock`: replay recorded decisions instead of proposing anew.

A record lists, per kernel, the pass instance that was chosen (parameters and, for a
custom remap, its formula) and where it came from. Replaying it gives the same rewrite
without asking anyone again; the proposals are checked, applied and verified like any
other. This is the minimal reader the lockfile format will grow from: JSON

    {"version": 1, "decisions": [{"file": "src/gemm.cu", "kernel": "sgemm", "pass": "swizzle",
      "params": {"pattern": "custom", "formula": "<digest>"}, "payload": "lx = ...", "proposer": "claude",
      "model": "...", "evidence": "predicted", "cost_usd": 0.05, "tokens": 31000}]}

or TOML with `version = 1` and `[[decision]]` tables holding the same keys. The
lockfile (`kxform.lock`, docs/lockfile.md) is this TOML form with more keys per entry:
`outcome` (`applied` or `left-alone`), the `source` and `result` digests of the
kernel's text, the `reason` it was left alone, `hw`, the `kxform` version and measured
`figures`; kxform.propose.lockfile writes it. A record is input: every field is
type-checked and errors name the file, the line (TOML) and the decision; a record of a
newer format or written by a newer kxform is refused.
Replayed proposals carry what the record says: the values (typed through the pass's
space), the payload, and as provenance the model, cost, tokens and evidence that earned
the decision; the proposer is the one replaying it (`lock`), the recorded proposer is
named in the rationale.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from kxform import __version__
from kxform.engine.params import ParamValue
from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal, Provenance, Rejection
from kxform.engine.proposal import Evidence
from kxform.errors import Location, SpecError, UsageError
from kxform.log.remarks import RemarkKind

MAX_RECORD_BYTES = 4 * 1024 * 1024
FORMAT_VERSION = 1
"""The record and lockfile format this kxform reads and writes (`version = 1`)."""
_KEYS = {
    "file",
    "kernel",
    "pass",
    "params",
    "payload",
    "proposer",
    "model",
    "rationale",
    "evidence",
    "cost_usd",
    "tokens",
    "outcome",
    "source",
    "result",
    "reason",
    "hw",
    "kxform",
    "figures",
}
EVIDENCE: tuple[Evidence, ...] = ("rule", "predicted", "measured")
OUTCOMES = ("applied", "left-alone")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_VERSION = re.compile(r"\d+(\.\d+)*")
Figure = float | str


@dataclass(frozen=True)
class Decision:
    """One recorded choice: which pass instance a kernel of a file gets."""

    kernel: str
    pass_name: str
    params: tuple[tuple[str, ParamValue], ...]
    file: str = ""
    payload: str = ""
    proposer: str = ""
    model: str = ""
    rationale: str = ""
    evidence: Evidence = "rule"
    """What the decision rests on: `measured` (timed on a GPU), `predicted`, or a `rule`."""
    cost_usd: float | None = field(default=None, compare=False)
    """What reaching the decision cost (a re-run served from the cache costs nothing, and
    decides the same: cost and tokens are not part of what a decision is)."""
    tokens: int | None = field(default=None, compare=False)
    outcome: str = "applied"
    """`applied` (replay the values) or `left-alone` (the kernel is not rewritten; `reason` says why)."""
    source: str = ""
    """Digest of the kernel's own text when it was decided (`sha256:...`; lockfile entries)."""
    result: str = ""
    """Digest of the kernel's text after the pipeline, when it differs from `source`."""
    reason: str = ""
    hw: str = ""
    """The hardware profile the decision was made for."""
    kxform: str = ""
    """The kxform version that made the decision."""
    figures: tuple[tuple[str, Figure], ...] = ()
    """Measured figures behind the decision (`original_ms`, `rewritten_ms`, ...)."""

    @property
    def key(self) -> tuple[str, str, str]:
        """What a lockfile holds one entry for: file, kernel, pass."""
        return (self.file, self.kernel, self.pass_name)

    def names_file(self, path: str) -> bool:
        """Whether this decision is for `path`. A lockfile entry (one with a `source`
        digest) names its file exactly, relative to the lockfile; a plain record's file
        matches when one of the two paths ends with the other's components, and a record
        without a file matches anywhere."""
        if not self.file:
            return True
        if self.source:
            return PurePath(self.file) == PurePath(path)
        a, b = PurePath(self.file).parts, PurePath(path).parts
        shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
        return longer[len(longer) - len(shorter) :] == shorter

    def matches(self, path: str, kernel: str, pass_name: str) -> bool:
        """Same kernel and pass, and the file names the same path (`names_file`)."""
        return kernel == self.kernel and pass_name == self.pass_name and self.names_file(path)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "file": self.file,
            "kernel": self.kernel,
            "pass": self.pass_name,
            "params": dict(self.params),
        }
        for key in ("payload", "proposer", "model", "rationale", "source", "result", "reason", "hw", "kxform"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        if self.outcome != "applied":
            data["outcome"] = self.outcome
        if self.figures:
            data["figures"] = dict(self.figures)
        data["evidence"] = self.evidence
        for key in ("cost_usd", "tokens"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    def provenance(self, proposer: str) -> Provenance:
        """The provenance of this decision replayed by `proposer`."""
        return Provenance(proposer, self.model or None, self.cost_usd, self.tokens, self.evidence)


def load_decisions(path: str) -> tuple[Decision, ...]:
    """Read a JSON (`.json`) or TOML record (the lockfile included); SpecError naming the
    file, the line where TOML gives one, and the entry."""
    where = Location(path)
    target = Path(path)
    from kxform.frontend.source import read_bytes_bounded

    try:
        raw = read_bytes_bounded(str(target), MAX_RECORD_BYTES, "a decision record")
    except OSError as exc:
        raise SpecError(f"cannot read decision record: {exc.strerror or exc}", where) from None
    if len(raw) > MAX_RECORD_BYTES:
        raise SpecError(f"decision record is {len(raw)} bytes (at most {MAX_RECORD_BYTES})", where)
    is_json = target.suffix == ".json"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError("decision record is not UTF-8 text", where) from None
    data = _parse(text, path, is_json)
    locate = _locator(path, None if is_json else text)
    if not isinstance(data, dict):
        raise SpecError("decision record needs `version = 1`", where)
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise SpecError(
            f"written by a newer kxform: format version {version}, this kxform ({__version__}) reads "
            f"version {FORMAT_VERSION}; upgrade kxform",
            locate(("version",)),
        )
    if version != FORMAT_VERSION:
        raise SpecError("decision record needs `version = 1`", locate(("version",)))
    name = "decisions" if "decisions" in data else "decision"
    entries = data.get(name, [])
    if not isinstance(entries, list):
        raise SpecError(f"`{name}` must be a list of tables", locate((name,)))
    return tuple(
        decision_from(entry, f"decision #{i + 1}", _within(locate, (name, i))) for i, entry in enumerate(entries)
    )


def _within(
    locate: Callable[[tuple[str | int, ...]], Location], prefix: tuple[str | int, ...]
) -> Callable[[tuple[str, ...]], Location]:
    """`locate` for the keys of one entry (`prefix`: where the entry is)."""
    return lambda key: locate((*prefix, *key))


def _parse(text: str, path: str, is_json: bool) -> object:
    if is_json:
        try:
            return json.loads(text)
        except ValueError as exc:
            raise SpecError(f"not a valid JSON decision record: {exc}", Location(path)) from None
    from kxform.harness.spec import _parse_toml

    try:
        return _parse_toml(text, path)
    except SpecError as exc:
        raise SpecError(f"not a valid TOML decision record: {exc.cause}", exc.location) from None


def _locator(path: str, toml_text: str | None) -> Callable[[tuple[str | int, ...]], Location]:
    """Where a key path of the record is: its line in a TOML text, else just the file."""
    from kxform.harness.locate import LineIndex

    index = LineIndex(toml_text) if toml_text is not None else None

    def locate(key: tuple[str | int, ...]) -> Location:
        found = index.find(key) if index is not None else None
        return Location(path, found.line, found.col) if found else Location(path)

    return locate


def decision_from(
    entry: object, where: str, locate: Callable[[tuple[str, ...]], Location | None] = lambda key: None
) -> Decision:
    """One decision from plain data, every field type-checked; `locate` gives the
    position of a key of the entry for messages."""

    def fail(key: str, message: str) -> SpecError:
        return SpecError(f"{where}: {message}", locate((key,) if key else ()))

    if not isinstance(entry, dict):
        raise fail("", "expected a table")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key {unknown[0]!r} (keys: {', '.join(sorted(_KEYS))})")
    for key in ("kernel", "pass"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise fail(key, f"`{key}` must be a non-empty string")
    for key in ("file", "payload", "proposer", "model", "rationale", "reason", "hw", "kxform"):
        if not isinstance(entry.get(key, ""), str):
            raise fail(key, f"`{key}` must be a string")
    params = entry.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, (str, int, bool)) for v in params.values()):
        raise fail("params", "`params` must be a table of strings, integers or booleans")
    evidence = entry.get("evidence", "rule")
    if evidence not in EVIDENCE:
        raise fail("evidence", f"`evidence` must be one of {', '.join(EVIDENCE)}")
    outcome = entry.get("outcome", "applied")
    if outcome not in OUTCOMES:
        raise fail("outcome", f"`outcome` must be one of {', '.join(OUTCOMES)}")
    cost, tokens = entry.get("cost_usd"), entry.get("tokens")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0):
        raise fail("cost_usd", "`cost_usd` must be a non-negative number")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
        raise fail("tokens", "`tokens` must be a non-negative integer")
    for key in ("source", "result"):
        if entry.get(key) and not DIGEST.fullmatch(entry[key]):
            raise fail(key, f"`{key}` must be a digest `sha256:` + 64 hex digits")
    made_by = entry.get("kxform", "")
    if made_by and not _VERSION.fullmatch(made_by):
        raise fail("kxform", "`kxform` must be a version such as 0.1.0")
    if made_by and _newer(made_by, __version__):
        raise fail("kxform", f"written by kxform {made_by}, newer than this kxform ({__version__}); upgrade kxform")
    figures = entry.get("figures", {})
    if not isinstance(figures, dict) or not all(
        isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in figures.values()
    ):
        raise fail("figures", "`figures` must be a table of numbers or strings")
    values = tuple((str(k), v) for k, v in params.items())
    return Decision(
        entry["kernel"],
        entry["pass"],
        values,
        entry.get("file", ""),
        entry.get("payload", ""),
        entry.get("proposer", ""),
        entry.get("model", ""),
        entry.get("rationale", ""),
        evidence,
        None if cost is None else float(cost),
        tokens,
        outcome,
        entry.get("source", ""),
        entry.get("result", ""),
        entry.get("reason", ""),
        entry.get("hw", ""),
        made_by,
        tuple((str(k), v if isinstance(v, str) else float(v)) for k, v in figures.items()),
    )


def _newer(version: str, than: str) -> bool:
    """Whether release `version` is newer than `than` (numeric components compared)."""

    def parts(text: str) -> tuple[int, ...]:
        match = _VERSION.match(text)
        return tuple(int(p) for p in match.group(0).split(".")) if match else ()

    return parts(version) > parts(than)


def write_decisions(path: str, decisions: Sequence[Decision]) -> None:
    """Write a JSON record atomically (what `load_decisions` reads back)."""
    from kxform.workspace.files import write_atomic

    data = {"version": 1, "decisions": [d.to_json() for d in decisions]}
    write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())


class LockProposer:
    """Proposes exactly what the record says for a kernel, nothing for kernels it lacks.

    `name` is who replays: `lock` for a record read from a file; `claude` for the decisions
    the same run's claude session just kept (kxform.cli.propose_args)."""

    def __init__(
        self,
        decisions: Sequence[Decision],
        missing: str = "no recorded decision in the lock record",
        name: str = "lock",
    ) -> None:
        self.decisions = tuple(decisions)
        self.missing = missing
        self.name = name
        self._why: dict[tuple[str, str], tuple[str, str] | None] = {}

    def propose(
        self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, rejected: Sequence[Rejection] = ()
    ) -> list[Proposal]:
        kernel = analysis.kernel
        path = ctx.model.source.path
        for decision in self.decisions:
            if decision.matches(path, kernel.name, pass_.name):
                self._why[(pass_.name, kernel.name)] = left_alone(decision, "the record")
                return replay(decision, pass_, ctx, analysis, self.name)
        ctx.remark(
            RemarkKind.ANALYSIS,
            pass_.name,
            "NoDecision",
            kernel.span.start,
            kernel.name,
            f"{pass_.name}: {self.missing} for '{kernel.name}'; left unchanged",
        )
        self._why[(pass_.name, kernel.name)] = ("NoDecision", self.missing)
        return []

    def why_nothing(self, pass_: Pass, analysis: KernelAnalysis) -> tuple[str, str] | None:
        """Why `propose` offered nothing for the kernel (the driver's "not applied" remark)."""
        return self._why.get((pass_.name, analysis.kernel.name))


def replay(
    decision: Decision, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, proposer: str, origin: str = ""
) -> list[Proposal]:
    """The proposal `decision` records for the kernel (none for a `left-alone` decision:
    `left_alone` says why), replayed by `proposer`; `origin` names the lockfile in the
    rationale ("replayed from kxform.lock: ...")."""
    if decision.outcome == "left-alone":
        return []
    head = f"replayed from {origin}: " if origin else ""
    why = f"{head}recorded decision ({_who(decision)})" + (f": {decision.rationale}" if decision.rationale else "")
    values = _typed(pass_, ctx, analysis, decision.params)
    return [
        Proposal.of(
            pass_.name, analysis.kernel.name, values, why, decision.provenance(proposer), decision.payload or None
        )
    ]


def left_alone(decision: Decision, origin: str) -> tuple[str, str] | None:
    """The remark key and sentence for a `left-alone` decision (None for an applied one)."""
    if decision.outcome != "left-alone":
        return None
    return (
        "LockedLeftAlone",
        f"left alone, as {origin} records ({_who(decision)}): {decision.reason or 'no reason recorded'}",
    )


def _who(decision: Decision) -> str:
    return (decision.proposer or "unknown proposer") + (f", {decision.model}" if decision.model else "")


def _typed(
    pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, params: Sequence[tuple[str, ParamValue]]
) -> dict[str, ParamValue]:
    """Recorded values typed through the pass's space for the kernel (a TOML `"8"` is the
    integer 8). A value the space does not know or refuses stays as recorded: the pass's
    check refuses it with the reason."""
    space = pass_.space(ctx, analysis)
    out: dict[str, ParamValue] = {}
    for name, value in params:
        try:
            out[name] = space.param(name).parse(value) if name in space.names else value
        except UsageError:
            out[name] = value
    return out
