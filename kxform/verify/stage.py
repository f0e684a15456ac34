"""The verification stage of `apply`: differential runs (and optional timing) of every
rewritten kernel that has a harness spec, before anything is written.

A kernel whose verification fails blocks the write of its file; the evidence (size,
output, first mismatching index, max errors) goes to the log. With `measure`, a
verified rewrite is kept only when it is faster than the original beyond the measured
spread; both times are logged.
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
from kxform.verify.differential import UnitFlags, verify_pair
from kxform.verify.measure import measure_pair


def spec_for_file(path: str, spec_dirs: tuple[str, ...] = ()) -> HarnessSpec | None:
    """The harness spec beside `path` (kxform.toml naming it), else one in `spec_dirs`, or None."""
    spec_path = find_spec_for(path) or (spec_in_dirs(path, spec_dirs) if spec_dirs else None)
    return None if spec_path is None else load_spec(spec_path)


def verify_file(original: bytes, rewritten: bytes, path: str, results: list[KernelResult], runtime: Runtime,
                measure: bool, build_dir: str | None = None,
                spec_dirs: tuple[str, ...] = ()) -> tuple[list[KernelResult], bool]:
    """Verify every applied kernel of one file; returns updated results and whether the
    rewritten file may be written."""
    source = validate_bytes(path, original)
    new = validate_bytes(path, rewritten)
    updated, keep = [], True
    try:
        file_spec, spec_error = spec_for_file(path, spec_dirs), None
    except KxformError as exc:
        file_spec, spec_error = None, exc
    for result in results:
        if result.outcome is not Outcome.APPLIED:
            updated.append(result)
            continue
        if spec_error is not None:
            updated.append(replace(result, checks=result.checks + (CheckRecord("verify", True,
                                   f"skipped: harness spec unusable: {spec_error}"),)))
            continue
        spec = file_spec.find(result.kernel) if file_spec is not None else None
        if spec is None:
            updated.append(replace(result, checks=result.checks + (CheckRecord(
                "verify", True, "skipped: no harness spec for this kernel (compile-checked only)"),)))
            continue
        report = verify_pair(source, new, spec, runtime, flags=UnitFlags.from_build_dir(build_dir, path))
        detail = "; ".join(v.summary() for v in report.sizes)
        record = CheckRecord("verify", report.ok, f"{report.summary()}: {detail}")
        if not report.ok:
            keep = False
            updated.append(replace(result, outcome=Outcome.FAILED, stage="verify", reasons=(record.detail,),
                                   checks=result.checks + (record,)))
            continue
        checks = result.checks + (record,)
        if measure:
            timing_record, faster = _measure(source, new, spec, runtime)
            checks += (timing_record,)
            if not faster:
                keep = False
                updated.append(replace(result, outcome=Outcome.MISSED, stage="measure",
                                       reasons=(f"NotFaster: {timing_record.detail}",), checks=checks))
                continue
        updated.append(replace(result, checks=checks))
    if not keep:  # the file is not written: kernels that passed go back to unchanged
        updated = [replace(r, outcome=Outcome.MISSED, stage="verify",
                           reasons=r.reasons + ("RevertedWithFile: another kernel of this file failed "
                                                "verification or was not faster",))
                   if r.outcome is Outcome.APPLIED else r for r in updated]
    return updated, keep


def _measure(source: SourceText, new: SourceText, spec: KernelSpec,
             runtime: Runtime) -> tuple[CheckRecord, bool]:
    try:
        before, after, size = measure_pair(source, new, spec, runtime)
    except RuntimeError_ as exc:
        return CheckRecord("measure", False, f"timing failed: {exc}"), False
    faster = after.median_ms + after.spread_ms < before.median_ms - before.spread_ms
    detail = (f"size {size} on {runtime.name}: original {before.median_ms:.4f} ms (+-{before.spread_ms:.4f}), "
              f"rewritten {after.median_ms:.4f} ms (+-{after.spread_ms:.4f}); speedup "
              f"{before.median_ms / after.median_ms:.3f}x (median of {after.samples} launches, "
              f"{after.copies} input set(s) rotated, persisting L2 capped, outputs re-checked after timing)")
    return CheckRecord("measure", True, detail), faster
