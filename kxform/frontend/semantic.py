"""Semantic layer (libclang): what the syntax alone cannot see.

tree-sitter sees one file as written. libclang preprocesses and resolves it, so it finds
reads of the CUDA built-ins (blockIdx, gridDim, threadIdx, blockDim) hidden behind macros
defined in other headers, and functions reached in other files together with the
built-ins they read. It runs only when the syntax leaves a question open (the file has
local includes, or device code calls something not defined in the file).

libclang searches the file's directory (and, for a header, the directory of the unit
that includes it), the compile database's paths and the CUDA toolkit's include
directories (all from kxform.build.toolchain). A header that still cannot be found is
replaced by an empty one and the file parsed again, so one missing header costs only
the kernels that use what it declares: a function whose body (or a declaration it uses)
holds an error is "unknown" (`SemanticInfo.unknown`), with the error and the missing
header's name. If libclang cannot parse a file at all, the answer is "unknown"
(`ok=False`) and passes stay conservative; it never raises. What a pass concludes from
these facts lives with the pass.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kxform.frontend.clang_diagnostics import errors_by_file, is_cascade, missing_header
from kxform.frontend.model import Function, FunctionKind, SourceModel

PRELUDE_DIR = Path(__file__).parent / "prelude"
BASE_ARGS = [
    "-x",
    "cuda",
    "--cuda-host-only",
    "-nocudainc",
    "-nocudalib",
    "-Wno-unknown-cuda-version",
    "-std=c++17",
    "-ferror-limit=0",
    "-include",
    str(PRELUDE_DIR / "kxform_cuda_prelude.h"),
    "-I",
    str(PRELUDE_DIR / "stubs"),
]
BUILTIN_NAMES = frozenset({"blockIdx", "gridDim", "threadIdx", "blockDim"})
MAX_STUBBED_HEADERS = 12

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
    errors: list[tuple[int, str]] = field(default_factory=list)
    """Errors libclang reported in the file itself: (byte offset, `line:col: message`)."""
    broken: dict[str, str] = field(default_factory=dict)
    """Functions of the file that use a declaration holding an error: name -> that error."""
    missing_headers: list[str] = field(default_factory=list)
    """Headers that could not be found (parsed as empty files), as spelled in #include."""
    build_dir_given: bool = False
    """The run has compile_commands.json (no point suggesting -p BUILD_DIR)."""
    source: bytes = b""
    """The file's bytes as analysed (offsets in `errors` point into them)."""

    def unknown(self, functions: Sequence[Function]) -> str | None:
        """Why libclang cannot answer for code made of `functions` (a kernel and the
        functions it reaches): the file did not parse, or one of them holds an error or
        uses a declaration that does. None: it can."""
        if not self.ok:
            return f"libclang could not analyse the file ({self.diagnostic})"
        for function in functions:
            inside = next(
                (
                    m
                    for offset, m in self.errors
                    if function.span.start <= offset < function.span.end
                    and not is_cascade(m, self.source[function.span.start : offset])
                ),
                None,
            )
            reason = inside or self.broken.get(function.name)
            if reason is not None:
                return f"libclang could not analyse '{function.name}' ({reason})"
        return None

    def missing_note(self) -> str:
        """`; header(s) not found: a.h, b.h` for a message, or nothing."""
        if not self.missing_headers:
            return ""
        return f"; header{'s' if len(self.missing_headers) > 1 else ''} not found: {', '.join(self.missing_headers)}"

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
    return sorted(
        {
            c.callee
            for c in model.calls
            if c.caller in device
            and c.callee not in defined
            and not BUILTIN_CALL_RE.match(c.callee)
            and model.macro(c.callee) is None
        }
    )


def parse_translation_unit(
    path: str,
    data: bytes,
    extra_args: list[str],  # type: ignore[no-untyped-def]
    missing: list[str] | None = None,
):
    """libclang's translation unit of `data` as `path`, or the reason it could not parse it.

    A header that cannot be found is parsed as an empty file (its name, as spelled in
    `#include`, is appended to `missing`), up to MAX_STUBBED_HEADERS of them: the rest of
    the file is still analysed. Any other fatal error makes the file unparseable."""
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - libclang is a dependency
        return None, f"libclang not importable: {exc}"
    missing = [] if missing is None else missing
    stubs = tempfile.mkdtemp(prefix="kxform-missing-headers-")
    try:
        for _ in range(MAX_STUBBED_HEADERS + 1):
            try:
                tu = ci.Index.create().parse(
                    path,
                    args=BASE_ARGS + extra_args + ["-idirafter", stubs],
                    unsaved_files=[(path, data.decode("utf-8"))],
                    options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD | ci.TranslationUnit.PARSE_INCOMPLETE,
                )
            except ci.TranslationUnitLoadError as exc:
                return None, f"libclang failed to load the file: {exc}"
            name = missing_header(tu)
            if name is None or name in missing or len(missing) >= MAX_STUBBED_HEADERS:
                break
            missing.append(name)
            stub = Path(stubs) / name
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text("/* kxform: not found; parsed as empty */\n")
    finally:
        shutil.rmtree(stubs, ignore_errors=True)
    fatal = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Fatal]
    if fatal and missing_header(tu) is None:
        d = fatal[0]
        where = f"{d.location.file}:{d.location.line}" if d.location.file else path
        return None, f"{where}: {d.spelling}"
    return tu, ""


