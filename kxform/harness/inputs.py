"""Deterministic kernel inputs for one resolved launch.

Each buffer gets its own random stream, seeded from the kernel seed mixed with the
argument's name (CSR parts: with the group's name), so adding or reordering args never
changes the data of the others and a failure reproduces from `(seed, size)` alone.
`out` buffers are poisoned (every byte 0xFF) so a skipped write is visible.

Representation: float16 is `np.float16`; bfloat16 is `np.uint16` holding bf16 bits
(see `kxform.harness.dtypes`); scalars are NumPy scalars of their dtype.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from kxform.errors import SpecError
from kxform.harness.dtypes import INT_DTYPES, numpy_dtype, to_storage
from kxform.harness.fills import (
    ConstFill,
    CsrFill,
    FillSpec,
    IntFill,
    NormalFill,
    NpyFill,
    SortedFill,
    UniformFill,
)
from kxform.harness.launch import CsrDims, ResolvedArg, ResolvedLaunch
from kxform.harness.model import KernelSpec
from kxform.runtime.base import poison_like

Inputs = dict[str, np.ndarray | np.generic]

_FAST_FLOATS = frozenset({"float16", "bfloat16", "float32"})
"""Dtypes whose random data is drawn in float32 (half the memory and time of float64)."""


def make_inputs(kernel: KernelSpec, resolved: ResolvedLaunch, seed: int | None = None) -> Inputs:
    """Every argument of `kernel` at `resolved`'s size, in parameter order.

    `seed` defaults to the spec's seed; pass another one for fresh data per check.
    """
    base = kernel.seed if seed is None else seed
    if base < 0:
        raise SpecError(f"kernel '{kernel.name}': seed must be >= 0, got {base}")
    csr_cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    inputs: Inputs = {}
    for spec_arg, arg in zip(kernel.args, resolved.args, strict=True):
        if arg.kind == "scalar":
            assert arg.value is not None
            inputs[arg.name] = arg.value
        elif arg.role == "out":
            inputs[arg.name] = poison_like(np.empty(arg.shape, numpy_dtype(arg.dtype)))
        else:
            assert spec_arg.fill is not None  # the loader requires a fill for in/inout
            inputs[arg.name] = _filled(spec_arg.fill, arg, base, csr_cache)
    return inputs


def rng_for(seed: int, key: str) -> np.random.Generator:
    """A PCG64 generator for `key` (an arg or CSR group) under `seed`."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, *words])))


