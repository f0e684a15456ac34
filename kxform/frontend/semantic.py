"""Semantic layer (libclang): what the syntax alone cannot see.

tree-sitter sees one file as written. libclang preprocesses and resolves it, so it finds
reads of the CUDA built-ins (blockIdx, gridDim, threadIdx, blockDim) hidden behind macros
defined in other headers, and functions reached in other files together with the
built-ins they read. It runs only when the syntax leaves a question open (the file has
local includes, or device code calls something not defined in the file). If libclang
cannot parse a file, the answer is "unknown" (`ok=False`) and passes stay conservative;
it never raises. What a pass concludes from these facts lives with the pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kxform.frontend.model import FunctionKind, SourceModel

PRELUDE_DIR = Path(__file__).parent / "prelude"
BASE_ARGS = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-Wno-unknown-cuda-version",
             "-std=c++17", "-ferror-limit=0", "-include", str(PRELUDE_DIR / "kxform_cuda_prelude.h"),
             "-I", str(PRELUDE_DIR / "stubs")]
BUILTIN_NAMES = frozenset({"blockIdx", "gridDim", "threadIdx", "blockDim"})

BUILTIN_CALL_RE = re.compile(
    r"^(__\w+|atomic\w*|make_\w+|min|max|abs|f?abs\w*|\w+f|sqrt|rsqrt|exp\w*|log\w*|pow|sin\w*|cos\w*|tan\w*|"
    r"erf\w*|floor|ceil|round|trunc|fma|fmin|fmax|isnan|isinf|printf|assert|static_cast|reinterpret_cast|"
    r"const_cast|dynamic_cast|sizeof|alignof|decltype|dim3|float[1-4]|int[1-4]|uint[1-4]|double[1-4]|"
    r"half\w*|bfloat\w*|std::\w+|cuda\w*|hip\w*|cg::\w+|load_matrix_sync|store_matrix_sync|mma_sync|"
    r"fill_fragment|this_thread_block|this_grid|tiled_partition|sync|thread_rank|size|shfl\w*|ballot\w*)$"
)
"""Callees that are CUDA/C++ built-ins, not user functions that could read a built-in."""


@dataclass(frozen=True)
class HiddenRead:
    """A read of a CUDA built-in (`blockIdx.y`) that is not spelled where it happens: it
    comes from the expansion of `macro` inside `function`."""

    function: str
    offset: int
    macro: str
    axis: str
    builtin: str = "blockIdx"


@dataclass(frozen=True)
class ForeignFunction:
    """A function defined in another file and called from this one."""

    file: str
    builtins: frozenset[str]
    """The CUDA built-ins it reads, itself or through what it calls."""


@dataclass
class SemanticInfo:
    """What libclang established about one file (or why it could not)."""

    path: str
    ok: bool
    diagnostic: str = ""
    hidden_reads: list[HiddenRead] = field(default_factory=list)
    foreign_calls: dict[str, ForeignFunction] = field(default_factory=dict)
    local_macros: frozenset[str] = frozenset()
    """Macros defined in the file itself: passes rewrite their bodies syntactically."""

    def foreign_readers(self, builtin: str) -> dict[str, str]:
        """Functions of other files, called from this file, that read `builtin`: name -> file."""
        return {name: f.file for name, f in self.foreign_calls.items() if builtin in f.builtins}


def needs_semantics(model: SourceModel) -> bool:
    """The syntax leaves a question open for device code: the file includes local headers,
    or a kernel or device function calls something that is neither defined in the file
    nor a known built-in. Host code never needs it (the built-ins cannot be read there)."""
    if any(not inc.system for inc in model.includes):
        return True
    return bool(external_device_calls(model))


def external_device_calls(model: SourceModel) -> list[str]:
    defined = {f.name for f in model.functions}
    device = {f.name for f in model.functions if f.kind is not FunctionKind.HOST}
    defined |= frozenset().union(*(f.template_names for f in model.functions if f.name in device))
    return sorted({c.callee for c in model.calls if c.caller in device and c.callee not in defined
                   and not BUILTIN_CALL_RE.match(c.callee) and model.macro(c.callee) is None})


def parse_translation_unit(path: str, data: bytes, extra_args: list[str]):  # type: ignore[no-untyped-def]
    """libclang's translation unit of `data` as `path`, or the reason it could not parse it."""
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - libclang is a dependency
        return None, f"libclang not importable: {exc}"
    try:
        tu = ci.Index.create().parse(path, args=BASE_ARGS + extra_args, unsaved_files=[(path, data.decode("utf-8"))],
                                     options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
                                     | ci.TranslationUnit.PARSE_INCOMPLETE)
    except ci.TranslationUnitLoadError as exc:
        return None, f"libclang failed to load the file: {exc}"
    fatal = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Fatal]
    if fatal:
        d = fatal[0]
        where = f"{d.location.file}:{d.location.line}" if d.location.file else path
        return None, f"{where}: {d.spelling}"
    return tu, ""


