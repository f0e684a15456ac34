"""The process that touches the GPU: loads a cubin with pycuda, launches, copies back.

Run by `GpuRuntime`, never imported by it. A kernel that faults leaves the CUDA context
unusable and a kernel that hangs cannot be interrupted from inside the process, so every
launch happens here and the parent only reads what comes back. Three modes:

* `probe [DEVICE]`: print the device's properties as one JSON line.
* `serve DEVICE RFD WFD`: the long-lived worker. Creates the context once, then answers
  requests read from file descriptor RFD on WFD until RFD reaches end of file. Messages
  are length-prefixed pickles (8-byte little-endian length): the parent sends a job, the
  worker answers `{"kind": "launched"}` once setup is done (the parent's launch timeout
  starts there, so loading the module and copying inputs do not eat into it) and then
  `{"kind": "result", "ok": ...}`. Loaded modules are cached by cubin hash. After any
  failure the worker answers and exits: a CUDA error may have poisoned the context.
* `run DIR` / `time DIR`: one request through files (used under compute-sanitizer, which
  wraps a whole process): `DIR/job.json` in, `DIR/result.json` out, plus a `launched`
  marker file.

Arrays cross as raw bytes: small ones inline in the job (`data`) or the result
(`outputs`), large ones as files named by the parent (`path` in, `out_path` out, both
memory-mapped here). The parent keeps dtype and shape, so any NumPy dtype (bfloat16 from
ml_dtypes included) travels unchanged. This file imports only the standard library,
NumPy and pycuda, so it starts fast and without kxform installed.
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import pickle
import struct
import sys
import traceback
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 2, 3
POISON_BYTE = 0xFF  # kxform.runtime.base.POISON_BYTE (not imported: this file runs without kxform)
_DEFAULT_DYNAMIC_SMEM = 48 * 1024
_MAX_ROTATION_COPIES = 8
_MODULE_CACHE_SIZE = 64
_HEADER = struct.Struct("<Q")


class StageError(Exception):
    """A failure in one named stage (init, load, alloc, launch, sync, copy)."""

    def __init__(self, stage: str, cause: BaseException | str) -> None:
        self.stage = stage
        super().__init__(" ".join(str(cause).split()) or type(cause).__name__)


def main(argv: list[str]) -> int:
    if argv[:1] == ["probe"]:
        return _probe(int(argv[1]) if len(argv) > 1 else 0)
    if argv[:1] == ["serve"] and len(argv) == 4:
        return _serve(int(argv[1]), int(argv[2]), int(argv[3]))
    if argv[:1] in (["run"], ["time"]) and len(argv) == 2:
        return _one_shot(Path(argv[1]))
    print("usage: gpu_child.py probe [DEVICE] | serve DEVICE RFD WFD | run DIR | time DIR", file=sys.stderr)
    return EXIT_USAGE


def _failure(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, StageError):
        return {"ok": False, "stage": exc.stage, "error": str(exc)}
    return {
        "ok": False,
        "stage": "child",
        "error": f"{type(exc).__name__}: {exc}",
        "trace": traceback.format_exc(limit=3),
    }


# ----------------------------------------------------------------------------- probe


def _probe(index: int) -> int:
    try:
        import pycuda
        import pycuda.driver as cuda
    except ImportError as exc:
        print(json.dumps({"error": f"pycuda cannot be imported: {exc}"}))
        return EXIT_FAILED
    try:
        cuda.init()
        count = cuda.Device.count()
        if count == 0:
            raise RuntimeError("no CUDA device")
        if index >= count:
            raise RuntimeError(f"no CUDA device {index} (found {count})")
        device = cuda.Device(index)
        attr = cuda.device_attribute
        info = {
            "name": str(device.name()),
            "cc": list(device.compute_capability()),
            "sm_count": int(device.get_attribute(attr.MULTIPROCESSOR_COUNT)),
            "l2_bytes": int(device.get_attribute(attr.L2_CACHE_SIZE)),
            "max_shared_optin": int(device.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)),
            "total_memory": int(device.total_memory()),
            "driver_version": int(cuda.get_driver_version()),
            "pycuda": str(getattr(pycuda, "VERSION_TEXT", "")),
        }
    except Exception as exc:  # cuInit failures arrive as pycuda's own error types
        print(json.dumps({"error": " ".join(str(exc).split()) or type(exc).__name__}))
        return EXIT_FAILED
    print(json.dumps(info))
    return EXIT_OK


# --------------------------------------------------------------------- the worker


def _serve(device: int, rfd: int, wfd: int) -> int:
    """Answer jobs from `rfd` on `wfd` with one context, until `rfd` is closed."""
    try:
        import pycuda.driver as cuda

        _stage("init", cuda.init)
        context = _stage("init", lambda: cuda.Device(device).make_context())
    except Exception as exc:  # noqa: BLE001 - ImportError included: reported to the parent as one line
        _send(wfd, {"kind": "result", **_failure(exc)})
        os._exit(EXIT_FAILED)
    _send(wfd, {"kind": "ready", "pid": os.getpid()})
    modules = _Modules(cuda)
    while (job := _receive(rfd)) is not None:
        try:
            function = modules.function(job)
            result = _perform(cuda, job, function, lambda: _send(wfd, {"kind": "launched"}))
        except Exception as exc:  # noqa: BLE001 - the context may be poisoned: answer, end without teardown
            _send(wfd, {"kind": "result", **_failure(exc)})
            sys.stdout.flush()
            os._exit(EXIT_FAILED)
        _send(wfd, {"kind": "result", "ok": True, **result})
    modules.clear()
    context.pop()
    return EXIT_OK


def _receive(fd: int) -> dict[str, Any] | None:
    """The next message, or None at end of file (the parent closed the pipe or died)."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    payload = _read_exact(fd, _HEADER.unpack(header)[0])
    if payload is None:
        return None
    message = pickle.loads(payload)
    return message if isinstance(message, dict) else None


