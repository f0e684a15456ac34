"""nvcc as a library: content-cached, parallel builds of in-memory translation units.

`Builder` compiles `BuildJob`s (source text plus options) to cubin, PTX or objects,
caches successes by a hash of source, options and nvcc version, parses ptxas's resource
report and maps compiler errors back to the user's file and line. `load_compile_commands`
supplies a real project's include paths and defines.
"""

from kxform.build.builder import Builder
from kxform.build.cache import BuildCache, default_cache_dir
from kxform.build.compile_db import CompileDatabase, CompileFlags, load_compile_commands
from kxform.build.diagnostics import Diagnostic, build_failure, first_error
from kxform.build.entry import (
    EntryNotFound,
    demangle,
    find_demangler,
    instantiation_text,
    match_entry,
    ptx_entries,
)
from kxform.build.nvcc import BuildJob, BuildResult, KernelResources, OutputKind, find_nvcc, nvcc_version

__all__ = [
    "BuildCache",
    "BuildJob",
    "BuildResult",
    "Builder",
    "CompileDatabase",
    "CompileFlags",
    "Diagnostic",
    "EntryNotFound",
    "KernelResources",
    "OutputKind",
    "build_failure",
    "default_cache_dir",
    "demangle",
    "find_demangler",
    "find_nvcc",
    "first_error",
    "instantiation_text",
    "load_compile_commands",
    "match_entry",
    "nvcc_version",
    "ptx_entries",
]
