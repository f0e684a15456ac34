"""Input generation: deterministic per arg, every distribution, valid CSR, poisoned outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kxform.errors import SpecError
from kxform.harness.dtypes import bf16_to_float32, float_to_bf16
from kxform.harness.inputs import csr_structure, make_inputs, rng_for
from kxform.harness.launch import CsrDims
from kxform.harness.model import KernelSpec
from kxform.harness.spec import load_spec
from kxform.runtime.base import count_unwritten

HEADER = """\
version = 1
file = "k.cu"

[kernel.k]
grid = ["ceil_div(N, 64)"]
block = [64]
"""

ARGS = {
    "u": 'dtype = "float32"\ncount = "N"\nrole = "in"\nfill = { dist = "uniform", low = 2.0, high = 3.0 }',
    "g": 'dtype = "float64"\nshape = ["N", 4]\nrole = "in"\nfill = { dist = "normal", mean = 5.0, std = 0.5 }',
    "h": 'dtype = "float16"\ncount = "N"\nrole = "inout"\nfill = { dist = "uniform" }',
    "b": 'dtype = "bfloat16"\ncount = "N"\nrole = "in"\nfill = { dist = "uniform", low = -4.0, high = 4.0 }',
    "i": 'dtype = "int8"\ncount = "N"\nrole = "in"\nfill = { dist = "int", low = -3, high = 3 }',
    "s": 'dtype = "float32"\ncount = "N"\nrole = "in"\nfill = { dist = "sorted", low = 0, high = 100 }',
    "si": 'dtype = "int32"\ncount = "N"\nrole = "in"\nfill = { dist = "sorted", low = -50, high = 50 }',
    "c": 'dtype = "int32"\ncount = "N"\nrole = "inout"\nfill = { dist = "const", value = 0 }',
    "cb": 'dtype = "bfloat16"\ncount = 3\nrole = "in"\nfill = { dist = "const", value = 1.5 }',
    "o": 'dtype = "float32"\ncount = "N"\nrole = "out"',
    "ob": 'dtype = "bfloat16"\ncount = "N"\nrole = "out"',
    "n": 'kind = "scalar"\ndtype = "int32"\nvalue = "N"',
    "alpha": 'kind = "scalar"\ndtype = "bfloat16"\nvalue = 0.1',
}

SIZES = """
[[kernel.k.sizes]]
name = "small"
N = 1000