def _read_exact(fd: int, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = os.read(fd, min(size - len(chunks), 1 << 20))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _send(fd: int, message: dict[str, Any]) -> None:
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


class _Modules:
    """Loaded modules by cubin hash (least recently used dropped first) and their functions."""

    def __init__(self, cuda: Any, capacity: int = _MODULE_CACHE_SIZE) -> None:
        self._cuda = cuda
        self._capacity = capacity
        self._loaded: OrderedDict[str, tuple[Any, dict[str, Any]]] = OrderedDict()

    def function(self, job: dict[str, Any]) -> Any:
        key = str(job["module_key"])
        entry = self._loaded.pop(key, None)
        if entry is None:
            module = _stage("load", lambda: self._cuda.module_from_buffer(job["cubin"]))
            entry = (module, {})
        self._loaded[key] = entry
        while len(self._loaded) > self._capacity:
            self._loaded.popitem(last=False)
        module, functions = entry
        name = str(job["entry"])
        if name not in functions:
            functions[name] = _stage("load", lambda: module.get_function(name))
        return _raise_smem_limit(self._cuda, functions[name], int(job["shared_bytes"]))

    def clear(self) -> None:
        self._loaded.clear()


# ---------------------------------------------------------------- one request, files


def _one_shot(folder: Path) -> int:
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    try:
        result = _execute(folder, job)
    except Exception as exc:  # noqa: BLE001 - the context may be poisoned: skip pycuda's teardown
        _write_result(folder, _failure(exc))
        sys.stdout.flush()
        os._exit(EXIT_FAILED)
    _write_result(folder, {"ok": True, **result})
    return EXIT_OK


def _execute(folder: Path, job: dict[str, Any]) -> dict[str, Any]:
    import pycuda.driver as cuda

    _stage("init", cuda.init)
    context = _stage("init", lambda: cuda.Device(int(job["device"])).make_context())
    try:
        cubin = (folder / job["cubin_file"]).read_bytes()
        module = _stage("load", lambda: cuda.module_from_buffer(cubin))
        function = _stage("load", lambda: module.get_function(job["entry"]))
        _raise_smem_limit(cuda, function, int(job["shared_bytes"]))
        return _perform(cuda, job, function, lambda: (folder / "launched").touch())
    finally:
        with contextlib.suppress(Exception):  # a faulted context may refuse; the process ends next
            context.pop()


def _write_result(folder: Path, data: dict[str, Any]) -> None:
    tmp = folder / "result.json.tmp"
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, folder / "result.json")


# ---------------------------------------------------------------------- run and time


def _raise_smem_limit(cuda: Any, function: Any, shared: int) -> Any:
    if shared > _DEFAULT_DYNAMIC_SMEM:
        attribute = cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
        _stage("load", lambda: function.set_attribute(attribute, shared))
    return function


def _perform(cuda: Any, job: dict[str, Any], function: Any, launched: Callable[[], None]) -> dict[str, Any]:
    """Run or time `function` for `job`; `launched()` is called once setup is done.
    Every device allocation is freed before returning (the worker lives on)."""
    held: list[Any] = []
    try:
        if job["mode"] == "time":
            return _time(cuda, job, function, launched, held)
        return _run(cuda, job, function, launched, held)
    finally:
        for allocation in held:
            with contextlib.suppress(Exception):
                allocation.free()


