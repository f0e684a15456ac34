"""Reading a watched launch's findings: extents touched and reads before writes.

A watched launch (`LaunchRequest.watch`) runs the instrumented build of the kernel
(the sector-trace build, plus line tables). For every buffer the child reports one past
the highest byte the kernel touched, and for each `out` buffer (poisoned) the first read
of a byte that nothing had written yet, as the reading instruction's address relative
to the kernel unit's entry symbol. That address becomes a source line through binutils
(`nm` for the symbol's link-time address, `addr2line` for the line); where they are
missing the finding keeps its buffer and offset and says no line.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

from ..base import BufferArg, LaunchRequest, UnwrittenRead
from .source import KERNEL_FILE

ANCHOR = "kxcpu_tu_run_thread"
_LOCATION = re.compile(r"^(?P<file>.+?):(?P<line>\d+)")


def read_watch(result: Path, request: LaunchRequest, exe: Path) -> tuple[dict[str, int], tuple[UnwrittenRead, ...]]:
    """Extents by buffer name, and the unwritten reads in buffer order."""
    buffers = [arg.name for arg in request.args if isinstance(arg, BufferArg)]
    extents: dict[str, int] = {}
    raw: list[tuple[str, int, int]] = []
    lines = result.read_text().splitlines() if result.exists() else []
    for line in lines:
        parts = line.split()
        if parts[:1] == ["extent"] and len(parts) == 3:
            extents[buffers[int(parts[1])]] = int(parts[2])
        elif parts[:1] == ["unwritten_read"] and len(parts) == 4:
            raw.append((buffers[int(parts[1])], int(parts[2]), int(parts[3])))
    reads = tuple(
        UnwrittenRead(name, offset, _source_line(exe, delta, request.filename)) for name, offset, delta in raw
    )
    return extents, reads


def _source_line(exe: Path, delta: int, filename: str) -> str:
    """`file:line` of the instruction `delta` bytes from the anchor symbol, or ""."""
    anchor = _anchor_address(str(exe))
    tool = shutil.which("addr2line")
    if anchor is None or tool is None:
        return ""
    address = anchor + delta - 1  # a return address: the call is the instruction before it
    try:
        proc = subprocess.run(
            [tool, "-e", str(exe), hex(address)], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    match = _LOCATION.match(proc.stdout.strip())
    if match is None or match.group("file") == "??" or match.group("line") == "0":
        return ""
    file = match.group("file")
    if Path(file).name == KERNEL_FILE:
        file = filename or KERNEL_FILE
    return f"{file}:{match.group('line')}"


@functools.lru_cache(maxsize=64)
def _anchor_address(exe: str) -> int | None:
    tool = shutil.which("nm")
    if tool is None:
        return None
    try:
        proc = subprocess.run([tool, exe], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == ANCHOR:
            return int(parts[0], 16)
    return None