def analyse_file(
    path: str, data: bytes, extra_args: list[str], system_dirs: Sequence[str] | None = None
) -> SemanticInfo:
    """Parse with libclang and collect hidden built-in reads, foreign functions and the
    errors that make a function unknown (see the module doc). `system_dirs`: directories
    whose errors say nothing about the user's code (the toolchain's, from
    kxform.build.semantic). Never raises."""
    missing: list[str] = []
    tu, why = parse_translation_unit(path, data, extra_args, missing)
    if tu is None:
        return SemanticInfo(path, False, why, missing_headers=missing)
    system_dirs = system_dirs or ()
    info = SemanticInfo(path, True, missing_headers=missing, source=data)
    main = os.path.abspath(path)
    errors = errors_by_file(tu, main, tuple(os.path.realpath(d) for d in (str(PRELUDE_DIR), *system_dirs)))
    info.errors = list(errors.get(main, []))
    for cursor in tu.cursor.get_children():
        _visit_top(cursor, main, data, info, errors)
    return info


def _in_main(cursor, main: str) -> bool:  # type: ignore[no-untyped-def]
    loc = cursor.location
    return loc.file is not None and os.path.abspath(loc.file.name) == main


def _visit_top(
    cursor,
    main: str,
    data: bytes,
    info: SemanticInfo,  # type: ignore[no-untyped-def]
    errors: dict[str, list[tuple[int, str]]],
) -> None:
    import clang.cindex as ci

    kinds = (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE, ci.CursorKind.CXX_METHOD)
    if cursor.kind in (
        ci.CursorKind.NAMESPACE,
        ci.CursorKind.LINKAGE_SPEC,
        ci.CursorKind.STRUCT_DECL,
        ci.CursorKind.CLASS_DECL,
    ):
        for child in cursor.get_children():
            _visit_top(child, main, data, info, errors)
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
        if (
            node.kind
            in (
                ci.CursorKind.CALL_EXPR,
                ci.CursorKind.DECL_REF_EXPR,
                ci.CursorKind.TYPE_REF,
                ci.CursorKind.MEMBER_REF_EXPR,
                ci.CursorKind.TEMPLATE_REF,
            )
            and cursor.spelling not in info.broken
            and node.referenced is not None
        ):
            reason = _broken_declaration(node.referenced, cursor, errors)
            if reason is not None:
                info.broken[cursor.spelling] = reason


def _member_read(function, node, main: str, data: bytes, info: SemanticInfo) -> None:  # type: ignore[no-untyped-def]
    import clang.cindex as ci

    base = next(iter(node.get_children()), None)
    while base is not None and base.kind == ci.CursorKind.UNEXPOSED_EXPR:
        base = next(iter(base.get_children()), None)
    if base is None or base.kind != ci.CursorKind.DECL_REF_EXPR or base.spelling not in BUILTIN_NAMES:
        return
    if base.location.file is None or os.path.abspath(base.location.file.name) != main:
        return
    if _spelled_in_main(base.location, main, data, base.spelling):
        return  # written in this file (also as a macro argument): the syntax sees it
    offset = base.location.offset
    if data[offset : offset + 3] != b"hip":
        info.hidden_reads.append(
            HiddenRead(function.spelling, offset, _identifier_at(data, offset), node.spelling, base.spelling)
        )


def _broken_declaration(decl, user, errors: dict[str, list[tuple[int, str]]]) -> str | None:  # type: ignore[no-untyped-def]
    """The first error inside the extent of `decl` (outside the function `user` itself,
    whose own errors are counted by offset), or None."""
    extent = decl.extent
    if extent.start.file is None:
        return None
    name = os.path.abspath(extent.start.file.name)
    found = errors.get(name)
    if not found:
        return None
    own = user.extent
    for offset, message in found:
        if extent.start.offset <= offset <= extent.end.offset:
            in_user = (
                own.start.file is not None
                and os.path.abspath(own.start.file.name) == name
                and own.start.offset <= offset <= own.end.offset
            )
            if not in_user:
                return f"'{decl.spelling}' does not parse: {message}"
    return None


def _spelled_in_main(location, main: str, data: bytes, spelling: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether the token at `location` is written in the main file (its spelling location):
    `blockIdx.x` passed to a macro defined elsewhere is spelled at the call site."""
    import ctypes

    import clang.cindex as ci

    lib = ci.conf.lib
    function = getattr(lib, "clang_getSpellingLocation", None)
    if function is None:  # pragma: no cover - every libclang since 3.0 has it
        return False
    file_obj, line, col, offset = ci.c_object_p(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    function(location, ctypes.byref(file_obj), ctypes.byref(line), ctypes.byref(col), ctypes.byref(offset))
    if not file_obj:
        return False
    if os.path.abspath(ci.File(file_obj).name) != main:
        return False
    return data[offset.value : offset.value + len(spelling)] == spelling.encode()


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


def provider_for(
    path: str, extra_args: list[str], system_dirs: Sequence[str], build_dir_given: bool
) -> Callable[[SourceModel], SemanticInfo | None]:
    """A provider for the driver: runs libclang only when `needs_semantics` says so, with
    the flags and system directories the toolchain gives for `path`
    (kxform.build.semantic.semantic_provider builds one from a build directory)."""

    def provide(model: SourceModel) -> SemanticInfo | None:
        if not needs_semantics(model):
            return None
        info = analyse_file(path, model.source.data, extra_args, system_dirs)
        info.local_macros = frozenset(m.name for m in model.macros)
        info.build_dir_given = build_dir_given
        return info

    return provide
