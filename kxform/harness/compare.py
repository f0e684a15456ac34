"""Comparing a kernel's output buffer with the expected one.

Three modes (docs/harness-spec.md): `exact` compares bit patterns (so `-0.0 != 0.0`
and a NaN matches only the identical NaN); `ulp` counts representable values between
the two numbers on their integer bit patterns (float16, bfloat16, float32, float64;
`+0` and `-0` are 0 apart); `allclose` is `|a - e| <= atol + rtol * |e|`. Outside
exact mode any NaN is a mismatch: the poison that marks unwritten outputs is a NaN,
and it must never compare equal to anything.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kxform.harness.dtypes import FLOAT_DTYPES, UINT_OF_WIDTH, numpy_dtype, to_float64
from kxform.harness.model import CompareSpec

_NAME_OF_DTYPE = {
    np.dtype(np.float16): "float16",
    np.dtype(np.float32): "float32",
    np.dtype(np.float64): "float64",
}


@dataclass(frozen=True)
class Comparison:
    """Outcome of one buffer comparison.

    `max_abs`/`max_rel` are taken over element pairs where neither side is NaN;
    `first_mismatch` is a flat (C-order) index, with the two values found there.
    """

    ok: bool
    max_abs: float
    max_rel: float
    first_mismatch: int | None
    mismatches: int
    total: int
    first_expected: float | None = None
    first_actual: float | None = None
    unwritten_both: int = 0
    """Elements neither side wrote (still the poison in both): equal by definition."""

    def summary(self) -> str:
        """One line for reports: how many elements differ and where the first is."""
        both = f", {self.unwritten_both} unwritten in both" if self.unwritten_both else ""
        if self.ok:
            return f"match ({self.total} elements{both}, max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g})"
        return (
            f"{self.mismatches} of {self.total} elements differ; first at index {self.first_mismatch} "
            f"(expected {self.first_expected!r}, got {self.first_actual!r}); "
            f"max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}"
        )


def compare(
    expected: np.ndarray,
    actual: np.ndarray,
    spec: CompareSpec,
    *,
    dtype: str | None = None,
    unwritten_both: np.ndarray | None = None,
) -> Comparison:
    """Compare `actual` with `expected` under `spec`.

    `dtype` is the spec dtype of the buffer; it is required for bfloat16 (whose
    arrays are plain uint16) and inferred from the arrays otherwise. Both arrays must
    have the same shape and the storage dtype of `dtype`. `unwritten_both` (flat
    boolean mask) marks the elements neither side wrote (an output's border a stencil
    never touches): they agree by definition, whatever the mode makes of the poison;
    an element only one side wrote is compared as usual, and differs.
    """
    name = dtype or _infer_dtype(actual)
    want = numpy_dtype(name)
    exp, act = np.asarray(expected), np.asarray(actual)
    if exp.shape != act.shape:
        raise ValueError(f"shape mismatch: expected {exp.shape}, actual {act.shape}")
    if exp.dtype != want or act.dtype != want:
        raise ValueError(f"dtype mismatch: {name} needs {want}, got {exp.dtype} and {act.dtype}")
    exp, act = exp.reshape(-1), act.reshape(-1)
    where = np.flatnonzero(_bits_differ(exp, act))  # the only elements either step decodes
    bad = _mismatch_mask(exp, act, where, spec, name)
    if unwritten_both is None:
        return _summarise(exp, act, where, bad, name)
    return replace(_summarise(exp, act, where, bad & ~unwritten_both, name), unwritten_both=int(unwritten_both.sum()))


def _infer_dtype(array: np.ndarray) -> str:
    dt = np.asarray(array).dtype
    if dt in _NAME_OF_DTYPE:
        return _NAME_OF_DTYPE[dt]
    if dt.kind in "iu":
        return str(dt.name)
    raise ValueError(f"cannot compare arrays of dtype {dt}")


def _bits_differ(exp: np.ndarray, act: np.ndarray) -> np.ndarray:
    """Elements whose bit patterns differ."""
    bits = UINT_OF_WIDTH.get(exp.dtype.itemsize, exp.dtype) if exp.dtype.kind == "f" else exp.dtype
    differ: np.ndarray = exp.view(bits) != act.view(bits)
    return differ


def _mismatch_mask(exp: np.ndarray, act: np.ndarray, where: np.ndarray, spec: CompareSpec, name: str) -> np.ndarray:
    """Elements that do not match under `spec` (`where`: the indices whose bits differ).
    The tolerance is only evaluated there (identical bits are equal unless they are a
    NaN), so a verified output of 10^8 elements costs one pass, not a float64 copy of
    both sides."""
    is_float = name in FLOAT_DTYPES
    if spec.mode == "exact":
        differ = np.zeros(exp.shape, dtype=bool)
        differ[where] = True
        return differ
    e, a = exp[where], act[where]
    if spec.mode == "ulp" and is_float:
        off = _nan_mask(e, name) | _nan_mask(a, name) | (ulp_distance(e, a) > np.uint64(spec.ulps))
    elif spec.mode == "ulp":
        off = int_distance(e, a) > np.uint64(spec.ulps)
    else:
        e64, a64 = to_float64(e, name), to_float64(a, name)
        with np.errstate(invalid="ignore", over="ignore"):
            close = (a64 == e64) | (np.abs(a64 - e64) <= spec.atol + spec.rtol * np.abs(e64))
        off = ~close  # NaN on either side is never close
    bad = _nan_mask(exp, name) if is_float else np.zeros(exp.shape, dtype=bool)  # equal NaNs still differ
    bad[where] |= off
    return bad


def _nan_mask(array: np.ndarray, name: str) -> np.ndarray:
    if name == "bfloat16":  # exponent all ones, mantissa not zero: on the bits, without decoding
        bf16: np.ndarray = (array.view(np.uint16) & np.uint16(0x7FFF)) > np.uint16(0x7F80)
        return bf16
    mask: np.ndarray = np.isnan(array)
    return mask


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Representable values between `a` and `b` (same float storage dtype), as uint64.

    Works on bit patterns: sign-magnitude is mapped to a signed line (`-0` and `+0`
    both to 0), then the distance is taken with wrap-around so float64 never overflows.
    A bfloat16 array is its uint16 bits, which this handles the same way.
    """
    return int_distance(_ordered(a), _ordered(b))


