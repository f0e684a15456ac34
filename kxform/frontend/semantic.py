"""Semantic layer (libclang): what the syntax alone cannot see.

tree-sitter sees one file as written. libclang preprocesses and resolves it, so it finds
block-index reads hidden behind macros defined in other headers and device functions
reached in other files. It runs only when the syntax leaves a question open (the file
has local includes, or a kernel calls something not defined in the file). If libclang
cannot parse a file, the answer is "unknown" and passes stay conservative; it never
raises.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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

    def blockers_for(self, usage: object) -> list[Blocker]:
        from kxform.passes.swizzle.index_usage import IndexUsage

        assert isinstance(usage, IndexUsage)
        names = {f.name for f in usage.functions}
        if not self.ok:  # the question the syntax left open stays open: refuse
            what = f"'{usage.external_calls[0]}' is defined elsewhere and" if usage.external_calls else \
                "an included header"
            return [Blocker("SemanticUnavailable", f"libclang could not analyse the file ({self.diagnostic}); "
                            f"{what} may read the block index (pass -p BUILD_DIR with compile_commands.json)",
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
    """Parse with libclang and collect hidden reads and foreign index readers. Never raises."""
    try:
        import clang.cindex as ci
    except ImportError as exc:  # pragma: no cover - libclang is a dependency
        return SemanticInfo(path, False, f"libclang not importable: {exc}")
    args = BASE_ARGS + _compiler_include_dirs() + ["-I", os.path.dirname(os.path.abspath(path)) or "."] + extra_args
    try:
        tu = ci.Index.create().parse(path, args=args, unsaved_files=[(path, data.decode("utf-8"))],
                            options=ci.TranslationUnit.PARSE_DETAILED_PROCESSING_RECORD
                            | ci.TranslationUnit.PARSE_INCOMPLETE)
    except ci.TranslationUnitLoadError as exc:
        return SemanticInfo(path, False, f"libclang failed to load the file: {exc}")
    fatal = [d for d in tu.diagnostics if d.severity >= ci.Diagnostic.Fatal]
    if fatal:
        d = fatal[0]
        where = f"{d.location.file}:{d.location.line}" if d.location.file else path
        return SemanticInfo(path, False, f"{where}: {d.spelling}")
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
            base = next(iter(node.get_children()), None)
            while base is not None and base.kind == ci.CursorKind.UNEXPOSED_EXPR:
                base = next(iter(base.get_children()), None)
            if base is not None and base.kind == ci.CursorKind.DECL_REF_EXPR and base.spelling in INDEX_NAMES:
                offset = base.location.offset
                if base.location.file is None or os.path.abspath(base.location.file.name) != main:
                    continue
                if data[offset:offset + len(base.spelling)].decode("utf-8", "replace") != base.spelling and \
                        not data[offset:offset + 3] == b"hip":
                    macro = _identifier_at(data, offset)
                    info.hidden_reads.append(HiddenRead(cursor.spelling, offset, macro, node.spelling))
        elif node.kind == ci.CursorKind.CALL_EXPR and node.referenced is not None:
            target = node.referenced.get_definition() or node.referenced
            loc = target.location
            if loc.file is not None and os.path.abspath(loc.file.name) != main and _reads_index(target):
                info.foreign_readers[target.spelling] = loc.file.name


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


def semantic_provider(path: str, build_dir: str | None) -> Callable[[SourceModel], SemanticInfo | None]:
    """A provider for the driver: runs libclang only when `needs_semantics` says so."""
    extra: list[str] = []
    if build_dir:
        from kxform.build.compile_db import load_compile_commands

        include_dirs, defines, flags = load_compile_commands(build_dir).flags_for(path)
        extra = [f"-I{d}" for d in include_dirs] + [f"-D{d}" for d in defines] + \
            [f for f in flags if f.startswith("-std=")]

    def provide(model: SourceModel) -> SemanticInfo | None:
        if not needs_semantics(model):
            return None
        info = analyse_file(path, model.source.data, extra)
        info.local_macros = frozenset(m.name for m in model.macros)
        return info

    return provide
