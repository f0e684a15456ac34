"""Running an emulation binary once: argument files, the manifest, the child process.

The binary runs in a child process so that a crash, a hang or a runaway allocation in
the kernel cannot take the caller down; the child's exit code says what went wrong
(see include/kxcpu/host/report.h) and its last stderr line says where. The child runs
in a fresh work directory, in a session of its own, under the resource limits computed
here (`KXCPU_LIMITS`), which include/kxcpu/host/sandbox.h applies before any of the
unit's code runs, together with the rest of the sandbox.
"""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base import (
    BufferArg,
    LaunchRequest,
    LaunchResult,
    LaunchTimeout,
    RuntimeError_,
    ScalarArg,
    SectorTrace,
    count_unwritten,
    poison_like,
    arena_outputs,
    schedule_kind,
)
from .source import KERNEL_FILE
from .watch import read_watch

EXIT_USAGE, EXIT_DEADLOCK, EXIT_FAULT, EXIT_TRAP = 2, 3, 4, 5
_TOKEN = re.compile(r"[^A-Za-z0-9_.\-]")


@dataclass(frozen=True)
class ChildSettings:
    """How the child runs: worker threads and the stack size of every fiber."""

    workers: int
    stack_bytes: int


def run_binary(exe: Path, request: LaunchRequest, settings: ChildSettings, name: str) -> LaunchResult:
    """Runs `exe` once on the request's arguments and collects outputs and traces."""
    with tempfile.TemporaryDirectory(prefix="kxcpu-run-") as tmp:
        work = Path(tmp)
        blocks = tuple(dict.fromkeys(request.trace_blocks))
        manifest = work / "manifest.txt"
        manifest.write_text(_manifest(request, settings, blocks, work))
        _execute(exe, manifest, request.timeout_s, name, child_limits(request, settings))
        outputs: dict[str, np.ndarray] = {}
        unwritten: dict[str, int] = {}
        for i, arg in enumerate(request.args):
            if isinstance(arg, BufferArg) and arg.role != "in" and not request.only_traced_blocks and not arg.arena:
                outputs[arg.name] = np.fromfile(work / f"arg{i}.bin", dtype=arg.data.dtype).reshape(arg.data.shape)
        arenas = {a.name: np.fromfile(work / f"arena{k}.bin", dtype=np.uint8) for k, a in enumerate(request.arenas)}
        outputs.update(arena_outputs(request, arenas))
        for arg in request.args:
            if isinstance(arg, BufferArg) and arg.role == "out" and arg.name in outputs:
                unwritten[arg.name] = count_unwritten(outputs[arg.name])
        traces = _read_traces(work / "traces.txt", request, blocks)
        elapsed = _read_elapsed(work / "result.txt")
        extents, reads = read_watch(work / "result.txt", request, exe) if request.watch else ({}, ())
    return LaunchResult(
        outputs=outputs,
        unwritten=unwritten,
        runtime="cpu",
        elapsed_ms=elapsed,
        traces=traces,
        unwritten_reads=reads,
        extents=extents,
    )


def _manifest(
    request: LaunchRequest, settings: ChildSettings, blocks: tuple[tuple[int, int, int], ...], work: Path
) -> str:
    lines = [
        "kxcpu-manifest 1",
        "grid {} {} {}".format(*request.grid),
        "block {} {} {}".format(*request.block),
        f"shared {request.shared_bytes}",
        f"workers {1 if request.arenas else settings.workers}",  # overlapping buffers: blocks in order
        f"stack {settings.stack_bytes}",
    ]
    lines += ["trace {} {} {}".format(*b) for b in blocks]
    if request.watch:
        lines.append("watch 1")
    if request.only_traced_blocks:
        lines.append("only_traced 1")
    kind, number = schedule_kind(request.schedule)
    if kind != "forward":
        lines.append(f"order {kind} {number}")
    if request.arenas and (request.watch or request.trace_blocks):
        raise RuntimeError_(f"{request.label}: a traced or watched launch cannot place buffers in arenas")
    arenas = {a.name: k for k, a in enumerate(request.arenas)}
    for k, arena in enumerate(request.arenas):
        np.ascontiguousarray(arena.data).tofile(work / f"arena{k}.bin")
        lines.append(f"arena {_TOKEN.sub('_', arena.name) or f'arena{k}'} {arena.data.nbytes} arena{k}.bin")
    for i, arg in enumerate(request.args):
        token = _TOKEN.sub("_", arg.name) or f"arg{i}"
        if isinstance(arg, BufferArg) and arg.arena:
            if arg.arena not in arenas or not 0 <= arg.offset <= request.arenas[arenas[arg.arena]].data.nbytes:
                raise RuntimeError_(
                    f"{request.label}: argument {arg.name}: no arena '{arg.arena}' holds offset {arg.offset}"
                )
            lines.append(f"view {token} {arenas[arg.arena]} {arg.offset}")
        elif isinstance(arg, BufferArg):
            data = np.ascontiguousarray(arg.data)
            if arg.role == "out" and request.only_traced_blocks:
                with open(work / f"arg{i}.bin", "wb") as sparse:  # zeros, no poison: outputs are not read
                    sparse.truncate(data.nbytes)
            else:
                (poison_like(data) if arg.role == "out" else data).tofile(work / f"arg{i}.bin")
            lines.append(f"buffer {token} {arg.role} {data.nbytes} arg{i}.bin")
        else:
            raw = scalar_bytes(arg)
            lines.append(f"scalar {token} {len(raw)} {raw.hex()}")
    return "\n".join(lines) + "\n"