def _ordered(array: np.ndarray) -> np.ndarray:
    width = array.dtype.itemsize * 8
    bits = array.view(UINT_OF_WIDTH[array.dtype.itemsize]).astype(np.uint64)
    magnitude = (bits & np.uint64((1 << (width - 1)) - 1)).astype(np.int64)
    negative = (bits >> np.uint64(width - 1)) != 0
    ordered: np.ndarray = np.where(negative, -magnitude, magnitude)
    return ordered


def int_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`|a - b|` for integer arrays as uint64, exact for every int64/uint64 pair."""
    common = np.uint64 if a.dtype.kind == "u" and b.dtype.kind == "u" else np.int64
    x, y = a.astype(common), b.astype(common)
    with np.errstate(over="ignore"):
        diff: np.ndarray = np.where(x >= y, x - y, y - x)
    return diff.view(np.uint64)  # int64 wrap-around viewed unsigned is the exact distance


def _summarise(exp: np.ndarray, act: np.ndarray, where: np.ndarray, bad: np.ndarray, name: str) -> Comparison:
    # Elements with identical bits add 0 to both maxima (or nothing, as NaNs): only the
    # elements whose bits differ (`where`) are decoded.
    e64, a64 = to_float64(exp[where], name), to_float64(act[where], name)
    usable = ~(np.isnan(e64) | np.isnan(a64))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(a64 == e64, 0.0, np.abs(a64 - e64))
        rel = np.where(diff == 0, 0.0, diff / np.abs(e64))
    max_abs = float(diff[usable].max()) if usable.any() else 0.0
    max_rel = float(rel[usable].max()) if usable.any() else 0.0
    count = int(np.count_nonzero(bad))
    if count == 0:
        return Comparison(True, max_abs, max_rel, None, 0, exp.size)
    first = int(np.argmax(bad))
    values = to_float64(exp[first : first + 1], name), to_float64(act[first : first + 1], name)
    return Comparison(False, max_abs, max_rel, first, count, exp.size, float(values[0][0]), float(values[1][0]))


def compare_within(
    expected: np.ndarray,
    actual: np.ndarray,
    bound: np.ndarray,
    *,
    dtype: str | None = None,
    unwritten_both: np.ndarray | None = None,
) -> Comparison:
    """Compare `actual` with `expected` element by element within an absolute `bound` of
    the same shape (float64): `|a - e| <= bound`. A NaN on either side is a mismatch
    (unless neither side wrote the element), as in every other mode; a NaN bound accepts
    nothing."""
    name = dtype or _infer_dtype(actual)
    exp, act = np.asarray(expected).reshape(-1), np.asarray(actual).reshape(-1)
    limit = np.asarray(bound, dtype=np.float64).reshape(-1)
    if exp.shape != act.shape or exp.shape != limit.shape:
        raise ValueError(f"shape mismatch: expected {exp.shape}, actual {act.shape}, bound {limit.shape}")
    where = np.flatnonzero(_bits_differ(exp, act))
    e64, a64 = to_float64(exp[where], name), to_float64(act[where], name)
    with np.errstate(invalid="ignore", over="ignore"):
        close = (a64 == e64) | (np.abs(a64 - e64) <= limit[where])
    bad = _nan_mask(exp, name) if name in FLOAT_DTYPES else np.zeros(exp.shape, dtype=bool)
    bad[where] |= ~close
    if unwritten_both is not None:
        bad &= ~unwritten_both
    found = _summarise(exp, act, where, bad, name)
    return found if unwritten_both is None else replace(found, unwritten_both=int(unwritten_both.sum()))
