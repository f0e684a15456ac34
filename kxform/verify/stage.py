"""The verification stage of `apply`: differential runs (and optional timing) of every
rewritten kernel that has a harness spec, before anything is written.

A kernel whose verification fails blocks the write of its file; the evidence (size,
output, first mismatching index, max errors) goes to the log. With `measure`, a
verified rewrite is kept only when it is faster than the original beyond the measured
spread; both times are logged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from kxform.errors import KxformError
from kxform.harness.model import HarnessSpec, KernelSpec
from kxform.harness.spec import find_spec_for, load_spec
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome
from kxform.runtime.base import Runtime, RuntimeError_
from kxform.frontend.source import SourceText, validate_bytes
from kxform.engine.policy import VerifyPolicy
from kxform.verify.differential import UnitFlags, launch_request, verify_pair
from kxform.verify.versions import rewritten_launch


@dataclass(frozen=True)
class Timing:
    median_ms: float
    spread_ms: float  # half the interquartile range


def _timing(samples: list[float]) -> Timing:
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [min(samples), 0, max(samples)]
    return Timing(statistics.median(samples), (q[2] - q[0]) / 2)


def spec_for_file(path: str) -> HarnessSpec | None:
    """The harness spec beside `path` (kxform.toml naming it), or None."""
    spec_path = find_spec_for(path)
    return None if spec_path is None else load_spec(spec_path)


def verify_file(original: bytes, rewritten: bytes, path: str, results: list[KernelResult], runtime: Runtime,
                measure: bool, build_dir: str | None = None) -> tuple[list[KernelResult], bool]:
    """Verify every applied kernel of one file once, under the policy its passes compose
    (a kernel rewritten by `tile` then `swizzle` runs at tile's launch, compared as loosely
    as the looser pass allows); returns updated results and whether the rewritten file
    may be written."""
    source = validate_bytes(path, original)
    new = validate_bytes(path, rewritten)
    try:
        file_spec, spec_error = spec_for_file(path), None
    except KxformError as exc:
        file_spec, spec_error = None, exc
    records: dict[str, tuple[CheckRecord, ...]] = {}
    failed: dict[str, str] = {}
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
        if measure:
            timing_record, faster = _measure(source, new, spec, runtime, policy)
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


def measure_pair(source: SourceText, new: SourceText, spec: KernelSpec, runtime: Runtime,
                 repeat: int = 50, policy: VerifyPolicy | None = None) -> tuple[Timing, Timing, str]:
    """Median and spread of the original and the rewritten kernel at the spec's first bench
    size (else its largest check size), same inputs, same runtime; and the size's name."""
    from kxform.build.extract import extract_kernel
    from kxform.harness.inputs import make_inputs

    size = (spec.bench_sizes or spec.check_sizes[-1:])[0]
    resolved = spec.launch(size)
    inputs = make_inputs(spec, resolved)
    timings = []
    rewritten = rewritten_launch(resolved, extract_kernel(source, spec.name).params, (policy or VerifyPolicy()).launch)
    for version, src, launch in (("original", source, resolved), ("rewritten", new, rewritten)):
        request = launch_request(extract_kernel(src, spec.name), launch, inputs,
                                 f"{spec.name}[{size.name}] {version}", 600.0)
        timings.append(_timing(runtime.time(request, warmup=5, repeat=repeat)))
    return timings[0], timings[1], size.name


def _measure(source: SourceText, new: SourceText, spec: KernelSpec,
             runtime: Runtime, policy: VerifyPolicy) -> tuple[CheckRecord, bool]:
    try:
        before, after, size = measure_pair(source, new, spec, runtime, policy=policy)
    except RuntimeError_ as exc:
        return CheckRecord("measure", False, f"timing failed: {exc}"), False
    faster = after.median_ms + after.spread_ms < before.median_ms - before.spread_ms
    detail = (f"size {size} on {runtime.name}: original {before.median_ms:.4f} ms (+-{before.spread_ms:.4f}), "
              f"rewritten {after.median_ms:.4f} ms (+-{after.spread_ms:.4f}); speedup "
              f"{before.median_ms / after.median_ms:.3f}x")
    return CheckRecord("measure", True, detail), faster
