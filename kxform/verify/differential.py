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

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from kxform.errors import SpecError, UsageError
from kxform.build.extract import ExtractedKernel, extract_kernel
from kxform.harness.compare import Comparison, compare
from kxform.harness.dtypes import CTYPE_DTYPES, base_ctype
from kxform.harness.inputs import make_inputs
from kxform.harness.launch import ResolvedLaunch
from kxform.harness.model import CompareSpec, KernelSpec, SizeSpec
from kxform.harness.reference import compare_outputs, run_reference
from kxform.runtime.base import (
    BufferArg,
    LaunchRequest,
    Runtime,
    RuntimeError_,
    ScalarArg,
    count_unwritten_against,
)
from kxform.engine.policy import OutputCompare, VerifyPolicy
from kxform.frontend.source import SourceText
from kxform.verify.versions import comparison, rewritten_launch

EXACT = CompareSpec("exact")
FLOAT_ATOMIC_RE = re.compile(r"\batomic(Add|Sub)\s*\(\s*[^,]*,\s*[^)]*\)")


@dataclass(frozen=True)
class OutputCheck:
    name: str
    comparison: Comparison
    unwritten: int


@dataclass(frozen=True)
class SizeVerdict:
    size: str
    ok: bool
    outputs: tuple[OutputCheck, ...] = ()
    error: str | None = None
    seconds: float = 0.0

    def summary(self) -> str:
        if self.error:
            return f"{self.size}: error: {self.error}"
        bad = [o for o in self.outputs if not o.comparison.ok or o.unwritten]
        if not bad:
            off = [o for o in self.outputs if o.comparison.max_abs > 0]
            within = "; ".join(f"{o.name} within tolerance, max abs {o.comparison.max_abs:.3g}" for o in off)
            same = [o.name for o in self.outputs if o not in off]
            return f"{self.size}: ok ({', '.join(same) + ' match' if same else ''}{'; ' if same and off else ''}{within})"
        first = bad[0]
        note = f", {first.unwritten} elements never written" if first.unwritten else ""
        return f"{self.size}: {first.name}: {first.comparison.summary()}{note}"


