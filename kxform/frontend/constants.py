"""Values of named integer constants, as the compiler sees them (libclang).

`#define BK (TILE / 2)` or `constexpr int SMEM = 2 * TILE * TILE;` need macro expansion
and constant evaluation to be known; include files and `-D` flags can change them. The
file is parsed once by libclang with one probe per name appended at its end
(`constexpr long long kxform_probe_NAME = (long long)(NAME);`), and each probe is
evaluated by clang itself (`clang_Cursor_Evaluate`). A name clang cannot evaluate (not an
integer constant, a parse failure) maps to None: "unknown", never a guess. Without
libclang, plain integer literals and sums of known names are folded with kxform's own
expression language.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import re
import threading
from collections.abc import Iterable, Mapping

from kxform.errors import SpecError
from kxform.expr import parse_expr
from kxform.frontend.queries import int_value

PROBE = "kxform_probe_"
_CXEVAL_INT = 1


@functools.cache
def _evaluator():  # type: ignore[no-untyped-def]
    """libclang's constant evaluator through ctypes (the Python bindings do not wrap it)."""
    import clang.cindex as ci

    lib = ci.conf.lib
    lib.clang_Cursor_Evaluate.argtypes = [ci.Cursor]
    lib.clang_Cursor_Evaluate.restype = ctypes.c_void_p
    lib.clang_EvalResult_getKind.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getKind.restype = ctypes.c_int
    lib.clang_EvalResult_getAsLongLong.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_getAsLongLong.restype = ctypes.c_longlong
    lib.clang_EvalResult_dispose.argtypes = [ctypes.c_void_p]
    lib.clang_EvalResult_dispose.restype = None
    return lib


def _evaluate(cursor) -> int | None:  # type: ignore[no-untyped-def]
    lib = _evaluator()
    result = lib.clang_Cursor_Evaluate(cursor)
    if not result:
        return None
    try:
        if lib.clang_EvalResult_getKind(result) != _CXEVAL_INT:
            return None
        return int(lib.clang_EvalResult_getAsLongLong(result))
    finally:
        lib.clang_EvalResult_dispose(result)


def evaluate_constants(path: str, data: bytes, names: Iterable[str], extra_args: list[str]) -> dict[str, int | None]:
    """The integer value of each name (a macro or a constant visible at the end of the file).

    Values are remembered per file text and compiler arguments: a file of many kernels is
    asked once per kernel (a drafted spec each), and a parse per question made `apply`'s
    cost grow with the square of the kernels in a file; only names not yet evaluated for
    this text cost a parse."""
    wanted = sorted(set(names))
    if not wanted:
        return {}
    key = (path, hashlib.sha256(data).hexdigest(), tuple(extra_args))
    with _KNOWN_LOCK:
        known = _KNOWN.get(key, {})
        missing = [name for name in wanted if name not in known]
    if missing:
        found = _evaluate_names(path, data, missing, extra_args)
        with _KNOWN_LOCK:
            known = {**_KNOWN.pop(key, {}), **found}
            _KNOWN[key] = known
            while len(_KNOWN) > _KNOWN_FILES:
                _KNOWN.pop(next(iter(_KNOWN)))
    return {name: known[name] for name in wanted}


_KNOWN: dict[tuple[str, str, tuple[str, ...]], dict[str, int | None]] = {}
"""(path, text digest, arguments) -> the names evaluated for it, oldest file first."""
_KNOWN_LOCK = threading.Lock()
_KNOWN_FILES = 16


def _evaluate_names(path: str, data: bytes, wanted: list[str], extra_args: list[str]) -> dict[str, int | None]:
    from kxform.frontend.semantic import parse_translation_unit

    probes = "".join(f"\nconstexpr long long {PROBE}{name} = (long long)({name});" for name in wanted)
    tu, _ = parse_translation_unit(path, data + probes.encode(), extra_args)
    if tu is None:
        return {name: None for name in wanted}
    import clang.cindex as ci

    values: dict[str, int | None] = {name: None for name in wanted}
    for cursor in tu.cursor.get_children():
        if cursor.kind == ci.CursorKind.VAR_DECL and cursor.spelling.startswith(PROBE):
            values[cursor.spelling[len(PROBE) :]] = _evaluate(cursor)
    return values


def fold_constants(definitions: Mapping[str, str]) -> dict[str, int | None]:
    """Without libclang: literals, and arithmetic over names already folded (in order)."""
    known: dict[str, int] = {}
    out: dict[str, int | None] = {}
    for name, text in definitions.items():
        value = int_value(text)
        if value is None:
            cleaned = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text.strip())
            try:
                value = parse_expr(cleaned).evaluate_int(known)
            except SpecError:
                value = None
        out[name] = value
        if value is not None:
            known[name] = value
    return out