[[kernel.k.sizes]]
name = "tiny"
N = 3
"""


def spec_text(names: list[str], extra: str = "") -> str:
    parts = [HEADER]
    for name in names:
        body = ARGS[name]
        kind = "" if "kind =" in body else 'kind = "buffer"\n'
        parts.append(f'\n[[kernel.k.args]]\nname = "{name}"\n{kind}{body}\n')
    return "".join(parts) + extra + SIZES


def load(tmp_path: Path, text: str) -> KernelSpec:
    (tmp_path / "k.cu").write_text("")
    path = tmp_path / "k.kxspec.toml"
    path.write_text(text)
    return load_spec(path).kernel("k")


@pytest.fixture
def kernel(tmp_path: Path) -> KernelSpec:
    return load(tmp_path, spec_text(list(ARGS)))


def test_every_distribution(kernel: KernelSpec) -> None:
    inputs = make_inputs(kernel, kernel.launch("small"))
    assert list(inputs) == list(ARGS)
    u = inputs["u"]
    assert u.dtype == np.float32 and u.shape == (1000,) and u.min() >= 2.0 and u.max() < 3.0
    g = inputs["g"]
    assert g.dtype == np.float64 and g.shape == (1000, 4)
    assert abs(g.mean() - 5.0) < 0.1 and abs(g.std() - 0.5) < 0.1
    assert inputs["h"].dtype == np.float16 and np.abs(inputs["h"]).max() <= 1.0
    b = inputs["b"]
    assert b.dtype == np.uint16
    values = bf16_to_float32(b)
    assert values.min() >= -4.0 and values.max() <= 4.0 and len(np.unique(values)) > 100
    i = inputs["i"]
    assert i.dtype == np.int8 and set(np.unique(i)) == set(range(-3, 4))
    assert np.all(np.diff(inputs["s"]) >= 0) and inputs["s"].dtype == np.float32
    assert np.all(np.diff(inputs["si"]) >= 0) and inputs["si"].min() >= -50 and inputs["si"].max() <= 50
    assert not inputs["c"].any() and inputs["c"].dtype == np.int32
    assert list(bf16_to_float32(inputs["cb"])) == [1.5, 1.5, 1.5]
    assert inputs["n"] == np.int32(1000) and isinstance(inputs["n"], np.int32)
    assert inputs["alpha"] == float_to_bf16(np.array([0.1]))[0]


def test_out_buffers_are_poisoned(kernel: KernelSpec) -> None:
    inputs = make_inputs(kernel, kernel.launch("small"))
    for name in ("o", "ob"):
        out = inputs[name]
        assert isinstance(out, np.ndarray)
        assert np.all(out.view(np.uint8) == 0xFF)
        assert count_unwritten(out) == 1000
    assert np.isnan(inputs["o"]).all()


def test_deterministic_and_seeded(kernel: KernelSpec) -> None:
    launch = kernel.launch("small")
    first, again = make_inputs(kernel, launch), make_inputs(kernel, launch)
    other = make_inputs(kernel, launch, seed=99)
    for name in ("u", "g", "h", "b", "i"):
        assert np.array_equal(first[name], again[name])
        assert not np.array_equal(first[name], other[name])


def test_adding_an_arg_keeps_the_others(tmp_path: Path) -> None:
    (tmp_path / "small").mkdir()
    small = load(tmp_path / "small", spec_text(["u", "o"]))
    large = load(tmp_path, spec_text(["i", "g", "u", "o"]))
    a = make_inputs(small, small.launch("small"))
    b = make_inputs(large, large.launch("small"))
    assert np.array_equal(a["u"], b["u"])


def test_npy_fill(tmp_path: Path) -> None:
    np.save(tmp_path / "data.npy", np.arange(3, dtype=np.float32))
    text = spec_text(["o"]).replace(
        "\n[[kernel.k.sizes]]",
        '\n[[kernel.k.args]]\nname = "d"\nkind = "buffer"\ndtype = "float32"\ncount = "N"\nrole = "in"\n'
        'fill = { dist = "npy", path = "data.npy" }\n\n[[kernel.k.sizes]]',
        1,
    )
    kernel = load(tmp_path, text)
    assert list(make_inputs(kernel, kernel.launch("tiny"))["d"]) == [0.0, 1.0, 2.0]
    with pytest.raises(SpecError, match=r"data\.npy has 3 elements, buffer needs 1000"):
        make_inputs(kernel, kernel.launch("small"))
    np.save(tmp_path / "data.npy", np.arange(3, dtype=np.int64))
    with pytest.raises(SpecError, match=r"data\.npy holds int64, buffer is float32"):
        make_inputs(kernel, kernel.launch("tiny"))


CSR = """
[[kernel.k.args]]
name = "row_ptr"
kind = "buffer"
dtype = "int32"
role = "in"
fill = { dist = "csr", part = "row_ptr", group = "A", rows = "N", cols = "C", nnz_per_row = "Z" }

[[kernel.k.args]]
name = "col_idx"
kind = "buffer"
dtype = "int64"
role = "in"
fill = { dist = "csr", part = "col_idx", group = "A" }

