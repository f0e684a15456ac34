"""One nvcc invocation: finding nvcc, describing a job, running it in a scratch directory.

A job carries source *text*, not a path: kxform compiles rewritten code that exists only
in memory. The text is written to a temporary file, and `-I source_dir` comes first on
the command line so that `#include "..."` resolves as if the file were still in place.
Compiler messages are rewritten back to the job's filename (and original lines, through
`line_map`) by `kxform.build.diagnostics`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from kxform.build.diagnostics import rewrite_log
from kxform.build.overlay import Mirror, OverlayFile
from kxform.build.ptxas import KernelResources, parse_ptxas_info
from kxform.errors import BuildFailed

__all__ = [
    "BuildJob",
    "BuildResult",
    "KernelResources",
    "OutputKind",
    "find_nvcc",
    "nvcc_version",
    "run_nvcc",
]

OutputKind = Literal["obj", "cubin", "ptx", "check"]
"""`check` compiles host and device code (like `obj`) and discards the output."""

ENV_NVCC = "KXFORM_NVCC"
DEFAULT_NVCC = "/usr/local/cuda/bin/nvcc"
_KIND_FLAG = {"obj": "-c", "cubin": "-cubin", "ptx": "-ptx", "check": "-c"}
_ARCH = re.compile(r"^(sm|compute)_\d{2,3}[af]?$")


def find_nvcc() -> str | None:
    """`$KXFORM_NVCC` (a name or a path), else `nvcc` on PATH, else the default CUDA path."""
    explicit = os.environ.get(ENV_NVCC)
    if explicit:
        return shutil.which(explicit)
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    return DEFAULT_NVCC if os.access(DEFAULT_NVCC, os.X_OK) else None


def nvcc_version(nvcc: str) -> str:
    """nvcc's release and build id, e.g. `release 13.0, V13.0.88; cuda_13.0.r13.0/...`.

    The build id is part of every cache key: two nvcc builds of one release can emit
    different code.
    """
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildFailed(f"cannot run {nvcc} --version: {exc}") from exc
    lines = [ln.strip() for ln in proc.stdout.splitlines()]
    release = next((ln.split("tools, ", 1)[-1] for ln in lines if ln.startswith("Cuda compilation tools")), "")
    build = next((ln.split(None, 1)[-1] for ln in lines if ln.startswith("Build ")), "")
    if proc.returncode != 0 or not release:
        raise BuildFailed(f"{nvcc} --version did not report a CUDA release", log=proc.stdout + proc.stderr)
    return f"{release}; {build}" if build else release


@dataclass(frozen=True)
class BuildJob:
    """One translation unit to compile, and how.

    `defines` are `NAME` or `NAME=VALUE`; `extra_flags` go to nvcc as they are (they must
    not name the architecture or output: the job sets both). `line_map[i]` is the
    original line of line `i + 1` of `source` (0: inserted text), for error messages.
    `overlay` replaces other files of the tree for this compile (rewritten headers): the
    unit is then compiled in a mirror of its tree (kxform.build.overlay) at
    `source_path`, the absolute path it will have.
    """

    source: str
    filename: str = "kernel.cu"
    output: OutputKind = "cubin"
    arch: str = "sm_90"
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    extra_flags: tuple[str, ...] = ()
    source_dir: str | None = None
    line_map: tuple[int, ...] | None = None
    overlay: tuple[OverlayFile, ...] = ()
    source_path: str | None = None

    def __post_init__(self) -> None:
        if self.output not in get_args(OutputKind):
            raise ValueError(f"output must be one of {get_args(OutputKind)}, not {self.output!r}")
        if not _ARCH.match(self.arch):
            raise ValueError(f"arch must look like sm_90 or compute_90, not {self.arch!r}")
        if self.overlay and not self.source_path:
            raise ValueError("a job with an overlay needs source_path")

    def options(self) -> tuple[str, ...]:
        """Every nvcc option of this job except the input and output paths (the cache key)."""
        flags = ["-arch=" + self.arch, _KIND_FLAG[self.output]]
        if self.output != "ptx":
            flags += ["-Xptxas", "-v"]
        base = Path(self.source_dir) if self.source_dir else Path.cwd()
        if self.source_dir:
            flags += ["-I", str(Path(self.source_dir).resolve())]
        flags += [item for d in self.include_dirs for item in ("-I", str((base / d).resolve()))]
        flags += ["-D" + d for d in self.defines]
        flags += list(self.extra_flags)
        return tuple(flags)

    @property
    def temp_name(self) -> str:
        """The scratch file's name: the job's base name, always ending in `.cu` so nvcc
        treats it as CUDA whatever the original suffix."""
        stem = Path(self.filename).stem or "kernel"
        return re.sub(r"[^\w.-]", "_", stem) + ".cu"


@dataclass(frozen=True)
class BuildResult:
    """The outcome of one job. `output` is None for failures and `check` jobs."""

    ok: bool
    output: bytes | None
    log: str
    resources: tuple[KernelResources, ...] = ()
    cached: bool = False
    seconds: float = 0.0
    returncode: int = 0
    """nvcc's exit status; negative for a signal, -1 also for a timeout."""

    def entry(self, mangled: str) -> KernelResources | None:
        """The resources of one kernel by mangled name."""
        return next((r for r in self.resources if r.mangled == mangled), None)


def run_nvcc(nvcc: str, job: BuildJob, timeout_s: float) -> BuildResult:
    """Compile `job` once, uncached. Never raises for compiler errors: `ok` says."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kxform-nvcc-") as scratch:
        mirror = None
        options = list(job.options())
        if job.overlay:
            assert job.source_path is not None
            mirror = Mirror.build(Path(scratch) / "tree", job.source_path, job.source, job.overlay)
            src, options = mirror.unit, mirror.remap_options(options)
        else:
            src = Path(scratch) / job.temp_name
            src.write_text(job.source, encoding="utf-8")
        out = Path(scratch) / ("out." + ("o" if job.output in ("obj", "check") else job.output))
        command = [nvcc, *options, str(src), "-o", str(out)]
        returncode, raw_log = _run(command, cwd=scratch, timeout_s=timeout_s)
        log = rewrite_log(raw_log, str(src), job.filename, job.line_map)
        if mirror is not None:
            for replaced in job.overlay:
                log = rewrite_log(log, mirror.path_of(replaced.path), replaced.display, replaced.line_map)
            log = log.replace(str(mirror.root), str(mirror.source_root))
        ok = returncode == 0 and out.exists()
        output = out.read_bytes() if ok and job.output != "check" else None
    resources = parse_ptxas_info(log) if ok else ()
    return BuildResult(ok, output, log, resources, False, time.monotonic() - started, returncode)


def _run(command: list[str], cwd: str, timeout_s: float) -> tuple[int, str]:
    """Run nvcc in its own process group so a timeout also ends cicc, ptxas and the host
    compiler it started."""
    try:
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return -1, f"cannot run {command[0]}: {exc.strerror}"
    try:
        text, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        text, _ = proc.communicate()
        return -1, (text or "") + f"\nnvcc timed out after {timeout_s:g} s\n"
    return proc.returncode, text or ""


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
