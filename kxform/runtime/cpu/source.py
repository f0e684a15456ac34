"""Source-level work of the CPU runtime: the dynamic-shared-memory pre-pass and the scan
for features the emulation does not provide.

Both work on text, not on a parse tree: the pre-pass must run before the C preprocessor
(it rewrites declarations that may sit inside macro bodies), and the scan runs on the
preprocessed unit, where macros are expanded and dead `#if` branches are gone, so a
feature hidden behind a macro is found and one in an unused branch is not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kxform.frontend.lexical import blank_comments_and_strings

KERNEL_FILE = "kernel.cu"
"""Name under which the request's source is compiled (locations are reported with it)."""


_EXTERN_SHARED = re.compile(r"\bextern\b[^;{}]*?\b__shared__\b[^;{}]*;")
_ARRAY_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\[\s*\]\s*(?:__attribute__\s*\(\(.*\)\)\s*)?;$", re.DOTALL)
_ATTRIBUTE = re.compile(r"__align__\s*\([^)]*\)|alignas\s*\([^)]*\)|__attribute__\s*\(\(.*?\)\)", re.DOTALL)
_DYN_SHARED = "static thread_local {type}* const {name} = reinterpret_cast<{type}*>(::kxcpu::dyn_smem);"


_STATIC_SHARED = re.compile(r"\bstatic(\s+)__shared__\b|\b__shared__(\s+)static\b")


def drop_static_on_shared(source: str) -> str:
    """`static __shared__ T x[N];` is legal CUDA (a block-wide variable either way); the
    emulation spells `__shared__` as `static thread_local`, so the extra `static` goes."""
    return _STATIC_SHARED.sub(lambda m: "__shared__" + (m.group(1) or m.group(2)), source)


def rewrite_dynamic_shared(source: str) -> str:
    """Rewrites `extern __shared__ T name[];` into a pointer to the block's dynamic buffer.

    The replacement is a `static thread_local` pointer initialised from the worker's
    dynamic-shared-memory base; it is valid at namespace and function scope and inside
    templates. Line breaks of the declaration are kept so line numbers do not move.
    Declarations of another shape are left alone (the scan reports them).
    """
    blanked = blank_comments_and_strings(source)
    pieces: list[str] = []
    last = 0
    for m in _EXTERN_SHARED.finditer(blanked):
        decl = source[m.start() : m.end()]
        name = _ARRAY_NAME.search(decl)
        if name is None:
            continue
        type_text = decl[: name.start()]
        type_text = re.sub(r"\bextern\b|\b__shared__\b", " ", type_text)
        type_text = " ".join(_ATTRIBUTE.sub(" ", type_text).split())
        if not type_text or "," in decl:
            continue
        pieces.append(source[last : m.start()])
        pieces.append(_DYN_SHARED.format(type=type_text, name=name.group(1)))
        pieces.append("\n" * decl.count("\n"))
        last = m.end()
    pieces.append(source[last:])
    return "".join(pieces)


@dataclass(frozen=True)
class Finding:
    """A use of something the CPU runtime cannot run, with where it is."""

    feature: str
    file: str
    line: int


