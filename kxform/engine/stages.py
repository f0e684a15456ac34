"""The later stages of `apply` (compile, verify, measure) over checked candidates.

The pure core hands each rewritten kernel's first checked candidate to these stages,
with its alternates. When a stage refuses a kernel's candidate, the refusal goes back to
the proposer as feedback and the file is transformed again: the kernel gets its next
candidate (or, with none left, is left out and reported with every reason), while the
other kernels keep theirs. Rounds repeat until every remaining rewrite has passed or the
round limit is reached; then a file with a refused kernel is not written at all.

A pass can require that a rewrite is verified differentially before it is written (a new
tile size changes the computation's shape): `require_verification` fails every such
rewrite that no differential run has confirmed, whatever the reason ("could not tell" is
never "ok").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol, TypeVar

from kxform.engine.driver import FileTransform, final_remarks
from kxform.engine.pass_api import KernelResult, Outcome, Rejection
from kxform.engine.status import NO_DIFFERENTIAL_RUN, NOT_FASTER, REVERTED_WITH_FILE, Status

MAX_ROUNDS = 4
LATER_STAGES = ("compile", "verify", "measure")


class StagedFile(Protocol):
    """What the stages read and update of one file (kxform.orchestrate.runner.FileOutcome)."""

    path: str
    transform: FileTransform | None
    results: list[KernelResult]


F = TypeVar("F", bound=StagedFile)


def refused(result: KernelResult) -> bool:
    """A candidate a later stage turned down (not a kernel reverted only with its file, nor
    one whose stage could not tell: an unconfirmed compile check, the original failing
    the same way, says nothing against this candidate, and any other would fare alike)."""
    if result.proposal is None or result.stage not in LATER_STAGES:
        return False
    if result.outcome is Outcome.FAILED:
        return result.undecided() is None
    return result.outcome is Outcome.MISSED and result.key == NOT_FASTER


def run_later_stages(
    files: list[F],
    stages: Sequence[Callable[[list[F]], None]],
    retransform: Callable[[str, dict[tuple[str, str], tuple[Rejection, ...]]], F],
) -> list[F]:
    """Run `stages` over the changed files, retrying refused candidates; returns the files
    in their final state (same order), with final remarks."""
    current = list(files)
    feedback: dict[str, dict[tuple[str, str], tuple[Rejection, ...]]] = {}
    todo = [i for i, f in enumerate(current) if _changed(f)]
    for round_ in range(MAX_ROUNDS):
        batch = [current[i] for i in todo]
        for stage in stages:
            stage(batch)
        for item in batch:
            require_verification(item)
        retry = []
        for i in todo:
            item = current[i]
            refusals = [r for r in item.results if refused(r)]
            if not refusals or round_ == MAX_ROUNDS - 1:
                continue
            known = feedback.setdefault(item.path, {})
            for result in refusals:
                assert result.proposal is not None
                key = (result.pass_name, result.kernel)
                why = result.reasons[0] if result.reasons else "refused"
                known[key] = known.get(key, ()) + (Rejection(result.proposal.label(), result.stage, why, result.key),)
            retry.append(i)
        if not retry:
            break
        for i in retry:
            current[i] = retransform(current[i].path, feedback[current[i].path])
        todo = [i for i in retry if _changed(current[i])]
        if not todo:
            break
    for item in current:
        _revert_if_refused(item)
        if item.transform is not None:
            item.transform = replace(
                item.transform, pending=(), remarks=item.transform.remarks + final_remarks(item.transform, item.results)
            )
    return current


def _changed(item: StagedFile) -> bool:
    return item.transform is not None and item.transform.changed


def require_verification(item: StagedFile) -> None:
    """Fail every applied rewrite whose pass requires a differential run that did not happen."""
    updated = []
    for result in item.results:
        if result.outcome is Outcome.APPLIED and result.policy.required and not _verified(result):
            why = next(
                (c.detail for c in result.checks if c.name == "verify"),
                "no differential run (--verify static or compile)",
            )
            result = replace(
                result,
                outcome=Outcome.FAILED,
                stage="verify",
                key=NO_DIFFERENTIAL_RUN,
                reasons=(
                    f"could not verify: this rewrite changes the computation's shape and must pass "
                    f"a differential run before it is written ({why})",
                ),
            )
        updated.append(result)
    item.results = updated


def _verified(result: KernelResult) -> bool:
    return any(c.name == "verify" and c.status is Status.PASSED for c in result.checks)


def _revert_if_refused(item: StagedFile) -> None:
    """A file keeping a refused kernel after the last round is not written."""
    transform = item.transform
    if transform is None or not transform.changed:
        return
    if not any(refused(r) for r in item.results):
        return
    item.transform = replace(transform, new_data=transform.source.data)
    item.results = [
        replace(
            r,
            outcome=Outcome.MISSED,
            stage=r.stage or "verify",
            key=REVERTED_WITH_FILE,
            reasons=r.reasons + ("RevertedWithFile: another kernel of this file failed a later stage",),
        )
        if r.outcome is Outcome.APPLIED
        else r
        for r in item.results
    ]
