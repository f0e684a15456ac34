"""Fill distributions of input buffers: what each `fill = {dist = ...}` table means.

One frozen dataclass per distribution, so `inputs.make_inputs` dispatches on the type
and each generator sees exactly the fields it needs, already checked against the
buffer's dtype here (an `int` fill cannot overflow an int8 buffer, a `uniform` fill
cannot target an integer buffer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kxform.harness.dtypes import INT_DTYPES, int_range, is_float
from kxform.expr import Expr
from kxform.harness.fields import Table

CsrPart = Literal["row_ptr", "col_idx", "values"]
CSR_PARTS: tuple[CsrPart, ...] = ("row_ptr", "col_idx", "values")
CSR_INDEX_DTYPES = ("int32", "int64")


@dataclass(frozen=True)
class UniformFill:
    """Independent uniform floats in [low, high)."""

    low: float = -1.0
    high: float = 1.0


@dataclass(frozen=True)
class NormalFill:
    """Independent normal floats."""

    mean: float = 0.0
    std: float = 1.0


@dataclass(frozen=True)
class IntFill:
    """Independent uniform integers in [low, high], both inclusive."""

    low: int
    high: int


@dataclass(frozen=True)
class SortedFill:
    """Uniform values in [low, high) sorted ascending over the flattened buffer."""

    low: float
    high: float


@dataclass(frozen=True)
class CsrFill:
    """One part of a random CSR matrix shared by every arg with the same `group`.

    `rows`, `cols` and `nnz_per_row` may be given on any part of the group (they must
    agree where repeated). Row lengths vary around `nnz_per_row` (never above `cols`)
    and sum to exactly `rows * nnz_per_row`; column indices are distinct and sorted
    within each row; values are uniform in [low, high).
    """

    part: CsrPart
    group: str
    rows: Expr | None = None
    cols: Expr | None = None
    nnz_per_row: Expr | None = None
    low: float = -1.0
    high: float = 1.0


@dataclass(frozen=True)
class NpyFill:
    """Data read from a `.npy` file (absolute path, resolved against the spec)."""

    path: Path


@dataclass(frozen=True)
class ConstFill:
    """Every element set to `value`: for flags and counters, not for data."""

    value: float | int


FillSpec = UniformFill | NormalFill | IntFill | SortedFill | CsrFill | NpyFill | ConstFill

DISTS = ("uniform", "normal", "int", "sorted", "csr", "npy", "const")


def parse_fill(table: Table, dtype: str, spec_dir: Path) -> FillSpec:
    """Validate one `fill` table for a buffer of spec dtype `dtype`."""
    dist = table.choice("dist", DISTS)
    parser = _PARSERS[dist]
    return parser(table, dtype, spec_dir)


def _uniform(table: Table, dtype: str, _: Path) -> FillSpec:
    table.check_keys(("dist", "low", "high"))
    _need_float(table, dtype, "uniform")
    low, high = table.number("low", -1.0), table.number("high", 1.0)
    if not low < high:
        table.fail("low", f"uniform fill needs low < high, got low={low} high={high}")
    return UniformFill(low, high)


def _normal(table: Table, dtype: str, _: Path) -> FillSpec:
    table.check_keys(("dist", "mean", "std"))
    _need_float(table, dtype, "normal")
    std = table.number("std", 1.0)
    if not std > 0:
        table.fail("std", f"normal fill needs std > 0, got {std}")
    return NormalFill(table.number("mean", 0.0), std)


def _int(table: Table, dtype: str, _: Path) -> FillSpec:
    table.check_keys(("dist", "low", "high"))
    low, high = table.integer("low"), table.integer("high")
    if low > high:
        table.fail("low", f"int fill needs low <= high, got low={low} high={high}")
    _check_int_range(table, dtype, "low", low)
    _check_int_range(table, dtype, "high", high)
    return IntFill(low, high)


def _sorted(table: Table, dtype: str, _: Path) -> FillSpec:
    table.check_keys(("dist", "low", "high"))
    low, high = table.number("low", 0.0), table.number("high", 1.0)
    if not low < high:
        table.fail("low", f"sorted fill needs low < high, got low={low} high={high}")
    if dtype in INT_DTYPES:
        for key, value in (("low", low), ("high", high)):
            if not value.is_integer():
                table.fail(key, f"sorted fill of {dtype} needs integer bounds, got {value}")
            _check_int_range(table, dtype, key, int(value))
    return SortedFill(low, high)


def _csr(table: Table, dtype: str, _: Path) -> FillSpec:
    table.check_keys(("dist", "part", "group", "rows", "cols", "nnz_per_row", "low", "high"))
    part: CsrPart = table.choice("part", CSR_PARTS)  # type: ignore[assignment]
    if part == "values":
        _need_float(table, dtype, "csr values")
    elif dtype not in CSR_INDEX_DTYPES:
        table.fail("part", f"csr {part} must be int32 or int64, not {dtype}")
    elif table.has("low") or table.has("high"):
        table.fail("low", f"csr {part} takes no low/high (only values do)")
    low, high = table.number("low", -1.0), table.number("high", 1.0)
    if not low < high:
        table.fail("low", f"csr values need low < high, got low={low} high={high}")
    return CsrFill(
        part=part,
        group=table.required_string("group"),
        rows=table.expr("rows") if table.has("rows") else None,
        cols=table.expr("cols") if table.has("cols") else None,
        nnz_per_row=table.expr("nnz_per_row") if table.has("nnz_per_row") else None,
        low=low,
        high=high,
    )


def _npy(table: Table, _dtype: str, spec_dir: Path) -> FillSpec:
    table.check_keys(("dist", "path"))
    rel = table.required_string("path")
    path = (spec_dir / rel).resolve()
    if not path.is_relative_to(spec_dir.resolve()):
        table.fail(
            "path", f"npy file '{rel}' is outside the spec's directory (a spec reads only files beside it or below)"
        )
    if not path.is_file():
        table.fail("path", f"npy file '{rel}' not found (looked for {path})")
    return NpyFill(path)


def _const(table: Table, dtype: str, _: Path) -> FillSpec:
    table.check_keys(("dist", "value"))
    value = table.number("value")
    if dtype in INT_DTYPES:
        if not value.is_integer():
            table.fail("value", f"const fill of {dtype} needs an integer, got {value}")
        _check_int_range(table, dtype, "value", int(value))
        return ConstFill(int(value))
    return ConstFill(value)


def _need_float(table: Table, dtype: str, what: str) -> None:
    if not is_float(dtype):
        table.fail("dist", f'{what} fill needs a floating-point dtype, not {dtype} (use dist = "int")')


def _check_int_range(table: Table, dtype: str, key: str, value: int) -> None:
    if dtype not in INT_DTYPES:
        return
    low, high = int_range(dtype)
    if not low <= value <= high:
        table.fail(key, f"{key} = {value} does not fit {dtype} ({low}..{high})")


_PARSERS = {
    "uniform": _uniform,
    "normal": _normal,
    "int": _int,
    "sorted": _sorted,
    "csr": _csr,
    "npy": _npy,
    "const": _const,
}
