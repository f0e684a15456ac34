"""Proposer names -> lazy factories, and the picklable spec that builds one.

`kxform apply --proposer NAME` picks one: `heuristic` (the engine's deterministic
proposer: each pass's documented rule; `deterministic` is another name for it), `lock`
or `claude`. A `ProposerSpec` is plain data, so it crosses into the worker processes
that transform files; each worker builds its own proposer. Optional dependencies load
only when their proposer is built, with a one-line error naming the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kxform.engine.proposer import Proposer
from kxform.errors import UsageError
from kxform.propose.lock import Decision

DEFAULT = "heuristic"
ALIASES = {"deterministic": "heuristic"}


@dataclass(frozen=True)
class ProposerSpec:
    """Which proposer, and what it needs: decisions to replay (lock, or what a claude
    session kept) or nothing."""

    name: str = DEFAULT
    decisions: tuple[Decision, ...] = ()
    record: str = ""
    """Where the decisions were read from (for messages)."""
    missing: str = "no recorded decision in the lock record"
    """What the lock proposer says of a kernel the decisions do not cover."""
    lock_plan: Any = None
    """A `kxform.propose.replay.LockPlan` (`apply --lock`): locked kernels are replayed
    from it, the others go to this proposer (to none in a strict run)."""

    def build(self) -> Proposer:
        proposer = _FACTORIES[canonical(self.name)](self)
        if self.lock_plan is None:
            return proposer
        from kxform.propose.replay import ReplayProposer

        return ReplayProposer(self.lock_plan, None if self.lock_plan.strict else proposer)


def _heuristic(spec: ProposerSpec) -> Proposer:
    from kxform.engine.proposer import DeterministicProposer

    return DeterministicProposer()


def _lock(spec: ProposerSpec) -> Proposer:
    from kxform.propose.lock import LockProposer

    return LockProposer(spec.decisions, spec.missing)


def _claude(spec: ProposerSpec) -> Proposer:
    """Per file, claude proposes what its attempt loop kept (the loop runs first, over
    every file: kxform.propose.search); without a loop behind it there is nothing to say."""
    from kxform.propose.lock import LockProposer

    if not spec.record:
        raise UsageError("the claude proposer runs in the attempt loop (kxform apply --proposer claude), not per file")
    return LockProposer(spec.decisions, spec.missing, name="claude")


_FACTORIES: dict[str, Callable[[ProposerSpec], Proposer]] = {"heuristic": _heuristic, "lock": _lock, "claude": _claude}
NAMES = tuple(_FACTORIES)


def canonical(name: str) -> str:
    """The proposer's registered name (aliases resolved); UsageError for unknown names."""
    resolved = ALIASES.get(name, name)
    if resolved not in _FACTORIES:
        raise UsageError(f"unknown proposer {name!r} (proposers: {', '.join(NAMES)})")
    return resolved


def lock_spec(path: str) -> ProposerSpec:
    """The `lock` proposer replaying the record at `path`."""
    from kxform.propose.lock import load_decisions

    return ProposerSpec("lock", load_decisions(path), path)
