"""`kxform apply` walks the source tree once: the lock plan, the merged flags, the run and
the depfile all use that one collected set (and so agree on which files the run has)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from conftest import run_cli
from kxform.cli import apply, lock_args  # noqa: F401 - loaded so that their bindings are counted too
from kxform.cli.main import main
from kxform.workspace import files

KERNEL = """__global__ void tile(float* out, int n) {
    int x = blockIdx.x * 16 + threadIdx.x;
    int y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n) out[y * n + x] = 1.0f;
}
"""


def _tree(root: Path) -> Path:
    """src/a.cu including src/tile.cuh beside it, src/skip.cu excluded by the configuration,
    and a configured include directory (so that the flags are merged)."""
    (root / "src").mkdir()
    (root / "inc").mkdir()
    (root / "src" / "tile.cuh").write_text("#define EDGE 16\n")
    (root / "src" / "a.cu").write_text('#include "tile.cuh"\n' + KERNEL)
    (root / "src" / "skip.cu").write_text(KERNEL.replace("tile(", "skipped("))
    (root / "kxform.toml").write_text(
        '[tool.kxform]\npasses = ["swizzle{pattern=grouped}"]\nverify = "static"\n'
        'exclude = ["skip.cu"]\ninclude = ["inc"]\n'
    )
    return root


def _count_walks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Wrap the real directory walk wherever a kxform module has bound it; each call is
    recorded with the paths it walked, and behaves exactly as before."""
    real = files.walk_sources
    calls: list[tuple[str, ...]] = []

    def counted(paths: Sequence[str], *rest: object, **options: object) -> Iterator[Path]:
        calls.append(tuple(str(p) for p in paths))
        return real(paths, *rest, **options)  # type: ignore[arg-type]

    bound = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("kxform") and getattr(m, "walk_sources", None) is real
    ]
    assert bound, "the walk is bound nowhere: the count below would prove nothing"
    for module in bound:
        monkeypatch.setattr(module, "walk_sources", counted)
    return calls


def test_apply_with_lock_depfile_flags_and_out_dir_walks_the_tree_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _tree(tmp_path)
    monkeypatch.chdir(root)
    calls = _count_walks(monkeypatch)
    code = main(["apply", "--lock", "-o", "out", "--depfile", "out/a.d", "-q", "src/a.cu", "src/skip.cu"])
    assert code == 0
    assert calls == [("src/a.cu", "src/skip.cu")]  # one walk, not one per step
    # what each step made of that one set: the same run as when every step walked itself
    assert "kxform_block" in (root / "out" / "src" / "a.cu").read_text()
    assert (root / "out" / "src" / "tile.cuh").read_text() == "#define EDGE 16\n"
    assert not (root / "out" / "src" / "skip.cu").exists()  # excluded: not processed, not copied
    lock = (root / "kxform.lock").read_text()
    assert 'file = "src/a.cu"' in lock and "skip" not in lock
    deps = (root / "out" / "a.d").read_text()
    assert str(root / "src" / "tile.cuh") in deps and str(root / "kxform.lock") in deps
    assert (root / "src" / "a.cu").read_text() == '#include "tile.cuh"\n' + KERNEL  # -o: sources untouched


