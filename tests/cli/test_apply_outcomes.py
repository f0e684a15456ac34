"""`apply` reports each kernel's final outcome, writes nothing it could not verify, and
refuses `--measure` without a runtime that times kernels before doing any work."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, logged_remarks, run_cli
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import pick_runtime

requires_cpu_runtime = pytest.mark.skipif(not CpuRuntime().available()[0], reason="no host C++ compiler")


@pytest.fixture
def sgemm(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    return tmp_path / "sgemm_tiled" / "sgemm_tiled.cu"


def test_measure_without_a_timing_runtime_is_a_usage_error(sgemm: Path) -> None:
    if pick_runtime("auto").times_kernels:
        pytest.skip("a GPU runtime that times kernels is available here")
    before = sgemm.read_bytes()
    for verify in ("auto", "cpu", "compile", "static"):
        proc = run_cli(
            "apply",
            "--pass",
            "swizzle",
            "--measure",
            "--verify",
            verify,
            "--log",
            str(sgemm.parent / "log.jsonl"),
            str(sgemm),
        )
        assert proc.returncode == 2, proc.stderr
        assert "--measure needs a runtime that times kernels" in proc.stderr
        assert "remark" not in proc.stderr  # refused before any work
    assert sgemm.read_bytes() == before


@pytest.mark.slow
@requires_cpu_runtime
def test_inconclusive_verification_writes_nothing_and_the_remark_says_why(sgemm: Path) -> None:
    """A spec that declares C `out` although the kernel reads it (beta * C): the poison
    propagates, both runs agree on NaN, and the old verifier called that a match."""
    spec = sgemm.parent / "sgemm_tiled.kxspec.toml"
    text = spec.read_text()
    c_arg = text.index('name = "C"')
    tail = text[c_arg:].replace(
        'role = "inout"\nfill = { dist = "uniform", low = -1.0, high = 1.0 }\n', 'role = "out"\n', 1
    )
    spec.write_text(text[:c_arg] + tail)
    before = sgemm.read_bytes()
    log = sgemm.parent / "run.jsonl"
    proc = run_cli("apply", "--pass", "swizzle", "--verify", "cpu", "--log", str(log), str(sgemm))
    assert sgemm.read_bytes() == before
    assert "swizzle applied to" not in proc.stderr
    assert "swizzle not applied to 'sgemm_tiled': verify stage: VerifyInconclusive:" in logged_remarks(proc)
    remarks = [json.loads(line) for line in log.read_text().splitlines() if '"type": "remark"' in line]
    assert [r["name"] for r in remarks if r["kind"] == "Analysis"] == ["LocalityPrediction"]  # the model's figures
    details = [r["message"] for r in remarks if r["kind"] != "Analysis"]
    assert "'C' is read at" in details[0] and "sgemm_tiled.cu:53" in details[0] and "declare it inout" in details[0]
    (kernel,) = [json.loads(line) for line in log.read_text().splitlines() if '"type": "kernel"' in line]
    assert kernel["outcome"] == "missed"
    remarks = [r for r in remarks if r["kind"] != "Analysis"]
    assert [r["kind"] for r in remarks] == ["Missed"] and remarks[0]["name"] == "VerifyInconclusive"
    # the log viewer and the report tell "could not tell" apart from a failed check
    shown = run_cli("log", "show", str(log), cwd=sgemm.parent)
    assert shown.returncode == 0, shown.stderr
    (verify_line,) = [ln for ln in shown.stdout.splitlines() if "check verify:" in ln]
    assert "UNDECIDED" in verify_line and "inconclusive on the cpu runtime" in verify_line and "FAIL" not in verify_line
    assert "VerifyInconclusive" in shown.stdout and "declare it inout" in shown.stdout  # the whole remark
    page = sgemm.parent / "report.html"
    reported = run_cli("report", str(log), "-o", str(page), cwd=sgemm.parent)
    assert reported.returncode == 0, reported.stderr
    assert '<td class="undecided">could not tell</td>' in page.read_text()
