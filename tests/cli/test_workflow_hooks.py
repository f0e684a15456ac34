"""The pre-commit hooks, `apply --depfile`, and progress bars (terminal only)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shlex
import struct
import subprocess
import termios
from io import StringIO
from pathlib import Path

import pytest

from conftest import ROOT, kxform_exe, run_cli
from kxform.cli.progress import ProgressBar

KERNEL = """__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""


def _hooks() -> dict[str, dict]:
    clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is not installed (test extra)")
    return {hook["id"]: hook for hook in clientlib.load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))}


def _run_hook(hook: dict, files: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """What pre-commit runs: entry, args, then the staged files its `files` pattern selects."""
    argv = shlex.split(hook["entry"]) + list(hook["args"])
    assert argv[0] == "kxform"
    chosen = [f for f in files if re.search(hook["files"], f)]
    return subprocess.run([kxform_exe(), *argv[1:], *chosen], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # runs kxform four times, as pre-commit would (no network: the hooks run here directly)
def test_pre_commit_hooks_check_then_rewrite(tmp_path: Path) -> None:
    hooks = _hooks()
    assert hooks["kxform-check"]["require_serial"] and hooks["kxform-check"]["language"] == "python"
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "tile.cu").write_text(KERNEL)
    (tmp_path / "README.md").write_text("not cuda\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.kxform]\npasses = ["swizzle{pattern=grouped}"]\nverify = "static"\n'
    )
    staged = ["src/tile.cu", "README.md"]
    check = _run_hook(hooks["kxform-check"], staged, tmp_path)
    assert check.returncode == 1 and "1 file would be rewritten" in check.stderr, check.stderr
    assert (tmp_path / "src" / "tile.cu").read_text() == KERNEL
    fix = _run_hook(hooks["kxform"], staged, tmp_path)
    assert fix.returncode == 0 and "kxform_block" in (tmp_path / "src" / "tile.cu").read_text()
    again = _run_hook(hooks["kxform-check"], staged, tmp_path)
    assert again.returncode == 0, again.stderr
    (tmp_path / "pyproject.toml").write_text('[tool.kxform]\npasses = ["swizle"]\n')  # planted: a typo
    bad = _run_hook(hooks["kxform-check"], staged, tmp_path)
    assert bad.returncode == 2 and "swizle" in bad.stderr


def test_depfile_lists_sources_headers_and_configuration(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "tile.cuh").write_text("#define EDGE 16\n")
    (tmp_path / "src" / "a b.cu").write_text('#include "tile.cuh"\n' + KERNEL)
    (tmp_path / "kxform.toml").write_text('[tool.kxform]\npasses = ["swizzle{pattern=grouped}"]\nverify = "static"\n')
    proc = run_cli("apply", "-o", "out", "--depfile", "out/a.d", "src/a b.cu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "out" / "a.d").read_text()
    rule, _, phony = text.partition("\n\n")
    target, _, deps = rule.partition(":")
    assert target == "out/src/a\\ b.cu"  # as the build names it (-o out)
    listed = [d.strip() for d in deps.replace("\\\n", "\n").split("\n") if d.strip()]
    assert listed == [
        str(tmp_path / "src" / "a\\ b.cu"),
        str(tmp_path / "src" / "tile.cuh"),
        str(tmp_path / "kxform.toml"),
    ]
    assert [line for line in phony.split("\n") if line] == [
        f"{d}:" for d in listed
    ]  # gcc -MP: a removed header does not stop Make
    assert "kxform_block" in (tmp_path / "out" / "src" / "a b.cu").read_text()
    proc = run_cli("apply", "--depfile", "x.d", "src", cwd=tmp_path)
    assert proc.returncode == 2 and "--depfile needs -o" in proc.stderr and not (tmp_path / "x.d").exists()


def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    piped = StringIO()
    bar = ProgressBar(stream=piped, delay=0)
    for i in range(1, 4):
        bar(i, 3, f"f{i}.cu")
    assert piped.getvalue() == ""  # not a terminal: nothing drawn
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    with os.fdopen(slave, "w") as terminal:
        bar = ProgressBar(stream=terminal, delay=0)
        for i in range(1, 4):
            bar(i, 3, f"f{i}.cu", stage="verify")
        terminal.flush()
        drawn = ""
        while select.select([master], [], [], 1.0)[0]:
            drawn += os.read(master, 65536).decode()
    os.close(master)
    assert "verify:" in drawn and "/3 [" in drawn and drawn.endswith("\r")  # drawn, then erased


def test_apply_piped_prints_no_progress(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i in range(12):
        (tmp_path / "src" / f"k{i}.cu").write_text(KERNEL.replace("tile", f"tile{i}"))
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "static", "--check", "src", cwd=tmp_path)
    assert proc.returncode == 1
    assert "\r" not in proc.stderr and "file/s" not in proc.stderr and "transform" not in proc.stderr
    log = next((tmp_path / ".kxform" / "logs").glob("*.jsonl")).read_text()
    assert "\r" not in log and "file/s" not in log


NUMBERS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def test_the_docs_name_every_hook_and_ask_for_no_gitignore_entry() -> None:
    """docs/build-integration.md counts and lists the hooks `.pre-commit-hooks.yaml`
    defines, and asks nobody to add `.kxform/` to `.gitignore`: it ignores itself."""
    hooks = _hooks()
    doc = (ROOT / "docs" / "build-integration.md").read_text(encoding="utf-8")
    section = doc[doc.index("## pre-commit") : doc.index("## CI")]
    assert f"defines {NUMBERS[len(hooks)]} hooks" in section
    assert all(f"id: {name} " in section for name in hooks), sorted(hooks)
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert not re.search(r"[Aa]dd `?\.kxform/?`? (\([^)]*\) )?to `?\.gitignore", text), path