BASE_ADDRESS_SPACE = 1 << 30
"""Address space of the binary itself (code, libraries, heap) beyond what a launch needs."""
OPEN_FILES = 64


def child_limits(request: LaunchRequest, settings: ChildSettings) -> str:
    """`KXCPU_LIMITS` for one launch: address space (buffers, fiber stacks of every
    worker, dynamic shared memory, plus a fixed base), largest file it may write
    (outputs and traces), CPU seconds (the timeout on every worker) and open files."""
    buffers = sum(a.data.nbytes for a in (*request.args, *request.arenas) if isinstance(a, BufferArg) and not a.arena)
    threads = request.block[0] * request.block[1] * request.block[2]
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    per_worker = threads * (settings.stack_bytes + 2 * page) + request.shared_bytes + 4 * page + (2 << 20)
    address_space = BASE_ADDRESS_SPACE + 2 * buffers + settings.workers * per_worker
    file_size = (len(request.trace_blocks) + 1) * buffers + (64 << 20)
    cpu = math.ceil(request.timeout_s * max(1, settings.workers)) + 30
    return f"as={address_space},fsize={file_size},cpu={cpu},nofile={OPEN_FILES}"


def _execute(exe: Path, manifest: Path, timeout_s: float, name: str, limits: str = "") -> None:
    env = dict(os.environ, KXCPU_LIMITS=limits or f"nofile={OPEN_FILES}")
    try:
        proc = subprocess.Popen(
            [str(exe), str(manifest)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            cwd=manifest.parent,
            env=env,
        )
    except OSError as exc:
        raise RuntimeError_(f"{name}: cannot start the emulation binary: {exc}") from exc
    try:
        _, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise LaunchTimeout(
            f"{name}: did not finish within {timeout_s:g} s on the CPU runtime "
            "(an endless loop, or a spin-wait on another block or thread that cannot progress)"
        ) from None
    if proc.returncode == 0:
        return
    text = err.decode(errors="replace")
    message = _child_message(text)
    if proc.returncode == EXIT_DEADLOCK:
        raise LaunchTimeout(f"{name}: {message}")
    if proc.returncode == EXIT_TRAP:
        raise RuntimeError_(f"{name}: {_assertion(text, name) or message}")
    if proc.returncode in (EXIT_USAGE, EXIT_FAULT):
        raise RuntimeError_(f"{name}: {message}")
    if proc.returncode < 0:
        raise RuntimeError_(f"{name}: the emulation crashed ({_signal_name(-proc.returncode)})")
    raise RuntimeError_(f"{name}: the emulation failed with exit code {proc.returncode}: {message}")


_ASSERT = re.compile(r"(?P<file>[^\s:]+):(?P<line>\d+): [^\n]*?Assertion `(?P<cond>.*)' failed")
_SOURCE_LINE = re.compile(r"(?<![\w/.])" + re.escape(KERNEL_FILE) + r":(\d+)")
_THREAD = re.compile(r" in thread \(.*")


def _assertion(stderr: str, name: str) -> str | None:
    """A failed device `assert` as one line, located like other messages."""
    m = _ASSERT.search(stderr)
    if m is None:
        return None
    where = name if m.group("file").endswith(KERNEL_FILE) else m.group("file")
    thread = _THREAD.search(_child_message(stderr))
    suffix = thread.group(0) if thread else ""
    return f"device assertion `{m.group('cond')}` failed at {where}:{m.group('line')}{suffix}"


def _child_message(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.startswith("kxcpu: ")]
    if lines:
        return _one_line(lines[-1][len("kxcpu: ") :])
    rest = [ln for ln in stderr.splitlines() if ln.strip()]
    return _one_line(rest[-1]) if rest else "no message"


def _one_line(text: str) -> str:
    """One line, with the generated source name replaced ("kernel.cu:12" -> "line 12")."""
    return _SOURCE_LINE.sub(r"line \1", " ".join(text.split()))


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _read_elapsed(path: Path) -> float | None:
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "elapsed_ms":
            return float(value)
    return None


def _parse_ranges(tokens: list[str]) -> frozenset[int]:
    sectors: set[int] = set()
    for token in tokens:
        first, _, last = token.partition("-")
        sectors.update(range(int(first), int(last or first) + 1))
    return frozenset(sectors)


def _read_traces(
    path: Path, request: LaunchRequest, blocks: tuple[tuple[int, int, int], ...]
) -> tuple[SectorTrace, ...]:
    """Traces in the order of `request.trace_blocks` (the child writes each block once)."""
    if not blocks:
        return ()
    buffers = [arg.name for arg in request.args if isinstance(arg, BufferArg)]
    parsed: dict[tuple[int, int, int], SectorTrace] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        head = lines[i].split()
        block = (int(head[1]), int(head[2]), int(head[3]))
        reads: dict[str, frozenset[int]] = {}
        writes: dict[str, frozenset[int]] = {}
        for k, name in enumerate(buffers):
            reads[name] = _parse_ranges(lines[i + 1 + 2 * k].split()[2:])
            writes[name] = _parse_ranges(lines[i + 2 + 2 * k].split()[2:])
        parsed[block] = SectorTrace(block=block, reads=reads, writes=writes)
        i += 1 + 2 * len(buffers)
    missing = [b for b in blocks if b not in parsed]
    if missing:
        raise RuntimeError_(f"the emulation wrote no trace for block {missing[0]}")
    return tuple(parsed[b] for b in request.trace_blocks)


def scalar_bytes(arg: ScalarArg) -> bytes:
    """The raw bytes of a by-value argument (its NumPy dtype is the C type)."""
    return np.asarray(arg.value).tobytes()
