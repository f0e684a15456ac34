"""The toolchain of one run: compilers, the cache root and the project's compile flags.

Everything that needs a compiler or a project's include paths asks this one service,
so the answers agree: nvcc (`$KXFORM_NVCC`, PATH, /usr/local/cuda), the host C++
compiler (`$CXX`, g++, c++, clang++; the CPU runtime and the bijection check build
with it, libclang borrows its resource headers), the content-cache root
(`$KXFORM_CACHE_DIR`, `$XDG_CACHE_HOME/kxform`, `~/.cache/kxform`) and the flags
`compile_commands.json` gives a file (`-p BUILD_DIR`). The driver hands a `Toolchain` to
passes through their context; discovery runs once per process and only when asked.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kxform.build.compile_db import CompileFlags
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
            proc = subprocess.run([exe, *parts[1:], "--version"], capture_output=True, text=True, timeout=60,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode == 0 and proc.stdout.strip():
            return HostCompiler((exe, *parts[1:]), proc.stdout.splitlines()[0].strip())
    return None


@functools.lru_cache(maxsize=8)
def _resource_include(command: tuple[str, ...]) -> tuple[str, ...]:
    try:
        out = subprocess.run([*command, "-print-file-name=include"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ()
    return ("-isystem", out) if out and os.path.isdir(out) else ()


@dataclass(frozen=True)
class Toolchain:
    """Compilers, cache and project flags of one run (`build_dir`: `-p BUILD_DIR`)."""

    build_dir: str | None = None

    @classmethod
    def create(cls, build_dir: str | None = None) -> Toolchain:
        return cls(build_dir)

    @property
    def nvcc(self) -> str | None:
        from kxform.build.nvcc import find_nvcc

        return find_nvcc()

    @property
    def host_compiler(self) -> HostCompiler | None:
        return HostCompiler.find()

    @property
    def cache_root(self) -> Path:
        return cache_root()

    def cache_dir(self, name: str) -> Path:
        """The cache of one component (`nvcc`, `cpu`, `bijection`)."""
        return cache_root() / name

    def project_flags(self, path: str) -> CompileFlags:
        """Include directories, defines and extra flags of `path` from compile_commands.json
        (none without a build directory); InputError when the database lacks the file."""
        if not self.build_dir:
            return NO_FLAGS
        from kxform.build.compile_db import load_compile_commands

        return load_compile_commands(self.build_dir).flags_for(path)

    def compiler_include_dirs(self) -> tuple[str, ...]:
        """`-isystem DIR` of the host compiler's own headers (stddef.h, stdarg.h): the
        libclang wheel ships no resource headers, and the C++ library needs them."""
        compiler = self.host_compiler
        return _resource_include(compiler.command) if compiler is not None else ()

    def libclang_args(self, path: str) -> list[str]:
        """What libclang needs beyond its CUDA prelude to parse `path` as the project does."""
        include_dirs, defines, flags = self.project_flags(path)
        return [*self.compiler_include_dirs(), "-I", os.path.dirname(os.path.abspath(path)) or ".",
                *(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines),
                *(f for f in flags if f.startswith("-std="))]
