"""Replaying a lockfile: which kernels are as they were locked, and the proposer that replays them.

Before an `apply --lock` run, `make_plan` digests every kernel of every file (its own
text, kxform.propose.lockfile) and pairs it with the lockfile's entries for that file.
Each kernel and pass then is in one `State`:

* `REPLAY`: the kernel's text is what was locked (`source` digest): the recorded decision
  is proposed as it stands, an applied one with its values and payload, a `left-alone`
  one as nothing; the proposer behind the run (heuristic, claude) is not asked.
* `AS_LOCKED`: the kernel already is the locked rewrite (`result` digest), as in a tree
  rewritten in place: nothing to do.
* `CHANGED`: neither: the kernel was edited since it was locked. It is left as it is and
  reported; it is re-decided only when asked (`--relock`, or its entry deleted).
* `NEW`: no entry: decided by the run's proposer as usual (and recorded afterwards), or,
  in a strict run (`--check`, `--proposer lock`), left alone and reported.

The plan is plain data, so it crosses into the worker processes with the proposer spec.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Proposal, Rejection
from kxform.engine.proposer import Proposer
from kxform.errors import KxformError
from kxform.frontend.source import read_source
from kxform.propose.lock import Decision, left_alone, replay
from kxform.propose.lockfile import kernel_digests, lock_key


class State(enum.Enum):
    NEW = "new"
    REPLAY = "replay"
    AS_LOCKED = "as-locked"
    CHANGED = "changed"


def state_of(entry: Decision | None, digest: str | None, relock: bool = False) -> State:
    """The state of a kernel whose text has `digest`, given its entry (module docstring).
    A record without digests (a plain decision record) is always replayed."""
    if entry is None or relock:
        return State.NEW
    if not entry.source or digest == entry.source:
        return State.REPLAY
    if entry.result and digest == entry.result:
        return State.AS_LOCKED
    return State.CHANGED


@dataclass(frozen=True)
class FilePlan:
    """One file: how the lockfile names it, its kernels' digests, the entries for it."""

    key: str
    digests: tuple[tuple[str, str], ...]
    entries: tuple[Decision, ...]

    def digest(self, kernel: str) -> str | None:
        return dict(self.digests).get(kernel)

    def entry(self, kernel: str, pass_name: str) -> Decision | None:
        """The entry for the kernel and pass: one naming this file exactly (a lockfile
        entry) before one that matches it by suffix or anywhere (a plain record)."""
        found = [d for d in self.entries if d.kernel == kernel and d.pass_name == pass_name]
        found.sort(key=lambda d: not d.source)
        return found[0] if found else None


@dataclass(frozen=True)
class LockPlan:
    """The lockfile's view of one run (picklable: it travels with the proposer spec)."""

    path: str
    """The lockfile (named in remarks and rationales)."""
    files: tuple[tuple[str, FilePlan], ...]
    """Absolute source path -> its plan."""
    relock: bool = False
    """Re-decide every selected kernel (its entries are replaced)."""
    strict: bool = False
    """Decide nothing: kernels without an entry are left alone (`--check`, `--proposer lock`)."""
    missing: str = "no entry in the lockfile"
    """What a strict run says of a kernel without an entry."""

    @property
    def name(self) -> str:
        return Path(self.path).name

    def file(self, path: str) -> FilePlan | None:
        return dict(self.files).get(os.path.abspath(path))

    def state(self, path: str, kernel: str, pass_name: str) -> tuple[State, Decision | None]:
        plan = self.file(path)
        if plan is None:
            return State.NEW, None
        entry = plan.entry(kernel, pass_name)
        return state_of(entry, plan.digest(kernel), self.relock), entry


def make_plan(
    lock_path: Path,
    decisions: Sequence[Decision],
    files: Sequence[str],
    relock: bool = False,
    strict: bool = False,
    missing: str = "",
) -> LockPlan:
    """Digest the kernels of `files` and pair them with `decisions`. A file that cannot
    be read or parsed is left out here: the run reports it the usual way."""
    lock_dir = lock_path.parent
    plans = []
    for path in files:
        key = lock_key(path, lock_dir)
        try:
            digests = kernel_digests(read_source(path))
        except KxformError:
            continue
        entries = tuple(d for d in decisions if d.names_file(key))
        plans.append((os.path.abspath(path), FilePlan(key, tuple(sorted(digests.items())), entries)))
    return LockPlan(
        str(lock_path),
        tuple(plans),
        relock,
        strict,
        missing or f"no entry in {lock_path.name} (this run decides nothing)",
    )


class ReplayProposer:
    """Replays what the lockfile says of a kernel; asks `fallback` only for kernels it
    does not cover (none in a strict run)."""

    name = "lock"

    def __init__(self, plan: LockPlan, fallback: Proposer | None) -> None:
        self.plan = plan
        self.fallback = fallback
        self._why: dict[tuple[str, str], tuple[str, str] | None] = {}

    def propose(
        self, pass_: Pass, ctx: PassContext, analysis: KernelAnalysis, rejected: Sequence[Rejection] = ()
    ) -> list[Proposal]:
        kernel = analysis.kernel.name
        state, entry = self.plan.state(ctx.model.source.path, kernel, pass_.name)
        why: tuple[str, str] | None = None
        proposals: list[Proposal] = []
        if state is State.REPLAY and entry is not None:
            why = left_alone(entry, self.plan.name)
            proposals = replay(entry, pass_, ctx, analysis, self.name, self.plan.name)
        elif state is State.AS_LOCKED:
            why = ("AsLocked", f"it already is the rewrite {self.plan.name} records; nothing to do")
        elif state is State.CHANGED:
            why = (
                "LockChanged",
                f"changed since it was locked in {self.plan.name}; left as it is, not re-decided "
                f"(re-decide: kxform apply --lock --relock --kernel {kernel}, or delete its entry)",
            )
        elif self.fallback is None or self.plan.strict:
            why = ("NoDecision", self.plan.missing)
        else:
            proposals = self.fallback.propose(pass_, ctx, analysis, rejected)
            explain = getattr(self.fallback, "why_nothing", None)
            why = explain(pass_, analysis) if explain is not None and not proposals else None
        self._why[(pass_.name, kernel)] = why
        return proposals

    def why_nothing(self, pass_: Pass, analysis: KernelAnalysis) -> tuple[str, str] | None:
        """Why `propose` offered nothing for the kernel (the driver's "not applied" remark)."""
        return self._why.get((pass_.name, analysis.kernel.name))
