"""The GPU runtime: nvcc builds the cubin here, a child process launches it with pycuda.

Why a child process: a kernel that faults poisons the CUDA context for the rest of the
process, and one that spins forever cannot be interrupted from inside it. Launching in
`gpu_child.py` lets this process kill a hung kernel after `request.timeout_s`, survive
illegal addresses and crashes, and report each as one line naming `request.label`.
This process never initialises CUDA; only the child does.

The child is a long-lived worker (one per `GpuRuntime`, started on the first launch)
that keeps its context and loaded modules between requests, so a launch costs a round
trip over a pipe rather than an interpreter start. A worker that fails in any way is
killed and replaced on the next request. Under compute-sanitizer, which wraps a whole
process, every request gets a fresh child instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from kxform.build import (
    Builder,
    BuildJob,
    KernelResources,
    demangle,
    find_nvcc,
    instantiation_text,
    match_entry,
    ptx_entries,
)
from kxform.build.hip import hip_include_dirs
from kxform.errors import BuildFailed, KxformError
from kxform.runtime.base import (
    BufferArg,
    LaunchRequest,
    LaunchResult,
    LaunchTimeout,
    Runtime,
    RuntimeError_,
    TimedRun,
    Unsupported,
)
from kxform.runtime.gpu_worker import (  # noqa: F401 - re-exported for tests and tools
    _CLOSE_GRACE_S,
    _POLL_S,
    CHILD,
    INLINE_LIMIT,
    _Expired,
    _map_file,
    _Staging,
    _stop_worker,
    _kill,
    _Worker,
)

SANITIZER_EXIT = 99
_Self = TypeVar("_Self", bound="GpuRuntime")


@dataclass(frozen=True)
class DeviceInfo:
    """What the child saw of the device (read once per runtime)."""

    name: str
    cc: tuple[int, int]
    sm_count: int
    l2_bytes: int
    max_shared_optin: int
    total_memory: int

    @property
    def arch(self) -> str:
        """nvcc's real architecture for this device, e.g. `sm_90`."""
        return f"sm_{self.cc[0]}{self.cc[1]}"


@dataclass(frozen=True)
class CompiledKernel:
    """A cubin and the mangled name of the entry to launch in it."""

    cubin: bytes
    entry: str
    resources: KernelResources | None
    cached: bool


def compile_kernel(
    builder: Builder, request: LaunchRequest, arch: str, extra_flags: tuple[str, ...] = ()
) -> CompiledKernel:
    """Build `request.source` to a cubin for `arch` and find `request.kernel` in it.

    A templated spelling gets an instantiation appended (see
    `kxform.build.entry.instantiation_text`). Raises `BuildFailed` or `EntryNotFound`.
    """
    text = request.source + instantiation_text(request.kernel, [p.ctype for p in request.params], request.source)
    include_dirs = tuple(request.include_dirs) + hip_include_dirs(request.source)  # HIP: through the shim
    job = BuildJob(
        text,
        filename="kernel.cu",
        output="cubin",
        arch=arch,
        include_dirs=include_dirs,
        defines=request.defines,
        extra_flags=extra_flags,
    )
    result = builder.build_or_raise(job)
    assert result.output is not None
    entries = {r.mangled: r.demangled for r in result.resources}
    if not entries:  # no ptxas report (flags that silence it): read the PTX's .entry lines
        ptx = builder.build_or_raise(replace(job, output="ptx")).output or b""
        names = ptx_entries(ptx.decode("utf-8", "replace"))
        entries = dict(zip(names, demangle(names, builder.demangler), strict=True))
    entry = match_entry(request.kernel, entries)
    return CompiledKernel(result.output, entry, result.entry(entry), result.cached)


