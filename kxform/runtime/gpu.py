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
import mmap
import os
import pickle
import select
import shutil
import signal
import struct
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
from kxform.errors import BuildFailed, KxformError
from kxform.runtime.base import (
    BufferArg,
    LaunchRequest,
    LaunchResult,
    LaunchTimeout,
    Runtime,
    RuntimeError_,
    ScalarArg,
    Unsupported,
    count_unwritten,
)

CHILD = Path(__file__).with_name("gpu_child.py")
SANITIZER_EXIT = 99
_POLL_S = 0.02
INLINE_LIMIT = 256 * 1024
"""Arrays up to this many bytes travel inside the request; larger ones as memory-mapped
files (on /dev/shm where it has room): measured crossover of the two on a 2-core host."""
_CLOSE_GRACE_S = 2.0
_HEADER = struct.Struct("<Q")
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
    job = BuildJob(text, filename="kernel.cu", output="cubin", arch=arch, include_dirs=request.include_dirs,
                   defines=request.defines, extra_flags=extra_flags)
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
    given as `sanitizer`) and fails on its first error; `startup_timeout_s` bounds what
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
        extra_flags: tuple[str, ...] = (),
        python: str | None = None,
        startup_timeout_s: float = 120.0,
    ) -> None:
        self.device = device
        self.arch_override = arch
        self.sanitize = sanitize
        self.sanitizer_path = sanitizer
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
            proc = subprocess.run([self.python, str(CHILD), "probe", str(self.device)], capture_output=True,
                                  text=True, timeout=self.startup_timeout_s, check=False)
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
        self._info = DeviceInfo(str(data["name"]), (int(data["cc"][0]), int(data["cc"][1])), int(data["sm_count"]),
                                int(data["l2_bytes"]), int(data["max_shared_optin"]), int(data["total_memory"]))
        return ""

    def _sanitizer(self) -> str | None:
        if self.sanitizer_path:
            return self.sanitizer_path if os.access(self.sanitizer_path, os.X_OK) else None
        nvcc = find_nvcc()
        beside = Path(os.path.realpath(nvcc)).parent / "compute-sanitizer" if nvcc else None
        if beside is not None and os.access(beside, os.X_OK):
            return str(beside)
        return shutil.which("compute-sanitizer") or (
            "/usr/local/cuda/bin/compute-sanitizer" if os.access("/usr/local/cuda/bin/compute-sanitizer", os.X_OK)
            else None)

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
        self, request: LaunchRequest, *, warmup: int = 3, repeat: int = 20, flush_l2: bool = False
    ) -> list[float]:
        """Milliseconds of each of `repeat` launches (CUDA events), after `warmup` launches.

        Every launch starts as `run`'s does: `out` buffers poisoned, `inout` buffers
        restored to the request's data (outside the timed span). Outputs are not copied
        back: use `run` for them. Buffers are rotated over several copies when they fit in
        the L2, and `flush_l2=True` overwrites twice the L2 between launches (cold-cache
        timing). The timeout covers all launches: `request.timeout_s` per launch.
        """
        if warmup < 0 or repeat < 1:
            raise ValueError("warmup must be >= 0 and repeat >= 1")
        compiled = self.compile(request)
        extra = {"mode": "time", "warmup": warmup, "repeat": repeat, "flush_l2": flush_l2, "rotate": True}
        reply, _, _ = self._launch(request, compiled, extra, request.timeout_s * (warmup + repeat))
        return [float(t) for t in reply["times_ms"]]

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
        job = {"entry": compiled.entry, "grid": [int(v) for v in request.grid],
               "block": [int(v) for v in request.block], "shared_bytes": int(request.shared_bytes),
               "l2_bytes": info.l2_bytes, **extra}
        want_outputs = extra["mode"] == "run"
        if self.sanitize:
            return self._launch_once(request, compiled, job, want_outputs, launch_s)
        with self._worker_lock:
            staging = self._staging(request)
            try:
                job.update(args=staging.args(request, label, want_outputs), cubin=compiled.cubin,
                           module_key=hashlib.sha256(compiled.cubin).hexdigest())
                reply = self._ask(job, label, launch_s)
                outputs, unwritten = staging.outputs(request, reply.get("outputs", {}), want_outputs)
            finally:
                staging.cleanup()
        return reply, outputs, unwritten

    # ------------------------------------------------------------ the worker process

    def _ask(self, job: dict[str, Any], label: str, launch_s: float) -> dict[str, Any]:
        """Send `job` to the worker (starting one if needed) and wait for its result."""
        deadline = time.monotonic() + self.startup_timeout_s
        early = (f"timed out after {self.startup_timeout_s:g} s before the launch "
                 "(context creation or module load hung); killed")
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
        large = sum(2 * a.data.nbytes for a in request.args if isinstance(a, BufferArg) and a.data.nbytes > INLINE_LIMIT)
        if large:
            stat = os.statvfs(folder)
            if large > stat.f_bavail * stat.f_frsize // 2:
                return _Staging(Path(tempfile.mkdtemp(prefix="kxform-gpu-")), INLINE_LIMIT, prefix, own_folder=True)
        return _Staging(folder, INLINE_LIMIT, prefix)

    # ----------------------------------------------------- one child per request

    def _launch_once(
        self, request: LaunchRequest, compiled: CompiledKernel, job: dict[str, Any], want_outputs: bool,
        launch_s: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, int]]:
        """Run `job` in a fresh child through files (what compute-sanitizer can wrap)."""
        with tempfile.TemporaryDirectory(prefix="kxform-gpu-") as scratch:
            folder = Path(scratch)
            staging = _Staging(folder, -1, "")
            (folder / "module.cubin").write_bytes(compiled.cubin)
            job.update(args=staging.args(request, _label(request), want_outputs), device=self.device,
                       cubin_file="module.cubin")
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
            command = [sanitizer, "--error-exitcode", str(SANITIZER_EXIT), *command]
        with open(folder / "child.log", "w+", encoding="utf-8", errors="replace") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
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


