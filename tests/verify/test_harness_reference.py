"""Reference functions (loading, output checks) and the three compare modes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from kxform.errors import SpecError
from kxform.harness.compare import compare, ulp_distance
from kxform.harness.dtypes import bf16_to_float32, float_to_bf16
from kxform.harness.inputs import make_inputs
from kxform.harness.model import CompareSpec, KernelSpec
from kxform.harness.reference import compare_outputs, run_reference
from kxform.harness.spec import load_spec

EXACT = CompareSpec("exact")
ULP0 = CompareSpec("ulp", ulps=0)
ULP2 = CompareSpec("ulp", ulps=2)


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_exact_compares_bits() -> None:
    assert compare(f32(1.0, 2.0), f32(1.0, 2.0), EXACT).ok
    signed_zero = compare(f32(0.0), f32(-0.0), EXACT)
    assert not signed_zero.ok and signed_zero.first_mismatch == 0
    nan = f32(np.nan)
    assert compare(nan, nan.copy(), EXACT).ok
    other_nan = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)
    assert not compare(nan, other_nan, EXACT).ok


def test_ulp_mode() -> None:
    one = f32(1.0)
    assert compare(f32(0.0), f32(-0.0), ULP0).ok
    assert not compare(one, np.nextafter(one, f32(2.0)), ULP0).ok
    assert compare(one, np.nextafter(one, f32(2.0)), CompareSpec("ulp", ulps=1)).ok
    nan = f32(np.nan)
    result = compare(nan, nan.copy(), ULP2)
    assert not result.ok and result.mismatches == 1  # NaN never matches outside exact mode
    assert compare(f32(np.inf), f32(np.inf), ULP0).ok
    assert not compare(f32(np.inf), f32(-np.inf), ULP2).ok


def test_allclose_mode() -> None:
    spec = CompareSpec("allclose", rtol=1e-3, atol=1e-6)
    assert compare(f32(1000.0), f32(1000.9), spec).ok
    assert not compare(f32(1000.0), f32(1001.1), spec).ok
    assert not compare(f32(np.nan), f32(np.nan), spec).ok
    assert compare(f32(np.inf), f32(np.inf), spec).ok


def test_mismatch_summary() -> None:
    expected = np.arange(12, dtype=np.float64).reshape(3, 4)
    actual = expected.copy()
    actual[1, 2] += 0.5
    actual[2, 3] = np.nan
    result = compare(expected, actual, CompareSpec("allclose", rtol=0, atol=0.1))
    assert (result.ok, result.mismatches, result.total, result.first_mismatch) == (False, 2, 12, 6)
    assert (result.first_expected, result.first_actual) == (6.0, 6.5)
    assert result.max_abs == 0.5 and result.max_rel == pytest.approx(0.5 / 6)
    assert result.summary().startswith("2 of 12 elements differ; first at index 6 (expected 6.0, got 6.5)")
    assert compare(expected, expected, EXACT).summary().startswith("match (12 elements")


def test_integer_buffers() -> None:
    a = np.array([1, -5, 2**31 - 1], dtype=np.int32)
    assert compare(a, a.copy(), EXACT).ok
    b = a.copy()
    b[1] = -3
    assert not compare(a, b, EXACT).ok
    assert compare(a, b, ULP2).ok and not compare(a, b, CompareSpec("ulp", ulps=1)).ok
    big = np.array([np.iinfo(np.int64).min], dtype=np.int64)
    assert not compare(big, np.array([np.iinfo(np.int64).max]), ULP2).ok


def test_bfloat16_needs_its_dtype() -> None:
    expected = float_to_bf16(f32(1.0, -2.0))
    actual = expected.copy()
    actual[1] += 1  # one bf16 ulp
    assert compare(expected, actual, CompareSpec("ulp", ulps=1), dtype="bfloat16").ok
    result = compare(expected, actual, CompareSpec("allclose", rtol=0, atol=1e-3), dtype="bfloat16")
    assert not result.ok and result.first_actual == float(bf16_to_float32(actual)[1])


def test_shape_and_dtype_mismatch_raise() -> None:
    with pytest.raises(ValueError, match="shape mismatch"):
        compare(f32(1.0), f32(1.0, 2.0), EXACT)
    with pytest.raises(ValueError, match="dtype mismatch"):
        compare(np.zeros(2, np.float64), f32(1.0, 2.0), EXACT)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@given(data=st.data(), steps=st.integers(0, 50))
def test_ulp_distance_counts_representable_steps(dtype: type, data: st.DataObject, steps: int) -> None:
    width = {np.float16: 16, np.float32: 32, np.float64: 64}[dtype]
    start = np.array([data.draw(st.floats(allow_nan=False, allow_infinity=False, width=width))], dtype=dtype)
    walked = start.copy()
    with np.errstate(over="ignore"):
        for _ in range(steps):
            walked = np.nextafter(walked, dtype(np.inf))  # steps over -0 to +tiny: one value
    assume(np.isfinite(walked).all())
    assert ulp_distance(start, walked)[0] == steps
    assert ulp_distance(walked, start)[0] == ulp_distance(start, walked)[0]


@given(
    st.lists(st.floats(-1e6, 1e6, width=64), min_size=1, max_size=20),
    st.floats(0, 1e-2),
    st.floats(0, 1e-2),
    st.floats(-1e-2, 1e-2),
)
def test_allclose_agrees_with_numpy(values: list[float], rtol: float, atol: float, shift: float) -> None:
    expected = np.array(values)
    actual = expected * (1 + shift) + shift
    result = compare(expected, actual, CompareSpec("allclose", rtol=rtol, atol=atol))
    want = np.isclose(actual, expected, rtol=rtol, atol=atol)
    assert result.mismatches == int((~want).sum())


SPEC = """\
version = 1
file = "k.cu"

