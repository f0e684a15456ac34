"""The interface every runtime implements.

A runtime takes a standalone translation unit (one kernel and what it needs, no host
code), launches the kernel once on given inputs and returns the buffers it wrote.
Runtimes never hold state across requests in module or class attributes: a device
handle lives in the runtime object, so two runtimes can coexist in one process.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from kxform.frontend.signature import KernelParam

Role = Literal["in", "out", "inout"]

POISON_BYTE = 0xFF
"""Output buffers are filled with this byte before every launch (NaN for floats)."""


@dataclass(frozen=True)
class BufferArg:
    """A device buffer argument: `data` is copied in (for out-only buffers it is poisoned).

    With `arena`, the buffer has no allocation of its own: the kernel gets a pointer
    `offset` bytes into the allocation `arena` names (`LaunchRequest.arenas`), which the
    caller filled; `data` then only gives the shape and type its output is read back as.
    Two such buffers may overlap, and one may start at any offset (misaligned)."""

    name: str
    data: np.ndarray
    role: Role
    arena: str = ""
    offset: int = 0


@dataclass(frozen=True)
class ScalarArg:
    """A by-value argument; `value` is a NumPy scalar whose dtype is the C type."""

    name: str
    value: np.generic


Arg = BufferArg | ScalarArg


@dataclass(frozen=True)
class LaunchRequest:
    """Everything needed to run one kernel once.

    `kernel` is the C++ spelling of the kernel to launch (`saxpy`, `gemm<float, 64>`);
    `params` is its declared parameter list, in order, matching `args` one to one.
    `label` names the kernel, size and version in errors ("sgemm_tiled[ragged] rewritten").
    """

    source: str
    kernel: str
    params: tuple[KernelParam, ...]
    args: tuple[Arg, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    timeout_s: float = 60.0
    label: str = ""
    filename: str = ""
    """The user's source file the unit was extracted from (line numbers match it), for messages."""
    include_dirs: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    trace_blocks: tuple[tuple[int, int, int], ...] = ()
    """Blocks whose global-memory sectors to record (CPU runtime only; empty: none)."""
    watch: bool = False
    """Watch every access (CPU runtime only): report reads of `out` buffers before any write
    (`LaunchResult.unwritten_reads`) and the bytes of each buffer touched (`extents`)."""
    only_traced_blocks: bool = False
    """Run only the blocks in `trace_blocks` (CPU runtime only): for trace collection at
    sizes too large to emulate whole. The outputs are then unspecified and not returned
    (`LaunchResult.outputs` and `unwritten` are empty); `out` buffers start zeroed."""
    arenas: tuple[BufferArg, ...] = ()
    """Allocations the kernel is not passed itself (bytes, `inout`): buffer arguments with
    `arena` point into them. Not for traced or watched launches."""
    schedule: str = "forward"
    """The order the threads of a block run in between synchronisation points (CPU runtime
    only; `schedule_kind` reads it): `forward` (thread order), `reverse`, `random:SEED` (a
    seeded permutation per block) or `delay:W` (warp W runs after the others). A kernel
    without races gives the same outputs in every order."""


ADVERSARIAL_SCHEDULES = ("reverse", "random:1", "delay:0")
"""The orders a rewrite whose threads share data is also run in (besides `forward`)."""


def schedule_kind(schedule: str) -> tuple[str, int]:
    """`random:7` -> ("random", 7); ValueError naming the schedule when it is not one."""
    kind, _, number = schedule.partition(":")
    if kind in ("forward", "reverse") and not number:
        return kind, 0
    if kind in ("random", "delay") and number.isdigit():
        return kind, int(number)
    raise ValueError(f"unknown schedule {schedule!r} (forward, reverse, random:SEED, delay:WARP)")


@dataclass(frozen=True)
class SectorTrace:
    """The 32-byte sectors of each buffer one block read and wrote (byte offset // 32)."""

    block: tuple[int, int, int]
    reads: dict[str, frozenset[int]]
    writes: dict[str, frozenset[int]]


