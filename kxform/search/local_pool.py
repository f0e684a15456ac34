"""Timing workers on this host: one process per GPU, pinned to it, no Ray needed.

Each worker is a fresh process (`spawn`: no CUDA state inherited) that sets
`CUDA_VISIBLE_DEVICES` to its GPU before anything can touch CUDA, builds its
objective from the recipe (`kxform.search.workers`), and then serves
configurations over a pipe, evaluating each on a thread of its own so that a second
configuration compiles while the first is timed (`EvalWorker` keeps the device to one
at a time). A worker that dies (a crash, a kill) is started again on its GPU, up to
RESTARTS times, and the configurations it held are reported lost, for the pool to
submit again (`kxform.search.pool`).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import subprocess
import threading
import traceback
from collections.abc import Mapping
from multiprocessing.connection import Connection
from typing import Any

from kxform.engine.params import ParamValue
from kxform.errors import InputError, KxformError, UsageError
from kxform.search.pool import Backend, Done
from kxform.search.workers import EvalWorker, Identity, Recipe

RESTARTS = 3
"""Times one worker is started again after dying."""
START_TIMEOUT_S = 300.0


def parse_gpus(text: str) -> tuple[str, ...]:
    """`--gpus all|N|LIST` as the devices to pin the workers to (`CUDA_VISIBLE_DEVICES`
    values, indices into this process's own visible devices where it has any)."""
    text = text.strip()
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if text == "all":  # the devices this process may use: those CUDA_VISIBLE_DEVICES names, else the host's
        indices = list(range(len(visible) if visible else count_gpus()))
    elif text.isdigit() and "," not in text and len(text) < 4:
        if int(text) < 1:
            raise UsageError(f"--gpus {text}: must be at least 1 GPU")
        indices = list(range(int(text)))
    else:
        try:
            indices = [int(part) for part in text.split(",")]
        except ValueError:
            raise UsageError(f"--gpus {text!r}: expected all, a count, or a list of device numbers (0,1,3)") from None
        if len(set(indices)) != len(indices) or min(indices) < 0:
            raise UsageError(f"--gpus {text}: device numbers must be distinct and not negative")
    if visible:
        if max(indices) >= len(visible):
            raise UsageError(
                f"--gpus {text}: this process sees {len(visible)} devices (CUDA_VISIBLE_DEVICES={','.join(visible)})"
            )
        return tuple(visible[i] for i in indices)
    return tuple(str(i) for i in indices)


def count_gpus() -> int:
    """The GPUs of this host (nvidia-smi); a UsageError naming why when none are found."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise UsageError("--gpus all: cannot count the GPUs (no nvidia-smi on PATH); give a count or a list")
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True, timeout=60, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise UsageError(f"--gpus all: nvidia-smi failed ({exc}); give a count or a list") from None
    count = sum(1 for line in out.splitlines() if line.strip())
    if count == 0:
        raise UsageError("--gpus all: nvidia-smi lists no GPU")
    return count


def _serve(conn: Connection, device: str, recipe: Recipe, threads: int) -> None:
    """The worker process: pin, build, then evaluate what arrives until the pipe closes."""
    from concurrent.futures import ThreadPoolExecutor

    if device:
        os.environ["CUDA_VISIBLE_DEVICES"] = device
    try:
        worker = EvalWorker(recipe)
        conn.send(("ready", worker.identity()))
    except Exception as exc:  # sent to the driver, which raises it as one line
        conn.send(("error", _one_line(exc)))
        return
    sending = threading.Lock()

    def one(ticket: int, config: dict[str, ParamValue]) -> None:
        try:
            reply: tuple[Any, ...] = ("done", ticket, worker.evaluate(config))
        except Exception as exc:
            reply = ("error", _one_line(exc))
        with sending:
            conn.send(reply)

    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kxform-eval") as pool:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            if message is None:
                break
            pool.submit(one, *message)
    worker.close()


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KxformError):
        return str(exc)
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" at {where[0].filename}:{where[0].lineno}" if where else ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}{at}"


class LocalBackend(Backend):
    """One worker process per device of `devices` (see the module's docstring)."""

    def __init__(self, recipe: Recipe, devices: tuple[str, ...], threads: int = 2) -> None:
        if not devices:
            raise UsageError("no device to run a worker on")
        self.recipe = recipe
        self.devices = devices
        self.threads = threads
        self._context = multiprocessing.get_context("spawn")
        self._results: queue.Queue[Done | str] = queue.Queue()
        self._lock = threading.Lock()
        self._conns: list[Connection | None] = [None] * len(devices)
        self._procs: list[Any] = [None] * len(devices)
        self._held: list[set[int]] = [set() for _ in devices]
        self._restarts = [0] * len(devices)
        self._restarting = [False] * len(devices)
        self._queued: list[list[tuple[int, dict[str, ParamValue]]]] = [[] for _ in devices]
        """What was submitted to a worker while it was being started again."""
        self._closing = False

    # -- lifecycle --------------------------------------------------------------------

    def start(self) -> list[Identity]:
        started = [self._spawn(w) for w in range(len(self.devices))]  # all start at once: imports take seconds
        return [self._ready(w, *pair) for w, pair in enumerate(started)]

    def _spawn(self, worker: int) -> tuple[Connection, Any]:
        parent, child = self._context.Pipe()
        proc = self._context.Process(
            target=_serve,
            args=(child, self.devices[worker], self.recipe, self.threads),
            name=f"kxform-worker-{worker}",
            daemon=True,
        )
        proc.start()
        child.close()
        return parent, proc

    def _ready(self, worker: int, parent: Connection, proc: Any) -> Identity:
        """Wait until `worker`'s objective is built, then start reading its replies."""
        where = f"worker {worker} (device {self.devices[worker]})"
        if not parent.poll(START_TIMEOUT_S):
            proc.kill()
            raise InputError(f"{where} did not start in {START_TIMEOUT_S:g} s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            proc.join(5)
            raise InputError(f"{where} exited while starting (exit code {proc.exitcode})") from None
        if kind != "ready":
            proc.kill()
            raise InputError(f"{where}: {payload}")
        with self._lock:
            self._conns[worker], self._procs[worker] = parent, proc
        threading.Thread(target=self._read, args=(worker, parent), name=f"kxform-reader-{worker}", daemon=True).start()
        identity: Identity = payload
        return identity

    def close(self) -> None:
        self._closing = True
        for conn in self._conns:
            if conn is not None:
                try:
                    conn.send(None)
                except OSError:
                    pass
        for proc in self._procs:
            if proc is not None:
                proc.join(10)
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)

    # -- traffic ----------------------------------------------------------------------

    def alive(self, worker: int) -> bool:
        with self._lock:
            return self._conns[worker] is not None or self._restarting[worker]

    def submit(self, worker: int, ticket: int, config: Mapping[str, ParamValue]) -> None:
        with self._lock:
            conn = self._conns[worker]
            self._held[worker].add(ticket)
            if conn is None and self._restarting[worker]:
                self._queued[worker].append((ticket, dict(config)))  # sent once it is back
                return
        try:
            if conn is None:
                raise OSError("worker is gone")
            conn.send((ticket, dict(config)))
        except OSError as exc:
            with self._lock:
                self._held[worker].discard(ticket)
            self._results.put(Done(ticket, worker, None, f"worker {worker} unreachable ({exc})"))

    def wait(self) -> list[Done]:
        out = [self._results.get()]
        while True:
            try:
                out.append(self._results.get_nowait())
            except queue.Empty:
                break
        for item in out:
            if isinstance(item, str):
                raise InputError(item)
        return [d for d in out if isinstance(d, Done)]

    def _read(self, worker: int, conn: Connection) -> None:
        """Forward `worker`'s replies; when its process dies, restart it and report
        what it held as lost."""
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "error":
                self._results.put(f"worker {worker} (device {self.devices[worker]}): {message[1]}")
                continue
            _, ticket, evaluation = message
            with self._lock:
                self._held[worker].discard(ticket)
            self._results.put(Done(ticket, worker, evaluation))
        if self._closing:
            return
        proc = self._procs[worker]
        proc.join(5)
        why = f"worker {worker} (device {self.devices[worker]}, pid {proc.pid}) died (exit code {proc.exitcode})"
        with self._lock:
            self._conns[worker] = None
            lost, self._held[worker] = self._held[worker], set()  # what the dead process had
            self._restarting[worker] = self._restarts[worker] < RESTARTS
            restart = self._restarting[worker]
        if restart:
            self._restarts[worker] += 1
            try:
                self._ready(worker, *self._spawn(worker))
            except Exception as exc:  # reported with what it held, never lost in this thread
                why = f"{why}; not restarted: {_one_line(exc)}"
        with self._lock:
            self._restarting[worker] = False
            queued, self._queued[worker] = self._queued[worker], []
            conn = self._conns[worker]
            if conn is None:  # not back: what waited for it is lost too
                lost |= {ticket for ticket, _ in queued}
                self._held[worker] -= lost
        for ticket, config in queued if conn is not None else ():
            try:
                conn.send((ticket, config))
            except OSError:
                lost.add(ticket)
        for ticket in sorted(lost):
            self._results.put(Done(ticket, worker, None, why))
