"""`kxform apply --lock`: the lockfile around an ordinary apply run (docs/lockfile.md).

Before the run (`lock_mode`, `prepare`): which lockfile, read and checked (a bad one is
an error naming it, exit 2, before anything is written), and the plan of which kernels
are replayed (kxform.propose.replay). After the run (`reconcile`): the entries to record
for kernels decided now, the kernels that changed since they were locked, and, for
`--check`, every way the tree and the lock disagree. `record` writes the lockfile
(under a file lock, atomically) before the sources are written, so a run killed in
between leaves a lock that replays to the same sources.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kxform import __version__
from kxform.engine.pass_api import KernelResult, Outcome
from kxform.engine.status import REVERTED_WITH_FILE
from kxform.orchestrate.runner import ApplyConfig, FileOutcome, collect_sources
from kxform.workspace.tree import SourceSet
from kxform.errors import UsageError
from kxform.frontend.source import CUDA_SUFFIXES, validate_bytes
from kxform.log.figures import timing
from kxform.propose.lock import Decision
from kxform.propose.registry import canonical
from kxform.propose.replay import FilePlan, LockPlan, State, make_plan
from kxform.workspace.config import ProjectConfig
from kxform.propose.lockfile import Key, default_lock_path, kernel_digests, read_lock, update_lock

MAX_REASON = 400
"""Characters of a left-alone reason kept in the lockfile (a compiler error can be long)."""


@dataclass(frozen=True)
class LockMode:
    """Which lockfile a run uses, and how."""

    path: Path
    write: bool
    """Record new decisions (not with --check, --diff or --proposer lock)."""
    strict: bool
    """Decide nothing new (--check, --proposer lock)."""
    relock: bool = False
    check: bool = False


def take_paths(args: argparse.Namespace) -> None:
    """`kxform apply --lock src/`: argparse gives `src/` to `--lock [FILE]`, but a directory
    or a CUDA/HIP source is never a lockfile: it is a PATH, and the lockfile the default.
    (`--lock=FILE` is never ambiguous.) At least one PATH is required."""
    value = getattr(args, "lock", None)
    if value and (Path(value).is_dir() or Path(value).suffix in CUDA_SUFFIXES):
        args.paths = [value, *args.paths]
        args.lock = ""
    if not args.paths:
        raise UsageError("the following arguments are required: PATH")


def lock_mode(args: argparse.Namespace, project: ProjectConfig | None) -> LockMode | None:
    """The lockfile the options and the configuration ask for, or None; usage errors."""
    replay_only = canonical(args.proposer) == "lock"
    if args.no_lock and (args.lock is not None or replay_only):
        raise UsageError("--no-lock contradicts --lock and --proposer lock")
    configured = project is not None and project.lock is not None and not args.no_lock
    if args.lock is None and not replay_only and not configured:
        if args.relock:
            raise UsageError("--relock goes with --lock (or 'lock' in the project configuration)")
        return None
    if args.relock and (args.check or args.diff or replay_only):
        raise UsageError("--relock records new decisions: not with --check, --diff or --proposer lock")
    if args.lock:
        path = Path(args.lock)
    elif project is not None and project.lock is not None:
        path = Path(project.lock)
    else:
        path = default_lock_path(project.root if project is not None else None, args.paths)
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())  # as messages name it
    write = not (args.check or args.diff or replay_only)
    if write and path.suffix == ".json":
        raise UsageError(
            f"--lock {path}: the lockfile is TOML; a .json decision record is only replayed "
            "(--proposer lock --lock FILE)"
        )
    if replay_only and not path.is_file():
        raise UsageError(
            f"--proposer lock: no lockfile at {path} (record one with kxform apply --lock, or name a "
            "decision record with --lock FILE)"
        )
    return LockMode(path, write, args.check or replay_only, args.relock, args.check)


def prepare(
    mode: LockMode, config: ApplyConfig, paths: Sequence[str], sources: SourceSet | None = None
) -> tuple[ApplyConfig, LockPlan, dict[str, tuple[str, ...]] | None]:
    """Read the lockfile and plan the run over `sources`, the files the run processes
    (default: collected from `paths` here, as run_apply would); the returned config's
    proposer replays it. With `--proposer claude`, also which kernels claude must be
    asked about (None: not claude): when none, its key is not needed at all; when some,
    it is required now, before anything is written."""
    decisions = read_lock(mode.path)
    files = (sources if sources is not None else collect_sources(paths, config).sources).files
    missing = "no recorded decision in the lock record" if not mode.check and mode.strict else ""
    plan = make_plan(mode.path, decisions, files, mode.relock, mode.strict, missing)
    spec = replace(config.proposer, lock_plan=plan)
    need = None
    if spec.name == "claude" and not mode.strict:
        need = unlocked(plan, config, config.kernels)
        if need:
            from kxform.propose.client import require_claude

            require_claude()
        else:  # every kernel is in the lock: claude is never asked
            spec = replace(spec, record="no session (every kernel is locked)")
    return replace(config, proposer=spec), plan, need


def unlocked(plan: LockPlan, config: ApplyConfig, kernels: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Per file, the (selected) kernels without an entry for a pass of the pipeline: the
    only ones a proposer that costs something (claude) is asked about."""
    from kxform.engine.registry import default_registry

    passes = [p.name for p in default_registry().pipeline(config.pipeline, dict(config.extra_options))]
    out = {}
    for path, file in plan.files:
        names = tuple(
            k
            for k, _ in file.digests
            if (not kernels or k in kernels) and any(plan.state(path, k, name)[0] is State.NEW for name in passes)
        )
        if names:
            out[path] = names
    return out