[[kernel.k.args]]
name = "vals"
kind = "buffer"
dtype = "float32"
role = "in"
fill = { dist = "csr", part = "values", group = "A", low = 1.0, high = 2.0 }
"""


def check_csr(row_ptr: np.ndarray, col_idx: np.ndarray, rows: int, cols: int, nnz_per_row: int) -> None:
    assert row_ptr.shape == (rows + 1,)
    assert row_ptr[0] == 0 and row_ptr[-1] == rows * nnz_per_row == col_idx.size
    lengths = np.diff(row_ptr)
    assert lengths.min() >= 0 and lengths.max() <= cols
    assert col_idx.size == 0 or (col_idx.min() >= 0 and col_idx.max() < cols)
    for r in range(rows):
        row = col_idx[row_ptr[r] : row_ptr[r + 1]]
        assert np.all(np.diff(row) > 0), f"row {r} not strictly ascending: {row}"


def test_csr_through_spec(tmp_path: Path) -> None:
    text = spec_text(["o"], CSR).replace("N = 1000", "N = 1000\nC = 50\nZ = 7").replace("N = 3", "N = 3\nC = 2\nZ = 2")
    kernel = load(tmp_path, text)
    for size in ("small", "tiny"):
        launch = kernel.launch(size)
        inputs = make_inputs(kernel, launch)
        v = launch.variables
        assert inputs["row_ptr"].dtype == np.int32 and inputs["col_idx"].dtype == np.int64
        check_csr(inputs["row_ptr"], inputs["col_idx"], v["N"], v["C"], v["Z"])
        assert inputs["vals"].shape == (v["N"] * v["Z"],)
        assert inputs["vals"].min() >= 1.0 and inputs["vals"].max() < 2.0
    lengths = np.diff(make_inputs(kernel, kernel.launch("small"))["row_ptr"])
    assert len(set(lengths)) > 3  # row lengths vary, as in real matrices


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.data(), st.integers(0, 2**32))
def test_csr_structure_is_valid(rows: int, cols: int, data: st.DataObject, seed: int) -> None:
    nnz = data.draw(st.integers(0, cols))
    row_ptr, col_idx = csr_structure(CsrDims(rows, cols, nnz), rng_for(seed, "csr:A"))
    check_csr(row_ptr, col_idx, rows, cols, nnz)


def test_full_rows_are_dense() -> None:
    row_ptr, col_idx = csr_structure(CsrDims(5, 4, 4), rng_for(0, "x"))
    assert list(col_idx) == [0, 1, 2, 3] * 5 and list(np.diff(row_ptr)) == [4] * 5


def test_negative_seed_is_refused(kernel: KernelSpec) -> None:
    with pytest.raises(SpecError, match="seed must be >= 0"):
        make_inputs(kernel, kernel.launch("tiny"), seed=-1)


@given(st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_bf16_rounding_is_nearest_even(value: float) -> None:
    single = np.array([value], dtype=np.float32)
    low = np.uint16(single.view(np.uint32)[0] >> 16)  # truncated toward zero
    candidates = [low, np.uint16(low + 1)]
    # IEEE rounding treats infinity as the value 2**128 just past the largest finite one.
    values = [float(bf16_to_float32(np.array([c]))[0]) for c in candidates]
    errors = [abs((np.copysign(2.0**128, v) if np.isinf(v) else v) - value) for v in values]
    if errors[0] == errors[1]:
        want = candidates[0] if candidates[0] % 2 == 0 else candidates[1]
    else:
        want = candidates[int(np.argmin(errors))]
    assert float_to_bf16(single)[0] == want


def test_bf16_ties_round_to_even() -> None:
    # 1 + 2**-8 lies halfway between bf16 1.0 (even) and 1 + 2**-7 (odd).
    assert float_to_bf16(np.array([1.0 + 2.0**-8], dtype=np.float32))[0] == 0x3F80
    # 1 + 3 * 2**-8 lies halfway between 1 + 2**-7 (odd) and 1 + 2**-6 (even).
    assert float_to_bf16(np.array([1.0 + 3 * 2.0**-8], dtype=np.float32))[0] == 0x3F82
    nan = float_to_bf16(np.array([np.nan], dtype=np.float32))[0]
    assert np.isnan(bf16_to_float32(np.array([nan]))[0])
