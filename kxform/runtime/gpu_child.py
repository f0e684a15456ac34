"""The process that touches the GPU: loads a cubin with pycuda, launches, copies back.

Run by `GpuRuntime` as `python gpu_child.py probe|run|time DIR`, never imported by it. A
kernel that faults leaves the CUDA context unusable and a kernel that hangs cannot be
interrupted from inside the process, so every launch happens here and the parent only
reads files: `DIR/job.json` and `in_<i>.npy` in; `out_<i>.npy` and `result.json` out,
plus a `launched` marker file once setup is done (the parent's launch timeout starts
there, so loading the module and copying inputs do not eat into it).

Arrays cross as raw bytes (uint8 .npy files): the parent keeps dtype and shape, so any
NumPy dtype (bfloat16 from ml_dtypes included) travels unchanged. This file imports only
the standard library, NumPy and pycuda, so it starts fast and without kxform installed.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 2, 3
_DEFAULT_DYNAMIC_SMEM = 48 * 1024
_MAX_ROTATION_COPIES = 8


class StageError(Exception):
    """A failure in one named stage (load, alloc, launch, sync, copy)."""

    def __init__(self, stage: str, cause: BaseException | str) -> None:
        self.stage = stage
        super().__init__(" ".join(str(cause).split()) or type(cause).__name__)


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in ("probe", "run", "time"):
        print("usage: gpu_child.py probe [DEVICE] | run DIR | time DIR", file=sys.stderr)
        return EXIT_USAGE
    if argv[0] == "probe":
        return _probe(int(argv[1]) if len(argv) > 1 else 0)
    folder = Path(argv[1])
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    try:
        result = _execute(folder, job)
    except StageError as exc:
        _write_result(folder, {"ok": False, "stage": exc.stage, "error": str(exc)})
        sys.stdout.flush()
        os._exit(EXIT_FAILED)  # the context may be poisoned: skip pycuda's teardown
    except Exception as exc:  # anything else is a bug or an environment problem: report it
        trace = traceback.format_exc(limit=3)
        _write_result(folder, {"ok": False, "stage": "child", "error": f"{type(exc).__name__}: {exc}",
                               "trace": trace})
        os._exit(EXIT_FAILED)
    _write_result(folder, {"ok": True, **result})
    return EXIT_OK


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


# ---------------------------------------------------------------------- run and time


def _execute(folder: Path, job: dict[str, Any]) -> dict[str, Any]:
    import pycuda.driver as cuda

    _stage("init", cuda.init)
    context = _stage("init", lambda: cuda.Device(int(job["device"])).make_context())
    try:
        function = _load(cuda, folder, job)
        if job["mode"] == "time":
            return _time(cuda, folder, job, function)
        return _run(cuda, folder, job, function)
    finally:
        with contextlib.suppress(Exception):  # a faulted context may refuse; the process ends next
            context.pop()


def _load(cuda: Any, folder: Path, job: dict[str, Any]) -> Any:
    module = _stage("load", lambda: cuda.module_from_buffer((folder / job["cubin"]).read_bytes()))
    function = _stage("load", lambda: module.get_function(job["entry"]))
    shared = int(job["shared_bytes"])
    if shared > _DEFAULT_DYNAMIC_SMEM:
        attribute = cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
        _stage("load", lambda: function.set_attribute(attribute, shared))
    return function


def _run(cuda: Any, folder: Path, job: dict[str, Any], function: Any) -> dict[str, Any]:
    buffers = _allocate(cuda, folder, job["args"])
    params = _pack(job["args"], buffers)
    _prepare(function, len(params))
    (folder / "launched").touch()
    start, end = cuda.Event(), cuda.Event()
    start.record()
    _launch(function, job, params)
    end.record()
    _stage("sync", cuda.Context.synchronize)
    for index, arg in enumerate(job["args"]):
        if arg["kind"] == "buffer" and arg["role"] != "in":
            host = np.empty(arg["nbytes"], dtype=np.uint8)
            if host.size:
                _stage("copy", lambda h=host, i=index: cuda.memcpy_dtoh(h, buffers[i]))
            np.save(folder / f"out_{index}.npy", host)
    return {"elapsed_ms": float(end.time_since(start))}


def _time(cuda: Any, folder: Path, job: dict[str, Any], function: Any) -> dict[str, Any]:
    """Per-launch milliseconds between CUDA events, after `warmup` untimed launches.

    When all buffers together fit in twice the L2, several copies are rotated so that a
    launch does not simply re-read what the previous one left in L2; `flush_l2` also
    writes a buffer of twice the L2 between launches, for cold-cache timings.
    """
    args = job["args"]
    total = sum(a["nbytes"] for a in args if a["kind"] == "buffer")
    l2 = int(job["l2_bytes"])
    copies = 1 if not job.get("rotate", True) or total >= 2 * l2 or total == 0 else \
        min(_MAX_ROTATION_COPIES, math.ceil(2 * l2 / total))
    sets = [_allocate(cuda, folder, args) for _ in range(copies)]
    has_inout = any(a["kind"] == "buffer" and a["role"] == "inout" for a in args)
    pristine = _allocate(cuda, folder, args) if has_inout else []  # restored before each launch
    packed = [_pack(args, s) for s in sets]
    _prepare(function, len(packed[0]))
    flush = _stage("alloc", lambda: cuda.mem_alloc(2 * l2)) if job.get("flush_l2") else None
    start, end = cuda.Event(), cuda.Event()
    (folder / "launched").touch()
    times: list[float] = []
    warmup, repeat = int(job["warmup"]), int(job["repeat"])
    for i in range(warmup + repeat):
        current = i % copies
        for index, arg in enumerate(args):
            if arg["kind"] == "buffer" and arg["role"] == "inout" and arg["nbytes"]:
                dst, src, n = sets[current][index], pristine[index], arg["nbytes"]
                _stage("copy", lambda d=dst, s=src, n=n: cuda.memcpy_dtod(d, s, n))
        if flush is not None:
            _stage("flush", lambda v=i & 0xFF: cuda.memset_d8(flush, v, 2 * l2))
        start.record()
        _launch(function, job, packed[current])
        end.record()
        _stage("sync", end.synchronize)
        if i >= warmup:
            times.append(float(end.time_since(start)))
    return {"times_ms": times, "copies": copies}


def _allocate(cuda: Any, folder: Path, args: list[dict[str, Any]]) -> list[Any]:
    """Device buffers: inputs copied in, out-only buffers poisoned with 0xFF bytes."""
    buffers: list[Any] = []
    for index, arg in enumerate(args):
        if arg["kind"] != "buffer":
            buffers.append(None)
            continue
        size = max(int(arg["nbytes"]), 256)  # mem_alloc(0) fails; empty buffers get a stub
        device = _stage("alloc", lambda n=size: cuda.mem_alloc(n))
        if arg["role"] == "out":
            _stage("alloc", lambda d=device, n=size: cuda.memset_d8(d, 0xFF, n))
        elif int(arg["nbytes"]):
            host = np.load(folder / f"in_{index}.npy")
            _stage("copy", lambda d=device, h=host: cuda.memcpy_htod(d, h))
        buffers.append(device)
    return buffers


def _pack(args: list[dict[str, Any]], buffers: list[Any]) -> bytes:
    """The kernel's parameter buffer, laid out with C alignment (as nvcc lays out params)."""
    out = bytearray()
    for arg, device in zip(args, buffers, strict=True):
        if arg["kind"] == "buffer":
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


def _stage(name: str, action: Any) -> Any:
    try:
        return action()
    except StageError:
        raise
    except Exception as exc:  # pycuda's LogicError/LaunchError/MemoryError/RuntimeError
        raise StageError(name, exc) from exc


def _write_result(folder: Path, data: dict[str, Any]) -> None:
    tmp = folder / "result.json.tmp"
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, folder / "result.json")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
