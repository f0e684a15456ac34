from __future__ import annotations

from dataclasses import dataclass

import pytest

from kxform.errors import UsageError
from kxform.engine.pass_api import parse_pass_spec, split_pipeline
from kxform.passes.swizzle import Swizzle
from kxform.engine.registry import Registry, default_registry, order_passes


def test_swizzle_is_discovered_and_spec_round_trips() -> None:
    registry = default_registry()
    assert "swizzle" in registry.names()
    spec = "swizzle{pattern=grouped,group=4}"
    parsed = registry.parse(spec)
    assert parsed == Swizzle(pattern="grouped", group=4)
    assert parsed.spec() == spec
    assert registry.parse(parsed.spec()) == parsed
    assert registry.parse("swizzle").spec() == "swizzle"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("swizle", r"unknown pass 'swizle' \(passes: (.*, )?swizzle"),
        ("swizzle{pattern}", "malformed option 'pattern'"),
        ("swizzle{colour=red}", "unknown option 'colour'"),
        ("swizzle{pattern=a,pattern=b}", "given twice"),
        ("swizzle{pattern=a", "unbalanced braces"),
        ("swizzle,swizzle", "given twice"),
    ],
)
def test_bad_specs_are_usage_errors(text: str, message: str) -> None:
    with pytest.raises(
        UsageError, match=message if "\\(" in message else message.replace("(", r"\(").replace("{", r"\{")
    ):
        default_registry().pipeline(text)


def test_split_pipeline_keeps_commas_inside_braces() -> None:
    assert split_pipeline("a, b{x=1,y=2},c") == ["a", "b{x=1,y=2}", "c"]
    assert parse_pass_spec("b{x=1,y=2}") == ("b", {"x": "1", "y": "2"})


@dataclass(frozen=True)
class _Tile(Swizzle):
    """A second pass (a Swizzle variant) that declares it must run after swizzle."""

    name = "tile-test"  # type: ignore[assignment]
    requires = ("swizzle",)


@dataclass(frozen=True)
class _Loop(Swizzle):
    name = "loop-test"  # type: ignore[assignment]
    requires = ("tile-test",)


def test_pipeline_orders_by_declared_dependencies_and_rejects_cycles() -> None:
    registry = default_registry()
    registry.register("tile-test", lambda: _Tile, "test")
    ordered = registry.pipeline("tile-test,swizzle")
    assert [p.name for p in ordered] == ["swizzle", "tile-test"]

    @dataclass(frozen=True)
    class _Swz(Swizzle):
        requires = ("loop-test",)

    with pytest.raises(UsageError, match="cycle"):
        order_passes([_Swz(), _Tile(), _Loop()])


def test_duplicate_registration_fails_loudly() -> None:
    registry = Registry()
    registry.register("x", lambda: Swizzle, "first")
    with pytest.raises(UsageError, match="registered twice: by first and by second"):
        registry.register("x", lambda: Swizzle, "second")
