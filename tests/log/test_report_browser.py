"""The report in a real headless browser (Chromium): apply, tune and failed-run reports
each render to a screenshot that is not blank, with no console error.

Each starts a browser (seconds): the module is `slow`. Screenshots go to the test's
directory, and to $KXFORM_REPORT_SCREENSHOTS when set (to look at them). Where no
Chromium is installed the tests skip and say so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from log_fixtures import ROOT, real_run
from search_helpers import KERNEL_SOURCE, write_recording

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium on PATH (apt-get install chromium)")
pytestmark = pytest.mark.slow  # a browser takes seconds to start
WIDTH, HEIGHT = 1280, 1800
"""The window (a screenshot shows the window; a report taller than it is cut, so the
apply report, whose figures and source view come after its diffs, gets a taller one)."""
CONSOLE = re.compile(r":CONSOLE(?::\d+)?\]|Uncaught")


def screenshot(page: Path, png: Path, tmp: Path, height: int = HEIGHT) -> list[str]:
    """Open `page` in headless Chromium, save a WIDTH x `height` screenshot to `png`; the
    page's console messages (the report runs no script, so any is an error)."""
    assert BROWSER is not None
    proc = subprocess.run(
        [
            BROWSER,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp / 'chromium-profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
            f"--screenshot={png}",
            f"--window-size={WIDTH},{height}",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line for line in proc.stderr.splitlines() if CONSOLE.search(line)]


def assert_rendered(png: Path, height: int = HEIGHT) -> None:
    """The screenshot exists, has the window's size, and shows something: many colours
    (anti-aliased text, plots), and neither blank nor one colour."""
    import matplotlib.image
    import numpy as np

    assert png.is_file() and png.stat().st_size > 0, png
    pixels = matplotlib.image.imread(png)
    assert pixels.shape[:2] == (height, WIDTH), pixels.shape
    rgb = (pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours = len(np.unique(rgb, axis=0))
    background = np.all(rgb == rgb[0], axis=1).mean()
    assert colours > 50, f"{png}: {colours} colours: a blank page"
    assert 0.02 < 1.0 - background, f"{png}: {1.0 - background:.1%} of the pixels drawn"


def _keep(png: Path) -> None:
    folder = os.environ.get("KXFORM_REPORT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(png, Path(folder) / png.name)


def _report(cwd: Path, log: Path, name: str) -> Path:
    out = cwd / f"{name}.html"
    proc = run_cli("report", str(log), "-o", str(out), cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return out


def _check(page: Path, tmp: Path, name: str, height: int = HEIGHT) -> None:
    png = tmp / f"report-{name}.png"
    errors = screenshot(page, png, tmp, height)
    assert errors == [], errors
    assert_rendered(png, height)
    _keep(png)


@needs_browser
def test_the_browser_check_rejects_a_script_error_and_a_blank_page(tmp_path: Path) -> None:
    """Planted: a page whose script throws, and a page that draws nothing."""
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><h1>kxform</h1><p>text</p><script>undefinedFunction();</script></body></html>"
    )
    errors = screenshot(broken, tmp_path / "broken.png", tmp_path)
    assert len(errors) == 1 and "Uncaught ReferenceError: undefinedFunction is not defined" in errors[0]
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    assert screenshot(blank, tmp_path / "blank.png", tmp_path) == []
    with pytest.raises(AssertionError, match="a blank page"):
        assert_rendered(tmp_path / "blank.png")


@needs_browser
def test_apply_report_renders(tmp_path: Path) -> None:
    """A real swizzle run: decisions, diff, L2 predictions and the source view with remarks."""
    log = real_run(tmp_path, "--pass", "swizzle", "--verify", "static")
    page = _report(tmp_path, log, "apply")
    html = page.read_text(encoding="utf-8")
    assert "<h2>L2 model predictions</h2>" in html and "<h2>Source</h2>" in html
    _check(page, tmp_path, "apply", 5600)


@needs_browser
def test_tune_report_renders(tmp_path: Path) -> None:
    """A real tuning run over a recorded space, one configuration of which failed."""
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    write_recording(tmp_path)
    proc = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "synth_kernel",
        "--objective",
        "replay:synth_A.json.gz",
        "--strategy",
        "exhaustive",
        "--log",
        "t.jsonl",
        cwd=tmp_path,
        env={"KXFORM_CACHE_DIR": str(tmp_path / "c")},
    )
    assert proc.returncode == 0, proc.stderr
    page = _report(tmp_path, tmp_path / "t.jsonl", "tune")
    html = page.read_text(encoding="utf-8")
    assert "(1 failed)" in html and ">runtime_failed<" in html and "time against each parameter" in html
    _check(page, tmp_path, "tune", 2200)


@needs_browser
def test_failed_run_report_renders(tmp_path: Path) -> None:
    """A forced pattern refused on two kernels (exit 1) and a file that does not parse (exit 2)."""
    corpora = ("chained_scan", "grid_sync_jacobi", "syntax_error")
    for name in corpora:
        shutil.copytree(ROOT / "corpora" / name, tmp_path / name)
    proc = run_cli(
        "apply",
        "--pass",
        "swizzle{pattern=grouped}",
        "--verify",
        "static",
        "--check",
        "--log",
        "f.jsonl",
        *corpora,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    page = _report(tmp_path, tmp_path / "f.jsonl", "failed")
    html = page.read_text(encoding="utf-8")
    assert "SpinWait (at analyse)" in html and "GridSync (at analyse)" in html  # the table says why not
    assert html.count("does not parse (tree-sitter-cuda)") == 1  # the input error once, in its file's section
    assert html.count('<h3 id="src-') == 2  # the source view: the two files with kernels and remarks
    _check(page, tmp_path, "failed")
