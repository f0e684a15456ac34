"""Kernel extraction: a standalone translation unit for one kernel of a file.

The unit keeps what device code can need (includes, macros, types, constants, device
functions) and drops host functions (and so `main`) and the other kernels, so it builds
and runs on its own. Removed text is replaced by as many newlines as it held, so line
numbers in compiler messages are the original file's.

The kernel itself becomes a `__device__ __forceinline__` function and an
`extern "C" __global__` entry with concrete parameter types calls it: templated kernels
are instantiated explicitly (`gemm<float, 64>`) and every runtime launches the same
stable, unmangled name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.engine.edits import Edit, apply_edits
from kxform.errors import InputError, UsageError
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import Function, FunctionKind, SourceModel
from kxform.frontend.signature import KernelParam
from kxform.frontend.source import SourceText

ENTRY_PREFIX = "kxform_entry_"
_TEMPLATE_PARAM = re.compile(r"(?:typename|class|[\w:<>\s]+?)\s+(\w+)\s*(?:=\s*([^,]+))?$")


@dataclass(frozen=True)
class ExtractedKernel:
    source: str
    entry: str
    """The extern "C" name to launch."""
    kernel: str
    """The kernel as the user spelled it (`gemm<float, 64>`)."""
    params: tuple[KernelParam, ...]
    """Concrete parameter types (template parameters substituted), in order."""
    launch_bounds: str | None
    path: str = ""
    """The file it was extracted from: the unit keeps that file's line numbers."""


def split_spelling(spelling: str) -> tuple[str, list[str]]:
    """`gemm<float, 64>` -> ("gemm", ["float", "64"]); nested <> and () are kept together."""
    name, sep, rest = spelling.partition("<")
    if not sep:
        return spelling.strip(), []
    if not rest.rstrip().endswith(">"):
        raise UsageError(f"malformed kernel instantiation {spelling!r}: expected NAME<ARGS>")
    inner = rest.rstrip()[:-1]
    args, depth, current = [], 0, ""
    for char in inner:
        depth += char in "<("
        depth -= char in ">)"
        if char == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        args.append(current.strip())
    return name.strip(), args


def _template_bindings(kernel: Function, args: list[str], spelling: str) -> dict[str, str]:
    if kernel.template_params is None:
        if args:
            raise UsageError(f"kernel '{kernel.name}' is not a template; got {spelling!r}")
        return {}
    if not args:
        raise UsageError(
            f"kernel '{kernel.name}' is a template {kernel.template_params}: "
            f"name an instantiation, e.g. --kernel '{kernel.name}<...>'"
        )
    names, defaults = [], []
    for part in _split_top(kernel.template_params.strip()[1:-1]):
        match = _TEMPLATE_PARAM.match(part.strip())
        if match is None:
            raise UsageError(f"cannot read template parameter {part.strip()!r} of '{kernel.name}'")
        names.append(match.group(1))
        defaults.append(match.group(2).strip() if match.group(2) else None)
    if len(args) > len(names):
        raise UsageError(f"{spelling!r}: '{kernel.name}' takes {len(names)} template arguments")
    bound = dict(zip(names, args))
    for name, default in zip(names[len(args) :], defaults[len(args) :]):
        if default is None:
            raise UsageError(f"{spelling!r}: template argument for '{name}' missing")
        bound[name] = default
    return bound


def _split_top(text: str) -> list[str]:
    _, parts = split_spelling(f"x<{text}>")
    return parts


def _substitute(text: str, bindings: dict[str, str]) -> str:
    for name, value in bindings.items():
        text = re.sub(rf"\b{re.escape(name)}\b", value, text)
    return text


def _blank(source: SourceText, start: int, end: int, origin: str) -> Edit:
    return Edit(start, end, "\n" * source.data.count(b"\n", start, end), origin)


