"""`lock`: replay recorded decisions instead of proposing anew.

A record lists, per kernel, the pass instance that was chosen (parameters and, for a
custom remap, its formula) and where it came from. Replaying it gives the same rewrite
without asking anyone again; the proposals are checked, applied and verified like any
other. This is the minimal reader the lockfile format will grow from: JSON

    {"version": 1, "decisions": [{"file": "src/gemm.cu", "kernel": "sgemm", "pass": "swizzle",
      "params": {"pattern": "custom", "formula": "<digest>"}, "payload": "lx = ...", "proposer": "claude",
      "model": "...", "evidence": "predicted", "cost_usd": 0.05, "tokens": 31000}]}

or TOML with `version = 1` and `[[decision]]` tables holding the same keys. A record
is input: every field is type-checked and errors name the file and the decision.
Replayed proposals carry what the record says: the values (typed through the pass's
space), the payload, and as provenance the model, cost, tokens and evidence that earned
the decision; the proposer is the one replaying it (`lock`), the recorded proposer is
named in the rationale.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from kxform.engine.params import ParamValue
from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal, Provenance, Rejection
from kxform.engine.proposal import Evidence
from kxform.errors import Location, SpecError, UsageError
from kxform.log.remarks import RemarkKind

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_RECORD_BYTES = 4 * 1024 * 1024
_KEYS = {"file", "kernel", "pass", "params", "payload", "proposer", "model", "rationale", "evidence", "cost_usd",
         "tokens"}
EVIDENCE: tuple[Evidence, ...] = ("rule", "predicted", "measured")


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

    def matches(self, path: str, kernel: str, pass_name: str) -> bool:
        """Same kernel and pass, and the file (when recorded) names the same path: one of
        the two paths ends with the other's components (relative records match anywhere)."""
        if kernel != self.kernel or pass_name != self.pass_name:
            return False
        if not self.file:
            return True
        a, b = PurePath(self.file).parts, PurePath(path).parts
        shorter, longer = (a, b) if len(a) <= len(b) else (b, a)
        return longer[len(longer) - len(shorter):] == shorter

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "kernel": self.kernel, "pass": self.pass_name,
                                "params": dict(self.params)}
        for key in ("payload", "proposer", "model", "rationale"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        data["evidence"] = self.evidence
        for key in ("cost_usd", "tokens"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data

    def provenance(self, proposer: str) -> Provenance:
        """The provenance of this decision replayed by `proposer`."""
        return Provenance(proposer, self.model or None, self.cost_usd, self.tokens, self.evidence)


def load_decisions(path: str) -> tuple[Decision, ...]:
    """Read a JSON or TOML record (by suffix); SpecError naming the file and entry."""
    where = Location(path)
    target = Path(path)
    try:
        raw = target.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read decision record: {exc.strerror or exc}", where) from None
    if len(raw) > MAX_RECORD_BYTES:
        raise SpecError(f"decision record is {len(raw)} bytes (at most {MAX_RECORD_BYTES})", where)
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text) if target.suffix == ".toml" else json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise SpecError(f"not a valid {'TOML' if target.suffix == '.toml' else 'JSON'} decision record: {exc}",
                        where) from None
    if not isinstance(data, dict) or data.get("version") != 1:
        raise SpecError("decision record needs `version = 1`", where)
    entries = data.get("decisions", data.get("decision", []))
    if not isinstance(entries, list):
        raise SpecError("`decisions` must be a list of tables", where)
    return tuple(decision_from(entry, f"{path}: decision #{i + 1}") for i, entry in enumerate(entries))


def decision_from(entry: object, where: str) -> Decision:
    """One decision from plain data, every field type-checked."""
    if not isinstance(entry, dict):
        raise SpecError(f"{where}: expected a table")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_KEYS))})")
    for key in ("kernel", "pass"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise SpecError(f"{where}: `{key}` must be a non-empty string")
    for key in ("file", "payload", "proposer", "model", "rationale"):
        if not isinstance(entry.get(key, ""), str):
            raise SpecError(f"{where}: `{key}` must be a string")
    params = entry.get("params", {})
    if not isinstance(params, dict) or not all(isinstance(v, (str, int, bool)) for v in params.values()):
        raise SpecError(f"{where}: `params` must be a table of strings, integers or booleans")
    evidence = entry.get("evidence", "rule")
    if evidence not in EVIDENCE:
        raise SpecError(f"{where}: `evidence` must be one of {', '.join(EVIDENCE)}")
    cost, tokens = entry.get("cost_usd"), entry.get("tokens")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or cost < 0):
        raise SpecError(f"{where}: `cost_usd` must be a non-negative number")
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0):
        raise SpecError(f"{where}: `tokens` must be a non-negative integer")
    values = tuple((str(k), v) for k, v in params.items())
    return Decision(entry["kernel"], entry["pass"], values, entry.get("file", ""), entry.get("payload", ""),
                    entry.get("proposer", ""), entry.get("model", ""), entry.get("rationale", ""), evidence,
                    None if cost is None else float(cost), tokens)


def write_decisions(path: str, decisions: Sequence[Decision]) -> None:
    """Write a JSON record atomically (what `load_decisions` reads back)."""
    from kxform.workspace.files import write_atomic

    data = {"version": 1, "decisions": [d.to_json() for d in decisions]}
    write_atomic(path, (json.dumps(data, indent=2) + "\n").encode())


class LockProposer:
    """Proposes exactly what the record says for a kernel, nothing for kernels it lacks.

    `name` is who replays: `lock` for a record read from a file; `claude` for the decisions
    the same run's claude session just kept (kxform.cli.propose_args)."""

    def __init__(self, decisions: Sequence[Decision], missing: str = "no recorded decision in the lock record",
                 name: str = "lock") -> None:
        self.decisions = tuple(decisions)
        self.missing = missing
        self.name = name

    def propose(self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis,
                rejected: Sequence[Rejection] = ()) -> list[Proposal]:
        kernel = analysis.kernel
        path = ctx.model.source.path
        for decision in self.decisions:
            if decision.matches(path, kernel.name, pass_.name):
                why = f"recorded decision ({decision.proposer or 'unknown proposer'}" + \
                      (f", {decision.model}" if decision.model else "") + ")" + \
                      (f": {decision.rationale}" if decision.rationale else "")
                values = _typed(pass_, ctx, analysis, decision.params)
                return [Proposal.of(pass_.name, kernel.name, values, why, decision.provenance(self.name),
                                    decision.payload or None)]
        ctx.remark(RemarkKind.ANALYSIS, pass_.name, "NoDecision", kernel.span.start, kernel.name,
                   f"{pass_.name}: {self.missing} for '{kernel.name}'; left unchanged")
        return []


def _typed(pass_: Pass, ctx: PassContext, analysis: KernelAnalysis,
           params: Sequence[tuple[str, ParamValue]]) -> dict[str, ParamValue]:
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
