"""Element types of harness arguments and their NumPy representation.

NumPy has no bfloat16, and kxform does not depend on a package that adds one, so a
bfloat16 buffer is a `uint16` array holding the raw bf16 bits (the upper half of the
float32 with the same value). `bf16_to_float32` and `float_to_bf16` convert; rounding
to bf16 is round-to-nearest-even, as `__float2bfloat16` does on the device.
"""

from __future__ import annotations

import re

import numpy as np

NUMPY_DTYPES: dict[str, np.dtype] = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),  # raw bf16 bits, see module docstring
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
}
"""Spec dtype name to the NumPy dtype of the array that holds it."""

DTYPE_NAMES: tuple[str, ...] = tuple(NUMPY_DTYPES)

FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
INT_DTYPES = frozenset(DTYPE_NAMES) - FLOAT_DTYPES

UINT_OF_WIDTH: dict[int, np.dtype] = {
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
}


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype for spec dtype `name` (bfloat16: uint16 bits)."""
    return NUMPY_DTYPES[name]


def is_float(name: str) -> bool:
    """Whether spec dtype `name` is a floating-point type (bfloat16 included)."""
    return name in FLOAT_DTYPES


def int_range(name: str) -> tuple[int, int]:
    """Inclusive value range of integer spec dtype `name`."""
    info = np.iinfo(NUMPY_DTYPES[name])
    return int(info.min), int(info.max)


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """Values of bf16 `bits` (uint16) as float32; exact."""
    wide: np.ndarray = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return wide.view(np.float32)


def float_to_bf16(values: np.ndarray) -> np.ndarray:
    """bf16 bits (uint16) nearest to `values`, ties to even; NaN stays a quiet NaN.

    float64 input is first rounded to float32, which can differ from a direct rounding
    in the last bf16 bit for values within 2**-24 relative of a tie; harness
    comparisons of bf16 data always allow at least that much.
    """
    single = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    bits = single.view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded: np.ndarray = ((bits + np.uint32(0x7FFF) + lsb) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(single)
    if nan.any():
        quiet = ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
        rounded = np.where(nan, quiet, rounded)
    return rounded


def to_storage(values: np.ndarray, name: str) -> np.ndarray:
    """`values` converted to the array representation of spec dtype `name`."""
    if name == "bfloat16":
        return float_to_bf16(values)
    return np.asarray(values).astype(NUMPY_DTYPES[name])


def to_float64(array: np.ndarray, name: str) -> np.ndarray:
    """Values of an array of spec dtype `name` as float64 (decoding bf16 bits)."""
    if name == "bfloat16":
        return bf16_to_float32(array).astype(np.float64)
    return np.asarray(array).astype(np.float64)


# C spellings of the element types a harness dtype can stand for (pointee of a buffer
# parameter, or a scalar parameter's type), used to check a spec against the kernel.
CTYPE_DTYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "int": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "int64_t": "int64",
    "long long": "int64",
    "uint64_t": "uint64",
    "unsigned long long": "uint64",
    "int8_t": "int8",
    "char": "int8",
    "uint8_t": "uint8",
    "unsigned char": "uint8",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "short": "int16",
    "int16_t": "int16",
    "size_t": "uint64",
    # LP64 (Linux, where nvcc's host compiler and the CPU runtime run): `long` is 64 bits
    "long": "int64",
    "long int": "int64",
    "signed long": "int64",
    "unsigned long": "uint64",
    "unsigned long int": "uint64",
    "long long int": "int64",
    "unsigned long long int": "uint64",
    "ptrdiff_t": "int64",
    "ssize_t": "int64",
    "int64": "int64",
    "uint": "uint32",
    "ushort": "uint16",
    "unsigned short": "uint16",
}


def base_ctype(ctype: str) -> str:
    """`const float* __restrict__` -> `float`: the element type without qualifiers."""
    words = [
        w
        for w in re.sub(r"[*&]", " ", ctype).split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")
    ]
    return " ".join(words)
