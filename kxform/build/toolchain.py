"""The toolchain of one run: compilers, the cache root and the project's compile flags.

Everything that needs a compiler or a project's include paths asks this one service,
so the answers agree: nvcc (`$KXFORM_NVCC`, PATH, /usr/local/cuda), the host C++
compiler (`$CXX`, g++, c++, clang++; the CPU runtime and the bijection check build
with it, libclang borrows its resource headers), the CUDA toolkit's include directories
(CCCL's too: libclang must see the toolkit headers kernels include), the
content-cache root (`$KXFORM_CACHE_DIR`, `$XDG_CACHE_HOME/kxform`, `~/.cache/kxform`)
and the flags `compile_commands.json` gives a file (`-p BUILD_DIR`, filtered by
kxform.build.compile_db: a header without an entry takes those of the file that
includes it). The driver hands a `Toolchain` to passes through their context; discovery
runs once per process and only when asked.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kxform.build.compile_db import CompileDatabase, CompileFlags, load_compile_commands
from kxform.cache import cache_root

NO_FLAGS = CompileFlags((), (), ())


@dataclass(frozen=True)
class HostCompiler:
    """A host C++ compiler: the command that runs it and its `--version` line."""

    command: tuple[str, ...]
    version: str

    @classmethod
    def find(cls, preferred: str | None = None) -> HostCompiler | None:
        """The first working compiler among `preferred`, $CXX, g++, c++ and clang++."""
        return find_host_compiler(preferred, os.environ.get("CXX"), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def find_host_compiler(preferred: str | None, env_cxx: str | None, search_path: str) -> HostCompiler | None:
    """Memoised per (preferred, $CXX, $PATH): one `--version` run per process."""
    candidates = [c for c in (preferred, env_cxx) if c] + ["g++", "c++", "clang++"]
    for candidate in candidates:
        parts = shlex.split(candidate)
        exe = shutil.which(parts[0], path=search_path) if parts else None
        if exe is None:
            continue
        try:
            proc = subprocess.run(
                [exe, *parts[1:], "--version"], capture_output=True, text=True, timeout=60, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            return HostCompiler((exe, *parts[1:]), proc.stdout.splitlines()[0].strip())
    return None


@functools.lru_cache(maxsize=8)
def _resource_include(command: tuple[str, ...]) -> tuple[str, ...]:
    try:
        out = subprocess.run(
            [*command, "-print-file-name=include"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ()
    return ("-isystem", out) if out and os.path.isdir(out) else ()


_DRYRUN_VAR = re.compile(r'^#\$ (?:_\w+_)?(INCLUDES|SYSTEM_INCLUDES)="?(.*?)"?\s*$')


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """The toolkit's header directories, most specific first; () when no toolkit is found.

    nvcc itself is the authority: `nvcc --dryrun` prints the `INCLUDES` and
    `SYSTEM_INCLUDES` it would pass (CUDA 12.x and 13 keep CCCL under `include/cccl`).
    Without nvcc, `$CUDA_HOME` and `$CUDA_PATH` are tried, then `/usr/local/cuda`."""
    from kxform.build.nvcc import find_nvcc

    nvcc = find_nvcc()
    found = _from_nvcc(nvcc) if nvcc else []
    if not found:
        for root in (
            os.environ.get("CUDA_HOME"),
            os.environ.get("CUDA_PATH"),
            str(Path(nvcc).resolve().parent.parent) if nvcc else None,
            "/usr/local/cuda",
        ):
            if root:
                found = _from_root(Path(root))
                if found:
                    break
    return tuple(dict.fromkeys(found))


def _from_nvcc(nvcc: str) -> list[str]:
    try:
        proc = subprocess.run(
            [nvcc, "--dryrun", "-c", "kxform-probe.cu"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return []
    dirs: list[str] = []
    for line in (proc.stdout + proc.stderr).splitlines():
        match = _DRYRUN_VAR.match(line.strip())
        if not match:
            continue
        words = shlex.split(match.group(2).replace('"', " "))
        dirs += [
            os.path.normpath(w[2:] if w.startswith("-I") else w)
            for w in words
            if w not in ("-isystem", "-I") and (w.startswith("-I") or os.path.isabs(w))
        ]
    return [d for d in dirs if os.path.isdir(d)]


def _from_root(root: Path) -> list[str]:
    include = root / "include"
    if not (include / "cuda_runtime.h").is_file():
        return []
    return [str(include)] + ([str(include / "cccl")] if (include / "cccl").is_dir() else [])


@dataclass(frozen=True)
class Toolchain:
    """Compilers, cache and project flags of one run (`build_dir`: `-p BUILD_DIR`)."""

    build_dir: str | None = None
    compiles: bool = True
    """Whether the checks may run nvcc (False: a rewrite judged on its source alone, as the
    tuner's cost model rewrites a configuration before it is built)."""

    @classmethod
    def create(cls, build_dir: str | None = None, compiles: bool = True) -> Toolchain:
        return cls(build_dir, compiles)

    @property
    def nvcc(self) -> str | None:
        from kxform.build.nvcc import find_nvcc

        return find_nvcc() if self.compiles else None

    @property
    def host_compiler(self) -> HostCompiler | None:
        return HostCompiler.find()

    @property
    def cache_root(self) -> Path:
        return cache_root()

    def cache_dir(self, name: str) -> Path:
        """The cache of one component (`nvcc`, `cpu`, `bijection`)."""
        return cache_root() / name

    def compile_database(self) -> CompileDatabase | None:
        """The run's `compile_commands.json` (None without `-p BUILD_DIR`), read once per
        content; InputError when it is missing or malformed."""
        if not self.build_dir:
            return None
        path = Path(self.build_dir)
        path = path / "compile_commands.json" if path.is_dir() else path
        try:
            info = path.stat()
            stamp: tuple[int, int] = (info.st_mtime_ns, info.st_size)
        except OSError:
            stamp = (0, 0)  # load_compile_commands names the problem
        return _load_database(str(path), stamp)

    def project_flags(self, path: str, includer: str | None = None) -> CompileFlags:
        """Include directories, defines and extra flags of `path` from compile_commands.json
        (none without a build directory). A header without an entry takes those of
        `includer` (the unit of the run that includes it); InputError when the database
        lacks a source file."""
        database = self.compile_database()
        return NO_FLAGS if database is None else database.flags_for(path, includer)

    def ignored_flags_note(self) -> str | None:
        """What the run should say about the database's flags that kxform does not pass on."""
        database = self.compile_database()
        if database is None or not database.ignored:
            return None
        shown = ", ".join(database.ignored[:6]) + (", ..." if len(database.ignored) > 6 else "")
        return (
            f"{database.path}: ignored flags that could run other programs or that kxform does not need "
            f"(only include paths, defines and the language standard are taken): {shown}"
        )

    def cuda_include_dirs(self) -> tuple[str, ...]:
        """The CUDA toolkit's header directories (CCCL's included), most specific first."""
        return cuda_include_dirs()

    def compiler_include_dirs(self) -> tuple[str, ...]:
        """`-isystem DIR` of the host compiler's own headers (stddef.h, stdarg.h): the
        libclang wheel ships no resource headers, and the C++ library needs them."""
        compiler = self.host_compiler
        return _resource_include(compiler.command) if compiler is not None else ()

    def system_include_dirs(self) -> tuple[str, ...]:
        """Directories whose headers are not the project's (the compiler's, the toolkit's)."""
        own = tuple(d for d in self.compiler_include_dirs() if d != "-isystem")
        return ("/usr/include", "/usr/lib", "/usr/local/include", *self.cuda_include_dirs(), *own)

    def libclang_args(self, path: str, includer: str | None = None) -> list[str]:
        """What libclang needs beyond its CUDA prelude to parse `path` as the project does:
        the file's directory (and, for a header, that of the unit including it: its
        sibling headers are what the header's own includes usually name), the database's
        include paths, defines and standard, and the toolkit's include directories last."""
        include_dirs, defines, flags = self.project_flags(path, includer)
        here = os.path.dirname(os.path.abspath(path)) or "."
        args = [
            *self.compiler_include_dirs(),
            "-I",
            here,
            *(f"-I{d}" for d in include_dirs),
            *(f"-D{d}" for d in defines),
            *(f for f in flags if f.startswith(("-std=", "-U"))),
        ]
        pairs = iter(flags)
        for flag in pairs:
            if flag in ("-isystem", "-iquote", "-idirafter", "-include"):
                args += [flag, next(pairs, "")]
        if includer and os.path.dirname(os.path.abspath(includer)) != here:
            args += ["-I", os.path.dirname(os.path.abspath(includer))]
        return args + [arg for d in self.cuda_include_dirs() for arg in ("-isystem", d)]


@functools.lru_cache(maxsize=4)
def _load_database(path: str, stamp: tuple[int, int]) -> CompileDatabase:
    del stamp  # part of the cache key only: an edited database is read again
    return load_compile_commands(path)