def test_other_callers_of_the_run_and_the_lock_plan_still_collect_themselves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_apply and lock_args.prepare without a collected set walk the paths themselves,
    with the same rules (headers beside a named file for -o, the exclude filter)."""
    from kxform.orchestrate.runner import ApplyConfig, collect_sources, run_apply
    from kxform.hw import load_profile
    from kxform.log.report import WriteBack
    from kxform.propose.registry import ProposerSpec
    from kxform.workspace.exclude import Exclude

    root = _tree(tmp_path)
    monkeypatch.chdir(root)
    config = ApplyConfig(
        "swizzle{pattern=grouped}",
        hw=load_profile("h100"),
        verify="static",
        write_back=WriteBack.OUT_DIR,
        out_dir="out",
        exclude=Exclude(str(root), ("skip.cu",)),
        proposer=ProposerSpec(),
    )
    calls = _count_walks(monkeypatch)
    report, outcomes = run_apply(["src/a.cu", "src/skip.cu"], config, emit=lambda text: None)
    assert len(calls) == 1 and report.exit_code == 0
    assert sorted(o.path for o in outcomes) == ["src/a.cu", "src/tile.cuh"]
    collected = collect_sources(["src/a.cu", "src/skip.cu"], config)
    assert collected.sources.files == ["src/a.cu", "src/tile.cuh"]
    assert collected.walked == ("src/a.cu", "src/skip.cu", "src/tile.cuh")  # the merged flags cover all three
    mode = lock_args.LockMode(root / "kxform.lock", write=True, strict=False)
    _, plan, _ = lock_args.prepare(mode, config, ["src/a.cu", "src/skip.cu"])
    assert len(calls) == 3
    assert sorted(path for path, _ in plan.files) == [str(root / "src" / "a.cu"), str(root / "src" / "tile.cuh")]


def test_lock_with_out_dir_copies_the_headers_a_run_without_lock_copies(tmp_path: Path) -> None:
    """`--lock -o OUT` writes the same copies as `-o OUT`: the header beside the named
    file too (its copy must sit beside the includer's for `#include "..."` to find it)."""
    root = _tree(tmp_path)
    plain = run_cli("apply", "-o", "plain", "src/a.cu", cwd=root)
    assert plain.returncode == 0, plain.stderr
    locked = run_cli("apply", "--lock", "-o", "locked", "src/a.cu", cwd=root)
    assert locked.returncode == 0, locked.stderr

    def copies(out: str) -> dict[str, bytes]:  # everything under OUT but kxform's own .kxform/ (the run's log)
        found = (
            p.relative_to(root / out)
            for p in sorted((root / out).rglob("*"))
            if p.is_file() and ".kxform" not in p.relative_to(root / out).parts
        )
        return {str(p): (root / out / p).read_bytes() for p in found}

    assert copies("plain") == copies("locked")
    assert set(copies("locked")) == {"src/a.cu", "src/tile.cuh"}


def test_an_unknown_pass_is_reported_before_a_missing_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The walk comes after the checks that need no source: the option at fault is named,
    with or without --lock, and nothing is walked or logged for a run that cannot start."""
    monkeypatch.chdir(tmp_path)
    calls = _count_walks(monkeypatch)
    for extra in ([], ["--lock"]):
        assert main(["apply", "--pass", "nosuch", *extra, "missing.cu"]) == 2
        assert capsys.readouterr().err.startswith("kxform: error: unknown pass 'nosuch' (passes: ")
    assert main(["apply", "--pass", "swizzle", "missing.cu"]) == 2
    assert capsys.readouterr().err.strip() == "kxform: error: missing.cu: no such file or directory"
    assert calls == [("missing.cu",)] and not (tmp_path / ".kxform").exists()


def test_a_directory_with_no_source_to_process_is_an_error_naming_it(tmp_path: Path) -> None:
    """`kxform apply docs/` (no .cu, .cuh or .hip there) is a mistyped path, not a run that
    rewrote "0 files": exit 2, one line naming it, nothing written (not even a log)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.txt").write_text("__global__ void k() {}\n")
    _tree(tmp_path)
    proc = run_cli("apply", "--pass", "swizzle", "src", "docs", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("kxform: error: docs: no CUDA/HIP source to process under it (none there;")
    assert not (tmp_path / ".kxform").exists() and "kxform_block" not in (tmp_path / "src" / "a.cu").read_text()
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "skip.cu").write_text(KERNEL)  # the configuration excludes every skip.cu
    excluded = run_cli("apply", "only", cwd=tmp_path)
    assert excluded.returncode == 2 and "only: no CUDA/HIP source to process under it (the 1 there are excluded" in (
        excluded.stderr
    )
    assert run_cli("apply", "src", cwd=tmp_path).returncode == 0  # a tree with sources runs as before