class GpuRuntime(Runtime):
    """Launches kernels on CUDA device `device` through pycuda, in a worker process.

    The worker starts on the first `run`/`time` and serves later ones; `close()` (or
    leaving a `with` block, dropping the runtime, or the interpreter exiting) stops it, and
    a later request starts a new one. `worker_pid` is the current worker's process id.

    `arch` overrides the device's (`sm_90a` for wgmma kernels); `sanitize=True` runs each
    request in a fresh child under compute-sanitizer (found beside nvcc or on PATH, or
    given as `sanitizer`; `sanitizer_tool`: memcheck, racecheck, initcheck or synccheck)
    and fails on its first error; `startup_timeout_s` bounds what
    comes before the launch (worker start and context creation when there is no worker
    yet, module load, copies).
    """

    name = "gpu"

    def __init__(
        self,
        builder: Builder | None = None,
        *,
        device: int = 0,
        arch: str | None = None,
        sanitize: bool = False,
        sanitizer: str | None = None,
        sanitizer_tool: str = "memcheck",
        extra_flags: tuple[str, ...] = (),
        python: str | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.device = device
        self.arch_override = arch
        self.sanitize = sanitize
        self.sanitizer_path = sanitizer
        self.sanitizer_tool = sanitizer_tool
        self.extra_flags = extra_flags
        self.python = python or sys.executable
        self.startup_timeout_s = startup_timeout_s
        self._builder = builder
        self._info: DeviceInfo | None = None
        self._reason = ""
        self._lock = threading.Lock()
        self._worker_lock = threading.Lock()  # one request at a time per worker
        self._worker: _Worker | None = None
        self._scratch: Path | None = None
        self._scratch_cleanup: Callable[[], object] | None = None
        self._serial = itertools.count()

    # ------------------------------------------------------------------ availability

    def available(self) -> tuple[bool, str]:
        """Whether pycuda, nvcc, a device (and compute-sanitizer if asked) are there."""
        with self._lock:
            if self._info is None and not self._reason:
                self._reason = self._check()
            return (self._info is not None, self._reason or "ok")

    def device_info(self) -> DeviceInfo:
        """The probed device; `Unsupported` with the reason when the runtime cannot run."""
        ok, reason = self.available()
        if not ok or self._info is None:
            raise Unsupported(f"gpu runtime unavailable: {reason}")
        return self._info

    def _check(self) -> str:
        import importlib.util

        if importlib.util.find_spec("pycuda") is None:
            return "pycuda is not installed: pip install 'kxform[gpu]'"
        if self._builder is None and find_nvcc() is None:
            return "nvcc not found: put it on PATH or set KXFORM_NVCC"
        if self.sanitize and self._sanitizer() is None:
            return "compute-sanitizer not found (it ships with the CUDA toolkit)"
        try:
            proc = subprocess.run(
                [self.python, str(CHILD), "probe", str(self.device)],
                capture_output=True,
                text=True,
                timeout=self.startup_timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"probing the device took over {self.startup_timeout_s:g} s"
        except OSError as exc:
            return f"cannot start {self.python}: {exc.strerror}"
        try:
            data = json.loads(proc.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return "device probe failed: " + _last_line(proc.stderr or proc.stdout)
        if "error" in data:
            error = str(data["error"])
            return "no CUDA device" if "no CUDA" in error or "NO_DEVICE" in error.upper() else error
        self._info = DeviceInfo(
            str(data["name"]),
            (int(data["cc"][0]), int(data["cc"][1])),
            int(data["sm_count"]),
            int(data["l2_bytes"]),
            int(data["max_shared_optin"]),
            int(data["total_memory"]),
        )
        return ""

    def _sanitizer(self) -> str | None:
        if self.sanitizer_path:
            return self.sanitizer_path if os.access(self.sanitizer_path, os.X_OK) else None
        nvcc = find_nvcc()
        beside = Path(os.path.realpath(nvcc)).parent / "compute-sanitizer" if nvcc else None
        if beside is not None and os.access(beside, os.X_OK):
            return str(beside)
        return shutil.which("compute-sanitizer") or (
            "/usr/local/cuda/bin/compute-sanitizer"
            if os.access("/usr/local/cuda/bin/compute-sanitizer", os.X_OK)
            else None
        )

    @property
    def builder(self) -> Builder:
        """The nvcc builder (created on first use, so a runtime costs nothing until used)."""
        with self._lock:
            if self._builder is None:
                self._builder = Builder()
            return self._builder

    # ------------------------------------------------------------------- lifetime

    @property
    def worker_pid(self) -> int | None:
        """The process id of the running worker, or None when there is none."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive() else None

    def close(self) -> None:
        """Stop the worker (it pops its context and exits) and remove the scratch folder.
        The runtime stays usable: the next request starts a new worker."""
        with self._worker_lock:
            self._drop_worker(kill=False)
            if self._scratch_cleanup is not None:
                self._scratch_cleanup()
            self._scratch, self._scratch_cleanup = None, None

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # half-built, or interpreter shutdown: finalizers remain
            self.close()

    # ------------------------------------------------------------------- launching

    def compile(self, request: LaunchRequest) -> CompiledKernel:
        """The cubin and entry for `request`, as `run` and `time` launch it."""
        label = _label(request)
        ok, reason = self.available()
        if not ok:
            raise Unsupported(f"{label}: gpu runtime unavailable: {reason}")
        arch = self.arch_override or self.device_info().arch
        try:
            return compile_kernel(self.builder, request, arch, self.extra_flags)
        except KxformError as exc:
            raise RuntimeError_(f"{label}: {'build failed: ' if isinstance(exc, BuildFailed) else ''}{exc}") from exc

    def run(self, request: LaunchRequest) -> LaunchResult:
        """Launch once: inputs copied in, `out` buffers poisoned first, outputs copied back."""
        compiled = self.compile(request)
        reply, outputs, unwritten = self._launch(request, compiled, {"mode": "run"}, request.timeout_s)
        return LaunchResult(outputs, unwritten, self.name, elapsed_ms=float(reply.get("elapsed_ms", 0.0)))

    def time(
        self,
        request: LaunchRequest,
        *,
        warmup: int = 3,
        repeat: int = 20,
        flush_l2: bool = False,
        keep_outputs: bool = False,
        persisting_l2_limit: int = 0,
    ) -> TimedRun:
        """Milliseconds of each of `repeat` launches (CUDA events), after `warmup` launches.

        Every launch starts as `run`'s does: `out` buffers poisoned, `inout` buffers
        restored to the request's data (outside the timed span). Buffers are rotated over
        several copies when they fit in the L2, the persisting-L2 carveout is capped at
        zero, and `flush_l2=True` overwrites twice the L2 between launches (cold-cache
        timing). With `keep_outputs` the last timed launch's outputs come back, for the
        caller to compare with a verified run. The timeout covers all launches:
        `request.timeout_s` per launch. `persisting_l2_limit` (bytes, default 0: the cap)
        is for tools/bench_integrity.py only, which times without the cap to show its effect.
        """
        if warmup < 0 or repeat < 1:
            raise ValueError("warmup must be >= 0 and repeat >= 1")
        compiled = self.compile(request)
        extra = {
            "mode": "time",
            "warmup": warmup,
            "repeat": repeat,
            "flush_l2": flush_l2,
            "rotate": True,
            "keep_outputs": keep_outputs,
            "persisting_l2_limit": int(persisting_l2_limit),
        }
        reply, outputs, _ = self._launch(request, compiled, extra, request.timeout_s * (warmup + repeat))
        persisting = reply.get("persisting_l2_bytes")
        return TimedRun(
            tuple(float(t) for t in reply["times_ms"]),
            int(reply.get("copies", 1)),
            None if persisting is None else int(persisting),
            outputs,
        )

    def _launch(
        self, request: LaunchRequest, compiled: CompiledKernel, extra: dict[str, Any], launch_s: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, int]]:
        """Send one job to a child; its reply, and the outputs when `extra` asks to run."""
        label, info = _label(request), self.device_info()
        if request.params and len(request.params) != len(request.args):
            counts = f"{len(request.args)} arguments for {len(request.params)} parameters"
            raise RuntimeError_(f"{label}: {counts}")
        if request.shared_bytes > info.max_shared_optin:
            limit = f"the device's maximum of {info.max_shared_optin} bytes per block"
            raise RuntimeError_(f"{label}: {request.shared_bytes} bytes of dynamic shared memory exceed {limit}")
        job = {
            "entry": compiled.entry,
            "grid": [int(v) for v in request.grid],
            "block": [int(v) for v in request.block],
            "shared_bytes": int(request.shared_bytes),
            "l2_bytes": info.l2_bytes,
            **extra,
        }
        want_outputs = extra["mode"] == "run" or bool(extra.get("keep_outputs"))
        if self.sanitize:
            return self._launch_once(request, compiled, job, want_outputs, launch_s)
        with self._worker_lock:
            staging = self._staging(request)
            try:
                job.update(
                    args=staging.args(request, label, want_outputs),
                    cubin=compiled.cubin,
                    module_key=hashlib.sha256(compiled.cubin).hexdigest(),
                )
                reply = self._ask(job, label, launch_s)
                outputs, unwritten = staging.outputs(request, reply.get("outputs", {}), want_outputs)
            finally:
                staging.cleanup()
        return reply, outputs, unwritten

    # ------------------------------------------------------------ the worker process

    def _ask(self, job: dict[str, Any], label: str, launch_s: float) -> dict[str, Any]:
        """Send `job` to the worker (starting one if needed) and wait for its result."""
        deadline = time.monotonic() + self.startup_timeout_s
        early = (
            f"timed out after {self.startup_timeout_s:g} s before the launch "
            "(context creation or module load hung); killed"
        )
        try:
            worker = self._ready_worker(label, deadline, early)
            worker.truncate_log()
            worker.send(job, deadline, early)
            reply = worker.receive(deadline, early)
            if reply is not None and reply.get("kind") == "launched":
                late = f"timed out after {launch_s:g} s (kernel hung or too slow); killed"
                reply = worker.receive(time.monotonic() + launch_s, late)
        except _Expired as exc:
            self._drop_worker(kill=True)
            raise LaunchTimeout(f"{label}: {exc}") from None
        except BrokenPipeError:
            reply = None
        except BaseException:  # interrupted mid-request: the worker's state is unknown
            self._drop_worker(kill=True)
            raise
        if reply is None:
            raise self._worker_died(label)
        if reply.get("ok"):
            return reply
        self._drop_worker(kill=True)  # it exits by itself after any failure; make sure
        raise RuntimeError_(f"{label}: {reply.get('stage', 'child')} failed: {reply.get('error', 'unknown error')}")

    def _ready_worker(self, label: str, deadline: float, early: str) -> _Worker:
        if self._worker is not None and self._worker.alive():
            return self._worker
        self._drop_worker(kill=True)
        try:
            self._worker = _Worker(self.python, self.device, self._scratch_dir() / "worker.log")
        except OSError as exc:
            raise RuntimeError_(f"{label}: cannot start {self.python}: {exc.strerror}") from exc
        hello = self._worker.receive(deadline, early)
        if hello is None:
            raise self._worker_died(label)
        if hello.get("kind") != "ready":
            self._drop_worker(kill=True)
            raise RuntimeError_(f"{label}: {hello.get('stage', 'child')} failed: {hello.get('error', 'unknown error')}")
        return self._worker

    def _worker_died(self, label: str) -> RuntimeError_:
        worker = self._worker
        assert worker is not None
        returncode = worker.wait(_CLOSE_GRACE_S)
        text = worker.log_text()
        self._drop_worker(kill=True)
        return RuntimeError_(f"{label}: {_death(returncode, text)}")

    def _drop_worker(self, *, kill: bool) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.stop(0.0 if kill else _CLOSE_GRACE_S)

    def _scratch_dir(self) -> Path:
        """This runtime's folder for the worker's log and large arrays (/dev/shm if usable)."""
        if self._scratch is None or not self._scratch.is_dir():
            shm = Path("/dev/shm")
            root = shm if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None
            self._scratch = Path(tempfile.mkdtemp(prefix="kxform-gpu-", dir=root))
            self._scratch_cleanup = weakref.finalize(self, shutil.rmtree, str(self._scratch), True)
        return self._scratch

    def _staging(self, request: LaunchRequest) -> _Staging:
        """Staging in the scratch folder, or in a temporary folder of its own when the
        request's large arrays would fill more than half of the scratch file system."""
        prefix = f"r{next(self._serial)}_"
        folder = self._scratch_dir()
        large = sum(
            2 * a.data.nbytes for a in request.args if isinstance(a, BufferArg) and a.data.nbytes > INLINE_LIMIT
        )
        if large:
            stat = os.statvfs(folder)
            if large > stat.f_bavail * stat.f_frsize // 2:
                return _Staging(Path(tempfile.mkdtemp(prefix="kxform-gpu-")), INLINE_LIMIT, prefix, own_folder=True)
        return _Staging(folder, INLINE_LIMIT, prefix)

    # ----------------------------------------------------- one child per request

    def _launch_once(
        self, request: LaunchRequest, compiled: CompiledKernel, job: dict[str, Any], want_outputs: bool, launch_s: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, int]]:
        """Run `job` in a fresh child through files (what compute-sanitizer can wrap)."""
        with tempfile.TemporaryDirectory(prefix="kxform-gpu-") as scratch:
            folder = Path(scratch)
            staging = _Staging(folder, -1, "")
            (folder / "module.cubin").write_bytes(compiled.cubin)
            job.update(
                args=staging.args(request, _label(request), want_outputs), device=self.device, cubin_file="module.cubin"
            )
            (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
            reply = self._run_child(folder, job["mode"], request, launch_s)
            outputs, unwritten = staging.outputs(request, {}, want_outputs)  # mapped: outlive the folder
        return reply, outputs, unwritten

    def _run_child(self, folder: Path, mode: str, request: LaunchRequest, launch_timeout_s: float) -> dict[str, Any]:
        """Run the child on `folder`; its result, or a one-line error naming the label."""
        label = _label(request)
        command = [self.python, str(CHILD), mode, str(folder)]
        if self.sanitize:
            sanitizer = self._sanitizer()
            if sanitizer is None:
                raise Unsupported(f"{label}: compute-sanitizer not found")
            command = [sanitizer, "--tool", self.sanitizer_tool, "--error-exitcode", str(SANITIZER_EXIT), *command]
        with open(folder / "child.log", "w+", encoding="utf-8", errors="replace") as log:
            proc = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            timed_out = _wait(proc, folder, self.startup_timeout_s, launch_timeout_s)
            log.seek(0)
            text = log.read()
        if timed_out:
            raise LaunchTimeout(f"{label}: {timed_out}")
        result = _load_result(folder)
        if self.sanitize:
            finding = sanitizer_error(text)
            if finding:
                raise RuntimeError_(f"{label}: compute-sanitizer: {finding}")
        if result is not None and result.get("ok"):
            return result
        if result is not None:
            stage, error = result.get("stage", "child"), result.get("error", "unknown error")
            raise RuntimeError_(f"{label}: {stage} failed: {error}")
        raise RuntimeError_(f"{label}: {_death(proc.returncode, text)}")


# ------------------------------------------------------------------ worker plumbing


def _label(request: LaunchRequest) -> str:
    return request.label or request.kernel


def _wait(proc: subprocess.Popen[Any], folder: Path, startup_s: float, launch_s: float) -> str:
    """Wait for the child; kill its process group on a timeout and say which one."""
    started = time.monotonic()
    launched_at: float | None = None
    while proc.poll() is None:
        now = time.monotonic()
        if launched_at is None and (folder / "launched").exists():
            launched_at = now
        if launched_at is None and now - started > startup_s:
            _kill(proc)
            return f"timed out after {startup_s:g} s before the launch (context creation or module load hung); killed"
        if launched_at is not None and now - launched_at > launch_s:
            _kill(proc)
            return f"timed out after {launch_s:g} s (kernel hung or too slow); killed"
        time.sleep(_POLL_S)
    return ""


def _load_result(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _death(returncode: int | None, log: str) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"child process died ({name}): {_last_line(log)}"
    return f"child process exited with status {returncode}: {_last_line(log)}"


def _last_line(text: str) -> str:
    return next((" ".join(ln.split()) for ln in reversed(text.splitlines()) if ln.strip()), "no output")


_SUMMARY = re.compile(r"[A-Z]+ SUMMARY:")
"""The closing tally of a tool: ERROR SUMMARY (memcheck, initcheck, synccheck), LEAK
SUMMARY, RACECHECK SUMMARY (racecheck's, also with 0 hazards)."""


def sanitizer_error(log: str) -> str:
    """The first error compute-sanitizer reported, with its `at <function>` line, or "".

    A hazard record (`Invalid __global__ write ...`) is the cause; the `Program hit
    CUDA_ERROR_...` API records that follow it are consequences, used only when no
    hazard was recorded.
    """
    lines = [ln[len("=========") :] for ln in log.splitlines() if ln.startswith("=========")]
    found: list[str] = []
    for index, line in enumerate(lines):
        text = line.strip()
        banner = text.startswith("COMPUTE-SANITIZER") or _SUMMARY.match(text) is not None  # each tool's tally
        if not text or line.startswith("  ") or banner:
            continue
        where = next((ln.strip() for ln in lines[index + 1 : index + 3] if ln.strip().startswith("at ")), "")
        found.append(f"{text} {where}".strip())
    hazards = [f for f in found if not f.startswith("Program hit")]
    return (hazards or found or [""])[0]
