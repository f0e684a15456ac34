"""Proposals: one parameterised instance of a pass for one kernel, and where it came from.

Deterministic rules, the tuner and LLM proposers all return this one type, and every
proposal is untrusted until the pass has checked it and the later stages (compile,
verify, measure) have kept it. Values are typed (`kxform.engine.params`), so a
proposal prints as the spec that would reproduce it (`tile{TILE=32}`) and serialises
to the pass log as it was made. A proposal the later stages refuse comes back to the
proposer as a `Rejection`, so the next proposal can avoid it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kxform.engine.params import ParamValue

Evidence = Literal["rule", "predicted", "measured"]
"""Why the proposer believes in a proposal: a documented rule, a model's prediction, a measurement."""


@dataclass(frozen=True)
class Provenance:
    """Who proposed, with what, at what cost, on what evidence (logged with every proposal)."""

    proposer: str = "heuristic"
    """`heuristic` (a pass's documented rule, the default), `lock`, `claude`, a tuner, ..."""
    model: str | None = None
    """The model behind a predicting proposer (an LLM's name), if any."""
    cost_usd: float | None = None
    tokens: int | None = None
    evidence: Evidence = "rule"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"proposer": self.proposer, "evidence": self.evidence}
        for key in ("model", "cost_usd", "tokens"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        return data


def format_value(value: ParamValue) -> str:
    """A value as a pass spec writes it (`true`, `32`, `grouped`)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


@dataclass(frozen=True)
class Proposal:
    """One parameterised instance of a pass for one kernel."""

    pass_name: str
    kernel: str
    values: tuple[tuple[str, ParamValue], ...]
    """Typed option or parameter values, in the pass's order."""
    rationale: str
    provenance: Provenance = field(default_factory=Provenance)
    payload: str | None = None
    """Free-form content a pass may accept beyond its typed values (a custom remap formula)."""

    @classmethod
    def of(
        cls,
        pass_name: str,
        kernel: str,
        values: Mapping[str, ParamValue],
        rationale: str,
        provenance: Provenance | None = None,
        payload: str | None = None,
    ) -> Proposal:
        return cls(pass_name, kernel, tuple(values.items()), rationale, provenance or Provenance(), payload)

    @property
    def options(self) -> dict[str, ParamValue]:
        return dict(self.values)

    @property
    def proposer(self) -> str:
        return self.provenance.proposer

    @property
    def measured(self) -> bool:
        return self.provenance.evidence == "measured"

    def label(self) -> str:
        """The pass spec of this proposal: `swizzle{pattern=grouped,group=8}`."""
        inner = ",".join(f"{k}={format_value(v)}" for k, v in self.values)
        return f"{self.pass_name}{{{inner}}}" if inner else self.pass_name

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "spec": self.label(),
            "params": dict(self.values),
            "rationale": self.rationale,
            "proposer": self.proposer,
            "measured": self.measured,
            "provenance": self.provenance.to_json(),
        }
        if self.payload is not None:
            data["payload"] = self.payload
        return data


@dataclass(frozen=True)
class Rejection:
    """A proposal a check or a later stage refused, and why: what goes back to the proposer."""

    label: str
    """The refused proposal's spec (`Proposal.label()`)."""
    stage: str
    """`check`, `compile`, `verify`, `measure`, ..."""
    reason: str
    key: str = ""
    """The stable key of the refusal (kxform.engine.status), when the stage gave one."""

    def to_json(self) -> dict[str, str]:
        out = {"spec": self.label, "stage": self.stage, "reason": self.reason}
        if self.key:
            out["key"] = self.key
        return out
