"""Resolving a kernel spec at one size: concrete launch dimensions and argument shapes.

All expressions are evaluated here, and the CUDA launch limits are checked, so that a
bad size fails with a spec error naming the size instead of a launch failure deep in
a runtime. `load_spec` resolves every size once, which makes these errors load errors.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kxform.errors import SpecError
from kxform.harness.dtypes import float_to_bf16, int_range, is_float, numpy_dtype
from kxform.expr import Expr
from kxform.harness.fills import CsrFill
from kxform.harness.model import ArgKind, ArgSpec, KernelSpec, Role, SizeSpec

MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2**31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 227 * 1024
"""Largest dynamic shared memory per block on sm_90 (needs the opt-in attribute above 48 KiB)."""

AXES = "xyz"


@dataclass(frozen=True)
class CsrDims:
    """Resolved dimensions of a CSR matrix."""

    rows: int
    cols: int
    nnz_per_row: int

    @property
    def nnz(self) -> int:
        """Total stored entries (exactly rows * nnz_per_row)."""
        return self.rows * self.nnz_per_row


@dataclass(frozen=True)
class ResolvedArg:
    """One argument at one size: buffer shape (scalars: `()`) or scalar value."""

    name: str
    kind: ArgKind
    dtype: str
    role: Role
    shape: tuple[int, ...]
    value: np.generic | None = None
    csr: CsrDims | None = None
    scratch: bool = False
    """A buffer a rewritten kernel takes beyond the spec's arguments (kxform.engine.policy.Scratch):
    no input of the spec, zero-filled by the request builder."""

    @property
    def count(self) -> int:
        """Number of elements (1 for a scalar)."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the buffer (0 for a scalar)."""
        return 0 if self.kind == "scalar" else self.count * numpy_dtype(self.dtype).itemsize


@dataclass(frozen=True)
class ResolvedLaunch:
    """Everything about one launch that depends on the size, as plain numbers."""

    kernel: str
    size: str
    variables: Mapping[str, int]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    args: tuple[ResolvedArg, ...]

    def arg(self, name: str) -> ResolvedArg:
        """The resolved argument called `name`."""
        for arg in self.args:
            if arg.name == name:
                return arg
        raise KeyError(name)

    @property
    def total_bytes(self) -> int:
        """Bytes of all buffers together (the data a launch may touch)."""
        return sum(a.nbytes for a in self.args)

    @property
    def threads_per_block(self) -> int:
        """Threads in one block."""
        return math.prod(self.block)

    @property
    def blocks(self) -> int:
        """Blocks in the grid."""
        return math.prod(self.grid)


def resolve(kernel: KernelSpec, size: SizeSpec) -> ResolvedLaunch:
    """Resolve `kernel` at `size`; SpecError (located at the size) when anything is off."""
    prefix = f"kernel '{kernel.name}' size '{size.name}'"
    try:
        env = dict(size.values)
        grid = _dims(kernel.grid, env, "grid")
        block = _dims(kernel.block, env, "block")
        _check_limits(grid, block)
        shared = _evaluate_int(kernel.shared_bytes, env, "shared_bytes")
        if not 0 <= shared <= MAX_SHARED_BYTES:
            raise SpecError(f"shared_bytes = {shared} outside 0..{MAX_SHARED_BYTES}")
        csr = {
            name: _csr_dims(group.name, group.rows, group.cols, group.nnz_per_row, env)
            for name, group in kernel.csr_groups.items()
        }
        args = tuple(_resolve_arg(arg, env, csr) for arg in kernel.args)
        _check_memory(args)
    except SpecError as err:
        raise SpecError(f"{prefix}: {err.cause}", size.location) from None
    return ResolvedLaunch(kernel.name, size.name, env, grid, block, shared, args)


