"""Verification inside `apply`: a failed differential run blocks the write, with evidence;
whole-program output comparison; harness spec drafts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, run_cli
from kxform.engine.pass_api import Outcome
from kxform.verify.program import compare_output
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.stage import verify_file
from swizzle_helpers import rewrite

requires_cpu_runtime = pytest.mark.skipif(not CpuRuntime().available()[0], reason="no host C++ compiler")


@pytest.fixture
def sgemm(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    return tmp_path / "sgemm_tiled" / "sgemm_tiled.cu"


@requires_cpu_runtime
def test_broken_rewrite_fails_verification_and_is_not_kept(sgemm: Path) -> None:
    original = sgemm.read_bytes()
    result = rewrite(original, path=str(sgemm), pattern="grouped", group="2")
    broken = result.new_data.replace(b"first + in_group % size", b"first + (in_group % size) / 2u * 2u")
    results, keep = verify_file(original, broken, str(sgemm), list(result.results), CpuRuntime(), measure=False)
    assert not keep
    (kernel,) = results
    assert kernel.outcome is Outcome.FAILED and kernel.stage == "verify"
    (verify,) = [c for c in kernel.checks if c.name == "verify"]
    assert not verify.ok and "MISMATCH" in verify.detail and "first at index" in verify.detail


@requires_cpu_runtime
def test_apply_verifies_on_the_cpu_runtime_and_logs_it(sgemm: Path) -> None:
    log = sgemm.parent / "run.jsonl"
    proc = run_cli(
        "apply", "--pass", "swizzle", "--pattern", "grouped", "--verify", "cpu", "--log", str(log), str(sgemm)
    )
    assert proc.returncode == 0, proc.stderr
    assert b"kxform_block" in sgemm.read_bytes()
    (kernel,) = [json.loads(line) for line in log.read_text().splitlines() if '"type": "kernel"' in line]
    (verify,) = [c for c in kernel["checks"] if c["name"] == "verify"]
    assert verify["ok"] and "verified on the cpu runtime" in verify["detail"]


def test_program_output_comparison_masks_and_tolerances() -> None:
    a = "result 1.0000001 ok\ntime 3.2 ms\nchecksum 42\n"
    b = "result 1.0000002 ok\ntime 9.9 ms\nchecksum 42\n"
    assert compare_output(a, b, masks=(r"^time",), rtol=1e-5) is None
    assert "line 2" in (compare_output(a, b, masks=(), rtol=1e-5) or "")
    assert "checksum" in (compare_output(a, a.replace("42", "43"), masks=(r"^time",), rtol=1e-5) or "") or "43" in (
        compare_output(a, a.replace("42", "43"), masks=(r"^time",), rtol=1e-5) or ""
    )
    assert "lines" in (compare_output(a, a + "extra\n", masks=(), rtol=1e-5) or "")


def test_harness_infer_drafts_a_loadable_spec(tmp_path: Path) -> None:
    shutil.copy(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu", tmp_path / "k.cu")
    proc = run_cli("harness", "infer", "k.cu", "--kernel", "sgemm_tiled", "-o", "draft.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "draft.toml").read_text()
    assert text.startswith("# DRAFT") and "review" in text
    check = run_cli("harness", "check", "draft.toml", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    again = run_cli("harness", "infer", "k.cu", "--kernel", "sgemm_tiled", "-o", "draft.toml", cwd=tmp_path)
    assert again.returncode == 2 and "not overwriting" in again.stderr
