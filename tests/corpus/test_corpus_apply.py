"""The corpus tool (tools/corpus.py on kxform.bench.corpus): its one step (a configuration
through `kxform apply --check --verify cpu`) reads the engine's typed results, never their
sentences; which configurations it verifies; its table and exit status."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, needs_nvcc
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome
from kxform.engine.policy import EXACT, OutputCompare, VerifyPolicy
from kxform.engine.status import (
    NO_HARNESS_SPEC,
    UNVERIFIABLE_LAUNCH,
    VERIFY_INCONCLUSIVE,
    VERIFY_MISMATCH,
    Status,
)

from kxform.bench.corpus import apply_config, checked, configurations, kernels, read_results, tuning_points

TOLERANCE = VerifyPolicy(compare=OutputCompare("spec", reason="the rewrite reorders a sum"))


EXACT_POLICY = VerifyPolicy(compare=EXACT)


def _result(
    outcome: Outcome,
    *checks: CheckRecord,
    key: str = "",
    reasons: tuple[str, ...] = (),
    policy: VerifyPolicy = EXACT_POLICY,
    pass_name: str = "launch",
) -> KernelResult:
    return KernelResult("k.cu", "k", pass_name, outcome, 1, reasons, checks=checks, key=key, policy=policy)


def _verify(status: Status, detail: str, key: str = "", max_abs: float | None = None) -> CheckRecord:
    figures = (("runtime", "cpu"), ("sizes", 2)) + ((("max_abs", max_abs),) if max_abs is not None else ())
    return CheckRecord("verify", status, detail, key, figures=figures)


def test_a_failed_record_whose_sentence_says_skipped_is_failed() -> None:
    record = _verify(Status.FAILED, "skipped: no harness spec (a sentence that lies)", VERIFY_MISMATCH, 0.5)
    applied = read_results([_result(Outcome.FAILED, record, key=VERIFY_MISMATCH, reasons=("skipped",))], "k")
    assert applied.label == "failed" and not applied.verified and not applied.could_not_tell


def test_a_skipped_record_whose_sentence_says_verified_is_unverified() -> None:
    record = _verify(Status.SKIPPED, "k: verified on the cpu runtime; bit-identical", NO_HARNESS_SPEC)
    applied = read_results([_result(Outcome.APPLIED, record)], "k")
    assert applied.label == "unverified" and not applied.verified and not applied.bit_exact


def test_identical_comes_from_the_figure_not_from_within_tolerance() -> None:
    said_within = _verify(Status.PASSED, "k: verified; n within tolerance, max abs 1e-07", max_abs=0.0)
    assert read_results([_result(Outcome.APPLIED, said_within)], "k").identical
    said_match = _verify(Status.PASSED, "k: verified; n match", max_abs=2e-7)
    applied = read_results([_result(Outcome.APPLIED, said_match, policy=TOLERANCE)], "k")
    assert applied.verified and not applied.identical and not applied.bit_exact
    assert applied.line() == "verified: the spec's tolerance; within tolerance"
    no_figure = _verify(Status.PASSED, "k: verified; n match")  # a record without the figure proves nothing
    assert not read_results([_result(Outcome.APPLIED, no_figure)], "k").identical


def test_bit_exact_is_the_composed_policy_of_every_applied_pass() -> None:
    record = _verify(Status.PASSED, "bit-exact everywhere, says the sentence", max_abs=0.0)
    first = _result(Outcome.APPLIED, pass_name="tile", policy=TOLERANCE)
    applied = read_results([first, _result(Outcome.APPLIED, record, pass_name="swizzle")], "k")
    assert applied.verified and applied.identical and not applied.bit_exact
    assert read_results([_result(Outcome.APPLIED, record)], "k").bit_exact


@pytest.mark.parametrize("key", [VERIFY_INCONCLUSIVE, UNVERIFIABLE_LAUNCH])
def test_could_not_tell_is_read_from_the_key(key: str) -> None:
    applied = read_results([_result(Outcome.MISSED, key=key, reasons=("the verdict, worded anyhow",))], "k")
    assert applied.could_not_tell and not applied.verified
    worded = read_results([_result(Outcome.FAILED, key="CheckFailed", reasons=("VerifyInconclusive: launch: x",))], "k")
    assert not worded.could_not_tell and worded.label == "failed"


def test_no_result_for_the_kernel_is_an_error_with_the_file_error() -> None:
    applied = read_results([_result(Outcome.APPLIED)], "other", error="x.cu: does not parse")
    assert applied.label == "error" and applied.detail == "x.cu: does not parse" and not applied.verified


GELU = ROOT / "tests" / "fixtures" / "launch" / "gelu"
SMALLER = "launch{GELU_FORWARD_BLOCK_X=128}"


def _planted(tmp_path: Path, old: str, new: str) -> Path:
    copy = tmp_path / "gelu"
    shutil.copytree(GELU, copy)
    path = copy / "gelu.cu"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.slow
@needs_nvcc
def test_a_real_apply_verifies_bit_identical() -> None:
    applied = apply_config(GELU / "gelu.cu", "launch", "gelu_forward", "h100")
    assert applied.verified and applied.identical and applied.bit_exact, applied.line()
    assert applied.verify is not None and applied.verify.figure("max_abs") == 0.0


@pytest.mark.slow
@needs_nvcc
def test_a_planted_dependence_on_the_block_size_is_a_failure(tmp_path: Path) -> None:
    """Outputs that depend on threadIdx.x itself change with the block: the differential
    run refutes the smaller block, and the helper reports it failed, not verified."""
    path = _planted(tmp_path, "out[i] = 0.5f * x", "out[i] = (float)(threadIdx.x / 128) + 0.5f * x")
    applied = apply_config(path, SMALLER, "gelu_forward", "h100")
    assert applied.label == "failed" and applied.key == VERIFY_MISMATCH, applied.line()
    assert not applied.verified and not applied.could_not_tell


@needs_nvcc
def test_a_launch_the_verifier_cannot_read_is_could_not_tell(tmp_path: Path) -> None:
    """A grid computed from a value the kernel does not receive: the rewritten launch
    cannot be judged, so the configuration is neither verified nor a failure."""
    path = _planted(
        tmp_path, "int n)\n{\n    gelu_forward<<<(n + 255)", "int n, int m)\n{\n    gelu_forward<<<(m + 255)"
    )
    applied = apply_config(path, SMALLER, "gelu_forward", "h100")
    assert applied.could_not_tell and applied.key == UNVERIFIABLE_LAUNCH, applied.line()
    assert not applied.verified


def _tool():  # type: ignore[no-untyped-def]
    """tools/corpus.py, loaded from its file (a script, not a module of the package)."""
    spec = importlib.util.spec_from_file_location("corpus_tool", ROOT / "tools" / "corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NAIVE = ROOT / "corpora" / "naive"


@pytest.mark.parametrize(
    ("pass_name", "family", "kernel", "expected"),
    [
        # defaults as written: the bare pass first, then the pass's nearest candidates
        ("launch", "gelu_f32", "gelu_f32_naive", ["launch", "launch{GELU_F32_NAIVE_BLOCK_X=64}"]),
        # no rule, no candidates: the points of the space at which a rewrite is proposed
        ("vectorize", "gelu_f32", "gelu_f32_naive", ["vectorize{width=2}", "vectorize{width=4}"]),
        ("coarsen", "gelu_f32", "gelu_f32_naive", ["coarsen{factor=2,along=x,layout=contiguous}"]),
        # the pass's own candidate shapes, the known-good one first
        (
            "smem-tile",
            "gemm",
            "gemm_naive",
            ["smem-tile{BM=128,BN=128,BK=8,TM=8,TN=8,WM=32,WN=64,STAGES=2,PAD=4,VEC=4}"],
        ),
    ],
)
def test_configurations_follow_what_the_pass_offers(pass_name, family, kernel, expected) -> None:
    found = configurations(NAIVE / family / "naive.cu", kernel, pass_name, "h100", None)
    assert found[: len(expected)] == expected and all("factor=1" not in spec for spec in found)
    limited = configurations(NAIVE / family / "naive.cu", kernel, pass_name, "h100", 1)
    assert limited == found[: len(limited)] and len(limited) == 1 + (pass_name == "launch")


def test_the_bare_pass_as_written_must_verify_bit_exact() -> None:
    judge = _tool()._judge
    record = _verify(Status.PASSED, "verified", max_abs=0.0)
    within = read_results([_result(Outcome.APPLIED, record, policy=TOLERANCE)], "k")
    assert judge(within, as_written=False) == "verified"
    assert judge(within, as_written=True) == "failed"  # planted: at the original values a tolerance is a failure
    assert judge(read_results([_result(Outcome.UNCHANGED)], "k"), as_written=True) == "verified"
    unreadable = read_results([_result(Outcome.MISSED, key=UNVERIFIABLE_LAUNCH)], "k")
    assert judge(unreadable, as_written=False) == "could not tell"


def test_the_tool_prints_the_verdicts_and_exits_zero(capsys) -> None:
    assert _tool().main(["vectorize", "--corpus", "naive", "--only", "gelu_f32", "--only", "jacobi2d"]) == 0
    out = capsys.readouterr().out
    assert "naive/gelu_f32" in out and "width=2 in {2, 4}" in out
    assert "naive/jacobi2d" in out and "refused" in out and "NotElementwise" in out
    assert "vectorize: 1 kernel(s) apply, 1 refused" in out


def test_a_bad_points_count_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        _tool().main(["launch", "--points", "many"])
    assert exc.value.code == 2 and "--points many" in capsys.readouterr().err


@pytest.mark.slow
@needs_nvcc
def test_the_tool_verifies_a_requested_configuration(capsys) -> None:
    code = _tool().main(["vectorize", "--corpus", "naive", "--only", "gelu_f32", "--verify", "--config", "width=4"])
    out = capsys.readouterr().out
    assert code == 0 and "vectorize{width=4}" in out and "verified: bit-exact; bit-identical" in out, out


def test_the_space_mode_puts_every_tuning_point_through_the_checks(capsys) -> None:
    assert _tool().main(["vectorize", "--corpus", "naive", "--only", "gelu_f32", "--space"]) == 0
    out = capsys.readouterr().out
    assert "vectorize{width=2}" in out and "vectorize{width=4}" in out and "2 passed the checks, 0 verified" in out
    (gelu,) = kernels(["naive"], ["gelu_f32"])
    assert tuning_points(gelu, "vectorize", "h100") == ["vectorize{width=2}", "vectorize{width=4}"]
    ok, why = checked(gelu, "vectorize{width=8}", "h100")  # planted: a width float does not allow
    assert not ok and "missed" in why and "width=8" in why