[kernel.k]
grid = [1]
block = [64]
reference = "ref.py:REFNAME"
compare = { mode = "ulp", ulps = 1 }

[[kernel.k.args]]
name = "x"
kind = "buffer"
dtype = "float32"
count = "N"
role = "in"
fill = { dist = "uniform" }

[[kernel.k.args]]
name = "acc"
kind = "buffer"
dtype = "int32"
count = "N"
role = "inout"
fill = { dist = "int", low = 0, high = 9 }

[[kernel.k.args]]
name = "y"
kind = "buffer"
dtype = "bfloat16"
shape = ["N", 2]
role = "out"
compare = { mode = "allclose", rtol = 1e-2 }

[[kernel.k.args]]
name = "n"
kind = "scalar"
dtype = "int32"
value = "N"

[[kernel.k.sizes]]
name = "small"
N = 10
"""

REF = """
import numpy as np

def good(size, inputs):
    assert "y" not in inputs  # out buffers are not inputs
    x = inputs["x"].astype(np.float64)
    return {"acc": inputs["acc"] + np.int32(size["N"]), "y": np.stack([x, 2 * x], axis=1)}

def missing(size, inputs):
    return {"acc": inputs["acc"]}

def extra(size, inputs):
    return {**good(size, inputs), "x": inputs["x"]}

def bad_shape(size, inputs):
    return {**good(size, inputs), "y": np.zeros(3)}

def bad_dtype(size, inputs):
    return {**good(size, inputs), "acc": inputs["acc"].astype(np.int64)}

def writes_input(size, inputs):
    inputs["x"][0] = 1.0
    return good(size, inputs)

def not_a_dict(size, inputs):
    return [1]

