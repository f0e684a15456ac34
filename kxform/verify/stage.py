"""The verification stage of `apply`: differential runs (and optional timing) of every
rewritten kernel that has a harness spec, before anything is written.

A kernel whose verification fails blocks the write of its file; the evidence (size,
output, first mismatching index, max errors) goes to the log. With `measure`, a
verified rewrite is kept only when it is faster than the original beyond the measured
spread; both times are logged, beside the prediction when a model chose the rewrite.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kxform.errors import KxformError
from kxform.harness.model import HarnessSpec, KernelSpec
from kxform.harness.dirs import spec_in_dirs
from kxform.harness.spec import find_spec_for, load_spec
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome
from kxform.runtime.base import Runtime, RuntimeError_
from kxform.frontend.source import SourceText, validate_bytes
from kxform.engine.policy import VerifyPolicy
from kxform.engine.status import (
    NO_HARNESS_SPEC,
    NOT_FASTER,
    REVERTED_WITH_FILE,
    UNVERIFIED,
    VERIFY_INCONCLUSIVE,
    VERIFY_MISMATCH,
    Status,
)
from kxform.verify.differential import UnitFlags, verify_pair
from kxform.verify.measure import measure_pair
from kxform.verify.verdict import VerifyReport, combined_status


_VERIFY_STATUS = {
    "ok": Status.PASSED,
    "mismatch": Status.FAILED,
    "inconclusive": Status.INCONCLUSIVE,
    "unverified": Status.INCONCLUSIVE,
}
_VERIFY_KEYS = {"ok": "", "mismatch": VERIFY_MISMATCH, "inconclusive": VERIFY_INCONCLUSIVE, "unverified": UNVERIFIED}


def spec_for_file(path: str, spec_dirs: tuple[str, ...] = ()) -> HarnessSpec | None:
    """The harness spec beside `path` (NAME.kxspec.toml, or a kxform-spec.toml naming it), else one in `spec_dirs`, or None."""
    spec_path = find_spec_for(path) or (spec_in_dirs(path, spec_dirs) if spec_dirs else None)
    return None if spec_path is None else load_spec(spec_path)


def verify_file(
    original: bytes,
    rewritten: bytes,
    path: str,
    results: list[KernelResult],
    runtime: Runtime,
    measure: bool,
    build_dir: str | None = None,
    spec_dirs: tuple[str, ...] = (),
) -> tuple[list[KernelResult], bool]:
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
    failed: dict[str, tuple[str, str, str]] = {}
    """kernel -> (stage, reason key, message) of what stops it."""
    predictions = _predictions(results)
    applied = [(r.kernel, r.proposal.proposer) for r in results if r.outcome is Outcome.APPLIED and r.proposal]
    replayed = {k for k, _ in applied} - {k for k, who in applied if who != "lock"}  # every pass replayed
    for kernel, policy in _policies(results).items():
        if spec_error is not None:  # a broken spec never silently turns verification off
            record = CheckRecord(
                "verify", Status.INCONCLUSIVE, f"inconclusive: harness spec unusable: {spec_error}", VERIFY_INCONCLUSIVE
            )
            records[kernel] = (record,)
            failed[kernel] = ("inconclusive", VERIFY_INCONCLUSIVE, f"VerifyInconclusive: {record.detail}")
            continue
        specs = file_spec.instantiations(kernel) if file_spec is not None else ()
        if not specs:
            records[kernel] = (
                CheckRecord(
                    "verify",
                    Status.SKIPPED,
                    "skipped: no harness spec for this kernel (compile-checked only)",
                    NO_HARNESS_SPEC,
                ),
            )
            continue
        flags = UnitFlags.from_build_dir(build_dir, path)
        reports = [verify_pair(source, new, spec, runtime, flags=flags, policy=policy) for spec in specs]
        status = combined_status(reports)
        notes = missing_instantiations(source, kernel, specs)
        detail = " | ".join(f"{r.summary()}: " + "; ".join(v.summary() for v in r.sizes) for r in reports)
        detail += "".join(f"; note: {n}" for n in notes)
        key = _VERIFY_KEYS[status]
        figures = (
            ("runtime", runtime.name),
            ("sizes", sum(len(r.sizes) for r in reports)),
            ("max_abs", _max_abs(reports)),
        )
        record = CheckRecord(
            "verify", _VERIFY_STATUS[status], f"{detail}; policy: {policy.describe()}", key, figures=figures
        )
        records[kernel] = (record,)
        if status == "mismatch":
            failed[kernel] = ("verify", key, record.detail)
            continue
        if status != "ok":  # inconclusive or unverified: could not tell, so nothing is written
            why = next(r for r in reports if r.status == status).summary()
            failed[kernel] = (status, key, f"{key}: {why}")
            continue
        if measure and kernel not in replayed:  # a replayed decision was measured when it was made
            timing_record, faster = _measure(source, new, specs[0], runtime, policy)
            if kernel in predictions:  # the measurement decides; the log keeps what was predicted beside it
                said = "overruled by this measurement, the model had predicted" if not faster else "predicted"
                timing_record = replace(timing_record, detail=f"{timing_record.detail}; {said}: {predictions[kernel]}")
            records[kernel] += (timing_record,)
            if not faster:
                failed[kernel] = ("measure", NOT_FASTER, f"NotFaster: {timing_record.detail}")
    updated = [_updated(r, records, failed) for r in results]
    keep = not failed
    if not keep:  # the file is not written: kernels that passed go back to unchanged
        updated = [
            replace(
                r,
                outcome=Outcome.MISSED,
                stage="verify",
                key=REVERTED_WITH_FILE,
                reasons=r.reasons
                + (
                    "RevertedWithFile: another kernel of this file failed "
                    "verification, could not be verified, or was not faster",
                ),
            )
            if r.outcome is Outcome.APPLIED
            else r
            for r in updated
        ]
    return updated, keep


def _max_abs(reports: list[VerifyReport]) -> float:
    """The largest absolute difference any compared output showed (0.0: bit-identical
    wherever compared): what a reader tests instead of the sizes' sentences."""
    return max((o.comparison.max_abs for r in reports for s in r.sizes for o in s.outputs), default=0.0)


