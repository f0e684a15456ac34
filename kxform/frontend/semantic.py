"""Semantic layer (libclang): what the syntax alone cannot see.

tree-sitter sees one file as written. libclang preprocesses and resolves it, so it finds
block-index reads hidden behind macros defined in other headers and device functions
reached in other files. It runs only when the syntax leaves a question open (the file
has local includes, or a kernel calls something not defined in the file).

libclang searches the file's directory (and, for a header, the directory of the unit
that includes it), the compile database's paths and the CUDA toolkit's include
directories (kxform.build.toolkit). A header that still cannot be found is replaced by
an empty one and the file parsed again, so one missing header costs only the kernels
that use what it declares: a function whose body (or a declaration it uses) holds an
error is "unknown" and passes stay conservative for the kernels that reach it, with
the error and the missing header's name in the remark. Analysis never raises.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kxform.frontend.clang_diagnostics import errors_by_file, is_cascade, missing_header
from kxform.frontend.model import SourceModel
from kxform.engine.pass_api import Blocker

PRELUDE_DIR = Path(__file__).parent / "prelude"


@functools.cache
def _compiler_include_dirs() -> list[str]:
    """The host compiler's own header directory (stddef.h, stdarg.h): the libclang wheel
    ships no resource headers, and the C++ standard library needs them."""
    import shutil
    import subprocess

    for compiler in ("gcc", "cc", "clang"):
        if shutil.which(compiler):
            try:
                out = subprocess.run([compiler, "-print-file-name=include"], capture_output=True, text=True,
                                     timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                continue
            if out and os.path.isdir(out):
                return ["-isystem", out]
    return []
BASE_ARGS = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-Wno-unknown-cuda-version",
             "-std=c++17", "-ferror-limit=0", "-include", str(PRELUDE_DIR / "kxform_cuda_prelude.h"),
             "-I", str(PRELUDE_DIR / "stubs")]
INDEX_NAMES = frozenset({"blockIdx", "gridDim"})
MAX_STUBBED_HEADERS = 12


@dataclass(frozen=True)
class HiddenRead:
    function: str
    offset: int
    macro: str
    axis: str


@dataclass
class SemanticInfo:
    """What libclang established about one file (or why it could not)."""

    path: str
    ok: bool
    diagnostic: str = ""
    hidden_reads: list[HiddenRead] = field(default_factory=list)
    foreign_readers: dict[str, str] = field(default_factory=dict)
    """Functions defined in other files, called from this file, that read blockIdx: name -> file."""
    local_macros: frozenset[str] = frozenset()
    """Macros defined in the file itself: their reads are rewritten syntactically."""
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

    def unknown(self, usage: object) -> str | None:
        """Why libclang cannot answer for the kernel of `usage` (None: it can)."""
        from kxform.passes.swizzle.index_usage import IndexUsage

        assert isinstance(usage, IndexUsage)
        if not self.ok:
            return f"libclang could not analyse the file ({self.diagnostic})"
        for function in usage.functions:
            inside = next((m for offset, m in self.errors if function.span.start <= offset < function.span.end
                           and not is_cascade(m, self.source[function.span.start:offset])), None)
            reason = inside or self.broken.get(function.name)
            if reason is not None:
                return f"libclang could not analyse '{function.name}' ({reason})"
        return None

    def blockers_for(self, usage: object) -> list[Blocker]:
        from kxform.passes.swizzle.index_usage import IndexUsage

        assert isinstance(usage, IndexUsage)
        names = {f.name for f in usage.functions}
        why = self.unknown(usage)
        if why is not None:  # the question the syntax left open stays open: refuse
            what = f"'{usage.external_calls[0]}' is defined elsewhere and" if usage.external_calls else \
                "an included header"
            missing = f"; header{'s' if len(self.missing_headers) > 1 else ''} not found: " \
                f"{', '.join(self.missing_headers)}" if self.missing_headers else ""
            hint = "" if self.build_dir_given else " (pass -p BUILD_DIR with compile_commands.json)"
            return [Blocker("SemanticUnavailable", f"{why}{missing}; {what} may read the block index{hint}",
                            usage.kernel.span.start)]
        out = []
        for read in self.hidden_reads:
            if read.function in names and read.axis in ("x", "y") and read.macro not in self.local_macros:
                out.append(Blocker("IndexReadInForeignMacro", f"macro '{read.macro}' (defined in another file) "
                                   f"reads blockIdx.{read.axis}; kxform does not rewrite other files", read.offset))
        for callee, where in sorted(self.foreign_readers.items()):
            if callee in usage.external_calls:
                out.append(Blocker("IndexReadInOtherFile", f"'{callee}' (defined in {where}) reads the block index; "
                                   "kxform does not rewrite other files", usage.kernel.span.start))
        return out


def needs_semantics(model: SourceModel) -> bool:
    """The syntax leaves a question open for device code: the file includes local headers,
    or a kernel or device function calls something that is neither defined in the file
    nor a known built-in. Host code never needs it (the index cannot be read there)."""
    if any(not inc.system for inc in model.includes):
        return True
    return bool(external_device_calls(model))


def external_device_calls(model: SourceModel) -> list[str]:
    from kxform.frontend.model import FunctionKind
    from kxform.passes.swizzle.index_usage import BUILTIN_CALL_RE

    defined = {f.name for f in model.functions}
    device = {f.name for f in model.functions if f.kind is not FunctionKind.HOST}
    defined |= frozenset().union(*(f.template_names for f in model.functions if f.name in device))
    return sorted({c.callee for c in model.calls if c.caller in device and c.callee not in defined
                   and not BUILTIN_CALL_RE.match(c.callee) and model.macro(c.callee) is None})


def analyse_file(path: str, data: bytes, extra_args: list[str]) -> SemanticInfo:
    """Parse with libclang and collect hidden reads, foreign index readers and the errors
    that make a function unknown (see the module doc). Never raises."""
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - libclang is a dependency
        return SemanticInfo(path, False, f"libclang not importable: {exc}")
    from kxform.build.toolkit import cuda_include_dirs

    toolkit = [arg for d in cuda_include_dirs() for arg in ("-isystem", d)]
    args = BASE_ARGS + _compiler_include_dirs() + ["-I", os.path.dirname(os.path.abspath(path)) or "."] + \
        extra_args + toolkit
    stubs = tempfile.mkdtemp(prefix="kxform-missing-headers-")
    missing: list[str] = []
    try:
        for _ in range(MAX_STUBBED_HEADERS + 1):
            try:
                tu = ci.Index.create().parse(path, args=args + ["-idirafter", stubs],
                                             unsaved_files=[(path, data.decode("utf-8"))],
                                             options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
                                             | ci.TranslationUnit.PARSE_INCOMPLETE)
            except ci.TranslationUnitLoadError as exc:
                return SemanticInfo(path, False, f"libclang failed to load the file: {exc}")
            name = missing_header(tu)
            if name is None or name in missing or len(missing) >= MAX_STUBBED_HEADERS:
                break
            missing.append(name)
            stub = Path(stubs) / name
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text("/* kxform: not found; parsed as empty */\n")
        info = SemanticInfo(path, True, missing_headers=missing, source=data)
        main = os.path.abspath(path)
        fatal = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Fatal]
        if fatal and missing_header(tu) is None:
            d = fatal[0]
            where = f"{d.location.file}:{d.location.line}" if d.location.file else path
            return SemanticInfo(path, False, f"{where}: {d.spelling}", missing_headers=missing)
        errors = errors_by_file(tu, main, _system_prefixes())
        info.errors = [(offset, message) for offset, message in errors.get(main, [])]
        for cursor in tu.cursor.get_children():
            _visit_top(cursor, main, data, info, errors)
        return info
    finally:
        shutil.rmtree(stubs, ignore_errors=True)


def _system_prefixes() -> tuple[str, ...]:
    from kxform.build.toolkit import cuda_include_dirs

    dirs = [str(PRELUDE_DIR), "/usr/include", "/usr/lib", "/usr/local/include", *cuda_include_dirs()]
    dirs += [d for d in _compiler_include_dirs() if d != "-isystem"]
    return tuple(os.path.realpath(d) for d in dirs)


def _in_main(cursor, main: str) -> bool:  # type: ignore[no-untyped-def]
    loc = cursor.location
    return loc.file is not None and os.path.abspath(loc.file.name) == main


def _visit_top(cursor, main: str, data: bytes, info: SemanticInfo,  # type: ignore[no-untyped-def]
               errors: dict[str, list[tuple[int, str]]]) -> None:
    import clang.cindex as ci

    kinds = (ci.CursorKind.FUNCTION_DECL, ci.CursorKind.FUNCTION_TEMPLATE, ci.CursorKind.CXX_METHOD)
    if cursor.kind in (ci.CursorKind.NAMESPACE, ci.CursorKind.LINKAGE_SPEC, ci.CursorKind.STRUCT_DECL,
                       ci.CursorKind.CLASS_DECL):
        for child in cursor.get_children():
            _visit_top(child, main, data, info, errors)
        return
    if cursor.kind not in kinds or not cursor.is_definition() or not _in_main(cursor, main):
        return
    for node in cursor.walk_preorder():
        if node.kind == ci.CursorKind.MEMBER_REF_EXPR:
            base = next(iter(node.get_children()), None)
            while base is not None and base.kind == ci.CursorKind.UNEXPOSED_EXPR:
                base = next(iter(base.get_children()), None)
            if base is not None and base.kind == ci.CursorKind.DECL_REF_EXPR and base.spelling in INDEX_NAMES:
                if base.location.file is None or os.path.abspath(base.location.file.name) != main:
                    continue
                if _spelled_in_main(base.location, main, data, base.spelling):
                    continue  # written in this file (also as a macro argument): the syntax sees it
                offset = base.location.offset
                if data[offset:offset + 3] == b"hip":
                    continue
                macro = _identifier_at(data, offset)
                info.hidden_reads.append(HiddenRead(cursor.spelling, offset, macro, node.spelling))
        elif node.kind == ci.CursorKind.CALL_EXPR and node.referenced is not None:
            target = node.referenced.get_definition() or node.referenced
            loc = target.location
            if loc.file is not None and os.path.abspath(loc.file.name) != main and _reads_index(target):
                info.foreign_readers[target.spelling] = loc.file.name
        if node.kind in (ci.CursorKind.CALL_EXPR, ci.CursorKind.DECL_REF_EXPR, ci.CursorKind.TYPE_REF,
                         ci.CursorKind.MEMBER_REF_EXPR, ci.CursorKind.TEMPLATE_REF) and \
                cursor.spelling not in info.broken and node.referenced is not None:
            reason = _broken_declaration(node.referenced, cursor, errors)
            if reason is not None:
                info.broken[cursor.spelling] = reason


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
            in_user = own.start.file is not None and os.path.abspath(own.start.file.name) == name and \
                own.start.offset <= offset <= own.end.offset
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
    return data[offset.value:offset.value + len(spelling)] == spelling.encode()


def _reads_index(cursor, depth: int = 0) -> bool:  # type: ignore[no-untyped-def]
    import clang.cindex as ci

    if depth > 4:
        return False
    for node in cursor.walk_preorder():
        if node.kind == ci.CursorKind.DECL_REF_EXPR and node.spelling == "blockIdx":
            return True
        if node.kind == ci.CursorKind.CALL_EXPR and node.referenced is not None and node.referenced != cursor:
            definition = node.referenced.get_definition()
            if definition is not None and _reads_index(definition, depth + 1):
                return True
    return False


def _identifier_at(data: bytes, offset: int) -> str:
    end = offset
    while end < len(data) and (chr(data[end]).isalnum() or data[end] == ord("_")):
        end += 1
    return data[offset:end].decode("utf-8", "replace") or "?"


def semantic_provider(path: str, build_dir: str | None,
                      includer: str | None = None) -> Callable[[SourceModel], SemanticInfo | None]:
    """A provider for the driver: runs libclang only when `needs_semantics` says so.

    A header takes the compile database flags of `includer` (the unit of the run that
    includes it) when it has no entry of its own, and that unit's directory is searched
    too (its sibling headers are what the header's own includes usually name)."""
    extra: list[str] = []
    if build_dir:
        from kxform.build.compile_db import load_compile_commands

        include_dirs, defines, flags = load_compile_commands(build_dir).flags_for(path, includer)
        extra = [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines] + \
            [f for f in flags if f.startswith(("-std=", "-U"))]
        pairs = iter(flags)
        for flag in pairs:
            if flag in ("-isystem", "-iquote", "-idirafter", "-include"):
                extra += [flag, next(pairs, "")]
    if includer and os.path.dirname(os.path.abspath(includer)) != os.path.dirname(os.path.abspath(path)):
        extra += ["-I", os.path.dirname(os.path.abspath(includer))]

    def provide(model: SourceModel) -> SemanticInfo | None:
        if not needs_semantics(model):
            return None
        info = analyse_file(path, model.source.data, extra)
        info.local_macros = frozenset(m.name for m in model.macros)
        info.build_dir_given = bool(build_dir)
        return info

    return provide