value = 3
"""


def kernel_with(tmp_path: Path, refname: str, module: str = REF) -> KernelSpec:
    (tmp_path / "k.cu").write_text("")
    (tmp_path / "ref.py").write_text(module)
    spec = tmp_path / "k.kxspec.toml"
    spec.write_text(SPEC.replace("REFNAME", refname))
    return load_spec(spec).kernel("k")


def test_reference_runs_and_converts(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, "good")
    launch = kernel.launch("small")
    inputs = make_inputs(kernel, launch)
    expected = run_reference(kernel, launch, inputs)
    assert set(expected) == {"acc", "y"}
    assert expected["acc"].dtype == np.int32 and np.array_equal(expected["acc"], inputs["acc"] + 10)
    assert expected["y"].dtype == np.uint16 and expected["y"].shape == (10, 2)
    assert np.allclose(bf16_to_float32(expected["y"][:, 0]), inputs["x"], rtol=1e-2)
    results = compare_outputs(kernel, launch, expected, {"acc": expected["acc"], "y": expected["y"]})
    assert all(r.ok for r in results.values())
    poisoned = inputs["y"]
    assert isinstance(poisoned, np.ndarray)
    assert not compare_outputs(kernel, launch, expected, {"acc": expected["acc"], "y": poisoned})["y"].ok


@pytest.mark.parametrize(
    ("refname", "message"),
    [
        ("missing", "reference ref.py:missing did not return 'y'"),
        ("extra", "returned 'x', which is not an out/inout buffer"),
        ("bad_shape", "output 'y': shape (3,), buffer is (10, 2)"),
        ("bad_dtype", "output 'acc': dtype int64, buffer is int32 (int32)"),
        ("writes_input", "raised ValueError: assignment destination is read-only"),
        ("not_a_dict", "returned list, expected a dict"),
        ("absent", "reference module ref.py has no function 'absent'"),
        ("value", "reference module ref.py has no function 'value'"),
    ],
)
def test_reference_errors(tmp_path: Path, refname: str, message: str) -> None:
    kernel = kernel_with(tmp_path, refname)
    launch = kernel.launch("small")
    with pytest.raises(SpecError) as err:
        run_reference(kernel, launch, make_inputs(kernel, launch))
    assert message in str(err.value)
    assert "kernel 'k'" in str(err.value)


def test_reference_module_that_fails_to_import(tmp_path: Path) -> None:
    kernel = kernel_with(tmp_path, "good", module="import no_such_module_anywhere\n")
    launch = kernel.launch("small")
    with pytest.raises(SpecError, match=r"importing reference ref\.py failed: ModuleNotFoundError"):
        run_reference(kernel, launch, make_inputs(kernel, launch))


_SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-30, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize(
    "spec",
    [EXACT, ULP0, ULP2, CompareSpec("allclose", rtol=1e-3, atol=1e-6)],
    ids=["exact", "ulp0", "ulp2", "allclose"],
)
@given(
    pairs=st.lists(
        st.tuples(
            st.sampled_from(_SPECIAL) | st.floats(-1e4, 1e4, width=32),
            st.sampled_from(["same", "nudge", "other", "nan"]),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_compare_judges_every_element_as_the_elementwise_definition(
    name: str, spec: CompareSpec, pairs: list[tuple[float, str]]
) -> None:
    """compare() evaluates tolerances only where the bits differ: the verdict, the count,
    the first mismatch and the maxima are what the element-by-element definition gives
    (identical NaNs differ outside exact mode, -0 and +0 are 0 ULP apart but not bit-exact)."""
    encode = (
        (lambda v: float_to_bf16(np.array(v, np.float32)))
        if name == "bfloat16"
        else (lambda v: np.array(v, dtype=name))
    )
    decode = (
        (lambda a: bf16_to_float32(a).astype(np.float64)) if name == "bfloat16" else (lambda a: a.astype(np.float64))
    )
    values = np.array([v for v, _ in pairs])
    exp = encode(values)
    act = exp.copy()
    for i, (_, how) in enumerate(pairs):
        if how == "nudge":
            act[i] = (
                act[i] + np.array(1, act.dtype) if name == "bfloat16" else np.nextafter(act[i], act.dtype.type(np.inf))
            )
        elif how == "other":
            act[i] = encode(np.array([values[i] * 0.5 + 3.0]))[0]
        elif how == "nan":
            act[i] = encode(np.array([np.nan]))[0]
    e, a = decode(exp), decode(act)
    bits = exp.view(f"u{exp.dtype.itemsize}") != act.view(f"u{act.dtype.itemsize}")
    if spec.mode == "exact":
        want = bits
    elif spec.mode == "ulp":
        want = np.isnan(e) | np.isnan(a) | (ulp_distance(exp, act) > spec.ulps)
    else:
        with np.errstate(invalid="ignore", over="ignore"):
            want = ~((a == e) | (np.abs(a - e) <= spec.atol + spec.rtol * np.abs(e)))
    got = compare(exp, act, spec, dtype=name)
    assert got.mismatches == int(want.sum()) and got.ok == (not want.any())
    assert got.first_mismatch == (int(np.argmax(want)) if want.any() else None)
    usable = ~(np.isnan(e) | np.isnan(a))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(a == e, 0.0, np.abs(a - e))
        rel = np.where(diff == 0, 0.0, diff / np.abs(e))
    assert got.max_abs == (float(diff[usable].max()) if usable.any() else 0.0) or np.isnan(got.max_abs)
    assert got.max_rel == (float(rel[usable].max()) if usable.any() else 0.0) or np.isnan(got.max_rel)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64, np.dtype("V12")])
def test_poison_mask_finds_whole_poisoned_elements_only(dtype: object) -> None:
    """One word per element where the size allows, bytes otherwise: a partly poisoned
    element is written."""
    from kxform.runtime.base import POISON_BYTE, poison_mask

    array = np.zeros(6, dtype=dtype)
    raw = array.view(np.uint8).reshape(6, -1)
    raw[1] = POISON_BYTE
    raw[4] = POISON_BYTE
    raw[2, 0] = POISON_BYTE  # only one byte: written
    assert poison_mask(array).tolist() == [False, True, raw.shape[1] == 1, False, True, False]