@dataclass(frozen=True)
class VerifyReport:
    kernel: str
    runtime: str
    against: str  # "rewritten" or "reference"
    sizes: tuple[SizeVerdict, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return bool(self.sizes) and all(s.ok for s in self.sizes)

    def summary(self) -> str:
        status = "verified" if self.ok else "MISMATCH"
        what = "original vs rewritten" if self.against == "rewritten" else "kernel vs NumPy reference"
        return f"{self.kernel}: {status} on the {self.runtime} runtime ({what}, {len(self.sizes)} sizes)"


def check_signature(spec: KernelSpec, extracted: ExtractedKernel) -> None:
    """The spec must describe the kernel's parameters, in order, with matching kinds and
    element types; say which one is off and how to fix it (before anything runs)."""
    where = spec.location
    params, args = extracted.params, spec.args
    for i, param in enumerate(params):
        if i >= len(args):
            raise SpecError(f"kernel '{spec.name}': the spec has no argument for parameter '{param.ctype} "
                            f"{param.name}' (#{i + 1}); add an [[kernel.\"{spec.name}\".args]] entry for it", where)
        arg = args[i]
        is_buffer = "*" in param.ctype or "[" in param.ctype
        if is_buffer != (arg.kind == "buffer"):
            raise SpecError(f"kernel '{spec.name}' arg '{arg.name}' (#{i + 1}): kind '{arg.kind}' but the kernel "
                            f"parameter is '{param.ctype} {param.name}'; use kind = "
                            f"\"{'buffer' if is_buffer else 'scalar'}\"", arg.location if arg.location.path else where)
        expected = CTYPE_DTYPES.get(base_ctype(param.ctype))
        if expected is not None and expected != arg.dtype and not _compatible(expected, arg.dtype):
            raise SpecError(f"kernel '{spec.name}' arg '{arg.name}': dtype '{arg.dtype}' but the kernel parameter "
                            f"is '{param.ctype} {param.name}'; use dtype = \"{expected}\"",
                            arg.location if arg.location.path else where)
    if len(args) > len(params):
        raise SpecError(f"kernel '{spec.name}': the spec lists {len(args)} arguments, the kernel takes "
                        f"{len(params)}; remove '{args[len(params)].name}'", where)


def _compatible(expected: str, given: str) -> bool:
    """Same-width integers of either signedness are interchangeable (bit patterns)."""
    return expected.lstrip("u").startswith("int") and given.lstrip("u") == expected.lstrip("u")


@dataclass(frozen=True)
class UnitFlags:
    """Include directories and defines for building extracted units (from -p BUILD_DIR)."""

    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()

    @classmethod
    def from_build_dir(cls, build_dir: str | None, path: str) -> UnitFlags:
        from kxform.build.toolchain import Toolchain

        flags = Toolchain.create(build_dir).project_flags(path)
        return cls(tuple(flags.include_dirs), tuple(flags.defines))


NO_FLAGS = UnitFlags()


def launch_request(extracted: ExtractedKernel, resolved: ResolvedLaunch, inputs: dict, label: str,
                   timeout_s: float, flags: UnitFlags = NO_FLAGS) -> LaunchRequest:
    """Turn harness inputs into a runtime request for the extracted kernel's entry. The
    unit is built away from the user's tree, so the file's own directory is an include
    directory (quoted includes resolve as they did in place)."""
    args: list[BufferArg | ScalarArg] = []
    for arg in resolved.args:
        value = inputs[arg.name]
        if arg.kind == "scalar":
            args.append(ScalarArg(arg.name, value))
        else:
            args.append(BufferArg(arg.name, np.ascontiguousarray(value), arg.role))
    return LaunchRequest(source=extracted.source, kernel=extracted.entry, params=extracted.params,
                         args=tuple(args), grid=resolved.grid, block=resolved.block,
                         shared_bytes=resolved.shared_bytes, timeout_s=timeout_s, label=label,
                         filename=extracted.path, defines=flags.defines,
                         include_dirs=(os.path.dirname(os.path.abspath(extracted.path)), *flags.include_dirs))


def _sizes(spec: KernelSpec, names: tuple[str, ...]) -> tuple[SizeSpec, ...]:
    if names:
        return tuple(spec.size(n) for n in names)
    return spec.check_sizes


def uses_float_atomics(source: SourceText) -> bool:
    return bool(FLOAT_ATOMIC_RE.search(source.text)) and "float" in source.text


SizeCheck = Callable[[SizeSpec, ResolvedLaunch, dict], tuple[OutputCheck, ...]]


def _over_sizes(spec: KernelSpec, sizes: tuple[str, ...], seed: int | None,
                check: SizeCheck) -> tuple[SizeVerdict, ...]:
    """Fresh seeded inputs per size, `check` them, and turn launch failures into verdicts."""
    verdicts = []
    for size in _sizes(spec, sizes):
        start = time.perf_counter()
        resolved = spec.launch(size)
        inputs = make_inputs(spec, resolved, seed)
        try:
            checks = check(size, resolved, inputs)
        except RuntimeError_ as exc:
            verdicts.append(SizeVerdict(size.name, False, error=str(exc)))
            continue
        ok = all(c.comparison.ok and not c.unwritten for c in checks)
        verdicts.append(SizeVerdict(size.name, ok, checks, seconds=time.perf_counter() - start))
    return tuple(verdicts)


def default_policy(original: SourceText) -> VerifyPolicy:
    """Without a pass to ask (`kxform verify A B`): the spec's launch for both, bit-exact
    unless the kernel accumulates floats with atomics (then the spec's tolerance)."""
    if uses_float_atomics(original):
        return VerifyPolicy(compare=OutputCompare("spec", reason="float atomics: block order changes rounding"))
    return VerifyPolicy()


def verify_pair(original: SourceText, rewritten: SourceText, spec: KernelSpec, runtime: Runtime,
                sizes: tuple[str, ...] = (), seed: int | None = None, timeout_s: float = 120.0,
                flags: UnitFlags = NO_FLAGS, policy: VerifyPolicy | None = None) -> VerifyReport:
    """Run both versions on identical inputs at every size; compare every output. The
    pass's `policy` says how the rewritten version is launched and how outputs compare."""
    extracted = (extract_kernel(original, spec.name), extract_kernel(rewritten, spec.name))
    check_signature(spec, extracted[0])
    policy = policy or default_policy(original)

    def check(size: SizeSpec, resolved: ResolvedLaunch, inputs: dict) -> tuple[OutputCheck, ...]:
        launches = (resolved, rewritten_launch(resolved, extracted[0].params, policy.launch))
        before, after = (runtime.run(launch_request(ext, launch, inputs, f"{spec.name}[{size.name}] {version}",
                                                    timeout_s, flags))
                         for ext, launch, version in zip(extracted, launches, ("original", "rewritten")))
        checks = []
        for name, expected in before.outputs.items():
            mode = comparison(spec.compare_for(name), policy.compare)
            comparison_ = compare(expected, after.outputs[name], mode, dtype=resolved.arg(name).dtype)
            checks.append(OutputCheck(name, comparison_, count_unwritten_against(expected, after.outputs[name])))
        return tuple(checks)

    return VerifyReport(spec.name, runtime.name, "rewritten", _over_sizes(spec, sizes, seed, check))


def verify_reference(source: SourceText, spec: KernelSpec, runtime: Runtime, sizes: tuple[str, ...] = (),
                     seed: int | None = None, timeout_s: float = 120.0,
                     flags: UnitFlags = NO_FLAGS) -> VerifyReport:
    """Run the kernel and compare every output with the spec's NumPy reference."""
    if spec.reference is None:
        raise SpecError(f"kernel '{spec.name}' has no reference function in its spec", spec.location)
    extracted = extract_kernel(source, spec.name)
    check_signature(spec, extracted)

    def check(size: SizeSpec, resolved: ResolvedLaunch, inputs: dict) -> tuple[OutputCheck, ...]:
        result = runtime.run(launch_request(extracted, resolved, inputs, f"{spec.name}[{size.name}]", timeout_s,
                                            flags))
        expected = run_reference(spec, resolved, inputs)
        comparisons = compare_outputs(spec, resolved, expected, result.outputs)
        return tuple(OutputCheck(n, c, count_unwritten_against(expected[n], result.outputs[n])
                                 if resolved.arg(n).role == "out" else 0)
                     for n, c in comparisons.items())

    return VerifyReport(spec.name, runtime.name, "reference", _over_sizes(spec, sizes, seed, check))


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

