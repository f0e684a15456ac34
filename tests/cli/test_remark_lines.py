"""Remarks on a terminal: one short line each (the log keeps the whole message) and
clang's `-Rpass=REGEX` filters."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from kxform.log.remarks import SHORT_LINE, Remark, RemarkFilter, RemarkKind, shorten

CORPORA = Path(__file__).resolve().parents[2] / "corpora"
LONG = (
    "swizzle applied to 'k': swizzle{pattern=grouped,group=8} (predicted by the model (h100-sxm, size bench): "
    "L2 hit 88% vs 40%; saves 86.4% of row-major's predicted memory time (0.782 vs 5.7455 ms; compute is not "
    "modelled, so a compute-bound kernel gains less); sampling error of DRAM reads +-1.1%)"
)


def _remark(kind: RemarkKind, pass_name: str, message: str = LONG) -> Remark:
    return Remark(kind, pass_name, "Name", "src/k.cu", 3, 1, "k", message)


def test_a_long_remark_keeps_its_first_clause_and_tag() -> None:
    line = _remark(RemarkKind.PASSED, "swizzle").format()
    assert line == (
        "src/k.cu:3:1: remark: swizzle applied to 'k': swizzle{pattern=grouped,group=8} (predicted by "
        "the model (h100-sxm, size bench): L2 hit 88% ... [-Rpass=swizzle]"
    )
    assert len(line) <= SHORT_LINE
    assert _remark(RemarkKind.PASSED, "swizzle").format(full=True).endswith(LONG + " [-Rpass=swizzle]")
    short = "src/k.cu:3:1: remark: tile applied to 'k': tile (lift TILE) [-Rpass=tile]"
    assert _remark(RemarkKind.PASSED, "tile", "tile applied to 'k': tile (lift TILE)").format() == short
    cut = shorten("word " * 100, 100)
    assert len(cut) <= 100 and cut.endswith(" ...")
    assert shorten("a; b " + "x" * 200, 100) == "a ..."


def test_filters_select_by_kind_and_pass_name() -> None:
    passed, missed = _remark(RemarkKind.PASSED, "swizzle"), _remark(RemarkKind.MISSED, "tile")
    analysis = _remark(RemarkKind.ANALYSIS, "swizzle")
    assert all(RemarkFilter().shows(r) for r in (passed, missed, analysis))
    only_swizzle = RemarkFilter(passed=re.compile("swiz"))
    assert only_swizzle.shows(passed) and not only_swizzle.shows(missed) and not only_swizzle.shows(analysis)
    assert not RemarkFilter(passed=re.compile("^tile$")).shows(passed)
    assert RemarkFilter(missed=re.compile("til")).shows(missed)


@pytest.mark.slow
def test_apply_prints_short_filtered_lines_and_logs_everything(tmp_path: Path) -> None:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    common = ("apply", "--no-config", "--pass", "swizzle,tile", "--verify", "static", "--check", "sgemm_tiled")
    proc = run_cli(*common, "--log", "all.jsonl", cwd=tmp_path)
    remarks = [line for line in proc.stderr.splitlines() if ": remark: " in line]
    assert remarks and all(len(line) <= SHORT_LINE for line in remarks), remarks
    assert {"[-Rpass=swizzle]", "[-Rpass=tile]"} <= {line.rsplit(" ", 1)[-1] for line in remarks}
    logged = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    messages = [r["message"] for r in logged if r["type"] == "remark"]
    assert len(messages) == len(remarks) and max(map(len, messages)) > 300  # the whole message stays in the log
    proc = run_cli(*common, "--log", "some.jsonl", "-Rpass=^tile$", cwd=tmp_path)
    shown = [line for line in proc.stderr.splitlines() if ": remark: " in line]
    assert shown and all(line.endswith("[-Rpass=tile]") for line in shown), shown
    logged = [json.loads(line) for line in (tmp_path / "some.jsonl").read_text().splitlines()]
    assert len([r for r in logged if r["type"] == "remark"]) == len(messages)
    proc = run_cli(*common, "-Rpass=(", cwd=tmp_path)
    assert proc.returncode == 2 and "-Rpass=(: not a regular expression" in proc.stderr