@dataclass
class Reconciled:
    """What a run did with the lockfile, for the summary, the log and the exit code."""

    changes: dict[Key, Decision | None] = field(default_factory=dict)
    replayed: int = 0
    as_locked: int = 0
    decided: int = 0
    changed: list[str] = field(default_factory=list)
    unlocked: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    other_hw: set[str] = field(default_factory=set)
    """Hardware profiles replayed decisions were made for, other than this run's."""

    @property
    def disagreements(self) -> int:
        return len(self.changed) + len(self.unlocked) + len(self.stale)

    def to_json(self) -> dict[str, object]:
        return {
            "replayed": self.replayed,
            "as_locked": self.as_locked,
            "decided": self.decided,
            "changed": len(self.changed),
            "unlocked": len(self.unlocked),
            "stale": len(self.stale),
            "recorded": sum(1 for d in self.changes.values() if d is not None),
            "dropped": sum(1 for d in self.changes.values() if d is None),
        }


def reconcile(plan: LockPlan, outcomes: Sequence[FileOutcome], config: ApplyConfig) -> Reconciled:
    """Compare the run's results with the lockfile: what to record, what disagrees."""
    out = Reconciled()
    proposer = canonical(config.proposer.name) if config.proposer is not None else "heuristic"
    hw = config.hw.name if config.hw is not None else ""
    for outcome in outcomes:
        file = plan.file(outcome.path)
        if outcome.transform is None or file is None:
            continue  # an input error: reported by the run, nothing recorded
        after = dict(file.digests)
        if outcome.transform.changed:
            after = kernel_digests(validate_bytes(outcome.path, outcome.transform.new_data))
        for result in outcome.results:
            if result.outcome is not Outcome.SKIPPED:
                _reconcile_one(out, plan, file, outcome.path, result, after.get(result.kernel, ""), proposer, hw)
        if not config.kernels:  # a partial run says nothing of the kernels it did not look at
            for entry in file.entries:
                if entry.source and file.digest(entry.kernel) is None:
                    out.stale.append(
                        f"{plan.path}: '{entry.kernel}' ({entry.pass_name}) of {entry.file} is locked "
                        "but no longer in the file"
                    )
                    out.changes[entry.key] = None
    return out


