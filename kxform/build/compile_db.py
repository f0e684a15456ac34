"""Include paths, defines and language flags of real projects, from `compile_commands.json`.

Kernels of real projects do not compile (or parse) without their include paths and
defines. CMake (`CMAKE_EXPORT_COMPILE_COMMANDS=ON`), Bear and Meson write them to
`compile_commands.json`; this module reads one entry back as the flags kxform needs,
leaving out what kxform sets itself (architecture, output, dependency files) and what
names the original input.

A compilation database is input, and kxform runs nvcc with what it takes from it, so
only flags that cannot run another program are taken: include paths (`-I`, `-isystem`,
`-iquote`, `-idirafter`, `-include`), defines (`-D`, `-U`), the language standard and
nvcc's language switches (`--expt-relaxed-constexpr`, `--extended-lambda`). Everything
else (`-ccbin`, `--compiler-bindir`, `-Xcompiler -fplugin=...`, optimisation and
warning flags) is ignored, and the database lists what it ignored so the run can say so.
Headers have no entry of their own: they take the flags of a file that includes them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kxform.errors import InputError, Location

_DB_NAME = "compile_commands.json"

# Options whose value is the next argument (when not glued as `-oX` or `--opt=X`).
_DROP_WITH_VALUE = {
    "-o",
    "--output-file",
    "-arch",
    "--gpu-architecture",
    "-code",
    "--gpu-code",
    "-gencode",
    "--generate-code",
    "-MF",
    "-MT",
    "-MQ",
    "--dependency-output",
    "-x",
    "--x",
    "--options-file",
    "-optf",
    "-rdc",
    "--relocatable-device-code",
}
_DROP = {
    "-c",
    "--compile",
    "-M",
    "-MM",
    "-MD",
    "-MMD",
    "-MP",
    "--generate-dependencies",
    "--generate-nonsystem-dependencies",
    "-cubin",
    "--cubin",
    "-ptx",
    "--ptx",
    "-E",
    "-dc",
    "--device-c",
    "-dw",
    "--device-w",
}
# Relocatable device code is dropped: kxform loads each cubin on its own, which needs
# a fully linked (non-relocatable) image.
_DROP_PREFIXES = (
    "-arch=",
    "--gpu-architecture=",
    "-code=",
    "--gpu-code=",
    "-gencode=",
    "--generate-code=",
    "-MF",
    "-MT",
    "-MQ",
    "--dependency-output=",
    "--output-file=",
    "--options-file=",
    "-rdc=",
    "--relocatable-device-code=",
)
_KEEP_WITH_VALUE = {"-isystem", "-include", "-std", "--std", "-idirafter", "-iquote", "-U", "--undefine-macro"}
_PATH_VALUED = {"-isystem", "-include", "-idirafter", "-iquote"}
_KEEP_PREFIXES = ("-std=", "--std=", "-U", "--undefine-macro=", "-isystem", "-iquote", "-idirafter")
_KEEP_NVCC = {
    "--expt-relaxed-constexpr",
    "-expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "-expt-extended-lambda",
    "--extended-lambda",
    "-extended-lambda",
}
"""nvcc language switches: they change what the front end accepts, and run nothing."""
_IGNORED_WITH_VALUE = {
    "-ccbin",
    "--compiler-bindir",
    "-Xcompiler",
    "--compiler-options",
    "-Xptxas",
    "--ptxas-options",
    "-Xcudafe",
    "-Xlinker",
    "--linker-options",
    "-Xnvlink",
    "--nvlink-options",
    "-Xarchive",
    "--archive-options",
    "-L",
    "--library-path",
    "-l",
    "--library",
    "-odir",
    "--output-directory",
    "-ldir",
    "--libdevice-directory",
    "-t",
    "--threads",
    "-maxrregcount",
    "--maxrregcount",
}
_SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".cuh", ".hip")
_UNIT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".hip")


class CompileFlags(NamedTuple):
    """What one entry contributes to a kxform build (unpacks as a 3-tuple)."""

    include_dirs: tuple[str, ...]
    defines: tuple[str, ...]
    extra_flags: tuple[str, ...]


@dataclass(frozen=True)
class CompileDatabase:
    """Entries of one `compile_commands.json`, keyed by the absolute path of their file."""

    path: str
    entries: dict[str, CompileFlags]
    ignored: tuple[str, ...] = ()
    """Distinct flags of the database that kxform does not pass on (see the module doc)."""

    def __contains__(self, source: object) -> bool:
        return isinstance(source, (str, Path)) and _absolute(str(source)) in self.entries

    def get(self, source: str | Path) -> CompileFlags | None:
        """The flags for `source`, or None when the database has no entry for it."""
        return self.entries.get(_absolute(str(source)))

    def flags_for(self, source: str | Path, includer: str | Path | None = None) -> CompileFlags:
        """The flags for `source`. A file without an entry takes those of `includer` (the
        file of the run that includes it); a header with neither takes none; a source
        file with neither is an `InputError` naming both files."""
        flags = self.get(source)
        if flags is None and includer is not None:
            flags = self.get(includer)
        if flags is None:
            if not str(source).endswith(_UNIT_SUFFIXES):
                return CompileFlags((), (), ())
            raise InputError(f"no entry for {source} in {self.path}", Location(str(source)))
        return flags


def load_compile_commands(build_dir: str | Path) -> CompileDatabase:
    """Read `<build_dir>/compile_commands.json` (or the file itself when given)."""
    path = Path(build_dir)
    if path.is_dir():
        path = path / _DB_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise InputError("compilation database not found", Location(str(path))) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read compilation database: {exc}", Location(str(path))) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", Location(str(path), exc.lineno, exc.colno)) from exc
    if not isinstance(data, list):
        raise InputError("invalid compilation database: expected a JSON array of entries", Location(str(path)))
    entries: dict[str, CompileFlags] = {}
    ignored: list[str] = []
    for index, entry in enumerate(data):
        source, flags = _parse_entry(entry, index, path, ignored)
        entries.setdefault(source, flags)  # the first entry of a file wins, as in clangd
    return CompileDatabase(str(path), entries, tuple(dict.fromkeys(ignored)))


def _parse_entry(entry: object, index: int, db: Path, ignored: list[str]) -> tuple[str, CompileFlags]:
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        raise InputError(f"invalid compilation database: entry {index} has no 'file'", Location(str(db)))
    directory = Path(entry.get("directory") or db.parent)
    if isinstance(entry.get("arguments"), list):
        argv = [str(a) for a in entry["arguments"]]
    elif isinstance(entry.get("command"), str):
        try:
            argv = shlex.split(entry["command"])
        except ValueError as exc:
            raise InputError(f"entry {index}: cannot split 'command': {exc}", Location(str(db))) from exc
    else:
        raise InputError(
            f"invalid compilation database: entry {index} has neither 'arguments' nor 'command'", Location(str(db))
        )
    source = _absolute(str(directory / entry["file"]))
    return source, flags_from_argv(argv, directory, source, ignored)


def flags_from_argv(
    argv: Sequence[str], directory: Path, source: str, ignored: list[str] | None = None
) -> CompileFlags:
    """Split one compiler command line into kxform's include dirs, defines and flags.

    Only what cannot run another program is taken (the module doc lists it); what
    kxform sets itself (architecture, output, dependency files) is dropped silently and
    every other flag is appended to `ignored`. nvcc's language switches are taken only
    from an nvcc command line.
    """
    args = list(_expand_response_files(argv[1:], directory))
    is_nvcc = Path(argv[0]).name.startswith("nvcc") if argv else False
    dropped = ignored if ignored is not None else []
    includes: list[str] = []
    defines: list[str] = []
    extra: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else ""
        i += 1
        if arg in _DROP:
            continue
        if arg in _DROP_WITH_VALUE:
            i += 1
            continue
        if arg in ("-I", "--include-path"):
            includes.append(_resolve(value, directory))
            i += 1
        elif arg.startswith(("-I", "--include-path=")):
            includes.append(_resolve(arg.split("=", 1)[1] if arg.startswith("--") else arg[2:], directory))
        elif arg in ("-D", "--define-macro"):
            defines.append(value)
            i += 1
        elif arg.startswith(("-D", "--define-macro=")):
            defines.append(arg.split("=", 1)[1] if arg.startswith("--") else arg[2:])
        elif arg.startswith(_DROP_PREFIXES) or _is_source(arg, directory, source):
            continue
        elif arg in _KEEP_WITH_VALUE:
            extra += [arg, _resolve(value, directory) if arg in _PATH_VALUED else value]
            i += 1
        elif arg.startswith(_KEEP_PREFIXES) or (is_nvcc and arg in _KEEP_NVCC):
            extra.append(arg)
        elif arg in _IGNORED_WITH_VALUE:
            dropped.append(f"{arg} {value}")
            i += 1
        else:
            dropped.append(arg)
    return CompileFlags(tuple(includes), tuple(defines), tuple(extra))


def _expand_response_files(args: Sequence[str], directory: Path) -> Iterator[str]:
    """Inline `@file` and `--options-file file` (CMake puts long include lists there)."""
    i = 0
    while i < len(args):
        arg = args[i]
        target: str | None = None
        if arg.startswith("@"):
            target = arg[1:]
        elif arg in ("--options-file", "-optf") and i + 1 < len(args):
            target, i = args[i + 1], i + 1
        elif arg.startswith("--options-file="):
            target = arg.split("=", 1)[1]
        i += 1
        if target is None:
            yield arg
            continue
        try:
            text = (directory / target).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot read response file: {exc.strerror}", Location(str(directory / target))) from exc
        yield from _expand_response_files(shlex.split(text), directory)


def _is_source(arg: str, directory: Path, source: str) -> bool:
    if arg.startswith("-") or not arg.endswith(_SOURCE_SUFFIXES):
        return False
    return _absolute(str(directory / arg)) == source or arg.endswith(Path(source).name)


def _resolve(value: str, directory: Path) -> str:
    return _absolute(str(directory / value)) if value else value


def _absolute(path: str) -> str:
    return str(Path(path).expanduser().resolve())
