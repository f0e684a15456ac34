"""Per-kernel resource usage from ptxas's `-v` report.

Registers, spills and stack decide occupancy and whether a rewrite made a kernel
worse, so every cubin/object build asks ptxas for them (`-Xptxas -v`) and keeps them
with the result. The report of nvcc 13 looks like this:

    ptxas info    : Compiling entry function '_Z3bigPfi' for 'sm_90'
    ptxas info    : Function properties for _Z3bigPfi
        2048 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes cumulative stack size, 4096 bytes smem

Older releases add `N bytes cmem[B]` and `A+B bytes smem/lmem` terms; all are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+)(?:\+(\d+))? bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")
_LMEM = re.compile(r"(\d+)(?:\+(\d+))? bytes lmem")
_CUMULATIVE = re.compile(r"(\d+) bytes cumulative stack size")


@dataclass(frozen=True)
class KernelResources:
    """What one kernel (`__global__` entry) uses, as ptxas reports it.

    `shared_bytes` is static shared memory only (dynamic shared memory is a launch
    parameter); `stack_bytes` includes the stack of the functions it calls;
    `constant_bytes` sums every constant bank ptxas lists (parameters included).
    """

    mangled: str
    demangled: str
    registers: int = 0
    shared_bytes: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    constant_bytes: int = 0
    arch: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "mangled": self.mangled,
            "demangled": self.demangled,
            "registers": self.registers,
            "shared_bytes": self.shared_bytes,
            "spill_stores": self.spill_stores,
            "spill_loads": self.spill_loads,
            "stack_bytes": self.stack_bytes,
            "constant_bytes": self.constant_bytes,
            "arch": self.arch,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> KernelResources:
        def num(key: str) -> int:
            value = data.get(key, 0)
            return value if isinstance(value, int) else 0

        return cls(
            mangled=str(data["mangled"]),
            demangled=str(data.get("demangled", data["mangled"])),
            registers=num("registers"),
            shared_bytes=num("shared_bytes"),
            spill_stores=num("spill_stores"),
            spill_loads=num("spill_loads"),
            stack_bytes=num("stack_bytes"),
            constant_bytes=num("constant_bytes"),
            arch=str(data.get("arch", "")),
        )


def parse_ptxas_info(log: str) -> tuple[KernelResources, ...]:
    """One record per entry function in `log`, in the order ptxas compiled them.

    Non-entry functions (`__noinline__` device functions) get "Function properties"
    blocks too; their stack is already in their callers' cumulative stack size, so they
    are not listed.
    """
    records: dict[str, KernelResources] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    current: str | None = None
    properties_of: str | None = None
    for line in log.splitlines():
        if match := _ENTRY.search(line):
            current = match.group(1)
            records[current] = KernelResources(current, current, arch=match.group(2))
        elif match := _PROPERTIES.search(line):
            properties_of = match.group(1)
        elif (match := _FRAME.search(line)) and properties_of is not None:
            frames[properties_of] = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
        elif (match := _USED.search(line)) and current in records:
            records[current] = _with_usage(records[current], int(match.group(1)), line)
    return tuple(_with_frame(record, frames.get(name)) for name, record in records.items())


def _with_usage(record: KernelResources, registers: int, line: str) -> KernelResources:
    smem = sum(_pair(m) for m in _SMEM.finditer(line))
    cmem = sum(int(m.group(1)) for m in _CMEM.finditer(line))
    lmem = sum(_pair(m) for m in _LMEM.finditer(line))
    cumulative = max((int(m.group(1)) for m in _CUMULATIVE.finditer(line)), default=0)
    return replace(
        record,
        registers=registers,
        shared_bytes=smem,
        constant_bytes=cmem,
        stack_bytes=max(record.stack_bytes, cumulative, lmem),
    )


def _with_frame(record: KernelResources, frame: tuple[int, int, int] | None) -> KernelResources:
    if frame is None:
        return record
    stack, stores, loads = frame
    return replace(record, stack_bytes=max(record.stack_bytes, stack), spill_stores=stores, spill_loads=loads)


def _pair(match: re.Match[str]) -> int:
    return int(match.group(1)) + int(match.group(2) or 0)
