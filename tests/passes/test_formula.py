"""The custom remap language: parsing, C semantics, emission, and every rejection."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kxform.engine.driver import transform_source
from kxform.engine.pass_api import Outcome, Proposal, Provenance, RunOptions
from kxform.errors import CheckFailed
from kxform.frontend.source import read_source
from kxform.hw import load_profile
from kxform.passes.swizzle import Swizzle
from kxform.passes.swizzle.bijection import _HOST_PRELUDE, check_helper, host_compiler
from kxform.passes.swizzle.formula import FormulaError, formula_remap, parse_formula
from kxform.passes.swizzle.formula_eval import check_arithmetic, evaluate_point
from kxform.passes.swizzle.patterns import get_pattern

from conftest import CORPORA

GROUPED = """per = gx <= 536870911 ? 8 * gx : 4294967295
first = (pid / per) * 8
size = min(gy - first, 8)
lx = (pid % per) / size
ly = first + (pid % per) % size"""

needs_cxx = pytest.mark.skipif(host_compiler() is None, reason="no host C++ compiler (set CXX)")


def test_grouped_formula_matches_the_library_pattern() -> None:
    remap = formula_remap(GROUPED)
    library = get_pattern("grouped").resolve({"group": 8, "along": "y"})
    for gx, gy in ((1, 1), (3, 17), (17, 3), (9, 9), (20, 31)):
        for by in range(gy):
            for bx in range(gx):
                assert remap.apply(bx, by, gx, gy) == library.apply(bx, by, gx, gy)


def test_canonical_text_parses_back_to_the_same_formula() -> None:
    text = "a = bx ^ by & 3 | gx << 1 >> 1\nb = a > 2 && !(by == 1) ? min(a, 7) : max(bx, 0x3u)\nlx = bx\nly = by"
    formula = parse_formula(text)
    again = parse_formula(formula.canonical)
    assert again.statements == formula.statements and again.digest == formula.digest
    assert parse_formula("lx = bx; ly = by").statements == parse_formula("lx = bx\nly = by").statements


@needs_cxx
def test_python_evaluation_agrees_with_the_emitted_c(tmp_path: Path) -> None:
    """Every operator, evaluated by kxform and by the compiled helper, on many blocks."""
    text = (
        "s = (bx * 7 + by * 3) % gx\nt = (pid >> 1) ^ (pid & 5) | (gy << 2)\n"
        "u = select(s >= t % 11, t / (s + 1), ~t & 255)\nv = (s < 3) + (t <= 9) + (s != u) + (s == 0) + !s\n"
        "w = (bx > 1 || by < 2) * 10 + (bx > 2 && by >= 1)\nlx = max(min(u, v + w), s)\nly = total - pid - 1"
    )
    remap = formula_remap(text)
    points = [(bx, by, gx, gy) for gx, gy in ((1, 1), (5, 3), (13, 7), (64, 2)) for by in range(gy) for bx in range(gx)]
    calls = "\n".join(
        f'{{ uint2 r = {remap.helper_name()}({bx}u, {by}u, {gx}u, {gy}u); std::printf("%u %u\\n", r.x, r.y); }}'
        for bx, by, gx, gy in points
    )
    src = tmp_path / "parity.cpp"
    src.write_text(f"{_HOST_PRELUDE}\n{remap.helper_source()}\nint main() {{\n{calls}\nreturn 0; }}\n")
    exe = tmp_path / "parity"
    compiler = host_compiler()
    assert compiler is not None
    subprocess.run([*compiler.command, "-O1", "-o", str(exe), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    assert [tuple(map(int, line.split())) for line in out if line] == [
        evaluate_point(remap.formula, *p) for p in points
    ]


@pytest.mark.parametrize(
    "text, kind, words",
    [
        ("lx = bx; ly = by - 1", "overflow", "subtraction below zero"),
        ("lx = bx; ly = (by + 8 - gy) % gy", "overflow", "subtraction below zero"),
        ("lx = bx % (gx / 2); ly = by", "division-by-zero", "modulo by zero"),
        ("lx = pid * 4096 % gx; ly = by", "overflow", "does not fit in 32 bits"),
        ("lx = (bx + 4294967295) % gx; ly = by", "overflow", "does not fit in 32 bits"),
        ("lx = bx << gx; ly = by", "shift", "32 or more"),
        ("lx = bx; ly = by + 1", "range", "outside the grid"),
        ("lx = gx == 1 ? 0 : bx / (gy - 1); ly = by", "division-by-zero", "division by zero"),
    ],
)
def test_arithmetic_hazards_are_rejected_with_grid_and_block(text: str, kind: str, words: str) -> None:
    with pytest.raises(FormulaError) as err:
        check_arithmetic(parse_formula(text))
    assert err.value.kind == kind and words in str(err.value) and "grid " in str(err.value)


def test_hazards_in_the_arm_c_does_not_evaluate_are_fine() -> None:
    formula = parse_formula("lx = gx > 1 ? bx % (gx - 1) + (bx == gx - 1) * (gx - 1) : 0\nly = by")
    assert check_arithmetic(formula).blocks > 4_000_000
    assert check_arithmetic(parse_formula("q = by > 0 && bx / by > 0\nlx = bx\nly = by")).blocks > 0


@pytest.mark.parametrize(
    "text, kind, words",
    [
        ("lx = bx; ly = by /* x */", "grammar", "comments are not allowed"),
        ("#include <stdio.h>\nlx = bx; ly = by", "grammar", "character '#'"),
        ('lx = bx; ly = by; asm("trap")', "grammar", "character '\"'"),
        ("lx = bx; ly = by; }", "grammar", "character '}'"),
        ("lx = bx[0]; ly = by", "grammar", "character '['"),
        ("lx = blockIdx.x; ly = by", "grammar", "character '.'"),
        ("lx = printf(bx); ly = by", "grammar", "unknown function 'printf'"),
        ("lx = foo; ly = by", "grammar", "unknown name 'foo'"),
        ("lx = -bx; ly = by", "grammar", "unary '-'"),
        ("bx = 1; lx = bx; ly = by", "grammar", "is an input"),
        ("lx = bx; lx = by; ly = by", "grammar", "assigned twice"),
        ("int = 3; lx = bx; ly = by", "grammar", "not an allowed name"),
        ("TILE = 3; lx = bx; ly = by", "grammar", "not an allowed name"),
        ("lx = bx", "grammar", "must assign ly"),
        ("lx = min(bx); ly = by", "grammar", "takes 2 arguments"),
        ("lx = 4294967296; ly = by", "overflow", "32 bits"),
        ("lx = bx ly = by", "grammar", "unexpected 'ly'"),
        ("lx = " + "(" * 30 + "bx" + ")" * 30 + "; ly = by", "size", "nested deeper"),
        ("lx = bx" + " + 0" * 600 + "; ly = by", "size", "characters long"),
        ("lx = bx" + "+0" * 320 + "; ly = by", "size", "syntax nodes"),
        ("\n".join(f"a{i} = {i}" for i in range(30)) + "\nlx = bx; ly = by", "size", "statements"),
        ("", "grammar", "empty"),
    ],
)
def test_text_outside_the_language_is_rejected(text: str, kind: str, words: str) -> None:
    with pytest.raises(FormulaError) as err:
        parse_formula(text)
    assert err.value.kind == kind and words in str(err.value), str(err.value)


def test_non_text_is_rejected() -> None:
    with pytest.raises(FormulaError, match="a formula is text"):
        parse_formula({"lx": "bx"})


@needs_cxx
def test_a_non_bijective_formula_fails_the_bijection_check() -> None:
    """In range and arithmetic-safe, but two blocks land on one tile."""
    remap = formula_remap("lx = bx\nly = by / 2 * 2")
    check_arithmetic(remap.formula)
    with pytest.raises(CheckFailed, match="already taken"):
        check_helper(remap.helper_source(), remap.helper_name())


class _Fixed:
    name = "fixed"

    def __init__(self, formula: str) -> None:
        self.formula = formula

    def propose(self, pass_, ctx, analysis, rejected=()):  # type: ignore[no-untyped-def]
        return [
            Proposal.of(
                "swizzle",
                analysis.kernel.name,
                {"pattern": "custom"},
                "test formula",
                Provenance("fixed"),
                payload=self.formula,
            )
        ]


@needs_cxx
def test_the_pass_applies_a_formula_with_its_checks() -> None:
    source = read_source(str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"))
    result = transform_source(source, [Swizzle()], load_profile("h100"), RunOptions(), proposer=_Fixed(GROUPED))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED
    assert [c.name for c in kernel.checks][:3] == ["formula", "bijection", "proof"]
    assert kernel.policy.compare.mode == "exact" and kernel.policy.launch.is_spec  # swizzle's: bit-exact, same launch
    assert kernel.proposal is not None and kernel.proposal.payload == GROUPED
    text = result.new_data.decode()
    assert (
        "kxform_swizzle_custom_" in text
        and "kxform_block.y * TILE" in text
        and [line for line in text.split("kxform swizzle")[1].split("__global__")[0].splitlines() if "#" in line]
        == ["#endif"]
    )  # the helper's include guard closes; the formula adds no directive


@needs_cxx
@pytest.mark.parametrize(
    "formula, check",
    [
        ("lx = bx\nly = (by + 1) % gy * 0", "bijection"),
        ("lx = bx; ly = gy - by", "formula"),
        ("lx = bx; ly = by; # define X", "proposal"),
    ],
)
def test_the_pass_rejects_bad_formulas_before_editing(formula: str, check: str) -> None:
    source = read_source(str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"))
    result = transform_source(source, [Swizzle()], load_profile("h100"), RunOptions(), proposer=_Fixed(formula))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.FAILED and kernel.stage == "check"
    assert kernel.reasons[0].startswith(f"{check}:") and not result.changed


GX77 = "lx = select(gx == 77 && bx == 1, 0, bx)\nly = by"
"""Not a bijection only at gx = 77: every sampled and enumerated grid misses it."""


def test_a_remap_wrong_at_one_grid_width_is_refuted_with_its_counter_example() -> None:
    from kxform.passes.swizzle.proof import ProofFailed, prove_formula

    check_arithmetic(parse_formula(GX77))  # the samples see nothing wrong
    with pytest.raises(ProofFailed) as err:
        prove_formula(parse_formula(GX77))
    assert err.value.kind == "refuted"
    assert "not a bijection: on grid 77x" in str(err.value) and "both map to (0, " in str(err.value)


def test_a_formula_that_wraps_only_beyond_the_sampled_grids_is_refuted() -> None:
    """`8 * gx` wraps for gx >= 2^29, a grid width CUDA allows (gridDim.x < 2^31)."""
    from kxform.passes.swizzle.proof import ProofFailed, prove_formula

    text = (
        "per = 8 * gx\nfirst = (pid / per) * 8\nsize = min(gy - first, 8)\nlx = (pid % per) / size\n"
        "ly = first + (pid % per) % size"
    )
    check_arithmetic(parse_formula(text))
    with pytest.raises(ProofFailed, match="product of 2\\^32 or more in `8 \\* gx`"):
        prove_formula(parse_formula(text))
    prove_formula(parse_formula(GROUPED))  # the same remap, guarded


def test_an_undecided_proof_is_a_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    from kxform.passes.swizzle import proof

    monkeypatch.setattr(proof, "TIME_LIMIT_MS", 1)
    proof._prove.cache_clear()
    with pytest.raises(proof.ProofFailed) as err:
        proof._prove(parse_formula("ly = pid % gy\nlx = (pid / gy + ly) % gx"))
    proof._prove.cache_clear()
    assert err.value.kind == "unknown" and "not proven is refused" in str(err.value)


def _with_failing_strategy(monkeypatch: pytest.MonkeyPatch, strategies: tuple[str, ...]) -> None:
    """The portfolio with `fail`, a strategy that never decides (z3's `fail` tactic)."""
    import z3

    from kxform.passes.swizzle import proof

    real = proof._strategy
    monkeypatch.setattr(proof, "STRATEGIES", strategies)
    monkeypatch.setattr(proof, "QUICK_MS", 0)  # straight to the portfolio
    monkeypatch.setattr(
        proof, "_strategy", lambda name, ctx: z3.Tactic("fail", ctx=ctx).solver() if name == "fail" else real(name, ctx)
    )
    proof._prove.cache_clear()


def test_a_claim_one_solver_of_the_portfolio_decides_is_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    from kxform.passes.swizzle import proof

    _with_failing_strategy(monkeypatch, ("fail", "smt"))
    try:
        assert proof._prove(parse_formula("lx = pid / gy\nly = pid % gy")).startswith("proven (z3)")
        with pytest.raises(proof.ProofFailed) as err:  # a counter-example read from the deciding solver's context
            proof._prove(parse_formula(GX77))
        assert err.value.kind == "refuted" and "on grid 77x" in str(err.value)
    finally:
        proof._prove.cache_clear()


def test_a_claim_no_solver_decides_is_unknown_with_each_solvers_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from kxform.passes.swizzle import proof

    _with_failing_strategy(monkeypatch, ("fail", "fail"))
    try:
        with pytest.raises(proof.ProofFailed) as err:
            proof._prove(parse_formula("lx = pid / gy\nly = pid % gy"))
    finally:
        proof._prove.cache_clear()
    assert err.value.kind == "unknown" and "fail: " in str(err.value) and "not proven is refused" in str(err.value)


@pytest.mark.parametrize(
    "name, params",
    [
        ("row", {}),
        ("column", {}),
        ("grouped", {"group": 8, "along": "y"}),
        ("grouped", {"group": 3, "along": "x"}),
        ("grouped", {"group": 32, "along": "x"}),
        ("diagonal", {}),
        ("xcd", {"xcds": 8}),
        ("xcd-grouped", {"xcds": 8, "group": 4}),
    ],
)
@pytest.mark.slow
def test_every_library_pattern_with_a_formula_is_proven(name: str, params: dict[str, object]) -> None:
    from kxform.passes.swizzle.proof import prove_stages

    config = get_pattern(name).resolve(params)  # type: ignore[arg-type]
    report = prove_stages(tuple(parse_formula(text) for text in config.stages()))
    assert report.detail.startswith("proven (z3)")


@needs_cxx
def test_the_emitted_helper_must_equal_its_proven_formula() -> None:
    """The enumeration holds the emitted C to the formula the solver proved: a helper
    that is a bijection but a different one is refused."""
    column = get_pattern("column").resolve({})
    twin = formula_remap("lx = bx\nly = by")  # a bijection, not the column order
    with pytest.raises(CheckFailed, match="the proven formula gives"):
        check_helper(column.helper_source(), column.helper_name(), ((twin.helper_source(), twin.helper_name()),))


@needs_cxx
def test_the_pass_refuses_the_gx77_formula_with_the_counter_example() -> None:
    source = read_source(str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"))
    result = transform_source(source, [Swizzle()], load_profile("h100"), RunOptions(), proposer=_Fixed(GX77))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.FAILED and kernel.stage == "check"
    assert "proof: not a bijection: on grid 77x" in kernel.reasons[0]


def test_proofs_from_many_threads_at_once_all_succeed_and_cache_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tuner prepares candidates on worker threads: threads proving the same new formula
    together each get the proof (z3 is called one proof at a time, each cache file is
    written under a name of its own), and one cache entry is left."""
    import threading

    from kxform.passes.swizzle import proof

    monkeypatch.setenv("KXFORM_CACHE_DIR", str(tmp_path / "cache"))
    proof._prove.cache_clear()
    formula = parse_formula("lx = (bx + by) % gx\nly = by")
    start, results, errors = threading.Barrier(8), [], []

    def prove() -> None:
        start.wait()
        try:
            results.append(proof.prove_formula(formula).detail)
        except Exception as exc:  # noqa: BLE001 - the test reports any failure
            errors.append(exc)

    threads = [threading.Thread(target=prove) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proof._prove.cache_clear()
    assert not errors and len(results) == 8 and all(r.startswith("proven (z3)") for r in results)
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == [
        next((tmp_path / "cache").rglob("*.ok")).name
    ]