class _Expired(Exception):
    """The worker did not answer before the deadline; the message says what timed out."""


class _Worker:
    """One `gpu_child.py serve` process: two pipes (length-prefixed pickles) and a log.

    The process leads its own session so that `stop` kills everything it started. A
    finalizer stops it when the object is dropped or the interpreter exits.
    """

    def __init__(self, python: str, device: int, log_path: Path) -> None:
        child_reads, self._write_fd = os.pipe()
        self._read_fd, child_writes = os.pipe()
        self.log_path = log_path
        try:
            with open(log_path, "ab") as log:  # O_APPEND: truncate_log() works while it runs
                self.proc = subprocess.Popen(
                    [python, str(CHILD), "serve", str(device), str(child_reads), str(child_writes)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(child_reads, child_writes), start_new_session=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        except OSError:
            os.close(self._write_fd)
            os.close(self._read_fd)
            raise
        finally:
            os.close(child_reads)
            os.close(child_writes)
        os.set_blocking(self._write_fd, False)
        self._finalizer = weakref.finalize(self, _stop_worker, self.proc, self._write_fd, self._read_fd,
                                           _CLOSE_GRACE_S)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self._finalizer.alive and self.proc.poll() is None

    def send(self, message: dict[str, Any], deadline: float, late: str) -> None:
        payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(_HEADER.pack(len(payload)) + payload)
        poller = select.poll()
        poller.register(self._write_fd, select.POLLOUT)
        while view:
            try:
                view = view[os.write(self._write_fd, view[:1 << 20]):]
            except BlockingIOError:
                _poll(poller, deadline, late)

    def receive(self, deadline: float, late: str) -> dict[str, Any] | None:
        """The next message; None when the worker closed its end (it died)."""
        header = self._read(_HEADER.size, deadline, late)
        payload = None if header is None else self._read(_HEADER.unpack(header)[0], deadline, late)
        if payload is None:
            return None
        message = pickle.loads(payload)
        return message if isinstance(message, dict) else None

    def _read(self, size: int, deadline: float, late: str) -> bytes | None:
        poller = select.poll()
        poller.register(self._read_fd, select.POLLIN)
        data = bytearray()
        while len(data) < size:
            _poll(poller, deadline, late)
            chunk = os.read(self._read_fd, min(size - len(data), 1 << 20))
            if not chunk:
                return None
            data += chunk
        return bytes(data)

    def truncate_log(self) -> None:
        """Start the log afresh, so a death message quotes this request's output."""
        with contextlib.suppress(OSError):
            os.truncate(self.log_path, 0)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def wait(self, timeout_s: float) -> int | None:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float) -> None:
        """Close the pipes (the worker exits at end of input); kill it after `grace_s`."""
        if grace_s <= 0 and self.proc.poll() is None:
            _kill(self.proc)
        self._finalizer()


def _stop_worker(proc: subprocess.Popen[bytes], write_fd: int, read_fd: int, grace_s: float) -> None:
    os.close(write_fd)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
    os.close(read_fd)


def _poll(poller: select.poll, deadline: float, late: str) -> None:
    """Wait until the registered descriptor is ready; `_Expired(late)` past `deadline`."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Expired(late)
        if poller.poll(max(1, int(remaining * 1000))):
            return


class _Staging:
    """How one request's arrays cross to the child and back.

    Arrays of at most `inline_limit` bytes travel inside the job and the reply; larger
    ones as raw files in `folder` (inputs written here, outputs written by the child),
    which are memory-mapped on both sides. `inline_limit=-1` sends everything as files.
    """

    def __init__(self, folder: Path, inline_limit: int, prefix: str, *, own_folder: bool = False) -> None:
        self.folder = folder
        self.inline_limit = inline_limit
        self.prefix = prefix
        self.own_folder = own_folder
        self._files: list[Path] = []

    def _file(self, name: str) -> Path:
        path = self.folder / f"{self.prefix}{name}.bin"
        self._files.append(path)
        return path

    def args(self, request: LaunchRequest, label: str, want_outputs: bool) -> list[dict[str, Any]]:
        return [self._arg(index, arg, label, want_outputs) for index, arg in enumerate(request.args)]

    def _arg(self, index: int, arg: BufferArg | ScalarArg, label: str, want_outputs: bool) -> dict[str, Any]:
        if isinstance(arg, ScalarArg):
            if not isinstance(arg.value, np.generic):
                raise RuntimeError_(f"{label}: argument {arg.name}: pass a NumPy scalar (np.int32(...)) "
                                    "so that its C type is known")
            value = np.asarray(arg.value)
            return {"kind": "scalar", "name": arg.name, "hex": value.tobytes().hex(), "align": value.dtype.alignment}
        if arg.data.dtype.hasobject:
            raise RuntimeError_(f"{label}: argument {arg.name}: object arrays cannot be copied to the device")
        nbytes = int(arg.data.nbytes)
        spec: dict[str, Any] = {"kind": "buffer", "name": arg.name, "role": arg.role, "nbytes": nbytes}
        if arg.role != "out" and nbytes:
            raw = np.ascontiguousarray(arg.data).reshape(-1).view(np.uint8)
            if nbytes <= self.inline_limit:
                spec["data"] = raw.tobytes()
            else:
                path = self._file(f"in_{index}")
                raw.tofile(path)
                spec["path"] = str(path)
        if want_outputs and arg.role != "in" and nbytes > max(self.inline_limit, 0):
            spec["out_path"] = str(self._file(f"out_{index}"))
        return spec

    def outputs(
        self, request: LaunchRequest, inline: dict[int, bytes], want_outputs: bool
    ) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """Every out/inout buffer with its dtype and shape; `unwritten` counts the elements
        of out buffers still holding the poison (inout buffers are not poisoned: 0)."""
        outputs: dict[str, np.ndarray] = {}
        unwritten: dict[str, int] = {}
        if not want_outputs:
            return outputs, unwritten
        for index, arg in enumerate(request.args):
            if not isinstance(arg, BufferArg) or arg.role == "in":
                continue
            array = np.empty_like(arg.data, order="C")
            if index in inline:
                array.reshape(-1).view(np.uint8)[:] = np.frombuffer(inline[index], dtype=np.uint8)
            elif arg.data.nbytes:
                array = _map_file(self.folder / f"{self.prefix}out_{index}.bin", arg.data.nbytes)
                array = array.view(arg.data.dtype).reshape(arg.data.shape)
            outputs[arg.name] = array
            unwritten[arg.name] = count_unwritten(array) if arg.role == "out" else 0
        return outputs, unwritten

    def cleanup(self) -> None:
        for path in self._files:
            path.unlink(missing_ok=True)
        if self.own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)


def _map_file(path: Path, nbytes: int) -> np.ndarray:
    """The file's bytes as a writable array (a private mapping: it outlives the file)."""
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), nbytes, access=mmap.ACCESS_COPY)
    return np.frombuffer(mapped, dtype=np.uint8)


# ------------------------------------------------------------------------ helpers


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


def _kill(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


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


def sanitizer_error(log: str) -> str:
    """The first error compute-sanitizer reported, with its `at <function>` line, or "".

    A hazard record (`Invalid __global__ write ...`) is the cause; the `Program hit
    CUDA_ERROR_...` API records that follow it are consequences, used only when no
    hazard was recorded.
    """
    lines = [ln[len("========="):] for ln in log.splitlines() if ln.startswith("=========")]
    found: list[str] = []
    for index, line in enumerate(lines):
        text = line.strip()
        banner = text.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY", "LEAK SUMMARY"))
        if not text or line.startswith("  ") or banner:
            continue
        where = next((ln.strip() for ln in lines[index + 1:index + 3] if ln.strip().startswith("at ")), "")
        found.append(f"{text} {where}".strip())
    hazards = [f for f in found if not f.startswith("Program hit")]
    return (hazards or found or [""])[0]