@dataclass(frozen=True)
class UnwrittenRead:
    """A read of an `out` buffer's element that nothing had written yet (it held poison):
    the kernel needs the buffer's old contents, so the spec must declare it `inout`."""

    buffer: str
    offset: int
    """Byte offset of the read in the buffer."""
    where: str
    """`file:line` of the read in the user's source, or "" when the line is unknown."""

    def describe(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return (
            f"'{self.buffer}' is read{at} (byte {self.offset}) before the kernel writes it; it is poisoned as "
            f"an 'out' buffer: declare it inout"
        )


@dataclass(frozen=True)
class LaunchResult:
    """Buffers after the launch (every `out`/`inout` arg) and what stayed poisoned."""

    outputs: dict[str, np.ndarray]
    unwritten: dict[str, int]
    runtime: str
    elapsed_ms: float | None = None
    traces: tuple[SectorTrace, ...] = field(default=())
    unwritten_reads: tuple[UnwrittenRead, ...] = field(default=())
    """Watched launches: the first unwritten read of each `out` buffer that had one."""
    extents: dict[str, int] = field(default_factory=dict)
    """Watched launches: per buffer, one past the highest byte the kernel read or wrote (0: untouched)."""


@dataclass(frozen=True)
class TimedRun:
    """What `Runtime.time` measured: per-launch milliseconds and how they were taken."""

    samples_ms: tuple[float, ...]
    copies: int = 1
    """Input sets rotated between launches (so a launch cannot re-read the last one's L2)."""
    persisting_l2_bytes: int | None = None
    """The persisting-L2 limit while timing (0: capped; None: the device has none)."""
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    """The last timed launch's outputs, when asked for (`keep_outputs`): to check that
    the timed code did the verified work every time, not only when verified."""


class RuntimeError_(Exception):
    """A launch failed: compile error, fault, timeout or unsupported feature.

    The message is one line naming the kernel, size and version (the request label).
    """


class Unsupported(RuntimeError_):
    """The runtime cannot run this kernel at all (e.g. inline PTX on the CPU runtime)."""


class LaunchTimeout(RuntimeError_):
    """The kernel did not finish within the request's timeout (or deadlocked)."""


class Runtime(abc.ABC):
    """One way to run kernels. Subclasses: `GpuRuntime` (pycuda) and `CpuRuntime`."""

    name: str = "abstract"
    watches_reads: bool = False
    """Whether `LaunchRequest.watch` is honoured (reads before writes, extents touched)."""

    @abc.abstractmethod
    def available(self) -> tuple[bool, str]:
        """Whether this runtime can run here, and if not, why (one line)."""

    @abc.abstractmethod
    def run(self, request: LaunchRequest) -> LaunchResult:
        """Launch once and return the outputs. Raises a `RuntimeError_` subclass on failure."""

    def time(
        self, request: LaunchRequest, *, warmup: int = 3, repeat: int = 20, keep_outputs: bool = False
    ) -> TimedRun:
        """Milliseconds per launch over `repeat` launches after `warmup`. GPU only by default."""
        raise Unsupported(f"{self.name} runtime does not time kernels")

    @property
    def times_kernels(self) -> bool:
        """Whether `time` is implemented (a runtime that cannot time cannot `--measure`)."""
        return type(self).time is not Runtime.time


def arena_outputs(request: LaunchRequest, arenas: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The outputs of the buffer arguments that lie in arenas (their bytes of each arena as
    it came back), by argument name."""
    out: dict[str, np.ndarray] = {}
    for arg in request.args:
        if isinstance(arg, BufferArg) and arg.arena and arg.role != "in":
            raw = arenas[arg.arena].reshape(-1).view(np.uint8)[arg.offset : arg.offset + arg.data.nbytes]
            out[arg.name] = raw.copy().view(arg.data.dtype).reshape(arg.data.shape)
    return out


def poison_like(array: np.ndarray) -> np.ndarray:
    """A copy of `array` with every byte set to POISON_BYTE."""
    out = np.empty_like(array)
    out.view(np.uint8)[...] = POISON_BYTE
    return out


_WORD_OF_SIZE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def poison_mask(array: np.ndarray) -> np.ndarray:
    """Flat boolean mask of the elements whose bytes are all POISON_BYTE.

    Elements of 1, 2, 4 or 8 bytes are compared as one word each (an output of 10^8
    floats in a tenth of the time of a byte-wise test); other sizes (structs) byte-wise."""
    itemsize = array.dtype.itemsize
    raw = np.ascontiguousarray(array)
    word = _WORD_OF_SIZE.get(itemsize)
    if word is not None:
        mask: np.ndarray = raw.reshape(-1).view(word) == word(int.from_bytes(bytes([POISON_BYTE]) * itemsize, "little"))
        return mask
    return np.all(raw.view(np.uint8).reshape(-1, itemsize) == POISON_BYTE, axis=1)


def count_unwritten(array: np.ndarray) -> int:
    """Elements of `array` whose bytes are all still POISON_BYTE."""
    return int(poison_mask(array).sum())


def count_unwritten_against(expected: np.ndarray, actual: np.ndarray) -> int:
    """Elements still poisoned in `actual` whose expected value is not the poison pattern
    itself (an int32 output may legitimately be -1, which is all 0xFF bytes)."""
    return int((poison_mask(actual) & ~poison_mask(expected)).sum())
