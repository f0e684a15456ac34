"""What git ignores stays out of a walk (as black and ruff do), `--no-gitignore` turns that
off, and kxform's own `.kxform/` ignores itself."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import run_cli
from kxform.workspace.files import walk_sources
from kxform.workspace.gitignore import GitIgnore

KERNEL = """__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A Git work tree: src/k.cu, an ignored vendor/ and build-*/, a generated file
    ignored by a nested .gitignore except the one it re-includes."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for name in ("src/k.cu", "vendor/v.cu", "build-debug/b.cu", "src/gen/x.gen.cu", "src/gen/keep.gen.cu"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(KERNEL)
    (tmp_path / ".gitignore").write_text("vendor/\nbuild-*/\n")
    (tmp_path / "src" / "gen" / ".gitignore").write_text("*.gen.cu\n!keep.gen.cu\n")
    return tmp_path


def _walked(root: Path, gitignore: bool = True) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in walk_sources([str(root)], gitignore=gitignore))


def test_the_walk_follows_git_rules(repo: Path) -> None:
    assert _walked(repo) == ["src/gen/keep.gen.cu", "src/k.cu"]
    assert _walked(repo, gitignore=False) == [
        "build-debug/b.cu",
        "src/gen/keep.gen.cu",
        "src/gen/x.gen.cu",
        "src/k.cu",
        "vendor/v.cu",
    ]
    rules = GitIgnore.find(repo / "src")
    assert rules is not None and rules.ignored(repo / "vendor" / "v.cu") and not rules.ignored(repo / "src" / "k.cu")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("k.cu\n")
    assert _walked(repo) == ["src/gen/keep.gen.cu"]


def test_outside_a_work_tree_nothing_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "v.cu").write_text(KERNEL)
    (tmp_path / ".gitignore").write_text("vendor/\n")
    if GitIgnore.find(tmp_path) is not None:
        pytest.skip("the temporary directory is inside a Git work tree")
    assert _walked(tmp_path) == ["vendor/v.cu"]


def test_apply_leaves_ignored_kernels_alone_and_kxform_ignores_itself(repo: Path) -> None:
    vendor = (repo / "vendor" / "v.cu").read_bytes()
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "static", ".", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert (repo / "vendor" / "v.cu").read_bytes() == vendor and "kxform_block" in (repo / "src" / "k.cu").read_text()
    assert (repo / ".kxform" / ".gitignore").read_text().splitlines()[-1] == "*"
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, check=True, capture_output=True, text=True
    ).stdout
    assert ".kxform" not in status and "src/k.cu" in status
    proc = run_cli(
        "apply", "--pass", "swizzle{pattern=grouped}", "--check", "--verify", "static", "--no-gitignore", ".", cwd=repo
    )
    assert proc.returncode == 1 and "would rewrite vendor/v.cu" in proc.stderr, proc.stderr


def test_out_dir_holds_only_the_copies(repo: Path) -> None:
    """... and kxform's own .kxform/ (the run's log, ignoring itself): the tree gets nothing."""
    proc = run_cli("apply", "--pass", "swizzle{pattern=grouped}", "--verify", "static", "-o", "out", "src", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    found = sorted(str(p.relative_to(repo / "out")) for p in (repo / "out").rglob("*") if p.is_file())
    copies = [f for f in found if not f.startswith(".kxform/")]
    assert copies == ["src/gen/keep.gen.cu", "src/k.cu"]
    assert [f for f in found if f not in copies and not f.startswith(".kxform/logs/")] == [".kxform/.gitignore"]
