"""The `unroll` pass: a loop's `#pragma unroll` factor as a parameter, rewritten byte for
byte as reviewed, refused with its reason, its spec round-tripped, its space exposed
through the Pass API, and its rewrites verified bit-exact on the CPU runtime."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.api import space_of
from kxform.engine.rewritten import edited_file
from kxform.engine.pass_api import Outcome, PassContext, RunOptions
from kxform.engine.policy import EXACT
from kxform.engine.registry import default_registry
from kxform.errors import CheckFailed
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import find_spec_for, load_spec
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink
from kxform.verify.differential import verify_pair
from swizzle_helpers import outcomes, remark_names, rewrite

SGEMM = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
GOLDEN = Path(__file__).parents[1] / "golden" / "sgemm_tiled.unroll4.cu"
INNER = "loop2"
"""The `for (int k = 0; k < TILE; ++k)` loop of sgemm_tiled, under a bare `#pragma unroll`."""


def test_golden_rewrite_changes_only_the_pragma() -> None:
    result = rewrite(SGEMM.read_bytes(), f"unroll{{{INNER}=4}}", path=str(SGEMM))
    assert outcomes(result)["sgemm_tiled"] is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == GOLDEN.read_bytes()
    assert result.diff().count("\n-") == 1 and "-#pragma unroll\n+#pragma unroll 4\n" in result.diff()
    again = rewrite(result.new_data, f"unroll{{{INNER}=4}}", path=str(SGEMM))
    assert not again.changed and outcomes(again)["sgemm_tiled"] is Outcome.UNCHANGED


def test_a_pragma_is_added_or_removed_where_asked() -> None:
    text = (
        "__global__ void k(float* a, int n) {\n    for (int i = 0; i < 8; ++i)\n        a[i] += 1.0f;\n"
        "#pragma unroll 2\n    for (int j = 0; j < n; ++j) a[j] *= 2.0f;\n}\n"
    )
    result = rewrite(text, "unroll{loop1=full,loop2=auto}")
    assert result.new_data.decode() == text.replace("    for (int i", "    #pragma unroll\n    for (int i").replace(
        "#pragma unroll 2\n", ""
    )
    again = rewrite(result.new_data, "unroll{loop1=full,loop2=auto}")  # names survive the inserted line
    assert not again.changed and outcomes(again)["k"] is Outcome.UNCHANGED


def test_refusals_name_their_reason() -> None:
    one_line = "__global__ void k(float* a) { for (int i = 0; i < 4; ++i) a[i] = 0.0f; }\n"
    result = rewrite(one_line, "unroll{factor=2}")
    assert outcomes(result)["k"] is Outcome.MISSED and "NoUnrollableLoop" in remark_names(result)
    assert not result.changed
    beyond = rewrite(SGEMM.read_bytes(), f"unroll{{{INNER}=32}}", path=str(SGEMM))
    (missed,) = [r for r in beyond.remarks if r.name == "BadValue"]
    assert f"{INNER}=32: not one of {{auto, 1, 2, 4, 8, 16, full}}" in missed.message and not beyond.changed
    elsewhere = rewrite(SGEMM.read_bytes(), "unroll{loop9=4}", path=str(SGEMM))
    (missed,) = [r for r in elsewhere.remarks if r.name == "UnknownParameter"]
    assert "loop9 is not a parameter of any kernel in this file (parameters: loop1, loop2)" in missed.message
    nothing = rewrite(SGEMM.read_bytes(), "unroll", path=str(SGEMM))
    assert "NoEvidence" in remark_names(nothing) and not nothing.changed


@pytest.mark.parametrize("factor", ["0", "-2", "abc"])
def test_a_factor_no_loop_can_have_is_a_usage_error_naming_it(factor: str, tmp_path: Path) -> None:
    """`unroll{factor=0|-2|abc}` is never a factor: exit 2, one line, nothing read or
    written (it exited 0, the kernel reported as having no factor requested)."""
    from conftest import run_cli

    shutil.copy(SGEMM, tmp_path / "k.cu")
    proc = run_cli("apply", "--pass", f"unroll{{factor={factor}}}", "--verify", "static", "k.cu", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr == (
        f"kxform: error: pass unroll: factor='{factor}': expected auto, full or a positive integer (1, 2, 4, ...)\n"
    )
    assert (tmp_path / "k.cu").read_bytes() == SGEMM.read_bytes() and not (tmp_path / ".kxform").exists()


def test_a_factor_no_loop_of_the_kernel_offers_is_refused_not_ignored() -> None:
    result = rewrite(SGEMM.read_bytes(), "unroll{factor=3}", path=str(SGEMM))
    (missed,) = [r for r in result.remarks if r.name == "BadValue"]
    assert "factor=3: no loop of this kernel offers it (1, 2, 4, 8, 16, auto, full)" in missed.message
    assert outcomes(result)["sgemm_tiled"] is Outcome.MISSED and not result.changed
    assert outcomes(rewrite(SGEMM.read_bytes(), "unroll{factor=4}", path=str(SGEMM)))["sgemm_tiled"] is Outcome.APPLIED


def test_the_check_rejects_a_planted_factor_beyond_the_trip_count() -> None:
    model = parse_model(validate_bytes(str(SGEMM), SGEMM.read_bytes()))
    ctx = PassContext(model, load_profile("h100"), RunOptions(), RemarkSink())
    pass_ = default_registry().parse("unroll")
    analysis = pass_.analyse(ctx)["sgemm_tiled"]
    good = pass_.proposal_for(ctx, analysis, {INNER: "8"})
    assert [r.name for r in pass_.check(ctx, good)] == ["factors"]
    planted = good.__class__.of("unroll", "sgemm_tiled", {INNER: "64"}, "planted")
    with pytest.raises(CheckFailed, match="not one of"):
        pass_.check(ctx, planted)
    assert pass_.verify_policy(ctx, good, edited_file(ctx, pass_, [good]).model).compare == EXACT


def test_factors_of_a_loop_bounded_through_a_name_survive_a_new_value_of_the_name() -> None:
    """`for (k = 0; k < TILE; ++k)`: in a composed tune the tile pass changes TILE, so the
    factors offered must not depend on its value: with TILE = 4 every factor the space
    offered at TILE = 16 still passes the check (a factor past the trip count unrolls fully)."""
    space = space_of(SGEMM.read_bytes(), "sgemm_tiled", "unroll", path=str(SGEMM))
    assert "through TILE" in space.param(INNER).doc
    smaller = SGEMM.read_bytes().replace(b"#define TILE 16", b"#define TILE 4")
    assert smaller != SGEMM.read_bytes()
    model = parse_model(validate_bytes(str(SGEMM), smaller))
    ctx = PassContext(model, load_profile("h100"), RunOptions(), RemarkSink())
    pass_ = default_registry().parse("unroll")
    analysis = pass_.analyse(ctx)["sgemm_tiled"]
    for factor in space.param(INNER).values:
        assert [r.name for r in pass_.check(ctx, pass_.proposal_for(ctx, analysis, {INNER: factor}))] == ["factors"]


def test_spec_round_trip_and_space_through_the_pass_api() -> None:
    registry = default_registry()
    assert "unroll" in registry.names()
    for spec in ("unroll{loop2=4}", "unroll{loop1=full,loop3=auto}", "unroll{factor=8}", "unroll"):
        assert registry.parse(spec).spec() == spec
    space = space_of(SGEMM.read_bytes(), "sgemm_tiled", "unroll", path=str(SGEMM))
    assert space.names == ("loop1", INNER) and space.param(INNER).doc.startswith("line 47: `for (k ...)`")
    assert space.param("loop1").values == ("auto", "1", "2", "4", "8", "16")
    assert space.param("loop1").default == "auto"
    assert space.param(INNER).values[-1] == "full" and space.param(INNER).default == "full"


@pytest.mark.slow
def test_every_factor_of_the_inner_loop_verifies_bit_exact_on_the_cpu_runtime(  # type: ignore[no-untyped-def]
    tmp_path: Path, cpu
) -> None:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    path = tmp_path / "sgemm_tiled" / "sgemm_tiled.cu"
    spec_path = find_spec_for(path)
    assert spec_path is not None
    spec = load_spec(spec_path).kernel("sgemm_tiled")
    original = validate_bytes(str(path), path.read_bytes())
    for value in ("1", "4", "auto"):
        result = rewrite(original.data, f"unroll{{{INNER}={value}}}", path=str(path))
        (kernel,) = result.results
        report = verify_pair(
            original, validate_bytes(str(path), result.new_data), spec, cpu, sizes=("tiles",), policy=kernel.policy
        )
        assert report.ok, (value, [s.summary() for s in report.sizes])
    broken = result.new_data.replace(b"k < TILE; ++k", b"k < TILE - 1; ++k")  # a planted off-by-one
    assert broken != result.new_data
    report = verify_pair(
        original, validate_bytes(str(path), broken), spec, cpu, sizes=("tiles",), policy=result.results[0].policy
    )
    assert not report.ok


@pytest.mark.slow
def test_apply_writes_a_verified_factor_from_the_command_line(tmp_path: Path) -> None:
    from conftest import run_cli

    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    path = tmp_path / "sgemm_tiled" / "sgemm_tiled.cu"
    done = run_cli(
        "apply",
        "--pass",
        f"unroll{{{INNER}=4}}",
        "--verify",
        "cpu",
        str(path),
        env={},
    )
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == GOLDEN.read_bytes()
