"""Coverage confirmed by the compiler: no physical block-index read survives the rewrite.

The source analysis finds the reads of blockIdx.x/.y it can see, in the kernel, its
device functions and its macros. The compiler sees all of them: through functors,
constructors, default arguments, function pointers, token pasting, cooperative-groups
index calls, inline PTX and headers. So each rewritten kernel's standalone unit is
compiled to PTX (nvcc, cached by content) in a variant whose prologue passes constants
instead of the physical index to the remap helper. The prologue is then the only place
allowed to read `%ctaid.x`/`%ctaid.y`, and it no longer does: any read left anywhere in
the PTX is a read the rewrite did not map, refused with the source line PTX names.
`%ctaid.z` is allowed (z is never remapped).

HIP sources are compiled through a small header set that spells HIP in CUDA
(`kxform/build/hip_for_nvcc/`). When the compiler cannot give an answer (no nvcc, a template with no
instantiation in the file or its harness spec, a unit that does not build on its own),
the caller falls back to refusing what the source analysis cannot see through (`opaque`).
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

from kxform.build.extract import extract_kernel
from kxform.build.hip import hip_include_dirs
from kxform.build.toolchain import Toolchain
from kxform.errors import KxformError
from kxform.frontend.model import Function, SourceModel
from kxform.frontend.source import SourceText

CTAID_XY = re.compile(r"%ctaid\.([xy])\b")
LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")
FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
PHYSICAL = ("blockIdx.x", "blockIdx.y", "hipBlockIdx_x", "hipBlockIdx_y")
PTX_ARCH = "sm_90"


@dataclass(frozen=True)
class PtxVerdict:
    """`confirmed`: the compiler answered (then `unmapped` lists the reads it found, as
    "%ctaid.x (line 52)"); otherwise `why_not` says why it could not answer."""

    confirmed: bool
    unmapped: tuple[str, ...] = ()
    why_not: str = ""


@functools.lru_cache(maxsize=1)
def _builder():  # type: ignore[no-untyped-def]
    """One nvcc builder per process (finding nvcc and its version costs a process start)."""
    from kxform.build.builder import Builder
    from kxform.build.nvcc import find_nvcc

    if find_nvcc() is None:
        return None
    try:
        return Builder(jobs=1)
    except KxformError:
        return None


def nvcc_available() -> bool:
    return _builder() is not None


def constant_prologue(source: SourceText, kernel: Function, mark: bytes) -> bytes | None:
    """The file with the kernel's prologue passing `0u, 0u` for the physical index, or None
    when the prologue is not where a rewrite puts it."""
    data = source.data
    at = data.find(mark, kernel.body.start, kernel.body.end)
    if at < 0:
        return None
    open_at = data.find(b"(", at)
    end = data.find(b";", at)
    if open_at < 0 or end < 0 or open_at > end:
        return None
    args = data[open_at + 1 : end].rsplit(b")", 1)[0].split(b",")
    if len(args) != 4 or args[0].strip().decode() not in PHYSICAL or args[1].strip().decode() not in PHYSICAL:
        return None
    new_args = b"0u, 0u," + b",".join(args[2:])
    close = data.rfind(b")", open_at, end)
    return data[: open_at + 1] + new_args + data[close:]


def instantiation(model: SourceModel, kernel: Function) -> str | None:
    """The kernel's spelling for extraction: its name, or for a template the first
    instantiation the file launches with concrete arguments or instantiates explicitly,
    else the first its harness spec lists (None if there is none)."""
    if kernel.template_params is None:
        return kernel.name
    for launch in model.launches:
        if launch.kernel != kernel.name or not launch.template_args:
            continue
        host = next((f for f in model.functions if f.name == launch.function), None)
        words = set(re.findall(r"[A-Za-z_]\w*", launch.template_args))
        if host is not None and words & host.template_names:
            continue
        return f"{kernel.name}{launch.template_args}"
    found = re.search(
        rb"\btemplate\s+__global__\s+void\s+" + re.escape(kernel.name.encode()) + rb"\s*(<[^;{(]*>)", model.source.data
    )
    if found:
        return f"{kernel.name}{found.group(1).decode()}"
    return _spec_instantiation(model.source.path, kernel.name)


def _spec_instantiation(path: str, name: str) -> str | None:
    """The first instantiation of `name` in the harness spec beside `path`, if any."""
    from kxform.harness.spec import find_spec_for, load_spec

    try:
        spec_path = find_spec_for(path)
        specs = load_spec(spec_path).instantiations(name) if spec_path is not None else ()
    except KxformError:
        return None
    return next((s.name for s in specs if "<" in s.name), None)


def confirm(
    model: SourceModel,
    kernel: Function,
    mark: bytes,
    builder=None,  # type: ignore[no-untyped-def]
    toolchain: Toolchain | None = None,
) -> PtxVerdict:
    """Compile the kernel's unit with a constant prologue and list every %ctaid.x/.y read
    (with `builder`, a `kxform.build.builder.Builder`, instead of the process's own), with
    the project's include directories, defines and flags from `toolchain`."""
    builder = builder or _builder()
    if builder is None:
        return PtxVerdict(False, why_not="nvcc not found")
    source = model.source
    if not source.path.endswith((".cu", ".cuh", ".hip")):
        return PtxVerdict(False, why_not=f"not a CUDA or HIP source ({os.path.basename(source.path)})")
    spelling = instantiation(model, kernel)
    if spelling is None:
        return PtxVerdict(False, why_not=f"template '{kernel.name}' has no concrete instantiation in the file")
    cleaned = _without_broken_functions(model, kernel, source.data)
    if cleaned is None:
        return PtxVerdict(False, why_not="a syntax error lies in the kernel's closure or outside every function")
    variant = constant_prologue(SourceText(source.path, cleaned), kernel, mark)
    if variant is None:
        return PtxVerdict(False, why_not="the prologue is not in the form the rewrite emits")
    try:
        unit = extract_kernel(SourceText(source.path, variant), spelling)
    except KxformError as exc:
        return PtxVerdict(False, why_not=f"the kernel cannot be extracted on its own ({exc.cause})")
    from kxform.build.nvcc import BuildJob

    try:
        include_dirs, defines, flags = toolchain.project_flags(source.path) if toolchain is not None else ((), (), ())
    except KxformError as exc:
        return PtxVerdict(False, why_not=f"the project's flags for the file are unknown ({exc})")
    job = BuildJob(
        source=unit.source,
        filename=source.path,
        output="ptx",
        arch=PTX_ARCH,
        extra_flags=("-lineinfo", *flags),
        source_dir=os.path.dirname(os.path.abspath(source.path)),
        include_dirs=hip_include_dirs(unit.source) + tuple(include_dirs),
        defines=tuple(defines),
    )
    result = builder.build(job)
    if not result.ok or result.output is None:
        first = next((ln.strip() for ln in result.log.splitlines() if "error" in ln), "nvcc failed")
        return PtxVerdict(False, why_not=f"its standalone unit does not compile ({first})")
    return PtxVerdict(True, tuple(_reads(result.output.decode("utf-8", "replace"))))


def _without_broken_functions(model: SourceModel, kernel: Function, data: bytes) -> bytes | None:
    """`data` with every function that holds a syntax error blanked (newlines kept), when
    none of them is in the kernel's closure: extraction drops them anyway, and the unit
    then builds. None when an error is in the closure or outside every function."""
    if not model.syntax_issues:
        return data
    closure = model.closure(kernel.name)
    out = bytearray(data)
    for issue in model.syntax_issues:
        owner = next((f for f in model.functions if f.span.contains(issue.span)), None)
        if owner is None or owner.name in closure:
            return None
        for i in range(owner.span.start, owner.span.end):
            if out[i] not in (0x0A, 0x0D):
                out[i] = 0x20
    return bytes(out)


def _reads(ptx: str) -> list[str]:
    """Every %ctaid.x/.y read, with the source line of the nearest preceding `.loc`."""
    files: dict[str, str] = {}
    found: list[str] = []
    line = ""
    for text in ptx.splitlines():
        file_match = FILE.match(text)
        if file_match:
            files[file_match.group(1)] = os.path.basename(file_match.group(2))
            continue
        loc = LOC.match(text)
        if loc:
            line = loc.group(2) if loc.group(2) != "0" else line
            continue
        for read in CTAID_XY.finditer(text):
            where = f" (line {line})" if line else ""
            item = f"%ctaid.{read.group(1)}{where}"
            if item not in found:
                found.append(item)
    return found
