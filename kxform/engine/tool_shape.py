"""How a pass is asked for a proposal through a model's tool call, pass by pass.

The proposer (kxform.propose) builds one tool per pass from the pass's typed space
and knows nothing else about the pass. What only the pass knows comes from here: the
tool's description, which parameters may be null (those a chosen variant does not
take), an extra free-text field carried as the proposal's payload (swizzle's remap
`formula`) with its help text, and how an answer that passed the schema becomes a
configuration (`Pass.read_answer`, raising `AnswerRejected` with a stable kind).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolShape:
    """What a pass adds to its tool beyond one schema field per parameter."""

    description: str
    nullable: frozenset[str] = frozenset()
    """Parameters that may be null (for swizzle, those the chosen pattern does not take)."""
    payload: str | None = None
    """The name of a free-text field whose text becomes the proposal's payload, or None."""
    payload_help: str = ""
    """What goes into that field (schema description and prompt)."""


class AnswerRejected(Exception):
    """An answer the pass cannot take: a stable `kind` and one line that goes back to the model."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
