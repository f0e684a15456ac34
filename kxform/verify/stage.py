"""The verification stage of `apply`: differential runs (and optional timing) of every
rewritten kernel that has a harness spec, before anything is written.

A kernel whose verification fails blocks the write of its file; the evidence (size,
output, first mismatching index, max errors) goes to the log. With `measure`, a
verified rewrite is kept only when it is faster than the original beyond the measured
spread; both times are logged.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, replace

from kxform.errors import KxformError
from kxform.harness.model import HarnessSpec, KernelSpec
from kxform.harness.spec import find_spec_for, load_spec
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome
from kxform.runtime.base import Runtime, RuntimeError_
from kxform.frontend.source import SourceText, validate_bytes
from kxform.verify.differential import UnitFlags, launch_request, verify_pair
from kxform.verify.verdict import combined_status


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
    """Verify every applied kernel of one file; returns updated results and whether the
    rewritten file may be written."""
    source = validate_bytes(path, original)
    new = validate_bytes(path, rewritten)
    updated, keep = [], True
    try:
        file_spec, spec_error = spec_for_file(path), None
    except KxformError as exc:
        file_spec, spec_error = None, exc
    for result in results:
        if result.outcome is not Outcome.APPLIED:
            updated.append(result)
            continue
        if spec_error is not None:  # a broken spec never silently turns verification off
            keep = False
            record = CheckRecord("verify", False, f"inconclusive: harness spec unusable: {spec_error}")
            updated.append(replace(result, outcome=Outcome.MISSED, stage="verify",
                                   reasons=(f"VerifyInconclusive: {record.detail}",), checks=result.checks + (record,)))
            continue
        specs = file_spec.instantiations(result.kernel) if file_spec is not None else ()
        if not specs:
            updated.append(replace(result, checks=result.checks + (CheckRecord(
                "verify", True, "skipped: no harness spec for this kernel (compile-checked only)"),)))
            continue
        flags = UnitFlags.from_build_dir(build_dir, path)
        reports = [verify_pair(source, new, spec, runtime, flags=flags) for spec in specs]
        status = combined_status(reports)
        notes = missing_instantiations(source, result.kernel, specs)
        detail = " | ".join(f"{r.summary()}: " + "; ".join(v.summary() for v in r.sizes) for r in reports)
        detail += "".join(f"; note: {n}" for n in notes)
        record = CheckRecord("verify", status == "ok", detail)
        if status == "mismatch":
            keep = False
            updated.append(replace(result, outcome=Outcome.FAILED, stage="verify", reasons=(record.detail,),
                                   checks=result.checks + (record,)))
            continue
        if status != "ok":  # inconclusive or unverified: could not tell, so nothing is written
            keep = False
            why = next(r for r in reports if r.status == status).summary()
            key = "VerifyInconclusive" if status == "inconclusive" else "Unverified"
            updated.append(replace(result, outcome=Outcome.MISSED, stage="verify", reasons=(f"{key}: {why}",),
                                   checks=result.checks + (record,)))
            continue
        checks = result.checks + (record,)
        if measure:
            timing_record, faster = _measure(source, new, specs[0], runtime)
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
                                                "verification, could not be verified, or was not faster",))
                   if r.outcome is Outcome.APPLIED else r for r in updated]
    return updated, keep


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
    return [f"instantiation {s} (launched at line {line}) has no spec entry and was not verified"
            for s, line in missing.items()]


def measure_pair(source: SourceText, new: SourceText, spec: KernelSpec, runtime: Runtime,
                 repeat: int = 50) -> tuple[Timing, Timing, str]:
    """Median and spread of the original and the rewritten kernel at the spec's first bench
    size (else its largest check size), same inputs, same runtime; and the size's name."""
    from kxform.build.extract import extract_kernel
    from kxform.harness.inputs import make_inputs

    size = (spec.bench_sizes or spec.check_sizes[-1:])[0]
    resolved = spec.launch(size)
    inputs = make_inputs(spec, resolved)
    timings = []
    for version, src in (("original", source), ("rewritten", new)):
        request = launch_request(extract_kernel(src, spec.name), resolved, inputs,
                                 f"{spec.name}[{size.name}] {version}", 600.0)
        timings.append(_timing(runtime.time(request, warmup=5, repeat=repeat)))
    return timings[0], timings[1], size.name


def _measure(source: SourceText, new: SourceText, spec: KernelSpec,
             runtime: Runtime) -> tuple[CheckRecord, bool]:
    try:
        before, after, size = measure_pair(source, new, spec, runtime)
    except RuntimeError_ as exc:
        return CheckRecord("measure", False, f"timing failed: {exc}"), False
    faster = after.median_ms + after.spread_ms < before.median_ms - before.spread_ms
    detail = (f"size {size} on {runtime.name}: original {before.median_ms:.4f} ms (+-{before.spread_ms:.4f}), "
              f"rewritten {after.median_ms:.4f} ms (+-{after.spread_ms:.4f}); speedup "
              f"{before.median_ms / after.median_ms:.3f}x")
    return CheckRecord("measure", True, detail), faster
