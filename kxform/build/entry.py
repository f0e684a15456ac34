"""Finding the compiled entry of a kernel spelled as in C++ (`saxpy`, `gemm<float, 64>`).

A cubin names kernels by their mangled symbol. To launch `gemm<float, 64>` the
specialisation must exist in the module (so the translation unit gets an explicit
instantiation appended when the spelling has template arguments) and its symbol must be
found: entry names come from ptxas's report or a PTX file, are demangled with `cu++filt`
(or binutils' `c++filt`, which reads the same Itanium mangling), and are matched to the
spelling ignoring whitespace and the literal forms demanglers add (`(int)64`, `64u`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kxform.errors import KxformError

_PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)\s*\(", re.MULTILINE)


class EntryNotFound(KxformError):
    """No compiled kernel, or several, match the requested spelling."""


# ----------------------------------------------------------------- template spelling


def split_template(spelling: str) -> tuple[str, tuple[str, ...]]:
    """`ns::gemm<float, 64>` -> (`ns::gemm`, (`float`, `64`)); no `<...>` -> (name, ())."""
    text = spelling.strip()
    open_at = text.find("<")
    if open_at < 0 or not text.endswith(">"):
        return text, ()
    return text[:open_at].strip(), tuple(a.strip() for a in _split_top(text[open_at + 1 : -1], ","))


def instantiation_text(spelling: str, param_types: Sequence[str], source: str) -> str:
    """Text to append to `source` so the specialisation `spelling` is compiled.

    An explicit instantiation (`template __global__ void gemm<float, 64>(const float*,
    float*, int);`) when the kernel's template header is found, with the template
    parameters in the declared parameter types replaced by the arguments. When the
    header cannot be read (macros, variadic packs, arguments left to deduction), taking
    the kernel's address instantiates it just as well. Returns "" for plain kernels and
    for specialisations the source already instantiates explicitly (a second explicit
    instantiation is an error).
    """
    name, args = split_template(spelling)
    if not args or _already_instantiated(name, args, source):
        return ""
    header = _template_header(name.rsplit("::", 1)[-1], source)
    types = _substitute(param_types, header, args) if header is not None and param_types else None
    if types is None:
        digest = hashlib.sha256(spelling.encode()).hexdigest()[:10]
        symbol = f"__kxform_instantiate_{re.sub(r'[^A-Za-z0-9]+', '_', name)[:40]}_{digest}"
        return (
            f"\n// kxform: instantiate {spelling} for launching\n"
            f"static void* const {symbol} __attribute__((unused)) = (void*)&{name}<{', '.join(args)}>;\n"
        )
    return (
        f"\n// kxform: instantiate {spelling} for launching\n"
        f"template __global__ void {name}<{', '.join(args)}>({', '.join(types)});\n"
    )


def _already_instantiated(name: str, args: tuple[str, ...], source: str) -> bool:
    wanted = _squash(f"{name}<{','.join(args)}>")
    found = re.finditer(r"\btemplate\s+(?!<)([^;{]*?)\(", source)
    return any(wanted in _squash(match.group(1)) for match in found)


def _template_header(name: str, source: str) -> list[tuple[str, str | None]] | None:
    """(parameter name, default text) of the `template <...>` that declares kernel `name`."""
    for match in re.finditer(r"\btemplate\s*<", source):
        close = _matching(source, match.end() - 1, "<", ">")
        if close < 0:
            continue
        tail = source[close + 1 :]
        decl = tail[: min((i for i in (tail.find("{"), tail.find(";")) if i >= 0), default=len(tail))]
        if "__global__" in decl and re.search(rf"\b{re.escape(name)}\s*\(", decl):
            return _parse_header(source[match.end() : close])
    return None


def _parse_header(text: str) -> list[tuple[str, str | None]] | None:
    params: list[tuple[str, str | None]] = []
    for part in _split_top(text, ","):
        decl, _, default = part.partition("=")
        if "..." in decl:
            return None  # a pack: leave it to the address-of form
        names = re.findall(r"[A-Za-z_]\w*", decl)
        if not names:
            return None
        unnamed = len(names) == 1 or names[-1] in ("typename", "class")
        params.append(("" if unnamed else names[-1], default.strip() or None))
    return params


def _substitute(
    param_types: Sequence[str], header: list[tuple[str, str | None]], args: tuple[str, ...]
) -> list[str] | None:
    if len(args) > len(header):
        return None
    values: dict[str, str] = {}
    for index, (pname, default) in enumerate(header):
        value = args[index] if index < len(args) else default
        if value is None:
            return None  # deduced from the call: cannot instantiate explicitly
        if pname:  # an unnamed parameter cannot appear in the parameter types
            values[pname] = _replace_names(value, values)
    return [_replace_names(t, values) for t in param_types]


def _replace_names(text: str, values: Mapping[str, str]) -> str:
    if not values:
        return text
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, values)) + r")\b")
    return pattern.sub(lambda m: values[m.group(1)], text)


# ------------------------------------------------------------------ symbols and names


def ptx_entries(ptx: str) -> list[str]:
    """Mangled names of the `.entry` functions of a PTX file, in order."""
    return _PTX_ENTRY.findall(ptx)


def find_demangler(nvcc: str | None = None) -> str | None:
    """`cu++filt` beside nvcc or in the CUDA toolkit, else on PATH, else `c++filt`."""
    folders = []
    if nvcc:
        folders.append(Path(os.path.realpath(nvcc)).parent)
    for var in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"):
        if os.environ.get(var):
            folders.append(Path(os.environ[var]) / "bin")
    folders.append(Path("/usr/local/cuda/bin"))
    for folder in folders:
        candidate = folder / "cu++filt"
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("cu++filt") or shutil.which("c++filt")


def demangle(names: Sequence[str], tool: str | None) -> list[str]:
    """Demangled `names` (same order); a name the tool cannot read is returned as is.

    Names go on the command line, which both cu++filt and c++filt read one per output
    line (cu++filt has no documented stdin mode).
    """
    if not names or tool is None:
        return list(names)
    out: list[str] = []
    for start in range(0, len(names), 200):
        chunk = list(names[start : start + 200])
        try:
            proc = subprocess.run([tool, *chunk], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return list(names)
        lines = proc.stdout.splitlines()
        if proc.returncode != 0 or len(lines) != len(chunk):
            return list(names)
        out += [line.strip() or name for line, name in zip(lines, chunk, strict=True)]
    return out


def function_name(demangled: str) -> str:
    """`void ns::gemm<float, 64>(float const*, ...)` -> `ns::gemm<float, 64>`."""
    text = demangled.strip()
    if text.endswith(")"):
        open_at = _matching_backward(text, len(text) - 1)
        if open_at > 0:
            text = text[:open_at].rstrip()
    parts = _split_top(text, " ")
    return parts[-1] if parts else text


def match_entry(spelling: str, entries: Mapping[str, str]) -> str:
    """The mangled name among `entries` (mangled -> demangled) that `spelling` names.

    Tried in order, each must be unique: the full name (`ns::gemm<float, 64>`), the
    name without namespaces, then the base name alone (`gemm`, for a module holding one
    specialisation). Raises `EntryNotFound` naming the candidates otherwise.
    """
    names = {m: _mangled_base(m) if d == m and m.startswith("_Z") else function_name(d) for m, d in entries.items()}
    want = _normal(spelling)
    tests: tuple[Callable[[str], bool], ...] = (
        lambda n: _normal(n) == want,
        lambda n: _unqualified(_normal(n)) == _unqualified(want),
        lambda n: _base(_normal(n)) == _base(want),
    )
    for test in tests:
        hits = [m for m, n in names.items() if test(n)]
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise EntryNotFound(f"kernel '{spelling}' is ambiguous: {', '.join(sorted(names[h] for h in hits))}")
    known = ", ".join(sorted(names.values())) or "none"
    raise EntryNotFound(f"kernel '{spelling}' is not among the compiled kernels ({known})")


def _normal(name: str) -> str:
    text = re.sub(r"\bunsigned\b(?!\s+(?:int|char|short|long)\b)", "unsigned int", name)
    text = re.sub(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)(?=-?\d)", "", text)
    text = re.sub(r"(?<=\d)(?:ull|llu|ul|lu|ll|u|l)\b", "", text, flags=re.IGNORECASE)
    return re.sub(r"\s+", "", text).lstrip(":")


def _mangled_base(mangled: str) -> str:
    """Qualified name of a mangled symbol without a demangler (`_ZN2ns1kIfEEvPT_` ->
    `ns::k`): enough to match a kernel by its base name."""
    match = re.match(r"_Z(N)?", mangled)
    pos, parts = (match.end() if match else 0), []
    while pos < len(mangled) and mangled[pos].isdigit():
        digits = re.match(r"\d+", mangled[pos:])
        assert digits is not None
        length = int(digits.group())
        start = pos + len(digits.group())
        parts.append(mangled[start : start + length])
        pos = start + length
        if not (match and match.group(1)):
            break
    return "::".join(parts) or mangled


def _unqualified(name: str) -> str:
    base, args = split_template(name)
    tail = base.rsplit("::", 1)[-1]
    return f"{tail}<{','.join(args)}>" if args else tail


def _base(name: str) -> str:
    return split_template(name)[0].rsplit("::", 1)[-1]


# ------------------------------------------------------------------------ scanning


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _split_top(text: str, sep: str) -> list[str]:
    """Split at `sep` outside <>, (), [] and {}; empty pieces are dropped."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth = max(depth - 1, 0)
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _matching(text: str, open_at: int, open_ch: str, close_ch: str) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i
        elif text[i] in ";{":
            return -1
    return -1


def _matching_backward(text: str, close_at: int) -> int:
    depth = 0
    for i in range(close_at, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1
