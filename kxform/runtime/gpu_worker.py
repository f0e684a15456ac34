"""The parent side of the GPU worker: its process, pipes and the staging of large arrays.

`GpuRuntime` (kxform.runtime.gpu) owns one `_Worker`; this module holds only the
plumbing, so the runtime's module reads as policy (what to launch, when to replace the
worker) and this one as mechanism (how bytes cross the process boundary).
"""

from __future__ import annotations

import contextlib
import mmap
import os
import pickle
import select
import shutil
import signal
import struct
import subprocess
import time
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from kxform.runtime.base import BufferArg, LaunchRequest, RuntimeError_, ScalarArg, arena_outputs, count_unwritten

_POLL_S = 0.02
_CLOSE_GRACE_S = 2.0
_HEADER = struct.Struct("<Q")
CHILD = Path(__file__).with_name("gpu_child.py")
INLINE_LIMIT = 256 * 1024
"""Arrays up to this many bytes travel inside the request; larger ones as memory-mapped
files (on /dev/shm where it has room): measured crossover of the two on a 2-core host."""


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
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    pass_fds=(child_reads, child_writes),
                    start_new_session=True,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
        except OSError:
            os.close(self._write_fd)
            os.close(self._read_fd)
            raise
        finally:
            os.close(child_reads)
            os.close(child_writes)
        os.set_blocking(self._write_fd, False)
        self._finalizer = weakref.finalize(self, _stop_worker, self.proc, self._write_fd, self._read_fd, _CLOSE_GRACE_S)

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
                view = view[os.write(self._write_fd, view[: 1 << 20]) :]
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
        """The kernel's arguments in order, then the arenas (allocations no argument is:
        `"param": False`); an argument inside an arena is a `view` of it at an offset."""
        first = len(request.args)
        arenas = {a.name: first + k for k, a in enumerate(request.arenas)}
        out = []
        for index, arg in enumerate(request.args):
            if isinstance(arg, BufferArg) and arg.arena:
                if arg.arena not in arenas:
                    raise RuntimeError_(f"{label}: argument {arg.name}: no arena '{arg.arena}'")
                out.append(
                    {
                        "kind": "buffer",
                        "name": arg.name,
                        "role": "in",
                        "nbytes": 0,
                        "view": arenas[arg.arena],
                        "offset": int(arg.offset),
                    }
                )
            else:
                out.append(self._arg(index, arg, label, want_outputs))
        for k, arena in enumerate(request.arenas):
            out.append({**self._arg(first + k, arena, label, want_outputs), "param": False})
        return out

    def _arg(self, index: int, arg: BufferArg | ScalarArg, label: str, want_outputs: bool) -> dict[str, Any]:
        if isinstance(arg, ScalarArg):
            if not isinstance(arg.value, np.generic):
                raise RuntimeError_(
                    f"{label}: argument {arg.name}: pass a NumPy scalar (np.int32(...)) so that its C type is known"
                )
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
        arenas: dict[str, np.ndarray] = {}
        for index, arg in enumerate((*request.args, *request.arenas)):
            if not isinstance(arg, BufferArg) or arg.role == "in" or arg.arena:
                continue
            array = np.empty_like(arg.data, order="C")
            if index in inline:
                array.reshape(-1).view(np.uint8)[:] = np.frombuffer(inline[index], dtype=np.uint8)
            elif arg.data.nbytes:
                array = _map_file(self.folder / f"{self.prefix}out_{index}.bin", arg.data.nbytes)
                array = array.view(arg.data.dtype).reshape(arg.data.shape)
            if index >= len(request.args):
                arenas[arg.name] = array
                continue
            outputs[arg.name] = array
        outputs.update(arena_outputs(request, arenas))
        for arg in request.args:
            if isinstance(arg, BufferArg) and arg.name in outputs:
                unwritten[arg.name] = count_unwritten(outputs[arg.name]) if arg.role == "out" else 0
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


def _kill(proc: subprocess.Popen[Any]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
