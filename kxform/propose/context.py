"""The prompt context: everything kxform tells a model about one kernel, assembled by
kxform and logged in full (and shown by `kxform inspect --prompt`).

Sections: the kernel with the device functions and macros it reaches and the constants
it uses; its launch sites; the memory-access analysis (static, plus measured sector
traces when a harness spec exists); the hardware profile; ptxas resources (when nvcc
exists); the L2 model's prediction (when this build has one); how attempts are ranked
(measured on a GPU, else predicted, and which); the pass's parameter space. Earlier
attempts follow in the conversation itself, one turn each, with their results.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kxform.analysis.access import closure_functions
from kxform.build.toolchain import Toolchain
from kxform.engine.pass_api import KernelAnalysis, PassContext
from kxform.errors import KxformError
from kxform.frontend.model import SourceModel
from kxform.harness.model import KernelSpec
from kxform.hw import HwProfile
from kxform.propose.access import AccessReport, Sharing, static_accesses
from kxform.propose.predict import WaveFootprint

MAX_SOURCE_CHARS = 24_000
"""Kernel text sent at most (a longer closure is cut, and the prompt says so)."""


@dataclass(frozen=True)
class Section:
    title: str
    body: str


@dataclass(frozen=True)
class KernelContext:
    """The assembled context of one kernel (frozen: logged and hashed as it is)."""

    path: str
    kernel: str
    sections: tuple[Section, ...]
    footprint: WaveFootprint | None = field(default=None, compare=False)
    ranking: str = "prediction"
    """How verified attempts are compared: `time` (measured on a GPU) or `prediction`."""

    def render(self) -> str:
        parts = [f"# Kernel `{self.kernel}` in {self.path}"]
        parts += [f"## {s.title}\n{s.body.rstrip()}" for s in self.sections]
        return "\n\n".join(parts) + "\n"


def kernel_text(model: SourceModel, analysis: KernelAnalysis) -> str:
    """The kernel, the device functions it reaches and the macros and constants they use."""
    data = model.source.data
    functions = closure_functions(model, analysis.kernel)
    pieces = [data[f.span.start : f.span.end].decode("utf-8", "replace") for f in reversed(functions)]
    body = "\n\n".join(pieces)
    used = set(re.findall(r"\b[A-Za-z_]\w*\b", body))
    macros = [
        data[m.span.start : m.span.end].decode("utf-8", "replace").rstrip()
        for m in model.macros
        if m.name in used and len(m.body) < 400
    ]
    text = "\n".join(macros) + ("\n\n" if macros else "") + body
    if len(text) > MAX_SOURCE_CHARS:
        text = (
            text[:MAX_SOURCE_CHARS]
            + f"\n/* ... cut: the kernel's closure is longer than {MAX_SOURCE_CHARS} characters */"
        )
    return f"```cuda\n{text}\n```"


def hardware_text(hw: HwProfile) -> str:
    lines = [
        f"{hw.name} ({hw.vendor}, {hw.arch}): {hw.sm_count} {'CUs' if hw.vendor == 'amd' else 'SMs'}, "
        f"L2 {hw.l2_bytes / 2**20:.0f} MiB" + (f" in {hw.l2_slices} slices" if hw.l2_slices else "") + ", "
        f"{hw.mem_bandwidth_gbs:.0f} GB/s memory bandwidth, at most {hw.max_threads_per_sm} threads and "
        f"{hw.smem_per_sm // 1024} KiB shared memory per SM, warp {hw.warp_size}."
    ]
    if hw.is_chiplet:
        per = f"{hw.l2_bytes_per_xcd / 2**20:.0f} MiB" if hw.l2_bytes_per_xcd else "a separate L2"
        lines.append(
            f"Chiplet GPU: {hw.xcds} XCDs, each with {per}; blocks are dispatched round-robin "
            "(block pid goes to XCD pid % xcds), so only blocks on the same XCD share an L2."
        )
    else:
        lines.append(
            "One L2 shared by all SMs; blocks are dispatched in row-major order of (blockIdx.y, blockIdx.x), "
            "a wave of about SMs x resident blocks per SM at a time."
        )
    return "\n".join(lines)


def launch_text(model: SourceModel, kernel: str, spec: KernelSpec | None) -> str:
    lines = [
        f"- line {model.source.line_col(s.span.start)[0]}: {s.kernel}{s.template_args or ''}<<<{', '.join(s.config)}>>>"
        for s in model.launches
        if s.kernel == kernel.split("<")[0]
    ]
    if spec is not None:
        for size in spec.sizes:
            resolved = spec.launch(size)
            mark = " (bench: timed and ranked here)" if size.bench else ""
            lines.append(
                f"- harness size '{size.name}'{mark}: grid {resolved.grid[0]}x{resolved.grid[1]}x"
                f"{resolved.grid[2]}, block {'x'.join(map(str, resolved.block))}"
            )
    return "\n".join(lines) or "- no launch site in this file and no harness spec"


def ptxas_text(path: str, source: bytes, arch: str, toolchain: Toolchain | None = None) -> str:
    """Registers, shared memory and spills of the original, from `nvcc -Xptxas -v` (with
    the project's flags from the toolchain service)."""
    import os

    from kxform.build.builder import Builder
    from kxform.build.nvcc import BuildJob

    tools = toolchain or Toolchain.create()
    if tools.nvcc is None:
        return "not available (nvcc not found)"
    if not path.endswith((".cu", ".cuh")):
        return "not available (not a CUDA source)"
    try:
        include_dirs, defines, flags = tools.project_flags(path)
    except KxformError as exc:
        return f"not available ({exc})"
    job = BuildJob(
        source=source.decode("utf-8"),
        filename=path,
        output="check",
        arch=arch if arch.startswith("sm_") else "sm_90",
        include_dirs=include_dirs,
        defines=defines,
        extra_flags=flags,
        source_dir=os.path.dirname(os.path.abspath(path)),
    )
    result = Builder(jobs=1).build(job)
    if not result.ok:
        return "not available (the original does not compile standalone; pass -p BUILD_DIR to apply)"
    return (
        "\n".join(
            f"- {r.demangled}: {r.registers} registers, {r.shared_bytes} B static shared memory, "
            f"{r.spill_stores + r.spill_loads} B spilled, {r.stack_bytes} B stack ({r.arch})"
            for r in result.resources
        )
        or "no entry function reported"
    )


def build_context(
    ctx: PassContext,
    analysis: KernelAnalysis,
    spec: KernelSpec | None,
    runtime: object | None,
    measure: bool,
    space_text: str,
) -> KernelContext:
    """Assemble every section for one kernel. `runtime`: the verification runtime (its name
    says whether attempts can be timed); the CPU runtime also provides sector traces."""
    model = ctx.model
    kernel = analysis.kernel.name
    accesses = static_accesses(ctx, closure_functions(model, analysis.kernel))
    sharing: tuple[Sharing, ...] = ()
    note = "Sector traces: not taken (no harness spec for this kernel)."
    if spec is not None:
        from kxform.propose.traces import measured_sharing
        from kxform.runtime.base import Runtime
        from kxform.runtime.cpu import CpuRuntime

        tracer = runtime if isinstance(runtime, Runtime) and runtime.name == "cpu" else CpuRuntime()
        ok, why = tracer.available()
        sharing, note = measured_sharing(model.source, spec, tracer) if ok else ((), f"Sector traces: {why}")
    access = AccessReport(kernel, accesses, sharing, note)
    footprint = _footprint(accesses, spec, ctx.hw)
    timed = measure and getattr(runtime, "name", "") == "gpu"
    ranking = (
        "time: each verified attempt is timed on the GPU against the original at the bench size; the "
        "fastest verified attempt is kept"
        if timed
        else "prediction (no GPU timing in this run): verified attempts are ranked by "
        + (
            "kxform's wave-footprint prediction (bytes the blocks of one wave touch at the bench size; lower "
            "is better; unmeasured)"
            if footprint
            else "nothing: without a harness spec no attempt can be verified, so none is kept"
        )
    )
    measured = (
        _baseline_text(model.source, spec, runtime)
        if timed
        else "No GPU timing in this run (no GPU, or --measure not given): nothing is timed."
    )
    sections = (
        Section("Source (the kernel, the device functions it calls, the macros it uses)", kernel_text(model, analysis)),
        Section("Launches", launch_text(model, kernel, spec)),
        Section("Memory accesses", access.render()),
        Section("Hardware", hardware_text(ctx.hw)),
        Section(
            "ptxas resources of the original",
            ptxas_text(model.source.path, model.source.data, ctx.hw.arch, ctx.toolchain),
        ),
        Section("L2 model", _l2_text(footprint)),
        Section("Measured", measured),
        Section("How attempts are ranked", ranking),
        Section("What you may propose", space_text),
    )
    return KernelContext(model.source.path, kernel, sections, footprint, "time" if timed else "prediction")


def _footprint(accesses: tuple, spec: KernelSpec | None, hw: HwProfile) -> WaveFootprint | None:  # type: ignore[type-arg]
    if spec is None:
        return None
    size = (spec.bench_sizes or spec.check_sizes[-1:])[0]
    resolved = spec.launch(size)
    from kxform.harness.dtypes import numpy_dtype

    buffer_bytes = {a.name: a.count * numpy_dtype(a.dtype).itemsize for a in resolved.args if a.kind == "buffer"}
    threads = resolved.block[0] * resolved.block[1] * resolved.block[2]
    return WaveFootprint.build(accesses, (resolved.grid[0], resolved.grid[1]), threads, hw, buffer_bytes)


def _baseline_text(source: object, spec: KernelSpec | None, runtime: object) -> str:
    """The original's time at the bench size on the GPU (what attempts are compared with)."""
    from kxform.build.extract import extract_kernel
    from kxform.harness.inputs import make_inputs
    from kxform.runtime.base import RuntimeError_
    from kxform.verify.differential import EXACT, launch_request
    from kxform.verify.measure import timed_and_checked

    if spec is None:
        return "Not timed: no harness spec for this kernel."
    size = (spec.bench_sizes or spec.check_sizes[-1:])[0]
    resolved = spec.launch(size)
    try:
        request = launch_request(
            extract_kernel(source, spec.name),
            resolved,
            make_inputs(spec, resolved),  # type: ignore[arg-type]
            f"{spec.name}[{size.name}] original",
            600.0,
        )
        timing = timed_and_checked(runtime, request, {a.name: a.dtype for a in resolved.args}, EXACT)  # type: ignore[arg-type]
    except RuntimeError_ as exc:
        return f"The original could not be timed: {exc}"
    return (
        f"Original at size '{size.name}' on the GPU: {timing.median_ms:.4f} ms median (+-{timing.spread_ms:.4f}) "
        f"over {timing.samples} launches."
    )


def _l2_text(footprint: WaveFootprint | None) -> str:
    from kxform.propose.predict import locality_predictor

    lines = []
    if locality_predictor() is None:
        lines.append("The L2 model (kxform.locality) is not part of this build: no L2 hit-rate prediction.")
    if footprint is not None:
        original = footprint.bytes_per_wave(None)
        lines.append(
            f"Wave-footprint prediction of the original order: {original / 1e6:.3f} MB touched per wave of "
            f"{footprint.wave} blocks on the {footprint.grid[0]}x{footprint.grid[1]} bench grid "
            "(buffers split evenly over the tiles their subscripts select; unmeasured)."
        )
    return "\n".join(lines)
