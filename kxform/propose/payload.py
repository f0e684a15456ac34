"""The proposal payload seam: a proposal may carry text its parameters cannot hold (a
custom remap formula), with where it came from.

Today's `Proposal` has string parameters only, so a payload rides on a subclass; once
the engine's `Proposal` has its own `payload` and provenance fields, `with_payload` and
`payload_of` become `dataclasses.replace(p, payload=...)` and `p.payload`, and nothing
else changes. Every module reads and writes payloads through these two functions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kxform.engine.pass_api import Proposal


@dataclass(frozen=True)
class PayloadProposal(Proposal):
    """A `Proposal` with a payload (picklable: it crosses worker processes)."""

    payload: str = ""


def with_payload(proposal: Proposal, payload: str) -> Proposal:
    """`proposal` carrying `payload` (same parameters, rationale and provenance)."""
    fields = {f.name: getattr(proposal, f.name) for f in dataclasses.fields(Proposal)}
    return PayloadProposal(**fields, payload=payload)


def payload_of(proposal: Proposal) -> str | None:
    """The payload text, or None when the proposal carries none."""
    payload = getattr(proposal, "payload", None)
    return payload if isinstance(payload, str) and payload else None