def _filled(
    fill: FillSpec, arg: ResolvedArg, seed: int, csr_cache: dict[str, tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    if isinstance(fill, CsrFill):
        data = _csr_part(fill, arg, seed, csr_cache)
    else:
        data = _GENERATORS[type(fill)](fill, arg, rng_for(seed, f"arg:{arg.name}"))
    return np.ascontiguousarray(data).reshape(arg.shape)


def _draw_floats(arg: ResolvedArg, rng: np.random.Generator, normal: bool) -> np.ndarray:
    dtype = np.float32 if arg.dtype in _FAST_FLOATS else np.float64
    if normal:
        return rng.standard_normal(arg.count, dtype=dtype)
    return rng.random(arg.count, dtype=dtype)


def _uniform(fill: FillSpec, arg: ResolvedArg, rng: np.random.Generator) -> np.ndarray:
    assert isinstance(fill, UniformFill)
    unit = _draw_floats(arg, rng, normal=False)
    values = unit * unit.dtype.type(fill.high - fill.low) + unit.dtype.type(fill.low)
    return to_storage(values, arg.dtype)


def _normal(fill: FillSpec, arg: ResolvedArg, rng: np.random.Generator) -> np.ndarray:
    assert isinstance(fill, NormalFill)
    unit = _draw_floats(arg, rng, normal=True)
    return to_storage(unit * unit.dtype.type(fill.std) + unit.dtype.type(fill.mean), arg.dtype)


def _integers(arg: ResolvedArg, rng: np.random.Generator, low: int, high: int) -> np.ndarray:
    dtype = numpy_dtype(arg.dtype) if arg.dtype in INT_DTYPES else np.dtype(np.int64)
    return rng.integers(low, high, size=arg.count, dtype=dtype, endpoint=True)


def _int(fill: FillSpec, arg: ResolvedArg, rng: np.random.Generator) -> np.ndarray:
    assert isinstance(fill, IntFill)
    return to_storage(_integers(arg, rng, fill.low, fill.high), arg.dtype)


def _sorted(fill: FillSpec, arg: ResolvedArg, rng: np.random.Generator) -> np.ndarray:
    assert isinstance(fill, SortedFill)
    if arg.dtype in INT_DTYPES:
        return np.sort(_integers(arg, rng, int(fill.low), int(fill.high)))
    unit = np.sort(_draw_floats(arg, rng, normal=False))
    # Rounding to the storage type is monotonic, so sorting first keeps the order.
    return to_storage(unit * unit.dtype.type(fill.high - fill.low) + unit.dtype.type(fill.low), arg.dtype)


def _const(fill: FillSpec, arg: ResolvedArg, _: np.random.Generator) -> np.ndarray:
    assert isinstance(fill, ConstFill)
    one = to_storage(np.array([fill.value]), arg.dtype)
    return np.full(arg.count, one[0], dtype=numpy_dtype(arg.dtype))


def _npy(fill: FillSpec, arg: ResolvedArg, _: np.random.Generator) -> np.ndarray:
    assert isinstance(fill, NpyFill)
    try:
        data = np.load(fill.path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise SpecError(f"arg '{arg.name}': cannot load {fill.path}: {err}") from None
    want = numpy_dtype(arg.dtype)
    if data.dtype != want:
        raise SpecError(f"arg '{arg.name}': {fill.path.name} holds {data.dtype}, buffer is {arg.dtype} ({want})")
    if data.size != arg.count:
        raise SpecError(f"arg '{arg.name}': {fill.path.name} has {data.size} elements, buffer needs {arg.count}")
    flat: np.ndarray = data.reshape(-1).copy()
    return flat


_GENERATORS: dict[type, Callable[[FillSpec, ResolvedArg, np.random.Generator], np.ndarray]] = {
    UniformFill: _uniform,
    NormalFill: _normal,
    IntFill: _int,
    SortedFill: _sorted,
    ConstFill: _const,
    NpyFill: _npy,
}


def _csr_part(
    fill: CsrFill, arg: ResolvedArg, seed: int, cache: dict[str, tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    assert arg.csr is not None  # resolved for every csr part
    if fill.part == "values":
        values = rng_for(seed, f"csr:{fill.group}:values").random(arg.csr.nnz)
        return to_storage(values * (fill.high - fill.low) + fill.low, arg.dtype)
    if fill.group not in cache:
        cache[fill.group] = csr_structure(arg.csr, rng_for(seed, f"csr:{fill.group}"))
    row_ptr, col_idx = cache[fill.group]
    return (row_ptr if fill.part == "row_ptr" else col_idx).astype(numpy_dtype(arg.dtype))


def csr_structure(dims: CsrDims, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random `(row_ptr, col_idx)` (int64) with varying row lengths.

    Row lengths follow a multinomial around `nnz_per_row`, capped at `cols` with the
    excess moved to rows that have room, so the total is exactly `rows * nnz_per_row`.
    Within a row, columns are distinct and ascending: sorted draws `u_i` from
    `[0, cols - len]` plus their rank `i` are strictly increasing and below `cols`.
    """
    rows, cols, total = dims.rows, dims.cols, dims.nnz
    lengths = rng.multinomial(total, np.full(rows, 1.0 / rows)).astype(np.int64)
    np.minimum(lengths, cols, out=lengths)
    deficit = total - int(lengths.sum())
    if deficit:
        order = rng.permutation(rows)
        room = cols - lengths[order]
        before = np.cumsum(room) - room
        lengths[order] += np.clip(deficit - before, 0, room)
    row_ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=row_ptr[1:])
    row_of = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    span = (cols - lengths)[row_of] + 1
    draws = np.minimum(np.floor(rng.random(total) * span).astype(np.int64), span - 1)
    keys = row_of * (cols + 1) + draws
    keys.sort()
    rank = np.arange(total, dtype=np.int64) - row_ptr[row_of]
    col_idx = keys - row_of * (cols + 1) + rank
    return row_ptr, col_idx