def host_memory_bytes() -> int | None:
    """Physical memory of this machine (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _check_memory(args: tuple[ResolvedArg, ...]) -> None:
    """Buffers are made on the host (inputs, references, both versions' outputs): a size
    whose buffers cannot fit in this machine's memory is a spec error, not a MemoryError."""
    need = sum(a.nbytes for a in args)
    limit = host_memory_bytes()
    if limit is not None and need > limit:
        raise SpecError(
            f"its buffers need {need / 1e9:.1f} GB, more than this machine's memory "
            f"({limit / 1e9:.1f} GB); use a smaller size"
        )


def _evaluate_int(expr: Expr, env: Mapping[str, int], what: str) -> int:
    try:
        return expr.evaluate_int(env)
    except SpecError as err:
        raise SpecError(f"{what}: {err.cause}") from None


def _dims(exprs: tuple[Expr, ...], env: Mapping[str, int], what: str) -> tuple[int, int, int]:
    values = [_evaluate_int(e, env, f"{what}[{i}]") for i, e in enumerate(exprs)]
    values += [1] * (3 - len(values))
    return values[0], values[1], values[2]


def _check_limits(grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
    for axis, value, limit in zip(AXES, grid, MAX_GRID_DIMS, strict=True):
        if not 1 <= value <= limit:
            raise SpecError(f"grid.{axis} = {value} outside 1..{limit} (grid {grid})")
    for axis, value, limit in zip(AXES, block, MAX_BLOCK_DIMS, strict=True):
        if not 1 <= value <= limit:
            raise SpecError(f"block.{axis} = {value} outside 1..{limit} (block {block})")
    threads = math.prod(block)
    if threads > MAX_BLOCK_THREADS:
        raise SpecError(f"block {block} has {threads} threads (limit {MAX_BLOCK_THREADS})")


def _csr_dims(name: str, rows: Expr, cols: Expr, nnz: Expr, env: Mapping[str, int]) -> CsrDims:
    what = f"csr group '{name}'"
    dims = CsrDims(
        _evaluate_int(rows, env, f"{what} rows"),
        _evaluate_int(cols, env, f"{what} cols"),
        _evaluate_int(nnz, env, f"{what} nnz_per_row"),
    )
    if dims.rows < 1 or dims.cols < 1:
        raise SpecError(f"{what}: needs rows >= 1 and cols >= 1, got {dims.rows} x {dims.cols}")
    if not 0 <= dims.nnz_per_row <= dims.cols:
        raise SpecError(f"{what}: nnz_per_row = {dims.nnz_per_row} outside 0..cols ({dims.cols})")
    return dims


def _resolve_arg(arg: ArgSpec, env: Mapping[str, int], csr: Mapping[str, CsrDims]) -> ResolvedArg:
    what = f"arg '{arg.name}'"
    if arg.kind == "scalar":
        assert arg.value is not None  # guaranteed by the loader
        value = _scalar(arg, _eval(arg.value, env, what))
        return ResolvedArg(arg.name, "scalar", arg.dtype, "in", (), value=value)
    dims = csr[arg.fill.group] if isinstance(arg.fill, CsrFill) else None
    shape = _buffer_shape(arg, env, what, dims)
    if any(n < 1 for n in shape):
        raise SpecError(f"{what}: shape {shape} has an empty dimension")
    return ResolvedArg(arg.name, "buffer", arg.dtype, arg.role, shape, csr=dims)


def _eval(expr: Expr, env: Mapping[str, int], what: str) -> int | float:
    try:
        return expr.evaluate(env)
    except SpecError as err:
        raise SpecError(f"{what} value: {err.cause}") from None


def _buffer_shape(arg: ArgSpec, env: Mapping[str, int], what: str, dims: CsrDims | None) -> tuple[int, ...]:
    if arg.shape is not None:
        shape = tuple(_evaluate_int(e, env, f"{what} shape[{i}]") for i, e in enumerate(arg.shape))
    elif arg.count is not None:
        shape = (_evaluate_int(arg.count, env, f"{what} count"),)
    else:
        shape = ()
    if dims is None or not isinstance(arg.fill, CsrFill):
        return shape
    want = dims.rows + 1 if arg.fill.part == "row_ptr" else dims.nnz
    if shape and math.prod(shape) != want:
        raise SpecError(
            f"{what}: count {math.prod(shape)} does not match csr group '{arg.fill.group}' "
            f"({arg.fill.part} of {dims.rows} rows x {dims.nnz_per_row} per row needs {want})"
        )
    if arg.fill.part != "values" and dims.nnz > int_range(arg.dtype)[1]:
        raise SpecError(f"{what}: {dims.nnz} nonzeros do not fit {arg.dtype}")
    return shape or (want,)


def _scalar(arg: ArgSpec, value: int | float) -> np.generic:
    """`value` as a NumPy scalar of the arg's dtype (bfloat16: uint16 bits)."""
    what = f"arg '{arg.name}'"
    if is_float(arg.dtype):
        with np.errstate(over="ignore"):
            stored = np.array([value], dtype=np.float64).astype(
                np.float32 if arg.dtype == "bfloat16" else numpy_dtype(arg.dtype)
            )
        if not np.isfinite(stored).all():
            raise SpecError(f"{what}: value {value!r} overflows {arg.dtype}")
        element: np.generic = float_to_bf16(stored)[0] if arg.dtype == "bfloat16" else stored[0]
        return element
    if not isinstance(value, int):
        raise SpecError(f"{what}: value {value!r} is not an integer but dtype is {arg.dtype}")
    low, high = int_range(arg.dtype)
    if not low <= value <= high:
        raise SpecError(f"{what}: value {value} does not fit {arg.dtype} ({low}..{high})")
    typed: np.generic = numpy_dtype(arg.dtype).type(value)
    return typed