def _run(
    cuda: Any, job: dict[str, Any], function: Any, launched: Callable[[], None], held: list[Any]
) -> dict[str, Any]:
    args = job["args"]
    buffers = _allocate(cuda, args, held, _Inputs(args))
    params = _pack(args, buffers)
    _prepare(function, len(params))
    launched()
    start, end = cuda.Event(), cuda.Event()
    start.record()
    _launch(function, job, params)
    end.record()
    _stage("sync", cuda.Context.synchronize)
    outputs: dict[int, bytes] = {}
    for index, arg in enumerate(args):
        if arg["kind"] == "buffer" and arg["role"] != "in" and arg["nbytes"]:
            inline = _copy_back(cuda, arg, buffers[index])
            if inline is not None:
                outputs[index] = inline
    return {"elapsed_ms": float(end.time_since(start)), "outputs": outputs}


def _copy_back(cuda: Any, arg: dict[str, Any], device: Any) -> bytes | None:
    """Copy one buffer to the host: into the file `out_path` (mapped), else returned inline."""
    size = int(arg["nbytes"])
    path = arg.get("out_path")
    if not path:
        host = np.empty(size, dtype=np.uint8)
        _stage("copy", lambda: cuda.memcpy_dtoh(host, device))
        return host.tobytes()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.posix_fallocate(fd, 0, size)  # ENOSPC here, not SIGBUS when the mapping is written
        mapped = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    with mapped:
        _stage("copy", lambda: cuda.memcpy_dtoh(np.frombuffer(mapped, dtype=np.uint8), device))
    return None


def _time(
    cuda: Any, job: dict[str, Any], function: Any, launched: Callable[[], None], held: list[Any]
) -> dict[str, Any]:
    """Per-launch milliseconds between CUDA events, after `warmup` untimed launches.

    Before every launch, `out` buffers are poisoned again and `inout` buffers restored
    from a pristine copy, so each launch starts from the state `run` gives its one launch
    (both outside the timed events). When all buffers together fit in twice the L2,
    several copies are rotated so that a launch does not simply re-read what the previous
    one left in L2; `flush_l2` also writes a buffer of twice the L2 between launches, for
    cold-cache timings. The persisting-L2 carveout is capped at zero bytes first, so no
    access policy (the host's or a kernel's `evict_last` hints) can keep data resident
    across launches. The outputs of the last timed launch are copied back (when asked),
    so the caller can check that the timed code did the verified work every time.
    """
    args = job["args"]
    inputs = _Inputs(args)
    total = sum(a["nbytes"] for a in args if a["kind"] == "buffer")
    l2 = int(job["l2_bytes"])
    copies = (
        1
        if not job.get("rotate", True) or total >= 2 * l2 or total == 0
        else min(_MAX_ROTATION_COPIES, math.ceil(2 * l2 / total))
    )
    sets = [_allocate(cuda, args, held, inputs) for _ in range(copies)]
    has_inout = any(a["kind"] == "buffer" and a["role"] == "inout" for a in args)
    pristine = _allocate(cuda, args, held, inputs) if has_inout else []
    packed = [_pack(args, s) for s in sets]
    _prepare(function, len(packed[0]))
    flush = _stage("alloc", lambda: cuda.mem_alloc(2 * l2)) if job.get("flush_l2") else None
    if flush is not None:
        held.append(flush)
    persisting = _cap_persisting_l2(int(job.get("persisting_l2_limit", 0)))
    start, end = cuda.Event(), cuda.Event()
    launched()
    times: list[float] = []
    warmup, repeat = int(job["warmup"]), int(job["repeat"])
    current = 0
    for i in range(warmup + repeat):
        current = i % copies
        _reset(cuda, args, sets[current], pristine)
        if flush is not None:
            _stage("flush", lambda v=i & 0xFF: cuda.memset_d8(flush, v, 2 * l2))
        start.record()
        _launch(function, job, packed[current])
        end.record()
        _stage("sync", end.synchronize)
        if i >= warmup:
            times.append(float(end.time_since(start)))
    outputs: dict[int, bytes] = {}
    if job.get("keep_outputs"):
        for index, arg in enumerate(args):
            if arg["kind"] == "buffer" and arg["role"] != "in" and arg["nbytes"]:
                inline = _copy_back(cuda, arg, sets[current][index])
                if inline is not None:
                    outputs[index] = inline
    return {"times_ms": times, "copies": copies, "persisting_l2_bytes": persisting, "outputs": outputs}


_CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # CUlimit; pycuda's `limit` enum does not list it
_CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108  # CUdevice_attribute


