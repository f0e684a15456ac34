"""`kxform report`: the HTML page parsed back and checked, and opened in a headless browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import needs_nvcc, run_cli
from kxform.log.passlog import PassLog, decode_line, encode_line_map
from kxform.log.report import Report
from log_fixtures import gpu_style_run, real_run

HAS_MATPLOTLIB = subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True).returncode == 0
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


class Page(HTMLParser):
    """Tags, attributes and visible text of a page, with the section each text is under."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.sections: dict[str, list[str]] = {}
        self._current = ""
        self._in: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._in:
            while self._in.pop() != tag:
                pass

    def handle_data(self, data: str) -> None:
        if "style" in self._in:
            return
        if self._in and self._in[-1] == "h2":
            self._current = data.strip()
        self.text.append(data)
        self.sections.setdefault(self._current, []).append(data)

    def section(self, name: str) -> str:
        return "".join(self.sections.get(name, []))

    def count(self, tag: str, cls: str | None = None) -> int:
        return sum(1 for t, a in self.tags if t == tag and (cls is None or cls in (a.get("class") or "").split()))


def _report(tmp: Path, log: Path) -> tuple[Path, Page]:
    out = tmp / "report.html"
    proc = run_cli("report", str(log), "-o", str(out), cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    assert f"written to {out}" in proc.stderr
    return out, Page(out.read_text(encoding="utf-8"))


def _assert_self_contained(page: Page, html: str) -> None:
    for tag, attrs in page.tags:
        assert tag not in ("script", "link", "img", "iframe", "object"), tag
        for name in ("src", "href", "xlink:href", "action"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), (tag, name, value)
    assert "@import" not in html and "<!DOCTYPE svg" not in html
    assert all(ref.startswith("#") for ref in re.findall(r"url\(\s*['\"]?([^)'\"]*)", html))  # clip paths only
    ids = [attrs["id"] for _, attrs in page.tags if attrs.get("id")]
    assert len(ids) == len(set(ids))  # several plots in one page share no id
    refs = re.findall(r"url\(#([^)]+)\)", html) + re.findall(r'href="#([^"]+)"', html)
    assert set(refs) <= set(ids)


def test_report_of_a_measured_and_tuned_run(tmp_path: Path) -> None:
    out, page = _report(tmp_path, gpu_style_run(tmp_path / "run.jsonl"))
    html = out.read_text(encoding="utf-8")
    _assert_self_contained(page, html)
    kernels = page.section("Kernels")
    assert "sgemm_128" in kernels and "stencil5" in kernels and "applied" in kernels and "missed" in kernels
    assert "66.1000" in kernels and "1.015x" in kernels and "0.802x" in kernels
    gemm = page.section("src/gemm.cu")
    assert "decision swizzle{pattern=grouped,group=8} (deterministic, predicted): predicted by the model" in gemm
    assert "swizzle{pattern=hilbert} at measure: NotFaster" in gemm and "alternates: swizzle{pattern=column}" in gemm
    assert '"remap": "grouped"' in gemm and "payload" in gemm
    assert "int row = kxform_block.y;" in gemm and page.count("span", "add") == 1 and page.count("span", "del") == 1
    assert "NotFaster: the rewrite was not faster" in page.section("src/stencil.cu")
    tuning = page.section("Tuning")
    assert "5 evaluations (1 failed), best 65.1000 ms at evaluation 4" in tuning
    l2 = page.section("L2 model predictions")
    assert "58.0%" in l2 and "8740.0" in l2 and "80.0%" in l2
    assert "future_kind" in page.section("Other records")
    if HAS_MATPLOTLIB:
        assert page.count("svg") == 4  # speedups, convergence, time per parameter, L2
        text = "".join(page.text)
        assert "best so far" in text and "L2 hit rate (%)" in text and "DRAM GB: read + write (lighter)" in text
        assert "best 65.1 ms (evaluation 4)" in text  # the optimum's line, labelled
        convergence = next(svg for svg in re.findall(r"<svg.*?</svg>", html, re.S) if "best so far" in svg)
        assert ">compile_failed<" in convergence  # the failed evaluation sits in its own strip, by failure class
        assert "sgemm_128: time against each parameter" in text
    assert out.stat().st_size < 200_000


def test_report_of_a_real_run_and_determinism(tmp_path: Path) -> None:
    log = real_run(tmp_path, "--pass", "swizzle", "--verify", "static")
    out, page = _report(tmp_path, log)
    _assert_self_contained(page, out.read_text(encoding="utf-8"))
    text = "".join(page.text)
    assert "sgemm_tiled" in text and "transposeNoBankConflicts" in text and "coverage" in text
    # the L2 model's figures for both kernels, logged by swizzle's LocalityPrediction remark
    l2 = page.section("L2 model predictions")
    assert "sgemm_tiled/sgemm_tiled.cu sgemm_tiled" in l2 and "grouped(along=y,group=8)" in l2 and "row" in l2
    assert "transpose/transpose.cu transposeNoBankConflicts" in l2
    if HAS_MATPLOTLIB:
        assert page.count("svg") == 2  # one L2 figure per kernel; no times or tuning in this run
    # the source view: the text the run read, each remark under its kernel's line, linked from the table
    html = out.read_text(encoding="utf-8")
    line = html.index('<div class="l hit" id="src-f1-L29">')
    assert "__global__ void sgemm_tiled(" in html[line : line + 300]
    after = html[line : html.index('id="src-f1-L30"')]
    assert "<b>Analysis</b> swizzle/LocalityPrediction in sgemm_tiled" in after
    assert "<b>Passed</b> swizzle/Applied in sgemm_tiled" in after and 'class="rm r-passed"' in after
    assert '<a href="#src-f1-L29">sgemm_tiled/sgemm_tiled.cu:29</a>' in html
    assert "source as the run read it (recorded in the pass log)" in page.section("Source")
    first = out.read_bytes()
    _report(tmp_path, log)
    assert out.read_bytes() == first


@pytest.mark.slow
@needs_nvcc
def test_report_and_log_of_a_verified_tile_then_swizzle_run(tmp_path: Path) -> None:
    """A real `tile{TILE=32},swizzle` run verified on the CPU runtime: two records for one
    kernel (one anchor each), and tile's policy: the launch read from the source, the
    tolerance it derived, a differential run required."""
    log = real_run(
        tmp_path, "--pass", "tile{TILE=32},swizzle{pattern=grouped}", "--verify", "cpu", corpora=("sgemm_tiled",)
    )
    out, page = _report(tmp_path, log)
    _assert_self_contained(page, out.read_text(encoding="utf-8"))
    kernels = page.section("Kernels")
    assert kernels.count("sgemm_tiled") >= 2 and "tile{TILE=32}" in kernels
    assert "swizzle{pattern=grouped,along=y,group=8}" in kernels
    hrefs = {a["href"] for t, a in page.tags if t == "a" and a.get("href")}
    assert len({h for h in hrefs if h.startswith("#k-")}) == 2  # one anchor per kernel record
    detail = page.section("sgemm_tiled/sgemm_tiled.cu")
    assert (
        "verification policy: launch from sgemm_tiled/sgemm_tiled.cu:95 at TILE=32: grid ((N + TILE - 1) / TILE, "
        "(M + TILE - 1) / TILE), block (TILE, TILE); outputs the spec's tolerance x2"
    ) in detail
    assert "a differential run is required before writing" in detail
    assert "verification policy: the spec's launch; outputs bit-exact (the rewrite changes no arithmetic)" in detail
    assert "#ifndef TILE" in detail and "kxform_block" in detail
    # swizzle ran on the tiled file: its lines are mapped back, so its remark sits on the kernel's original line
    html = out.read_text(encoding="utf-8")
    kernel_line = html[html.index('id="src-f1-L29"') : html.index('id="src-f1-L30"')]
    assert "__global__ void sgemm_tiled(" in kernel_line
    assert "<b>Passed</b> tile/Applied" in kernel_line and "<b>Passed</b> swizzle/Applied" in kernel_line
    assert html.count('<a href="#src-f1-L29">sgemm_tiled/sgemm_tiled.cu:29</a>') == 2  # both records link there
    shown = run_cli("log", "show", str(log), "--no-diff", cwd=tmp_path).stdout
    assert "sgemm_tiled (line 29) tile: applied  tile{TILE=32}" in shown
    assert "policy: launch from sgemm_tiled/sgemm_tiled.cu:95 at TILE=32: grid (" in shown


def test_without_matplotlib_the_report_says_why(tmp_path: Path) -> None:
    log = gpu_style_run(tmp_path / "run.jsonl")
    out = tmp_path / "plain.html"
    code = (
        "import sys; sys.modules['matplotlib'] = None; from kxform.cli.main import main; "
        f"sys.exit(main(['report', {str(log)!r}, '-o', {str(out)!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = Page(out.read_text(encoding="utf-8"))
    assert page.count("svg") == 0
    assert "plots need matplotlib: pip install 'kxform[report]'" in "".join(page.text)
    assert "66.1000" in page.section("Kernels")  # the tables are all there


def test_missing_run_writes_nothing(tmp_path: Path) -> None:
    proc = run_cli("report", "nope", "--dir", str(tmp_path), "-o", "r.html", cwd=tmp_path)
    assert proc.returncode == 2 and "no run 'nope'" in proc.stderr
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
@pytest.mark.skipif(BROWSER is None, reason="no headless browser (apt-get install chromium)")
def test_report_opens_in_a_headless_browser(tmp_path: Path) -> None:
    out, _ = _report(tmp_path, gpu_style_run(tmp_path / "run.jsonl"))
    assert BROWSER is not None
    proc = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"file://{out}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = Page(proc.stdout)
    assert "sgemm_128" in dom.section("Kernels") and "5 evaluations" in dom.section("Tuning")
    if HAS_MATPLOTLIB:
        assert dom.count("svg") == 4


def _source_log(tmp: Path, source: str | None, remarks: list[tuple[int, str, str]], file: str = "k.cu") -> Path:
    """A run over one file: its `file` record (with `source` unless None) and remarks (line, kind, message)."""
    log = PassLog.open(str(tmp / "s.jsonl"), hw="h100", pipeline="swizzle", argv=["apply", file])
    log.write(
        {
            "type": "kernel",
            "schema": 2,
            "run": log.run_id,
            "file": file,
            "kernel": "k",
            "line": 2,
            "pass": "swizzle",
            "outcome": "missed",
            "stage": None,
            "key": "SpinWait",
            "reasons": ["SpinWait: x"],
            "proposal": None,
            "checks": [],
        }
    )
    for line, kind, message in remarks:
        log.write(
            {
                "type": "remark",
                "schema": 1,
                "run": log.run_id,
                "kind": kind,
                "pass": "swizzle",
                "name": "N",
                "file": file,
                "line": line,
                "column": 1,
                "function": "k",
                "message": message,
                "args": {},
            }
        )
    log.write(
        {
            "type": "file",
            "schema": 1,
            "run": log.run_id,
            "file": file,
            "changed": False,
            "error": None,
            "diff": "",
            **({"source": source} if source is not None else {}),
            "compile": None,
            "timings_s": {},
        }
    )
    log.close(Report())
    return tmp / "s.jsonl"


def test_source_view_escapes_source_and_remarks_and_places_each_under_its_line(tmp_path: Path) -> None:
    """Planted: markup in the source and in a remark (a report must never run or load it)."""
    source = "// <script>alert(1)</script>\n__global__ void k(int *f) {\n  while (f[0] == 0) {}  // <img src=x>\n}\n"
    log = _source_log(
        tmp_path,
        source,
        [
            (3, "Missed", 'spins on <b>f</b> & "waits"'),
            (2, "Analysis", "a note"),
            (0, "Passed", "no line"),
            (99, "Missed", "past the end"),
        ],
    )
    out, page = _report(tmp_path, log)
    html = out.read_text(encoding="utf-8")
    _assert_self_contained(page, html)  # no <script>, <img> or remote reference got through
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x&gt;" in html
    line3 = html.index('id="src-f1-L3"')
    block = html[line3 : html.index('id="src-f1-L4"')]
    assert (
        'class="rm r-missed"><b>Missed</b> swizzle/N in k, column 1: spins on &lt;b&gt;f&lt;/b&gt; &amp; '
        "&quot;waits&quot;</div>" in block
    )
    assert 'class="rm r-analysis"><b>Analysis</b>' in html[html.index('id="src-f1-L2"') : line3]
    unplaced = html[html.index("remarks without a line in this text") : html.index('id="src-f1-L1"')]
    assert "no line" in unplaced and "past the end" in unplaced
    assert '<a href="#src-f1-L2">k.cu:2</a>' in html  # the kernel table links to the kernel's line
    assert "SpinWait (at analysis)" in page.section("Kernels")  # refused before any check: the table says why


def test_source_view_reads_an_older_log_s_file_from_disk_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("int a;\n__global__ void k() {}\n")
    file = str(tmp_path / "k.cu")  # the log's cwd is this process's: an absolute path
    out, page = _report(tmp_path, _source_log(tmp_path, None, [(2, "Missed", "m")], file))
    view = page.section("Source")
    assert f"read from {tmp_path / 'k.cu'} when this report was made (the log does not carry the source)" in view
    assert "__global__ void k() {}" in view
    (tmp_path / "k.cu").unlink()
    os.mkfifo(tmp_path / "k.cu")  # never read: it would block
    out, page = _report(tmp_path, _source_log(tmp_path, None, [(2, "Missed", "still shown")], file))
    view = page.section("Source")
    assert "not shown: the log does not carry the source and" in view and "not a regular file (a FIFO); refused" in view
    assert "still shown" in view
    _assert_self_contained(page, out.read_text(encoding="utf-8"))  # no link into a view without lines


def test_source_view_of_a_long_file_shows_the_lines_around_its_remarks(tmp_path: Path) -> None:
    source = "".join(f"int line_{i};\n" for i in range(1, 3001))
    out, page = _report(tmp_path, _source_log(tmp_path, source, [(1500, "Missed", "here")]))
    html = out.read_text(encoding="utf-8")
    shown = [int(n) for n in re.findall(r'id="src-f1-L(\d+)"', html)]
    assert shown == [*range(1, 9), *range(1494, 1507)]  # the kernel's line 2 and the remark's, 6 lines each side
    assert "... lines 9-1493 not shown" in html and "... lines 1507-3000 not shown" in html


def test_a_refusal_is_listed_once(tmp_path: Path) -> None:
    """The last candidate's refusal is also the kernel's reason: the page names it once."""
    log = PassLog.open(str(tmp_path / "r.jsonl"), hw="h100", pipeline="swizzle", argv=["apply"])
    why = "NotFaster: 0.207 ms against 0.166 ms"
    log.write(
        {
            "type": "kernel",
            "schema": 2,
            "run": log.run_id,
            "file": "s.cu",
            "kernel": "stencil5",
            "line": 3,
            "pass": "swizzle",
            "outcome": "missed",
            "stage": "measure",
            "key": "NotFaster",
            "reasons": [why],
            "proposal": None,
            "checks": [],
            "rejected": [{"spec": "swizzle{pattern=column}", "stage": "measure", "reason": why}],
        }
    )
    log.close(Report())
    out, page = _report(tmp_path, tmp_path / "r.jsonl")
    assert out.read_text(encoding="utf-8").count(why) == 1
    assert "swizzle{pattern=column} at measure: " + why in page.section("s.cu")
    assert "NotFaster (at measure)" in page.section("Kernels")


@given(st.lists(st.integers(min_value=1, max_value=60), max_size=80).map(sorted))
def test_a_line_map_survives_its_encoding(line_map: list[int]) -> None:
    runs = encode_line_map(tuple(line_map))
    assert [decode_line(runs, n) for n in range(1, len(line_map) + 1)] == line_map
    assert len(runs) <= len(line_map)
