"""Differential verification: the original and the rewritten kernel on the same inputs.

For every size of the harness spec: fresh seeded inputs, both versions launched by the
same runtime (GPU or CPU), every output compared. How the rewritten version is launched
and how outputs compare is the rewriting pass's verification policy
(kxform.engine.policy, applied by kxform.verify.versions): bit-exact for a remap (the
spec's tolerance when the kernel accumulates floats with atomics), a derived launch and
a stated tolerance for a new tile. The same machinery checks a kernel against its NumPy
reference (the corpus tests and the GPU suite).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from kxform.errors import SpecError, UsageError
from kxform.build.extract import ExtractedKernel, extract_kernel
from kxform.harness.compare import Comparison, compare, compare_within
from kxform.harness.dtypes import CTYPE_DTYPES, base_ctype
from kxform.harness.inputs import make_inputs
from kxform.harness.launch import ResolvedArg, ResolvedLaunch
from kxform.harness.model import CompareSpec, KernelSpec, SizeSpec
from kxform.harness.reference import compare_outputs, run_reference
from kxform.runtime.base import (
    BufferArg,
    LaunchRequest,
    LaunchResult,
    Runtime,
    RuntimeError_,
    Unsupported,
    count_unwritten_against,
    poison_like,
    poison_mask,
)
from kxform.engine.policy import OutputCompare, VerifyPolicy
from kxform.engine.reorder_probe import ReorderProbe
from kxform.verify.probe import ProbeBounds, probe_bounds
from kxform.verify.verdict import OutputCheck, SizeVerdict, VerifyReport, inputs_finite, vacuity
from kxform.frontend.source import SourceText
from kxform.verify.versions import LaunchUndecided, comparison, rewritten_launch
from kxform.harness.request import NO_FLAGS, UnitFlags, launch_request

EXACT = CompareSpec("exact")
FLOAT_ATOMIC_RE = re.compile(r"\batomic(Add|Sub)\s*\(\s*[^,]*,\s*[^)]*\)")


def check_signature(spec: KernelSpec, extracted: ExtractedKernel) -> None:
    """The spec must describe the kernel's parameters, in order, with matching kinds and
    element types; say which one is off and how to fix it (before anything runs)."""
    where = spec.location
    params, args = extracted.params, spec.args
    for i, param in enumerate(params):
        if i >= len(args):
            raise SpecError(
                f"kernel '{spec.name}': the spec has no argument for parameter '{param.ctype} "
                f'{param.name}\' (#{i + 1}); add an [[kernel."{spec.name}".args]] entry for it',
                where,
            )
        arg = args[i]
        is_buffer = "*" in param.ctype or "[" in param.ctype
        if is_buffer != (arg.kind == "buffer"):
            raise SpecError(
                f"kernel '{spec.name}' arg '{arg.name}' (#{i + 1}): kind '{arg.kind}' but the kernel "
                f"parameter is '{param.ctype} {param.name}'; use kind = "
                f'"{"buffer" if is_buffer else "scalar"}"',
                arg.location if arg.location.path else where,
            )
        expected = CTYPE_DTYPES.get(base_ctype(param.ctype))
        if expected is not None and expected != arg.dtype and not _compatible(expected, arg.dtype):
            raise SpecError(
                f"kernel '{spec.name}' arg '{arg.name}': dtype '{arg.dtype}' but the kernel parameter "
                f"is '{param.ctype} {param.name}'; use dtype = \"{expected}\"",
                arg.location if arg.location.path else where,
            )
    if len(args) > len(params):
        raise SpecError(
            f"kernel '{spec.name}': the spec lists {len(args)} arguments, the kernel takes "
            f"{len(params)}; remove '{args[len(params)].name}'",
            where,
        )


def _compatible(expected: str, given: str) -> bool:
    """Same-width integers of either signedness are interchangeable (bit patterns)."""
    return expected.lstrip("u").startswith("int") and given.lstrip("u") == expected.lstrip("u")


def _sizes(spec: KernelSpec, names: tuple[str, ...]) -> tuple[SizeSpec, ...]:
    if names:
        return tuple(spec.size(n) for n in names)
    return spec.check_sizes


def uses_float_atomics(source: SourceText) -> bool:
    return bool(FLOAT_ATOMIC_RE.search(source.text)) and "float" in source.text


SizeCheck = Callable[[SizeSpec, ResolvedLaunch, dict, bool], SizeVerdict]
SizeDone = Callable[[int, int, str], object]
"""Told after each size (done, total, size name): the CLI moves a progress bar."""


def _over_sizes(
    spec: KernelSpec, sizes: tuple[str, ...], seed: int | None, check: SizeCheck, progress: SizeDone | None = None
) -> tuple[SizeVerdict, ...]:
    """Fresh seeded inputs per size, `check` them. The smallest size (by bytes) is the one
    whose original run also watches for reads of unwritten `out` buffers."""
    chosen = _sizes(spec, sizes)
    launches = [spec.launch(size) for size in chosen]
    watched = min(range(len(launches)), key=lambda i: launches[i].total_bytes, default=-1)
    verdicts = []
    for i, (size, resolved) in enumerate(zip(chosen, launches)):
        start = time.perf_counter()
        inputs = make_inputs(spec, resolved, seed)
        verdict = check(size, resolved, inputs, i == watched)
        verdicts.append(replace(verdict, seconds=time.perf_counter() - start))
        if progress is not None:
            progress(i + 1, len(chosen), size.name)
    return tuple(verdicts)


def _run_original(runtime: Runtime, request: LaunchRequest, size: str) -> LaunchResult | SizeVerdict:
    """The original's run, or the verdict that ends this size: a kernel the runtime cannot
    run is unverified; one that fails, or reads an `out` buffer before writing it, makes
    the size inconclusive (an error of the spec or the kernel, not of the rewrite)."""
    try:
        result = runtime.run(request)
    except Unsupported as exc:
        return SizeVerdict(size, "unverified", error=str(exc))
    except RuntimeError_ as exc:
        return SizeVerdict(size, "inconclusive", error=f"the original kernel failed: {exc}")
    if result.unwritten_reads:
        first = result.unwritten_reads[0]
        return SizeVerdict(size, "inconclusive", error=f"spec error: {first.describe()}", spec_error=True)
    return result


def _blame_original(verdict: SizeVerdict, runtime: Runtime, request: LaunchRequest) -> SizeVerdict | None:
    """On a runtime that does not check bounds (the GPU), a mismatch may be the original's
    fault: one that reads past a buffer reads whatever lies there. Its launch is run
    again on the bounds-checked CPU runtime; when it fails there, the size is
    inconclusive and names the original (a spec or kernel error), not a mismatch."""
    from kxform.runtime.cpu import CpuRuntime

    if isinstance(runtime, CpuRuntime):
        return None  # it checked bounds already: the original ran cleanly
    cpu = CpuRuntime()
    if not cpu.available()[0]:
        return None
    try:
        cpu.run(request)
    except RuntimeError_ as exc:
        return replace(
            verdict,
            status="inconclusive",
            outputs=(),
            error=f"the original kernel fails at this size on the bounds-checked CPU runtime ({exc}): "
            f"a spec or kernel error, not the rewrite's (on {runtime.name}: {verdict.summary()})",
        )
    except Unsupported:
        return None
    return None


def _watching(request: LaunchRequest, runtime: Runtime, watch: bool) -> LaunchRequest:
    has_out = any(isinstance(a, BufferArg) and a.role == "out" for a in request.args)
    return replace(request, watch=True) if watch and has_out and runtime.watches_reads else request


def _unwritten_both(role: str, original: np.ndarray, other: np.ndarray) -> np.ndarray | None:
    """For an `out` buffer the original wrote in part (a stencil leaves its border): the
    elements both versions left unwritten, still the poison; None otherwise."""
    if role != "out":
        return None
    left = poison_mask(original)
    if left.all() or not left.any():
        return None
    return left & poison_mask(other)


def _output_checks(
    resolved: ResolvedLaunch,
    inputs: dict,
    original: dict[str, np.ndarray],
    other: dict[str, np.ndarray],
    comparisons: dict[str, Comparison],
    unwritten_both: bool = False,
) -> tuple[OutputCheck, ...]:
    """`unwritten_both`: two versions of a kernel are compared, so elements neither wrote
    agree (the comparison skipped them); against a reference every element counts."""
    dtypes = {a.name: a.dtype for a in resolved.args}
    outputs = {a.name for a in resolved.args if a.kind == "buffer" and a.role == "out"}
    finite = inputs_finite(inputs, dtypes, outputs)
    checks = []
    for name, compared in comparisons.items():
        arg = resolved.arg(name)
        initial = np.ascontiguousarray(inputs[name])
        if arg.role == "out":
            initial = poison_like(initial)
        why = vacuity(
            name, arg.role, arg.dtype, initial, original[name], other[name], finite, partial_ok=unwritten_both
        )
        checks.append(
            OutputCheck(
                name, compared, count_unwritten_against(original[name], other[name]) if arg.role == "out" else 0, why
            )
        )
    return tuple(checks)


def _scratch_left(policy: VerifyPolicy, after: LaunchResult) -> str | None:
    """Why a scratch buffer the kernel must leave as it found it (zero) is not, or None: a
    later launch would start from what this one left (arrival counters never reset)."""
    for scratch in policy.launch.scratch:
        data = after.outputs.get(scratch.name)
        if scratch.restored and data is not None and np.any(data):
            count = int(np.count_nonzero(data))
            return (
                f"the rewritten kernel leaves {count} of {data.size} elements of its scratch buffer "
                f"'{scratch.name}' non-zero: a later launch would start from them"
            )
    return None


def default_policy(original: SourceText) -> VerifyPolicy:
    """Without a pass to ask (`kxform verify A B`): the spec's launch for both, bit-exact
    unless the kernel accumulates floats with atomics (then the spec's tolerance)."""
    if uses_float_atomics(original):
        return VerifyPolicy(compare=OutputCompare("spec", reason="float atomics: block order changes rounding"))
    return VerifyPolicy()


def verify_pair(
    original: SourceText,
    rewritten: SourceText,
    spec: KernelSpec,
    runtime: Runtime,
    sizes: tuple[str, ...] = (),
    seed: int | None = None,
    timeout_s: float = 120.0,
    flags: UnitFlags = NO_FLAGS,
    policy: VerifyPolicy | None = None,
    progress: SizeDone | None = None,
) -> VerifyReport:
    """Run both versions on identical inputs at every size; compare every output. The
    pass's `policy` says how the rewritten version is launched and how outputs compare."""
    extracted = (extract_kernel(original, spec.name), extract_kernel(rewritten, spec.name))
    check_signature(spec, extracted[0])
    policy = policy or default_policy(original)
    probe = policy.compare.probe
    probed = extract_kernel(SourceText(original.path, probe.source.encode("utf-8")), spec.name) if probe else None

    def check(size: SizeSpec, resolved: ResolvedLaunch, inputs: dict, watch: bool) -> SizeVerdict:
        label = f"{spec.name}[{size.name}]"
        request = launch_request(extracted[0], resolved, inputs, f"{label} original", timeout_s, flags)
        before = _run_original(runtime, _watching(request, runtime, watch), size.name)
        if isinstance(before, SizeVerdict):
            return before
        try:
            launch = rewritten_launch(resolved, extracted[0].params, policy.launch)
        except LaunchUndecided as exc:  # the rewritten version's launch is unknown: could not tell
            return SizeVerdict(size.name, "inconclusive", error=str(exc))
        try:
            after = runtime.run(launch_request(extracted[1], launch, inputs, f"{label} rewritten", timeout_s, flags))
        except Unsupported as exc:
            return SizeVerdict(size.name, "unverified", error=str(exc))
        except RuntimeError_ as exc:
            verdict = SizeVerdict(
                size.name, "mismatch", error=f"the rewritten kernel failed where the original ran: {exc}"
            )
            return _blame_original(verdict, runtime, request) or verdict
        left = _scratch_left(policy, after)
        if left is not None:
            return SizeVerdict(size.name, "mismatch", error=left)
        measured = None
        if policy.compare.mode == "bound":
            measured = _probe_bounds(runtime, probe, probed, resolved, inputs, before.outputs, label, timeout_s, flags)
            if isinstance(measured, SizeVerdict):
                return replace(measured, size=size.name)
        comparisons = {
            name: _compare_one(spec, policy, measured, name, expected, after.outputs[name], resolved.arg(name))
            for name, expected in before.outputs.items()
        }
        verdict = SizeVerdict.from_checks(
            size.name, _output_checks(resolved, inputs, before.outputs, after.outputs, comparisons, unwritten_both=True)
        )
        if verdict.status == "mismatch":
            verdict = _blame_original(verdict, runtime, request) or verdict
        if measured is None or policy.compare.probe is None:
            return verdict
        return replace(verdict, tolerance=measured.describe(policy.compare.probe))

    return VerifyReport(spec.name, runtime.name, "rewritten", _over_sizes(spec, sizes, seed, check, progress))


def _compare_one(
    spec: KernelSpec,
    policy: VerifyPolicy,
    measured: ProbeBounds | None,
    name: str,
    expected: np.ndarray,
    actual: np.ndarray,
    arg: ResolvedArg,
) -> Comparison:
    """One output: within its measured bounds where the pass reorders sums (unless the spec
    asks for it bit-exact), else as the spec and the policy say."""
    unwritten = _unwritten_both(arg.role, expected, actual)
    stated = spec.compare_for(name)
    if measured is not None and stated.mode != "exact":
        return compare_within(expected, actual, measured.bounds[name], dtype=arg.dtype, unwritten_both=unwritten)
    return compare(expected, actual, comparison(stated, policy.compare), dtype=arg.dtype, unwritten_both=unwritten)


def _probe_bounds(
    runtime: Runtime,
    probe: ReorderProbe | None,
    probed: ExtractedKernel | None,
    resolved: ResolvedLaunch,
    inputs: dict,
    original: dict[str, np.ndarray],
    label: str,
    timeout_s: float,
    flags: UnitFlags,
) -> ProbeBounds | SizeVerdict:
    """The tolerances the reorder probe measures at this size, or the inconclusive verdict
    ("could not tell") when there is no probe or it cannot run."""
    if probe is None or probed is None:
        return SizeVerdict("", "inconclusive", error="could not tell: the rewrite reorders sums and has no probe")
    dtypes = {name: resolved.arg(name).dtype for name in original}

    def run(macro: str) -> dict[str, np.ndarray]:
        moved = replace(flags, defines=(*flags.defines, f"{macro}=1"))
        return runtime.run(launch_request(probed, resolved, inputs, f"{label} probe {macro}", timeout_s, moved)).outputs

    try:
        return probe_bounds(probe, original, dtypes, run)
    except (RuntimeError_, Unsupported) as exc:
        return SizeVerdict("", "inconclusive", error=f"could not tell: the reorder probe failed: {exc}")


def verify_reference(
    source: SourceText,
    spec: KernelSpec,
    runtime: Runtime,
    sizes: tuple[str, ...] = (),
    seed: int | None = None,
    timeout_s: float = 120.0,
    flags: UnitFlags = NO_FLAGS,
    progress: SizeDone | None = None,
) -> VerifyReport:
    """Run the kernel and compare every output with the spec's NumPy reference."""
    if spec.reference is None:
        raise SpecError(f"kernel '{spec.name}' has no reference function in its spec", spec.location)
    extracted = extract_kernel(source, spec.name)
    check_signature(spec, extracted)

    def check(size: SizeSpec, resolved: ResolvedLaunch, inputs: dict, watch: bool) -> SizeVerdict:
        request = launch_request(extracted, resolved, inputs, f"{spec.name}[{size.name}]", timeout_s, flags)
        result = _run_original(runtime, _watching(request, runtime, watch), size.name)
        if isinstance(result, SizeVerdict):
            return (
                replace(result, status="mismatch")
                if result.status == "inconclusive" and not result.spec_error
                else result
            )
        expected = run_reference(spec, resolved, inputs)
        comparisons = compare_outputs(spec, resolved, expected, result.outputs)
        return SizeVerdict.from_checks(
            size.name, _output_checks(resolved, inputs, result.outputs, expected, comparisons)
        )

    return VerifyReport(spec.name, runtime.name, "reference", _over_sizes(spec, sizes, seed, check, progress))


def pick_runtime(name: str) -> Runtime:
    """`gpu`, `cpu`, or `auto` (the GPU when pycuda and a device exist, else the CPU)."""
    from kxform.runtime.cpu import CpuRuntime
    from kxform.runtime.gpu import GpuRuntime

    if name not in ("auto", "gpu", "cpu"):
        raise UsageError(f"unknown runtime {name!r} (auto, gpu, cpu)")
    if name in ("auto", "gpu"):
        gpu = GpuRuntime()
        ok, why = gpu.available()
        if ok:
            return gpu
        if name == "gpu":
            raise UsageError(f"GPU runtime unavailable: {why}")
    cpu = CpuRuntime()
    ok, why = cpu.available()
    if not ok:
        raise UsageError(f"CPU runtime unavailable: {why}")
    return cpu
