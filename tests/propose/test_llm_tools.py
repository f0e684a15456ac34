"""Tool schemas from typed parameter spaces, kxform's own checks behind them, and cost."""

from __future__ import annotations

from pathlib import Path

import pytest

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed: pip install 'kxform[llm]'")

from kxform.engine.params import Constraint, Param, ParamSpace  # noqa: E402
from kxform.engine.pass_api import PassContext, Provenance, RunOptions  # noqa: E402
from kxform.frontend.cuda import parse_model  # noqa: E402
from kxform.frontend.source import read_source  # noqa: E402
from kxform.hw import load_profile  # noqa: E402
from kxform.log.remarks import RemarkSink  # noqa: E402
from kxform.passes.swizzle import Swizzle  # noqa: E402
from kxform.propose.answer import Answer, BadAnswer, read_tool_input  # noqa: E402
from kxform.propose.cost import PriceTable, Usage  # noqa: E402
from kxform.propose.tools import tool_for  # noqa: E402

from conftest import CORPORA  # noqa: E402

TILE = ParamSpace(
    (
        Param.int_range("tile", 1, 1000, 16),
        Param.enum("order", ("row", "col"), "row"),
        Param.boolean("vectorize", False),
    ),
    (
        Constraint.parse("tile % 16 == 0", "the loads are 16-wide"),
        Constraint.parse("tile * tile <= hw.max_threads_per_block", "one thread per element"),
    ),
)


CLAUDE = Provenance("claude", model="test", cost_usd=0.01, tokens=900, evidence="predicted")


def space_of(pass_: Swizzle, hw: str = "h100") -> ParamSpace:
    """Swizzle's space for a 2-D kernel (sgemm_tiled), as a proposer is given it."""
    model = parse_model(read_source(str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu")))
    ctx = PassContext(model, load_profile(hw), RunOptions(), RemarkSink())
    return pass_.space(ctx, pass_.analyse(ctx)["sgemm_tiled"])


def _input(**values: object) -> dict[str, object]:
    return {"last_attempt": "a", "expectation": "b", **values}


def test_every_generated_schema_is_a_strict_valid_json_schema() -> None:
    for tool in (tool_for("swizzle", space_of(Swizzle())), tool_for("tile", TILE)):  # type: ignore[arg-type]
        jsonschema.Draft202012Validator.check_schema(tool.schema)
        schema = tool.schema
        assert schema["additionalProperties"] is False and set(schema["required"]) == set(schema["properties"])
        assert tool.to_param()["strict"] is True and tool.choice() == {"type": "tool", "name": tool.name}
        assert {"last_attempt", "expectation"} <= set(schema["properties"])
        assert "minimum" not in str(schema) and "maximum" not in str(schema)  # ranges are kxform's to check


def test_small_domains_become_enums_and_wide_ones_plain_integers() -> None:
    swizzle = tool_for("swizzle", space_of(Swizzle())).schema["properties"]  # type: ignore[arg-type]
    assert swizzle["group"]["anyOf"][0]["enum"] == list(range(1, 65)) and swizzle["group"]["anyOf"][1] == {
        "type": "null"
    }
    assert "custom" in swizzle["pattern"]["enum"] and "row" not in swizzle["pattern"]["enum"]
    assert swizzle["formula"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    tile = tool_for("tile", TILE).schema["properties"]
    assert tile["tile"]["type"] == "integer" and "enum" not in tile["tile"] and "1..1000" in tile["tile"]["description"]
    assert tile["vectorize"]["type"] == "boolean"


@pytest.mark.parametrize(
    "values, kind, words",
    [
        ({"tile": 1001, "order": "row", "vectorize": False}, "parameter", "not one of 1..1000"),
        ({"tile": 24, "order": "row", "vectorize": False}, "constraint", "tile % 16 == 0"),
        ({"tile": 48, "order": "row", "vectorize": False}, "constraint", "max_threads_per_block"),
        ({"tile": 16, "order": "diagonal", "vectorize": False}, "schema", "is not one of"),
        ({"tile": 16, "order": "row", "vectorize": "yes"}, "schema", "is not of type 'boolean'"),
    ],
)
def test_ranges_divisibility_and_limits_are_checked_by_kxform(values: dict, kind: str, words: str) -> None:
    """The schema lets `tile` be any integer; kxform holds the range, the divisibility
    and the hardware limit."""
    tool = tool_for("tile", TILE)
    got = read_tool_input(_input(**values), tool, "k", load_profile("h100"), CLAUDE)
    assert isinstance(got, BadAnswer) and got.kind == kind and words in got.reason, got


def test_an_accepted_answer_becomes_a_typed_proposal() -> None:
    tool = tool_for("tile", TILE)
    got = read_tool_input(_input(tile=32, order="col", vectorize=True), tool, "k", load_profile("h100"), CLAUDE)
    assert isinstance(got, Answer) and got.config == {"tile": 32, "order": "col", "vectorize": True}
    assert got.proposal.values == (("tile", 32), ("order", "col"), ("vectorize", True))
    assert got.proposal.label() == "tile{tile=32,order=col,vectorize=true}"
    assert got.proposal.proposer == "claude" and got.proposal.provenance == CLAUDE
    assert got.proposal.to_json()["provenance"] == {
        "proposer": "claude",
        "evidence": "predicted",
        "model": "test",
        "cost_usd": 0.01,
        "tokens": 900,
    }


def test_a_formula_answer_carries_its_text_and_digest() -> None:
    tool = tool_for("swizzle", space_of(Swizzle()))
    data = _input(pattern="custom", group=None, along=None, xcds=None, formula="lx = bx; ly = by")
    got = read_tool_input(data, tool, "k", load_profile("h100"), CLAUDE)
    assert isinstance(got, Answer) and got.proposal.payload == "lx = bx; ly = by"
    assert got.proposal.label().startswith("swizzle{pattern=custom,formula=")
    xcd = read_tool_input(
        _input(pattern="xcd", group=None, along=None, xcds=None, formula=None),
        tool,
        "k",
        load_profile("mi300x"),
        CLAUDE,
    )
    assert isinstance(xcd, Answer) and xcd.config == {"pattern": "xcd", "xcds": 8}  # null: the profile's value


def test_cost_per_token_type_and_unknown_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = PriceTable()
    raw = {
        "input_tokens": 1000,
        "output_tokens": 200,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 10000,
    }
    usage = table.usage("claude-opus-4-5", raw, cached=False)
    assert usage.cost_usd == pytest.approx((1000 * 5 + 200 * 25 + 3000 * 6.25 + 10000 * 0.5) / 1e6)
    assert table.usage("claude-opus-4-5", raw, cached=True).cost_usd == 0
    unknown = table.usage("claude-someday-9", raw, cached=False)
    assert unknown.cost_usd is None and unknown.input_tokens == 1000 and "cost unknown" in unknown.describe()
    assert (usage + unknown).cost_usd is None and (usage + usage).requests == 2
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."claude-someday-9"]\ninput = 1\noutput = 2\ncache_write = 0\ncache_read = 0\n')
    monkeypatch.setenv("KXFORM_LLM_PRICES", str(prices))
    assert PriceTable.load().usage("claude-someday-9", raw, False).cost_usd == pytest.approx(1400 / 1e6)
    assert Usage().to_json()["cost_usd"] == 0
