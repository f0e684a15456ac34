"""Typed parameter spaces and constraints (kxform.engine.params, kxform.expr logic grammar)."""

from __future__ import annotations

import pytest

from kxform.engine.params import Constraint, Param, ParamSpace, UnknownName, hw_env
from kxform.errors import SpecError, UsageError
from kxform.expr import parse_logic
from kxform.hw import load_profile


def test_logic_grammar_chains_and_dotted_names() -> None:
    expr = parse_logic("32 <= bx * by <= hw.max_threads_per_block and not (TILE % 4)")
    assert expr.variables == frozenset({"bx", "by", "hw.max_threads_per_block", "TILE"})
    env = {"bx": 16, "by": 16, "TILE": 8, "hw.max_threads_per_block": 1024}
    assert expr.holds(env)
    assert not expr.holds({**env, "bx": 1, "by": 16})  # 16 < 32
    assert not expr.holds({**env, "bx": 128})  # 128*16 > 1024
    assert not expr.holds({**env, "TILE": 6})


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os')",
        "x.__class__",
        "f(x)",
        "[x]",
        "x if f(y) else z",
        "lambda: 1",
        "'a' < x",
        "'a' + x == 1",
        "x[0]",
        "(x).y.z()",
    ],
)
def test_logic_grammar_refuses_code(text: str) -> None:
    with pytest.raises(SpecError):
        parse_logic(text)


def test_logic_grammar_chooses_with_conditional_expressions() -> None:
    """A launcher's `n < 1024 ? n : 1024` is read as `n if n < 1024 else 1024`: only the
    branch the condition picks is evaluated (a division by zero in the other is not)."""
    expr = parse_logic("n if n < 1024 else 1024 // (n - n)")
    assert expr.evaluate({"n": 300}) == 300 and expr.variables == {"n"}
    with pytest.raises(SpecError, match="division by zero"):
        expr.evaluate({"n": 2000})


def test_arithmetic_grammar_stays_arithmetic() -> None:
    from kxform.expr import parse_expr

    for text in ("a < b", "a and b", "hw.x", "True", "a if b else c"):
        with pytest.raises(SpecError):
            parse_expr(text)


def test_is_pow2_and_division_by_zero() -> None:
    assert parse_logic("is_pow2(T)").holds({"T": 64})
    assert not parse_logic("is_pow2(T)").holds({"T": 48})
    with pytest.raises(SpecError, match="division by zero"):
        parse_logic("N % T == 0").holds({"N": 4, "T": 0})


def test_param_parse_and_domain() -> None:
    tile = Param.ints("TILE", [32, 8, 16, 16], 16, origin="k.cu:3")
    assert tile.values == (8, 16, 32)
    assert tile.parse("32") == 32 and tile.parse("0x10") == 16
    with pytest.raises(UsageError, match=r"TILE=12: not one of \{8, 16, 32\}"):
        tile.parse("12")
    with pytest.raises(UsageError, match="expected an integer"):
        tile.parse("big")
    flag = Param.boolean("vec", False)
    assert flag.parse("true") is True and flag.parse("off") is False
    wide = Param.int_range("unroll", 1, 1 << 20, 1)
    assert wide.describe_values() == "1..1048576" and wide.parse("4096") == 4096
    with pytest.raises(SpecError, match="default"):
        Param.ints("X", [1, 2], 3)
    with pytest.raises(SpecError, match="wrong type"):
        Param("X", "int", (1, "two"), 1)


def test_space_resolve_violations_and_hw() -> None:
    hw = load_profile("h100-sxm")
    space = ParamSpace(
        (Param.ints("bx", [8, 16, 32, 64], 16), Param.ints("by", [8, 16, 32, 64], 16)),
        (
            Constraint.parse("bx * by <= hw.max_threads_per_block", "threads per block", ""),
            Constraint.parse("bx == by", "the tile load assumes a square block", "k.cu:12"),
        ),
    )
    assert space.cardinality() == 16
    config = space.resolve({"bx": "32", "by": "32"})
    assert space.is_valid(config, hw)
    bad = space.resolve({"bx": "64", "by": "32"})
    assert [c.text for c in space.violations(bad, hw)] == ["bx * by <= hw.max_threads_per_block", "bx == by"]
    assert not space.is_valid(space.resolve({"bx": "64", "by": "64"}), hw)
    assert space.label(config) == "bx=32,by=32"
    assert hw_env(hw)["hw.max_threads_per_block"] == 1024
    with pytest.raises(UsageError, match="unknown parameter 'bz'"):
        space.resolve({"bz": "1"})


def test_space_refuses_unknown_names_and_duplicates() -> None:
    with pytest.raises(UnknownName, match="unknown name 'TILE'"):  # its own type: callers key on it, not on words
        ParamSpace((Param.ints("bx", [1], 1),), (Constraint.parse("TILE > 0"),))
    with pytest.raises(SpecError, match="defined twice") as duplicate:
        ParamSpace((Param.ints("bx", [1], 1), Param.ints("bx", [2], 2)))
    assert not isinstance(duplicate.value, UnknownName)


def test_a_constraint_renamed_into_a_composed_space_keeps_its_meaning_and_its_guard() -> None:
    own = Constraint.parse("TILE * TILE <= hw.max_threads_per_block and is_pow2(TILE)", "block limit", "k.cu:3")
    composed = own.renamed({"TILE": "tile.TILE"}, guard="tile")
    assert composed.text == "not (tile) or (tile.TILE * tile.TILE <= hw.max_threads_per_block and is_pow2(tile.TILE))"
    assert composed.params == frozenset({"tile", "tile.TILE"}) and composed.origin == "k.cu:3"
    hw = {"hw.max_threads_per_block": 1024}
    for tile in (8, 32, 48, 64):
        assert composed.holds({**hw, "tile": True, "tile.TILE": tile}) == own.holds({**hw, "TILE": tile})
        assert composed.holds({**hw, "tile": False, "tile.TILE": tile})  # waived while the pass is off
    space = ParamSpace((Param.boolean("tile", False), Param.ints("tile.TILE", (8, 64), 8)), (composed,))
    assert space.violations({"tile": True, "tile.TILE": 64}, load_profile("h100")) == [composed]
    for bad in ("tile..TILE", "tile.", "1tile.TILE"):
        with pytest.raises(SpecError, match="not an identifier"):
            Param.ints(bad, (1,), 1)


def test_an_enum_value_is_compared_as_a_quoted_name() -> None:
    """`loads == "each" or layout == "contiguous"`: the enum's value in == and != only; in
    arithmetic it is an error, never a silent truth."""

    space = ParamSpace(
        (Param.enum("layout", ("contiguous", "strided"), "contiguous"), Param.enum("loads", ("each", "once"), "each")),
        (Constraint.parse('loads == "each" or layout == "contiguous"', "no element is shared"),),
    )
    verdicts = {
        (lay, lo): space.is_valid({"layout": lay, "loads": lo})
        for lay in ("contiguous", "strided")
        for lo in ("each", "once")
    }
    assert verdicts == {
        ("contiguous", "each"): True,
        ("contiguous", "once"): True,
        ("strided", "each"): True,
        ("strided", "once"): False,
    }
    assert parse_logic('layout != "strided"').holds({"layout": "contiguous"})
    with pytest.raises(SpecError, match="arithmetic"):
        parse_logic("layout + 1 > 0").holds({"layout": "strided"})