def missing_instantiations(source: SourceText, kernel: str, specs: tuple[KernelSpec, ...]) -> list[str]:
    """Instantiations of template `kernel` that the file launches with concrete template
    arguments but the spec does not list: they are named, since nothing verified them."""
    from kxform.frontend.cuda import parse_model

    model = parse_model(source)
    listed = {re.sub(r"\s+", "", s.name) for s in specs}
    hosts = {f.name: f.template_names for f in model.functions}
    missing: dict[str, int] = {}
    for launch in model.launches:
        if launch.kernel != kernel or not launch.template_args:
            continue
        words = set(re.findall(r"[A-Za-z_]\w*", launch.template_args))
        if words & hosts.get(launch.function or "", frozenset()):
            continue  # arguments of an enclosing template: not a concrete instantiation
        spelling = f"{kernel}{launch.template_args}"
        if re.sub(r"\s+", "", spelling) not in listed:
            missing.setdefault(spelling, source.line_col(launch.span.start)[0])
    return [
        f"instantiation {s} (launched at line {line}) has no spec entry and was not verified"
        for s, line in missing.items()
    ]


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


def _updated(
    result: KernelResult, records: dict[str, tuple[CheckRecord, ...]], failed: dict[str, tuple[str, str, str]]
) -> KernelResult:
    """`result` with its kernel's records; a kernel that failed verification (a proven
    mismatch) is FAILED, one verification could not decide (inconclusive, unverified) or
    that was not faster is MISSED, with the reason."""
    if result.outcome is not Outcome.APPLIED or result.kernel not in records:
        return result
    checks = result.checks + records[result.kernel]
    if result.kernel not in failed:
        return replace(result, checks=checks)
    stage, key, reason = failed[result.kernel]
    if stage == "verify":
        return replace(result, outcome=Outcome.FAILED, stage="verify", reasons=(reason,), checks=checks, key=key)
    return replace(
        result,
        outcome=Outcome.MISSED,
        stage="measure" if stage == "measure" else "verify",
        reasons=(reason,),
        checks=checks,
        key=key,
    )


def _measure(
    source: SourceText, new: SourceText, spec: KernelSpec, runtime: Runtime, policy: VerifyPolicy
) -> tuple[CheckRecord, bool]:
    try:
        before, after, size = measure_pair(source, new, spec, runtime, policy=policy)
    except RuntimeError_ as exc:
        return CheckRecord("measure", Status.FAILED, f"timing failed: {exc}", "TimingFailed"), False
    faster = after.median_ms + after.spread_ms < before.median_ms - before.spread_ms
    detail = (
        f"size {size} on {runtime.name}: original {before.median_ms:.4f} ms (+-{before.spread_ms:.4f}), "
        f"rewritten {after.median_ms:.4f} ms (+-{after.spread_ms:.4f}); speedup "
        f"{before.median_ms / after.median_ms:.3f}x (median of {after.samples} launches, "
        f"{after.copies} input set(s) rotated, persisting L2 capped, outputs re-checked after timing)"
    )
    figures = (
        ("original_ms", before.median_ms),
        ("rewritten_ms", after.median_ms),
        ("original_spread_ms", before.spread_ms),
        ("rewritten_spread_ms", after.spread_ms),
        ("size", size),
        ("runtime", runtime.name),
    )
    return CheckRecord(
        "measure", Status.PASSED if faster else Status.FAILED, detail, "" if faster else NOT_FASTER, figures=figures
    ), faster
