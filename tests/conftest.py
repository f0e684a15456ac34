"""Shared test helpers: the installed `kxform` console script, tool availability."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kxform.build.nvcc import find_nvcc

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "corpora"


def kxform_exe() -> str:
    """The console script installed next to this interpreter (tests run the real entry point)."""
    candidate = Path(sys.executable).parent / "kxform"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("kxform")
    if found is None:
        pytest.skip("the kxform console script is not installed (pip install -e .)")
    return found


def run_cli(
    *args: str, cwd: Path | str | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([kxform_exe(), *args], cwd=cwd, capture_output=True, text=True, env=full_env, timeout=timeout)


NVCC = find_nvcc()
"""The nvcc kxform itself would use ($KXFORM_NVCC, PATH, /usr/local/cuda), or None."""


def needs_nvcc(test: Callable[..., None]) -> Callable[..., None]:
    """Mark a test `nvcc` and skip it, with the reason, where nvcc is missing."""
    reason = "nvcc not found (set KXFORM_NVCC or put it on PATH)"
    return pytest.mark.nvcc(pytest.mark.skipif(NVCC is None, reason=reason)(test))


def session_root(factory: pytest.TempPathFactory) -> Path:
    """The test session's temporary root, shared by its pytest-xdist workers (each worker's
    base is a `popen-gwN` folder under it): content caches kept there serve every worker,
    so a kernel one worker built is not built again by another. The caches write each
    entry to a temporary name and rename it, so workers may share them."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") and base.name.startswith("popen-gw") else base


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep kxform's content caches per test session, away from the user's ~/.cache."""
    if "KXFORM_CACHE_DIR" not in os.environ:
        monkeypatch.setenv("KXFORM_CACHE_DIR", str(session_root(tmp_path_factory) / "kxform-cache"))


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A CPU runtime with a cache shared by the session's tests (skips without a compiler)."""
    from kxform.runtime.cpu import CpuOptions, CpuRuntime

    runtime = CpuRuntime(CpuOptions(cache_dir=session_root(tmp_path_factory) / "kxcpu-cache", workers=2))
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"CPU runtime unavailable: {why}")
    return runtime


def logged_remarks(proc: subprocess.CompletedProcess[str], cwd: Path | str | None = None) -> str:
    """A run's remark messages whole, from its pass log (the terminal shows short lines),
    after what it printed: what a test of a remark's words reads."""
    import json

    if "Log: " not in proc.stderr:
        return proc.stderr
    log = Path(cwd or ".") / proc.stderr.rsplit("Log: ", 1)[1].strip()
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return proc.stderr + "\n".join(r.get("message", "") for r in records if r.get("type") == "remark")