def _cap_persisting_l2(limit: int = 0) -> int | None:
    """Set the current context's persisting-L2 limit to `limit` bytes and return the limit
    read back (None where the driver has no such limit: pre-Ampere). 0, what every kxform
    measurement uses, caps it and drops persisting lines; a positive limit (clamped to the
    device's maximum) exists only so tools/bench_integrity.py can show what the cap prevents."""
    import ctypes

    try:
        libcuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    if limit > 0:
        device, maximum = ctypes.c_int(0), ctypes.c_int(0)
        if (
            libcuda.cuCtxGetDevice(ctypes.byref(device)) == 0
            and libcuda.cuDeviceGetAttribute(
                ctypes.byref(maximum), ctypes.c_int(_CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE), device
            )
            == 0
        ):
            limit = min(limit, maximum.value)
    if libcuda.cuCtxSetLimit(ctypes.c_int(_CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(limit)) != 0:
        return None
    libcuda.cuCtxResetPersistingL2Cache()
    value = ctypes.c_size_t(1)
    status = libcuda.cuCtxGetLimit(ctypes.byref(value), ctypes.c_int(_CU_LIMIT_PERSISTING_L2_CACHE_SIZE))
    return int(value.value) if status == 0 else None


def _reset(cuda: Any, args: list[dict[str, Any]], buffers: list[Any], pristine: list[Any]) -> None:
    """Poison `out` buffers and restore `inout` buffers before a timed launch."""
    for index, arg in enumerate(args):
        size = int(arg["nbytes"]) if arg["kind"] == "buffer" else 0
        if not size or arg["role"] == "in":
            continue
        if arg["role"] == "out":
            _stage("alloc", lambda d=buffers[index], n=size: cuda.memset_d8(d, POISON_BYTE, n))
        else:
            _stage("copy", lambda d=buffers[index], s=pristine[index], n=size: cuda.memcpy_dtod(d, s, n))


class _Inputs:
    """Host bytes of each input buffer: inline `data`, or the file `path` mapped read-only."""

    def __init__(self, args: list[dict[str, Any]]) -> None:
        self._args = args
        self._cache: dict[int, np.ndarray] = {}

    def __getitem__(self, index: int) -> np.ndarray:
        if index not in self._cache:
            arg = self._args[index]
            if arg.get("data") is not None:
                self._cache[index] = np.frombuffer(arg["data"], dtype=np.uint8)
            else:
                with open(arg["path"], "rb") as handle:
                    mapped = mmap.mmap(handle.fileno(), int(arg["nbytes"]), access=mmap.ACCESS_READ)
                self._cache[index] = np.frombuffer(mapped, dtype=np.uint8)
        return self._cache[index]


def _allocate(cuda: Any, args: list[dict[str, Any]], held: list[Any], inputs: _Inputs) -> list[Any]:
    """Device buffers: inputs copied in, out-only buffers poisoned with 0xFF bytes."""
    buffers: list[Any] = []
    for index, arg in enumerate(args):
        if arg["kind"] != "buffer" or "view" in arg:  # a view points into an arena: no allocation
            buffers.append(None)
            continue
        size = max(int(arg["nbytes"]), 256)  # mem_alloc(0) fails; empty buffers get a stub
        device = _stage("alloc", lambda n=size: cuda.mem_alloc(n))
        held.append(device)
        if arg["role"] == "out":
            _stage("alloc", lambda d=device, n=size: cuda.memset_d8(d, POISON_BYTE, n))
        elif int(arg["nbytes"]):
            _stage("copy", lambda d=device, h=inputs[index]: cuda.memcpy_htod(d, h))
        buffers.append(device)
    return buffers


def _pack(args: list[dict[str, Any]], buffers: list[Any]) -> bytes:
    """The kernel's parameter buffer, laid out with C alignment (as nvcc lays out params)."""
    out = bytearray()
    for arg, device in zip(args, buffers, strict=True):
        if arg.get("param") is False:  # an arena: reached through the views into it
            continue
        if "view" in arg:
            pointer = int(buffers[int(arg["view"])]) + int(arg["offset"])
            raw, align = pointer.to_bytes(8, "little"), 8
        elif arg["kind"] == "buffer":
            raw, align = int(device).to_bytes(8, "little"), 8
        else:
            raw, align = bytes.fromhex(arg["hex"]), int(arg["align"])
        out += b"\0" * (-len(out) % align)
        out += raw
    return bytes(out)


def _prepare(function: Any, size: int) -> None:
    """Declare the parameters as one pre-packed byte string: `_pack` already laid them out,
    so pycuda's struct packing must not add padding of its own."""
    function.prepare([f"{size}s"] if size else [])


def _launch(function: Any, job: dict[str, Any], params: bytes) -> None:
    grid, block = tuple(job["grid"]), tuple(job["block"])
    values = (params,) if params else ()
    _stage("launch", lambda: function.prepared_call(grid, block, *values, shared_size=int(job["shared_bytes"])))


def _stage(name: str, action: Callable[..., Any]) -> Any:
    try:
        return action()
    except StageError:
        raise
    except Exception as exc:  # pycuda's LogicError/LaunchError/MemoryError/RuntimeError
        raise StageError(name, exc) from exc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