def _reconcile_one(
    out: Reconciled, plan: LockPlan, file: FilePlan, path: str, result: KernelResult, after: str, proposer: str, hw: str
) -> None:
    """One kernel and pass: count it, report it, or record it (`after`: the digest of
    the kernel's text after the run)."""
    state, entry = plan.state(path, result.kernel, result.pass_name)
    where = f"{path}:{result.line}: '{result.kernel}' ({result.pass_name})"
    if state is State.REPLAY:
        out.replayed += 1
        if entry is not None and entry.hw and entry.hw != hw:
            out.other_hw.add(entry.hw)
        if (
            entry is not None
            and entry.source
            and result.outcome is Outcome.APPLIED
            and after != (entry.result or entry.source)
        ):
            out.changes[entry.key] = replace(entry, result=after)  # same decision, the rewrite's text changed
    elif state is State.AS_LOCKED:
        out.as_locked += 1
    elif state is State.CHANGED:
        out.changed.append(
            f"{where} changed since it was locked in {plan.path}; left as it is (re-decide: kxform "
            f"apply --lock --relock --kernel {result.kernel} {path}, or delete its entry)"
        )
    elif plan.strict:
        out.unlocked.append(f"{where} is not in {plan.path} (record it: kxform apply --lock {path})")
    else:
        decision = _decision(result, file.key, file.digest(result.kernel) or "", after, proposer, hw)
        if decision is not None:
            out.changes[decision.key] = decision
            out.decided += 1


def _decision(result: KernelResult, key: str, source: str, after: str, proposer: str, hw: str) -> Decision | None:
    """The entry that records `result` (None for a kernel only reverted with its file:
    nothing was decided about it)."""
    if result.key == REVERTED_WITH_FILE:
        return None
    checks = {"checks": [c.to_json() for c in result.checks]}
    measured = timing(checks)
    figures: tuple[tuple[str, float | str], ...] = ()
    if measured is not None:
        figures = tuple(
            (k, v)
            for k, v in (
                ("original_ms", measured.original_ms),
                ("rewritten_ms", measured.rewritten_ms),
                ("original_spread_ms", measured.original_spread_ms),
                ("rewritten_spread_ms", measured.rewritten_spread_ms),
                ("size", measured.size),
                ("runtime", measured.runtime),
            )
            if v is not None and v != ""
        )
    proposal = result.proposal
    provenance = proposal.provenance if proposal is not None else None
    common = dict(
        file=key,
        hw=hw,
        kxform=__version__,
        source=source,
        figures=figures,
        proposer=provenance.proposer if provenance else proposer,
        model=(provenance.model or "") if provenance else "",
        cost_usd=provenance.cost_usd if provenance else None,
        tokens=provenance.tokens if provenance else None,
    )
    if result.outcome is Outcome.APPLIED and proposal is not None:
        return Decision(
            result.kernel,
            result.pass_name,
            proposal.values,
            payload=proposal.payload or "",
            rationale=proposal.rationale,
            evidence=proposal.provenance.evidence,
            result=after if after != source else "",
            **common,
        )  # type: ignore[arg-type]
    why = "; ".join(result.reasons) or "no reason given"
    if result.outcome is Outcome.UNCHANGED:
        why = f"nothing to do: {why}"
    elif result.stage:
        why = f"{result.outcome.value} at the {result.stage} stage: {why}"
    if len(why) > MAX_REASON:
        why = why[: MAX_REASON - 3] + "..."
    return Decision(
        result.kernel,
        result.pass_name,
        (),
        outcome="left-alone",
        reason=" ".join(why.split()),
        evidence="measured" if measured is not None else "rule",
        **common,
    )  # type: ignore[arg-type]


def record(mode: LockMode, reconciled: Reconciled) -> bool:
    """Write the lockfile's changes (see the module docstring); whether its bytes changed."""
    if not reconciled.changes and mode.path.exists():
        return False
    return update_lock(mode.path, reconciled.changes)


def summary(mode: LockMode, reconciled: Reconciled, written: bool | None, why_not: str = "") -> str:
    """`kxform: lock kxform.lock: 3 replayed, 1 decided; written`"""
    parts = [f"{reconciled.replayed} replayed"]
    for count, words in (
        (reconciled.as_locked, "already as locked"),
        (reconciled.decided, "decided"),
        (len(reconciled.changed), "changed since locked"),
        (len(reconciled.unlocked), "not in the lock"),
        (len(reconciled.stale), "locked but gone"),
    ):
        if count:
            parts.append(f"{count} {words}")
    state = "written" if written else "unchanged" if written is not None else f"not written ({why_not})"
    note = (
        f" (replayed decisions made for {', '.join(sorted(reconciled.other_hw))}: --relock to decide for this hardware)"
        if reconciled.other_hw
        else ""
    )
    return f"kxform: lock {mode.path}: {', '.join(parts)}; {state}{note}"
