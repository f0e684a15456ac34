"""`kxform verify ORIGINAL REWRITTEN` launches each file as its own launcher says: a
structural rewrite (rows, smem-tile) is verified again from the two files alone, the
launch used is stated, and a rewritten launcher that leaves work undone or cannot be read
is a mismatch or "could not tell", never "ok"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import ROOT, needs_nvcc, run_cli
from kxform.frontend.source import validate_bytes
from kxform.verify.own_launch import own_launch, pair_policy
from swizzle_helpers import rewrite

EMBEDDING = ROOT / "corpora" / "naive" / "embedding"


def _rows_rewrite(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(EMBEDDING, tmp_path / "embedding")
    original = tmp_path / "embedding" / "naive.cu"
    result = rewrite(original.read_bytes(), "rows{lanes=32,rows=4}", path=str(original))
    rewritten = tmp_path / "embedding" / "rewritten.cu"
    rewritten.write_bytes(result.new_data)
    return original, rewritten


def test_the_rewritten_launch_is_read_from_its_own_file_and_anchored_by_the_original(tmp_path: Path) -> None:
    original, rewritten = _rows_rewrite(tmp_path)
    files = [validate_bytes(str(p), p.read_bytes()) for p in (original, rewritten)]
    own = own_launch(*files, "embedding_naive")
    assert own.binding.block == ("(EMBEDDING_NAIVE_ROWS) * EMBEDDING_NAIVE_LANES",)
    assert dict(own.binding.values) == {"EMBEDDING_NAIVE_ROWS": 4, "EMBEDDING_NAIVE_LANES": 32}
    assert own.binding.anchor is not None and own.binding.anchor.block == ("(256)",)  # the original's own launch
    alike = own_launch(files[0], files[0], "embedding_naive")
    assert alike.binding.is_spec and "launch 'embedding_naive' alike" in alike.note
    policy, note = pair_policy(*files, "embedding_naive")
    assert policy.compare.mode == "spec" and "REWRITTEN as its launcher says" in note
    unreadable = rewritten.read_text().replace("embedding_naive<<<grid_size,", "embedding_naive<<<grid_size + extra,")
    gone = own_launch(files[0], validate_bytes("r.cu", unreadable.encode()), "embedding_naive")
    assert gone.binding.grid == ("unknown",) and "could not tell" in gone.note


@pytest.mark.slow
@needs_nvcc
def test_kxform_verify_re_verifies_a_structural_rewrite_and_says_which_launch(tmp_path: Path) -> None:
    original, rewritten = _rows_rewrite(tmp_path)
    spec = str(original.parent / "naive.kxspec.toml")
    args = ("--kernel", "embedding_naive", "--spec", spec, "--runtime", "cpu")
    proc = run_cli("verify", str(original), str(rewritten), *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "launch of 'embedding_naive': ORIGINAL as its launcher says" in proc.stdout
    assert "EMBEDDING_NAIVE_LANES=32" in proc.stdout
    # planted: the rewritten launcher covers half the rows: elements never written
    half = rewritten.read_text().replace("embedding_naive<<<grid_size,", "embedding_naive<<<grid_size / 2,")
    (original.parent / "half.cu").write_text(half)
    proc = run_cli("verify", str(original), str(original.parent / "half.cu"), *args)
    assert proc.returncode == 1 and "MISMATCH" in proc.stdout + proc.stderr
    # planted: a launch that reads what cannot be evaluated: could not tell (exit 3), never ok
    odd = rewritten.read_text().replace("embedding_naive<<<grid_size,", "embedding_naive<<<grid_size + extra,")
    (original.parent / "odd.cu").write_text(odd)
    proc = run_cli("verify", str(original), str(original.parent / "odd.cu"), *args)
    assert proc.returncode == 3 and "could not tell" in proc.stdout + proc.stderr