def _issue_in_reach(model: SourceModel, kernel: str) -> int | None:
    """The offset of a syntax error that the unit of `kernel` would carry: one inside the
    kernel or a function it reaches, or one no function holds before a kernel (an
    unbalanced brace can swallow what follows). An error inside host functions, which the
    unit drops, or after every kernel (`BOOL WINAPI DllMain(...)` under `#ifdef _WIN32`:
    the preprocessor removes it, and otherwise the unit's build says so) does not block."""
    reach = model.closure(kernel)
    functions = [f for f in model.functions if f.name in reach or f.kind is not FunctionKind.HOST]
    last_device = max((f.span.end for f in functions), default=0)
    for issue in model.syntax_issues:
        host = any(
            f.kind is FunctionKind.HOST and f.span.start <= issue.span.start < f.span.end for f in model.functions
        )
        inside = any(f.span.start < issue.span.end and issue.span.start < f.span.end for f in functions)
        if inside or (not host and issue.span.start < last_device):
            return issue.span.start
    return None


def find_kernel(model: SourceModel, name: str) -> Function:
    matches = [k for k in model.kernels if k.name == name]
    if not matches:
        known = ", ".join(sorted({k.name for k in model.kernels})) or "none"
        raise UsageError(f"{model.source.path}: no kernel named '{name}' (kernels: {known})")
    if len(matches) > 1:
        raise UsageError(
            f"{model.source.path}: kernel '{name}' is defined {len(matches)} times (overloads are not supported)"
        )
    return matches[0]


def extract_kernel(source: SourceText, spelling: str) -> ExtractedKernel:
    """Build the standalone unit for `spelling` (a kernel name or template instantiation)."""
    model = parse_model(source)
    name, args = split_spelling(spelling)
    issue = _issue_in_reach(model, name)
    if issue is not None:
        raise InputError("syntax error; cannot extract a kernel", source.location(issue))
    kernel = find_kernel(model, name)
    bindings = _template_bindings(kernel, args, spelling)
    closure = model.closure(kernel.name)
    edits: list[Edit] = []
    for function in model.functions:
        drop = function.kind is FunctionKind.HOST or (
            function.kind is FunctionKind.KERNEL and function.name not in closure
        )
        if drop:
            edits.append(_blank(source, function.span.start, function.span.end, f"drop {function.name}"))
    header_end = kernel.params_span.start
    global_at = source.data.find(b"__global__", kernel.span.start, header_end)
    if global_at < 0:
        raise InputError(
            f"kernel '{kernel.name}' is declared through a macro; extraction needs a literal __global__",
            source.location(kernel.span.start),
        )
    edits.append(Edit(global_at, global_at + len("__global__"), "__device__ __forceinline__", "entry"))
    if kernel.launch_bounds:
        at = source.data.find(kernel.launch_bounds.encode(), kernel.span.start, header_end)
        edits.append(Edit(at, at + len(kernel.launch_bounds.encode()), "", "launch bounds move to entry"))
    params = tuple(
        KernelParam(_substitute(p.ctype, bindings), p.name or f"arg{i}") for i, p in enumerate(kernel.params)
    )
    entry = ENTRY_PREFIX + kernel.name
    call = f"{kernel.name}<{', '.join(args)}>" if kernel.template_params else kernel.name
    bounds = f"{_substitute(kernel.launch_bounds, bindings)} " if kernel.launch_bounds else ""
    wrapper = (
        f"\n/* kxform: launch entry for {spelling} */\n"
        f'extern "C" __global__ void {bounds}{entry}('
        + ", ".join(f"{p.ctype} {p.name}" for p in params)
        + f") {{\n    {call}("
        + ", ".join(p.name for p in params)
        + ");\n}\n"
    )
    text = apply_edits(source, edits).data.decode("utf-8")
    if not text.endswith("\n"):
        text += "\n"
    return ExtractedKernel(text + wrapper, entry, spelling, params, kernel.launch_bounds, source.path)
