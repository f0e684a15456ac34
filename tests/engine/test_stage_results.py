"""Typed results between stages: every check has a status and a reason key, and the later
stages, the remarks, the report and the log viewer decide from those, never from the
sentences (each test plants a sentence that says the opposite of the typed field)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kxform import exitcodes
from kxform.cli.apply import _checks_line
from kxform.engine.driver import FileTransform, final_remarks, transform_source
from kxform.engine.pass_api import CheckRecord, KernelResult, Outcome, RunOptions
from kxform.engine.stages import refused, require_verification
from kxform.engine.status import (
    NOT_FASTER,
    ORIGINAL_DOES_NOT_COMPILE,
    REVERTED_WITH_FILE,
    VERIFY_INCONCLUSIVE,
    Status,
)
from kxform.frontend.source import validate_bytes
from kxform.hw import load_profile
from kxform.log.passlog import kernel_record
from kxform.log.report import Report, WriteBack
from kxform.log.view import _reason_key, check_mark
from kxform.passes.swizzle import Swizzle

SOURCE = "__global__ void k(float* o) { o[blockIdx.y * 9 + blockIdx.x] = 1; }\n"


@pytest.fixture(scope="module")
def held() -> FileTransform:
    """One swizzled kernel whose "Applied" remark waits for the later stages."""
    return transform_source(
        validate_bytes("k.cu", SOURCE.encode()),
        [Swizzle(pattern="grouped")],
        load_profile("h100"),
        RunOptions(),
        finalize=False,
    )


def applied(held: FileTransform) -> KernelResult:
    (result,) = held.results
    assert result.outcome is Outcome.APPLIED and result.proposal is not None
    return result


@pytest.mark.parametrize(
    "status, required, ok",
    [
        (Status.PASSED, False, True),
        (Status.SKIPPED, False, True),
        (Status.FAILED, False, False),
        (Status.INCONCLUSIVE, False, False),
        (Status.UNCONFIRMED, False, True),
        (Status.UNCONFIRMED, True, False),
    ],
)
def test_whether_a_check_lets_the_rewrite_be_written_follows_its_status(
    status: Status, required: bool, ok: bool
) -> None:
    record = CheckRecord("compile", status, "passed: every word of this sentence is ignored", required=required)
    assert record.ok is ok
    assert record.to_json()["status"] == status.value and record.to_json()["ok"] is ok


def test_a_bool_status_is_passed_or_failed_and_anything_else_is_refused() -> None:
    assert CheckRecord("bijection", True, "skipped: words only").status is Status.PASSED
    assert CheckRecord("bijection", False, "unconfirmed: words only").status is Status.FAILED
    with pytest.raises(TypeError, match="status must be a Status"):
        CheckRecord("bijection", "passed", "a string is not a status")  # type: ignore[arg-type]


def test_a_later_stage_refusal_is_read_from_the_key_not_the_reason(held: FileTransform) -> None:
    result = replace(applied(held), stage="measure", outcome=Outcome.MISSED)
    assert refused(replace(result, key=NOT_FASTER, reasons=("slower on the cpu runtime",)))
    assert not refused(replace(result, key=REVERTED_WITH_FILE, reasons=("NotFaster: planted words",)))


def test_a_failure_that_could_not_tell_is_not_retried_with_another_candidate(held: FileTransform) -> None:
    failed = replace(applied(held), stage="compile", outcome=Outcome.FAILED, reasons=("nvcc: error",))
    unsure = CheckRecord(
        "compile",
        Status.UNCONFIRMED,
        "nvcc failed (no word says unconfirmed here)",
        ORIGINAL_DOES_NOT_COMPILE,
        required=True,
    )
    assert not refused(replace(failed, checks=(unsure,)))
    assert refused(replace(failed, checks=(CheckRecord("compile", Status.FAILED, "unconfirmed: planted words"),)))


def test_only_a_passed_differential_run_counts_as_verification(held: FileTransform) -> None:
    from kxform.engine.policy import DEFAULT_POLICY

    required = replace(DEFAULT_POLICY, required=True)

    class Item:
        path = "k.cu"
        transform = None

        def __init__(self, check: CheckRecord) -> None:
            self.results = [replace(applied(held), policy=required, checks=(check,))]

    passed = Item(CheckRecord("verify", Status.PASSED, "skipped: planted words, but the run passed"))
    require_verification(passed)
    assert passed.results[0].outcome is Outcome.APPLIED
    skipped = Item(CheckRecord("verify", Status.SKIPPED, "verified on the cpu runtime: planted words"))
    require_verification(skipped)
    assert skipped.results[0].outcome is Outcome.FAILED and skipped.results[0].key == "NoDifferentialRun"


def test_remarks_name_the_final_outcome_from_statuses_and_keys(held: FileTransform) -> None:
    result = applied(held)
    doubt = CheckRecord(
        "compile", Status.UNCONFIRMED, "the original does not compile either", ORIGINAL_DOES_NOT_COMPILE
    )
    (remark,) = final_remarks(held, [replace(result, checks=result.checks + (doubt,))])
    assert remark.name == "AppliedUnconfirmed" and remark.args["confirmed"] is False
    strict = replace(doubt, required=True)
    failed = replace(result, outcome=Outcome.FAILED, stage="compile", reasons=("nvcc failed",), checks=(strict,))
    (remark,) = final_remarks(held, [failed])
    assert remark.name == "CompileUnconfirmed"
    undecided = replace(
        result, outcome=Outcome.MISSED, stage="verify", key=VERIFY_INCONCLUSIVE, reasons=("Unverified: planted words",)
    )
    (remark,) = final_remarks(held, [undecided])
    assert remark.name == "VerifyInconclusive"


def test_the_report_counts_unconfirmed_kernels_by_status(held: FileTransform) -> None:
    result = applied(held)
    report = Report(WriteBack.CHECK)
    report.add_kernels([replace(result, checks=(CheckRecord("compile", Status.PASSED, "unconfirmed: planted"),))])
    assert report.unconfirmed == 0
    report.add_kernels([replace(result, checks=(CheckRecord("compile", Status.UNCONFIRMED, "nvcc failed"),))])
    assert report.unconfirmed == 1 and report.exit_code == exitcodes.OK
    report.files_changed = 1
    assert report.exit_code == exitcodes.CHANGES
    report.input_errors.append("a.cu:1: bad")
    assert report.exit_code == exitcodes.USAGE
    report.internal_errors.append("bug")
    assert report.exit_code == exitcodes.INTERNAL


def test_the_apply_note_reads_statuses_and_figures(held: FileTransform) -> None:
    result = replace(
        applied(held),
        checks=(
            CheckRecord("bijection", Status.PASSED, "skipped: planted"),
            CheckRecord("compile", Status.UNCONFIRMED, "nvcc failed"),
            CheckRecord(
                "verify", Status.PASSED, "ok on the cpu runtime (planted)", figures=(("runtime", "gpu"), ("sizes", 4))
            ),
            CheckRecord("measure", Status.SKIPPED, "timed on the gpu runtime (planted)"),
        ),
    )
    assert _checks_line(result) == "bijection, compile unconfirmed, verify (gpu runtime, 4 sizes), measure skipped"


def test_the_pass_log_keeps_status_key_and_figures_and_reads_old_logs(held: FileTransform) -> None:
    result = replace(
        applied(held),
        outcome=Outcome.MISSED,
        stage="measure",
        key=NOT_FASTER,
        reasons=("slower",),
        checks=(
            CheckRecord(
                "verify", Status.INCONCLUSIVE, "ok (planted)", VERIFY_INCONCLUSIVE, figures=(("runtime", "cpu"),)
            ),
        ),
    )
    record = kernel_record("run", result)
    assert record["key"] == NOT_FASTER and _reason_key(record) == NOT_FASTER
    (check,) = record["checks"]
    assert check["status"] == "inconclusive" and check["key"] == VERIFY_INCONCLUSIVE
    assert check["figures"] == {"runtime": "cpu"} and check_mark(check) == "UNDECIDED"
    # schema 1: no status, no key; the sentences are all there is
    old = [
        {"name": "verify", "ok": True, "detail": "skipped: no harness spec"},
        {
            "name": "verify",
            "ok": False,
            "detail": "k: inconclusive on the cpu runtime (original vs rewritten, 2 sizes)",
        },
        {"name": "compile", "ok": True, "detail": "unconfirmed: the original does not compile either"},
        {"name": "compile", "ok": False, "detail": "rewritten file does not compile"},
        {"name": "bijection", "ok": True, "detail": "proved"},
    ]
    assert [check_mark(c) for c in old] == ["skip", "UNDECIDED", "UNCONFIRMED", "FAIL", "ok"]
    assert _reason_key({"reasons": ["NotFaster: slower"]}) == "NotFaster"
