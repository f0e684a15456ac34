"""Reading libclang's diagnostics for the semantic layer: which header is missing, and
which errors say something about the user's code.

kxform parses CUDA with libclang in host-only mode behind a small prelude, not the
toolkit's runtime headers, so many errors only say that a CUDA built-in is not declared
(`atomicAdd`, `cg::this_thread_block`) or come from inside toolkit headers. Those say
nothing about whether a kernel reads the block index and are dropped; what remains, in
the project's own files, makes the functions that contain or use it "unknown".
"""

from __future__ import annotations

import os
import re

NOT_FOUND = re.compile(r"^'(?P<name>[^']+)' file not found")
_QUOTED = re.compile(r"'([^']*)'")
CUDA_NAMES = frozenset(
    {
        "cg",
        "cooperative_groups",
        "nvcuda",
        "wmma",
        "cuda",
        "std",
        "cub",
        "thrust",
        "cute",
        "cutlass",
        "half",
        "thread_block",
        "thread_block_tile",
        "this_thread_block",
        "tiled_partition",
        "reduce",
        "inclusive_scan",
        "exclusive_scan",
        "plus",
        "less",
        "greater",
        "bit_and",
        "bit_or",
        "bit_xor",
        "warpSize",
        "nv_bfloat16",
        "nv_bfloat162",
        "bfloat16",
        "fragment",
        "matrix_a",
        "matrix_b",
        "accumulator",
        "row_major",
        "col_major",
        "mem_row_major",
        "mem_col_major",
        "precision",
        "tf32",
        "uint",
        "ushort",
        "uchar",
        "ulong",
        "longlong",
        "ulonglong",
        "char1",
        "char2",
        "char3",
        "char4",
        "uchar1",
        "uchar2",
        "uchar3",
        "uchar4",
        "short2",
        "short4",
        "ushort2",
        "ushort4",
        "long2",
        "ulong2",
        "longlong2",
        "ulonglong2",
        "dim3",
        "texture",
        "surface",
        "cudaTextureObject_t",
        "cudaSurfaceObject_t",
        "curandState",
        "curandState_t",
        "curand_init",
        "curand",
        "curand_uniform",
        "curand_normal",
        "hip",
        "hipcub",
        "rocprim",
        "grid_group",
        "thread_group",
        "coalesced_group",
        "multi_grid_group",
        "cluster_group",
        "grid",
        "block_tile_memory",
        "this_grid",
        "this_multi_grid",
        "this_cluster",
        "coalesced_threads",
        "memcpy_async",
        "wait",
        "wait_prior",
        "pipeline",
        "barrier",
        "aligned_size_t",
    }
)
"""CUDA/HIP names kxform's host-only libclang view does not declare (only a prelude is
parsed, not the toolkit's runtime headers): an error that names one of these says
nothing about the user's code. Built-in calls are matched by BUILTIN_CALL_RE too."""


def missing_header(tu) -> str | None:  # type: ignore[no-untyped-def]
    """The header (as spelled in `#include`) whose absence stopped the parse, if any."""
    import clang.cindex as ci

    for d in tu.diagnostics:
        if d.severity >= ci.Diagnostic.Fatal:
            match = NOT_FOUND.match(d.spelling)
            if match and not os.path.isabs(match.group("name")) and ".." not in match.group("name"):
                return match.group("name")
    return None


def _about_user_code(message: str) -> bool:
    """Whether an error can hide something of the user's (a function or macro that might
    read the block index): not when it only names a CUDA built-in kxform's prelude lacks."""
    from kxform.frontend.semantic import BUILTIN_CALL_RE

    quoted = _QUOTED.findall(message)
    if not quoted:
        return True
    name = re.split(r"[<(\s]", quoted[0].strip())[0].split("::")[-1]
    return not (
        name in CUDA_NAMES
        or BUILTIN_CALL_RE.match(name)
        or name in ("int", "float", "double", "bool", "unsigned", "char", "void")
    )


def errors_by_file(
    tu,
    main: str,  # type: ignore[no-untyped-def]
    system: tuple[str, ...],
) -> dict[str, list[tuple[int, str]]]:
    """Errors in the project's own files (the main file and its local headers), by file:
    errors inside toolkit and system headers come from kxform's host-only view of CUDA
    and say nothing about the user's code."""
    import clang.cindex as ci

    out: dict[str, list[tuple[int, str]]] = {}
    for d in tu.diagnostics:
        if d.severity < ci.Diagnostic.Error or d.location.file is None:
            continue
        name = os.path.abspath(d.location.file.name)
        if name != main and os.path.realpath(name).startswith(system):
            continue
        shown = os.path.basename(name) if name != main else os.path.basename(main)
        if not _about_user_code(d.spelling):
            continue
        out.setdefault(name, []).append(
            (d.location.offset, f"{shown}:{d.location.line}:{d.location.column}: {d.spelling}")
        )
    return out


_UNDECLARED = re.compile(r"use of undeclared identifier '(\w+)'")


def is_cascade(message: str, text_before: bytes) -> bool:
    """An "undeclared identifier" error for a name the function already mentioned before
    the error (`wmma::fragment<...> acc;` failed, so every later `acc` is "undeclared"):
    the first error explains it, and is counted on its own."""
    match = _UNDECLARED.search(message)
    return match is not None and re.search(rb"\b" + match.group(1).encode() + rb"\b", text_before) is not None
