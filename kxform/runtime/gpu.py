"""The GPU runtime: nvcc builds the cubin here, a child process launches it with pycuda.

Why a child process: a kernel that faults poisons the CUDA context for the rest of the
process, and one that spins forever cannot be interrupted from inside it. Launching in
`gpu_child.py` lets this process kill a hung kernel after `request.timeout_s`, survive
illegal addresses and crashes, and report each as one line naming `request.label`.
This process never initialises CUDA; only the child does.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

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
_CHILD_FAILED = 3


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
    """Launches kernels on CUDA device `device` through pycuda, one child process per call.

    `arch` overrides the device's (`sm_90a` for wgmma kernels); `sanitize=True` runs the
    child under compute-sanitizer (found beside nvcc or on PATH, or given as `sanitizer`)
    and fails on its first error; `startup_timeout_s` bounds what comes before the launch
    (interpreter, context, module load, copies).
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
        compiled = self.compile(request)
        with tempfile.TemporaryDirectory(prefix="kxform-gpu-") as scratch:
            folder = Path(scratch)
            self._write_job(folder, request, compiled, {"mode": "run"})
            result = self._run_child(folder, "run", request, request.timeout_s)
            outputs, unwritten = _read_outputs(folder, request)
        return LaunchResult(outputs, unwritten, self.name, elapsed_ms=float(result.get("elapsed_ms", 0.0)))

    def time(
        self, request: LaunchRequest, *, warmup: int = 3, repeat: int = 20, flush_l2: bool = False
    ) -> list[float]:
        """Milliseconds of each of `repeat` launches (CUDA events), after `warmup` launches.

        Buffers are rotated over several copies when they fit in the L2, and
        `flush_l2=True` overwrites twice the L2 between launches (cold-cache timing).
        The timeout covers all launches: `request.timeout_s` per launch.
        """
        if warmup < 0 or repeat < 1:
            raise ValueError("warmup must be >= 0 and repeat >= 1")
        compiled = self.compile(request)
        extra = {"mode": "time", "warmup": warmup, "repeat": repeat, "flush_l2": flush_l2, "rotate": True}
        with tempfile.TemporaryDirectory(prefix="kxform-gpu-") as scratch:
            folder = Path(scratch)
            self._write_job(folder, request, compiled, extra)
            result = self._run_child(folder, "time", request, request.timeout_s * (warmup + repeat))
        return [float(t) for t in result["times_ms"]]

    def _write_job(
        self, folder: Path, request: LaunchRequest, compiled: CompiledKernel, extra: dict[str, Any]
    ) -> None:
        label, info = _label(request), self.device_info()
        if request.params and len(request.params) != len(request.args):
            counts = f"{len(request.args)} arguments for {len(request.params)} parameters"
            raise RuntimeError_(f"{label}: {counts}")
        if request.shared_bytes > info.max_shared_optin:
            limit = f"the device's maximum of {info.max_shared_optin} bytes per block"
            raise RuntimeError_(f"{label}: {request.shared_bytes} bytes of dynamic shared memory exceed {limit}")
        (folder / "module.cubin").write_bytes(compiled.cubin)
        args = [_arg_spec(folder, index, arg, label) for index, arg in enumerate(request.args)]
        job = {"device": self.device, "cubin": "module.cubin", "entry": compiled.entry,
               "grid": [int(v) for v in request.grid], "block": [int(v) for v in request.block],
               "shared_bytes": int(request.shared_bytes), "args": args,
               "l2_bytes": info.l2_bytes, **extra}
        (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")

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


# ------------------------------------------------------------------------ helpers


def _label(request: LaunchRequest) -> str:
    return request.label or request.kernel


def _arg_spec(folder: Path, index: int, arg: BufferArg | ScalarArg, label: str) -> dict[str, Any]:
    """One argument for the child; buffer contents go to `in_<index>.npy` as raw bytes."""
    if isinstance(arg, ScalarArg):
        if not isinstance(arg.value, np.generic):
            raise RuntimeError_(f"{label}: argument {arg.name}: pass a NumPy scalar (np.int32(...)) "
                                "so that its C type is known")
        value = np.asarray(arg.value)
        return {"kind": "scalar", "name": arg.name, "hex": value.tobytes().hex(), "align": value.dtype.alignment}
    if arg.data.dtype.hasobject:
        raise RuntimeError_(f"{label}: argument {arg.name}: object arrays cannot be copied to the device")
    if arg.role != "out":
        raw = np.ascontiguousarray(arg.data).reshape(-1).view(np.uint8)
        np.save(folder / f"in_{index}.npy", raw)
    return {"kind": "buffer", "name": arg.name, "role": arg.role, "nbytes": int(arg.data.nbytes)}


def _read_outputs(folder: Path, request: LaunchRequest) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """Every out/inout buffer with its dtype and shape; `unwritten` counts the elements
    of out buffers still holding the poison (inout buffers are not poisoned: 0)."""
    outputs: dict[str, np.ndarray] = {}
    unwritten: dict[str, int] = {}
    for index, arg in enumerate(request.args):
        if not isinstance(arg, BufferArg) or arg.role == "in":
            continue
        raw = np.load(folder / f"out_{index}.npy")
        array = raw.view(arg.data.dtype).reshape(arg.data.shape) if raw.size else np.empty_like(arg.data)
        outputs[arg.name] = array
        unwritten[arg.name] = count_unwritten(array) if arg.role == "out" else 0
    return outputs, unwritten


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
