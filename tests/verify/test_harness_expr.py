"""Size expressions: what evaluates, what is refused, and how errors read."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kxform.errors import SpecError
from kxform.expr import evaluate, parse_expr


@pytest.mark.parametrize(
    ("text", "env", "want"),
    [
        ("ceil_div(N, 16)", {"N": 33}, 3),
        ("ceil_div(N, 16)", {"N": 32}, 2),
        ("round_up(N, 32)", {"N": 33}, 64),
        ("M*K + 1", {"M": 3, "K": 4}, 13),
        ("N / 2", {"N": 7}, 3),
        ("N / 2.0", {"N": 7}, 3.5),
        ("N // 2", {"N": 7}, 3),
        ("N % 5", {"N": 7}, 2),
        ("2 ** 10", {}, 1024),
        ("-(N - 10)", {"N": 4}, 6),
        ("min(N, 1024)", {"N": 4096}, 1024),
        ("max(1, D - N, 0)", {"D": 10, "N": 3}, 7),
        ("min(M, D - 1) - max(1, D - N) + 1", {"M": 5, "N": 7, "D": 9}, 4),
        ("0.02", {}, 0.02),
        (16, {}, 16),
    ],
)
def test_evaluates(text: str | int, env: dict[str, int], want: float) -> None:
    assert evaluate(text, env) == want
    assert type(evaluate(text, env)) is type(want)


def test_variables_exclude_function_names() -> None:
    assert parse_expr("ceil_div(N, TILE) * min(M, 4)").variables == frozenset({"N", "TILE", "M"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("__import__('os')", "unknown function '__import__'"),
        ("N.bit_length()", "unknown function 'N.bit_length'"),
        ("N.real", "'Attribute' is not allowed"),
        ("N[0]", "'Subscript' is not allowed"),
        ("[1, 2]", "'List' is not allowed"),
        ("N if M else K", "'IfExp' is not allowed"),
        ("N < M", "'Compare' is not allowed"),
        ("N and M", "'BoolOp' is not allowed"),
        ("'abc'", "literal 'abc' is not a number"),
        ("True", "literal True is not a number"),
        ("lambda: 1", "'Lambda' is not allowed"),
        ("ceil_div(N)", "ceil_div() takes 2 arguments, got 1"),
        ("min(N)", "min() takes 2 to 16 arguments, got 1"),
        ("max(*N)", "max() takes positional arguments only"),
        ("N +", "syntax error"),
        ("", "empty"),
        ("N & 3", "'BitAnd' is not allowed"),
    ],
)
def test_refuses_anything_else(text: str, message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_expr(text)
    assert message in str(err.value)
    if text:
        assert f"expression '{text}'" in str(err.value)


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("N / 0", {"N": 1}, "division by zero"),
        ("ceil_div(N, 0)", {"N": 1}, "division by zero"),
        ("N * M", {"N": 1}, "unknown variable 'M' (defined: N)"),
        ("2 ** 100", {}, "exponent 100 out of range"),
        ("ceil_div(N, 2.5)", {"N": 1}, "ceil_div() takes integer arguments"),
        ("(-8) ** 0.5", {}, "not a real number"),
        ("1e300 * 1e300", {}, "not finite"),
        ("10.0 ** 64.5 ** 2", {}, "overflow"),
    ],
)
def test_evaluation_errors_name_the_expression(text: str, env: dict[str, int], message: str) -> None:
    with pytest.raises(SpecError) as err:
        evaluate(text, env)
    assert f"expression '{text}'" in str(err.value)
    assert message in str(err.value)


def test_evaluate_int_refuses_floats() -> None:
    with pytest.raises(SpecError, match=r"gives 3.5, expected an integer"):
        parse_expr("N / 2.0").evaluate_int({"N": 7})


def test_huge_integers_are_refused() -> None:
    with pytest.raises(SpecError, match="too large"):
        evaluate("N * N * N * N", {"N": 2**30})


@given(st.integers(0, 10**9), st.integers(1, 10**6))
def test_ceil_div_and_round_up_match_their_definition(n: int, d: int) -> None:
    q = evaluate("ceil_div(n, d)", {"n": n, "d": d})
    assert (q - 1) * d < n <= q * d or (n == 0 and q == 0)
    assert evaluate("round_up(n, d)", {"n": n, "d": d}) == q * d


@given(st.integers(-(10**6), 10**6), st.integers(1, 1000))
def test_integer_slash_is_floor_division(a: int, b: int) -> None:
    assert evaluate("a / b", {"a": a, "b": b}) == a // b
