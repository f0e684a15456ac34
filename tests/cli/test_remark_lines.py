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
    "L2 hit 88% vs 40%; 86.4% less predicted memory time than row-major (0.782 vs 5.7455 ms; compute is not "
    "modelled, so a compute-bound kernel gains less); sampling error of DRAM reads +-1.1%)"
)


def _remark(kind: RemarkKind, pass_name: str, message: str = LONG) -> Remark:
    return Remark(kind, pass_name, "Name", "src/k.cu", 3, 1, "k", message)


NOT_JUDGED = (
    "swizzle not applied to 'scale_2d': left alone: no evidence that a remap helps (the locality model cannot "
    "judge it: no spec, and the drafted one is incomplete (line 8: 'sms' in the launch at q.cu:9 is computed in "
    "host code kxform cannot evaluate: write grid in terms of the size variables (n))); --pattern NAME forces one"
)


def test_a_long_remark_keeps_its_start_its_end_and_tag() -> None:
    """A first clause too long for the line keeps its start (the verdict and what it rests
    on) and its end, where the particular reason is; a wider line shows more of both."""
    line = _remark(RemarkKind.PASSED, "swizzle").format()
    assert line == (
        "src/k.cu:3:1: remark: swizzle applied to 'k': swizzle{pattern=grouped,group=8} (predicted by the model "
        "(h100-sxm ... of DRAM reads +-1.1% [-Rpass=swizzle]"
    )
    assert len(line) <= SHORT_LINE
    missed = _remark(RemarkKind.MISSED, "swizzle", NOT_JUDGED).format()
    assert len(missed) <= SHORT_LINE
    assert missed.startswith("src/k.cu:3:1: remark: swizzle not applied to 'scale_2d': left alone: no evidence ")
    assert missed.endswith(" ... size variables (n) ... [-Rpass-missed=swizzle]")  # the end of the cause
    wide = _remark(RemarkKind.MISSED, "swizzle", NOT_JUDGED).format(width=220)
    assert len(missed) < len(wide) <= 220 and "(the locality model cannot judge it: no spec" in wide
    assert wide.endswith(" ... terms of the size variables (n) ... [-Rpass-missed=swizzle]")
    assert (
        _remark(RemarkKind.MISSED, "swizzle", NOT_JUDGED)
        .format(width=400)
        .endswith(NOT_JUDGED + " [-Rpass-missed=swizzle]")
    )
    assert _remark(RemarkKind.PASSED, "swizzle").format(full=True).endswith(LONG + " [-Rpass=swizzle]")
    short = "src/k.cu:3:1: remark: tile applied to 'k': tile (lift TILE) [-Rpass=tile]"
    assert _remark(RemarkKind.PASSED, "tile", "tile applied to 'k': tile (lift TILE)").format() == short
    cut = shorten("word " * 100, 100)
    assert len(cut) <= 100 and " ... " in cut
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


def test_on_a_terminal_remarks_use_its_width(tmp_path: Path) -> None:
    """stderr a terminal of 220 columns (a real pseudo-terminal): the line is as wide as
    it; into a pipe the same remark keeps to SHORT_LINE."""
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios
    from fcntl import ioctl

    (tmp_path / "k.cu").write_text(
        "__global__ void scale_2d(const float* in, float* out, int n) {\n"
        "    int x = blockIdx.x * blockDim.x + threadIdx.x;\n    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "    if (x < n && y < n) out[y * n + x] = 2.0f * in[y * n + x];\n}\n"
        "void launch(const float* in, float* out, int n) {\n    int sms = 0;\n"
        "    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
        "    scale_2d<<<dim3(sms, sms), dim3(16, 16)>>>(in, out, n);\n}\n"
    )
    args = ("apply", "--no-config", "--pass", "swizzle", "--verify", "static", "--check", "-q", "k.cu")
    piped = run_cli(*args[:-2], "k.cu", cwd=tmp_path)
    (remark,) = [line for line in piped.stderr.splitlines() if ": remark: " in line]
    assert len(remark) <= SHORT_LINE
    main, child = pty.openpty()
    ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 220, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "kxform"), *args[:-2], "k.cu"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=child,
        env={**env, "TERM": "xterm"},
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(main)
    shown = b"".join(chunks).decode("utf-8", "replace").replace("\r", "\n")
    (wide,) = [line for line in shown.splitlines() if ": remark: " in line]
    assert SHORT_LINE < len(wide) <= 220 and "cannot judge it: no spec, and" in wide, wide
    assert "cannot judge it: no spec, and" not in remark  # what the wider line adds
