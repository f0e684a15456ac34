"""tools/corpus_apply.py: the corpus tools' one step (a configuration through `kxform apply
--check --verify cpu`) reads the engine's typed results, never their sentences."""

from __future__ import annotations

import shutil
import sys
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

sys.path.insert(0, str(ROOT / "tools"))

from corpus_apply import apply_config, read_results  # noqa: E402

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