_UNSUPPORTED: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), feature)
    for pattern, feature in (
        (r"\b(?:asm|__asm__|__asm)\b", "inline assembly (asm)"),
        (r"\brocwmma\b|\b__builtin_amdgcn_mfma\w*", "tensor-core matrix operations (rocwmma/MFMA)"),
        (
            r"\b(?:tex[123]D\w*|texCubemap\w*|tex2Dgather)\b|\btexture\s*<|\b(?:cuda|hip)TextureObject_t\b",
            "texture fetches",
        ),
        (r"\bsurf(?:1D|2D|3D|Cubemap)\w*(?:read|write)\b|\b(?:cuda|hip)SurfaceObject_t\b", "surface accesses"),
        (
            r"\b(?:this_grid|grid_group|this_multi_grid|multi_grid_group|sync_grids)\b",
            "grid-wide cooperative-groups synchronisation (this_grid)",
        ),
        (r"\b(?:this_cluster|cluster_group)\b", "thread-block clusters (this_cluster)"),
        (
            r"\b(?:coalesced_threads|coalesced_group|labeled_partition|binary_partition)\b",
            "coalesced cooperative groups (coalesced_threads)",
        ),
        (
            r"<<<|\b(?:cudaLaunchDevice|cudaGetParameterBuffer|cudaDeviceSynchronize|cudaLaunchKernel)\b",
            "dynamic parallelism (kernel launch from device code)",
        ),
        (
            r"\b__pipeline_(?!(?:memcpy_async|commit|wait_prior)\b)\w+|\bmemcpy_async\b"
            r"|\bcuda\s*::\s*(?:barrier|pipeline)\b",
            "asynchronous copies other than __pipeline_memcpy_async/commit/wait_prior (memcpy_async, "
            "pipeline objects, barriers)",
        ),
        (r"\b__builtin_amdgcn_\w+", "AMD GCN builtins (__builtin_amdgcn_*)"),
        (
            r"\bextern\s+static\s+thread_local\b|\bstatic\s+thread_local\s+extern\b",
            "an extern __shared__ declaration of a form the runtime does not rewrite (use `extern __shared__ T name[];`)",
        ),
    )
)

_LINE_MARKER = re.compile(r'^#\s+(\d+)\s+"((?:[^"\\]|\\.)*)"(.*)$')


def find_unsupported(preprocessed: str, include_dir: Path) -> Finding | None:
    """The first unsupported feature used by the request's own code, if any.

    Only lines that come from the kernel source and the request's include directories
    are scanned: system headers and the emulation headers (which legitimately contain
    inline assembly, for instance) are skipped using the preprocessor's line markers.
    """
    ours = str(include_dir)
    current, line, scan = "", 0, False
    for raw in preprocessed.splitlines():
        marker = _LINE_MARKER.match(raw)
        if marker is not None:
            line, current = int(marker.group(1)), marker.group(2)
            flags = marker.group(3).split()
            scan = not ("3" in flags or current.startswith((ours, "<")) or current.endswith("kernel.cpp"))
            continue
        if scan and raw.strip():
            text = blank_comments_and_strings(raw)
            for pattern, feature in _UNSUPPORTED:
                if pattern.search(text):
                    return Finding(feature, current, line)
        line += 1
    return None


_MISSING_HEADER = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):\d+: fatal error: (?P<header>[^:\n]+): No such file", re.MULTILINE
)
_GPU_HEADER = re.compile(
    r"^(?:cub|thrust|cuda|cutlass|cute|nv|crt|hipcub|rocprim|rocwmma|rocrand|hiprand|cooperative_groups)/"
    r"|^(?:cuda|cublas|cufft|curand|cusparse|cusolver|cudnn|cutensor|cufile|cudss|cupti|nccl|nvshmem|nvjpeg|npp|"
    r"rccl|nvtx|nvToolsExt|nvrtc|nvml|hip|rocblas|rocrand|hiprand)\w*(?:\.h|\.hpp|\.cuh)?$|^sm_\d+\w*\.h$"
)


def missing_gpu_header(compiler_output: str) -> Finding | None:
    """A GPU-library header the unit includes that the runtime does not emulate."""
    for m in _MISSING_HEADER.finditer(compiler_output):
        header = m.group("header").strip()
        if _GPU_HEADER.search(header):
            return Finding(f"<{header}> (not emulated)", m.group("file"), int(m.group("line")))
    return None


def absent_header(folder: Path, missing: Finding) -> Path:
    """`folder` holding an empty stand-in for the missing library header (the header's
    own relative path, `cudnn_frontend/ops.h` included): the unit is compiled without the
    library, which works when only host code the build drops used it."""
    header = missing.feature.removeprefix("<").split(">", 1)[0]
    target = folder / header
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"// kxform: <{header}> is not installed; the kernel is compiled without it\n")
    return folder


def first_error(compiler_output: str) -> str:
    """The first error line of a compiler run (the one that explains the rest)."""
    for raw in compiler_output.splitlines():
        if " error: " in raw or " fatal error: " in raw or raw.startswith("error:"):
            return raw.strip()
    lines = [raw.strip() for raw in compiler_output.splitlines() if raw.strip()]
    return lines[0] if lines else "the compiler failed without a message"
