"""The verification stage of `apply`: differential runs (and optional timing) of every
rewritten kernel that has a harness spec, before anything is written.

A kernel whose verification fails blocks the write of its file; the evidence (size,
output, first mismatching index, max errors) goes to the log. With `measure`, a
verified rewrite is kept only when it is faster than the original beyond the measured
spread; both times are logged, beside the prediction when a model chose the rewrite.
"""

from __future__ import annotations

from dataclasses import replace

from kxform.errors import KxformError
from kxform.harness.model import HarnessSpec, KernelSpec
from kxform.harness.dirs import spec_in_dirs
from kxform.harness.spec import find_spec_for, load_spec
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome
from kxform.runtime.base import Runtime, RuntimeError_
from kxform.frontend.source import SourceText, validate_bytes
from kxform.engine.policy import VerifyPolicy
from kxform.verify.differential import UnitFlags, verify_pair
from kxform.verify.measure import measure_pair


def spec_for_file(path: str, spec_dirs: tuple[str, ...] = ()) -> HarnessSpec | None:
    """The harness spec beside `path` (kxform.toml naming it), else one in `spec_dirs`, or None."""
    spec_path = find_spec_for(path) or (spec_in_dirs(path, spec_dirs) if spec_dirs else None)
    return None if spec_path is None else load_spec(spec_path)


def verify_file(original: bytes, rewritten: bytes, path: str, results: list[KernelResult], runtime: Runtime,
                measure: bool, build_dir: str | None = None,
                spec_dirs: tuple[str, ...] = ()) -> tuple[list[KernelResult], bool]:
    """Verify every applied kernel of one file once, under the policy its passes compose
    (a kernel rewritten by `tile` then `swizzle` runs at tile's launch, compared as loosely
    as the looser pass allows); returns updated results and whether the rewritten file
    may be written."""
    source = validate_bytes(path, original)
    new = validate_bytes(path, rewritten)
    try:
        file_spec, spec_error = spec_for_file(path, spec_dirs), None
    except KxformError as exc:
        file_spec, spec_error = None, exc
    records: dict[str, tuple[CheckRecord, ...]] = {}
    failed: dict[str, str] = {}
    predictions = _predictions(results)
    applied = [(r.kernel, r.proposal.proposer) for r in results if r.outcome is Outcome.APPLIED and r.proposal]
    replayed = {k for k, _ in applied} - {k for k, who in applied if who != "lock"}  # every pass replayed
    for kernel, policy in _policies(results).items():
        if spec_error is not None:
            records[kernel] = (CheckRecord("verify", True, f"skipped: harness spec unusable: {spec_error}"),)
            continue
        spec = file_spec.find(kernel) if file_spec is not None else None
        if spec is None:
            records[kernel] = (CheckRecord("verify", True, "skipped: no harness spec for this kernel "
                                           "(compile-checked only)"),)
            continue
        report = verify_pair(source, new, spec, runtime, flags=UnitFlags.from_build_dir(build_dir, path), policy=policy)
        detail = "; ".join(v.summary() for v in report.sizes)
        record = CheckRecord("verify", report.ok, f"{report.summary()}: {detail}; policy: {policy.describe()}")
        records[kernel] = (record,)
        if not report.ok:
            failed[kernel] = "verify"
            continue
        if measure and kernel not in replayed:  # a replayed decision was measured when it was made
            timing_record, faster = _measure(source, new, spec, runtime, policy)
            if kernel in predictions:  # the measurement decides; the log keeps what was predicted beside it
                timing_record = replace(timing_record, detail=f"{timing_record.detail}; {predictions[kernel]}")
            records[kernel] += (timing_record,)
            if not faster:
                failed[kernel] = "measure"
    updated = [_updated(r, records, failed) for r in results]
    keep = not failed
    if not keep:  # the file is not written: kernels that passed go back to unchanged
        updated = [replace(r, outcome=Outcome.MISSED, stage="verify",
                           reasons=r.reasons + ("RevertedWithFile: another kernel of this file failed "
                                                "verification or was not faster",))
                   if r.outcome is Outcome.APPLIED else r for r in updated]
    return updated, keep


def _predictions(results: list[KernelResult]) -> dict[str, str]:
    """Per applied kernel, the rationale of proposals a model predicted (evidence "predicted")."""
    out: dict[str, str] = {}
    for r in results:
        if r.outcome is Outcome.APPLIED and r.proposal is not None and r.proposal.provenance.evidence == "predicted":
            out[r.kernel] = "; ".join(filter(None, (out.get(r.kernel), r.proposal.rationale)))
    return out


def _policies(results: list[KernelResult]) -> dict[str, VerifyPolicy]:
    """Per applied kernel, the policies of its passes composed in pipeline order."""
    policies: dict[str, VerifyPolicy] = {}
    for result in results:
        if result.outcome is Outcome.APPLIED:
            known = policies.get(result.kernel)
            policies[result.kernel] = result.policy if known is None else known.then(result.policy)
    return policies


def _updated(result: KernelResult, records: dict[str, tuple[CheckRecord, ...]], failed: dict[str, str]) -> KernelResult:
    if result.outcome is not Outcome.APPLIED or result.kernel not in records:
        return result
    checks = result.checks + records[result.kernel]
    stage = failed.get(result.kernel)
    if stage == "verify":
        return replace(result, outcome=Outcome.FAILED, stage="verify", reasons=(records[result.kernel][0].detail,),
                       checks=checks)
    if stage == "measure":
        return replace(result, outcome=Outcome.MISSED, stage="measure",
                       reasons=(f"NotFaster: {records[result.kernel][-1].detail}",), checks=checks)
    return replace(result, checks=checks)


def _measure(source: SourceText, new: SourceText, spec: KernelSpec,
             runtime: Runtime, policy: VerifyPolicy) -> tuple[CheckRecord, bool]:
    try:
        before, after, size = measure_pair(source, new, spec, runtime, policy=policy)
    except RuntimeError_ as exc:
        return CheckRecord("measure", False, f"timing failed: {exc}"), False
    faster = after.median_ms + after.spread_ms < before.median_ms - before.spread_ms
    detail = (f"size {size} on {runtime.name}: original {before.median_ms:.4f} ms (+-{before.spread_ms:.4f}), "
              f"rewritten {after.median_ms:.4f} ms (+-{after.spread_ms:.4f}); speedup "
              f"{before.median_ms / after.median_ms:.3f}x (median of {after.samples} launches, "
              f"{after.copies} input set(s) rotated, persisting L2 capped, outputs re-checked after timing)")
    return CheckRecord("measure", True, detail), faster