def analyse_file(path: str, data: bytes, extra_args: list[str]) -> SemanticInfo:
    """Parse with libclang and collect hidden built-in reads and foreign functions. Never raises."""
    tu, why = parse_translation_unit(path, data, extra_args)
    if tu is None:
        return SemanticInfo(path, False, why)
    info = SemanticInfo(path, True)
    main = os.path.abspath(path)
    for cursor in tu.cursor.get_children():
        _visit_top(cursor, main, data, info)
    return info


def _in_main(cursor, main: str) -> bool:  # type: ignore[no-untyped-def]
    loc = cursor.location
    return loc.file is not None and os.path.abspath(loc.file.name) == main


def _visit_top(cursor, main: str, data: bytes, info: SemanticInfo) -> None:  # type: ignore[no-untyped-def]
    import clang.cindex as ci

    kinds = (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE, ci.CursorKind.CXX_METHOD)
    if cursor.kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.STRUCT_DECL,
                       ci.CursorKind.CLASS_DECL):
        for child in cursor.get_children():
            _visit_top(child, main, data, info)
        return
    if cursor.kind not in kinds or not cursor.is_definition() or not _in_main(cursor, main):
        return
    for node in cursor.walk_preorder():
        if node.kind == ci.CursorKind.MEMBER_REF_EXPR:
            _member_read(cursor, node, main, data, info)
        elif node.kind == ci.CursorKind.CALL_EXPR and node.referenced is not None:
            target = node.referenced.get_definition() or node.referenced
            loc = target.location
            if loc.file is not None and os.path.abspath(loc.file.name) != main:
                info.foreign_calls[target.spelling] = ForeignFunction(loc.file.name, _builtins_read(target))


def _member_read(function, node, main: str, data: bytes, info: SemanticInfo) -> None:  # type: ignore[no-untyped-def]
    import clang.cindex as ci

    base = next(iter(node.get_children()), None)
    while base is not None and base.kind == ci.CursorKind.UNEXPOSED_EXPR:
        base = next(iter(base.get_children()), None)
    if base is None or base.kind != ci.CursorKind.DECL_REF_EXPR or base.spelling not in BUILTIN_NAMES:
        return
    offset = base.location.offset
    if base.location.file is None or os.path.abspath(base.location.file.name) != main:
        return
    spelled = data[offset:offset + len(base.spelling)].decode("utf-8", "replace")
    if spelled != base.spelling and not data[offset:offset + 3] == b"hip":
        info.hidden_reads.append(HiddenRead(function.spelling, offset, _identifier_at(data, offset), node.spelling,
                                            base.spelling))


def _builtins_read(cursor, depth: int = 0) -> frozenset[str]:  # type: ignore[no-untyped-def]
    import clang.cindex as ci

    if depth > 4:
        return frozenset()
    found: set[str] = set()
    for node in cursor.walk_preorder():
        if node.kind == ci.CursorKind.DECL_REF_EXPR and node.spelling in BUILTIN_NAMES:
            found.add(node.spelling)
        elif node.kind == ci.CursorKind.CALL_EXPR and node.referenced is not None and node.referenced != cursor:
            definition = node.referenced.get_definition()
            if definition is not None:
                found |= _builtins_read(definition, depth + 1)
    return frozenset(found)


def _identifier_at(data: bytes, offset: int) -> str:
    end = offset
    while end < len(data) and (chr(data[end]).isalnum() or data[end] == ord("_")):
        end += 1
    return data[offset:end].decode("utf-8", "replace") or "?"


def semantic_provider(path: str, build_dir: str | None) -> Callable[[SourceModel], SemanticInfo | None]:
    """A provider for the driver: runs libclang only when `needs_semantics` says so."""
    from kxform.build.toolchain import Toolchain

    extra = Toolchain.create(build_dir).libclang_args(path)

    def provide(model: SourceModel) -> SemanticInfo | None:
        if not needs_semantics(model):
            return None
        info = analyse_file(path, model.source.data, extra)
        info.local_macros = frozenset(m.name for m in model.macros)
        return info

    return provide
