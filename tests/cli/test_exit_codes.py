"""Exit codes that do not hide failures: a kernel that does not parse (2, the rest of the
tree still processed), `--kernel` naming no kernel (2), a forced configuration the pass
refuses (1), and an API that does not answer (2, nothing recorded in a lock)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, run_cli
from llm_replies import PLANTED_KEY, error

HELD_OUT = Path(__file__).parents[1] / "fixtures" / "heldout"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    root.mkdir()
    shutil.copy(CORPORA / "syntax_error" / "vector_add_broken.cu", root)
    shutil.copy(HELD_OUT / "naive_transpose.cu", root)
    return root


def test_a_kernel_that_does_not_parse_is_an_error_line_and_exit_2_the_rest_is_processed(tree: Path) -> None:
    broken = (tree / "vector_add_broken.cu").read_bytes()
    done = run_cli("apply", "--pass", "swizzle", "--pattern", "grouped", "--verify", "static", str(tree))
    assert done.returncode == 2, done.stderr
    assert f"{tree / 'vector_add_broken.cu'}:9:13: syntax error: kernel 'vector_add' does not parse" in done.stderr
    assert (tree / "vector_add_broken.cu").read_bytes() == broken
    assert "kxform_swizzle_grouped" in (tree / "naive_transpose.cu").read_text()  # the other file is rewritten


def test_a_kernel_name_that_names_no_kernel_is_exit_2(tree: Path) -> None:
    path = tree / "naive_transpose.cu"
    before = path.read_bytes()
    done = run_cli(
        "apply", "--pass", "swizzle", "--pattern", "grouped", "--verify", "static", "--kernel", "nosuch", str(path)
    )
    assert done.returncode == 2 and "--kernel nosuch: no kernel of that name" in done.stderr
    assert path.read_bytes() == before
    named = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--pattern",
        "grouped",
        "--verify",
        "static",
        "--diff",
        "--kernel",
        "naive_transpose",
        str(path),
    )
    assert named.returncode == 0, named.stderr


def test_a_forced_configuration_the_pass_refuses_is_exit_1(tmp_path: Path) -> None:
    shutil.copytree(CORPORA / "transpose", tmp_path / "t")
    path = tmp_path / "t" / "transpose.cu"
    before = path.read_bytes()
    done = run_cli("apply", "--pass", "tile{TILE=32}", "--verify", "static", str(path))
    assert done.returncode == 1, done.stderr
    assert "TILE is not a parameter" in done.stderr and "1 missed" in done.stderr
    assert path.read_bytes() == before
    unforced = run_cli("apply", "--pass", "tile", "--verify", "static", "--diff", str(path))
    assert unforced.returncode == 0, unforced.stderr


@pytest.mark.parametrize("status, kind", [(500, "api_error"), (529, "overloaded_error")])
@pytest.mark.slow
def test_an_api_that_fails_is_exit_2_and_nothing_is_recorded(tmp_path: Path, status: int, kind: str) -> None:
    root = tmp_path / "sg"
    shutil.copytree(CORPORA / "sgemm_tiled", root)
    before = (root / "sgemm_tiled.cu").read_bytes()
    replay = tmp_path / "traffic.json"
    replies = [error(status, kind, "the server failed")] * 4  # the first request and the SDK's 3 retries
    exchanges = [{"response": {"status": r.status, "headers": dict(r.headers), "body": r.body}} for r in replies]
    replay.write_text(json.dumps({"version": 1, "exchanges": exchanges}))
    done = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--proposer",
        "claude",
        "--attempts",
        "1",
        "--verify",
        "static",
        "--lock",
        "--record",
        str(tmp_path / "kept.json"),
        ".",
        cwd=root,
        env={"KXFORM_LLM_REPLAY": str(replay), "ANTHROPIC_API_KEY": PLANTED_KEY},
    )
    assert done.returncode == 2, done.stderr
    assert "the API failed on" in done.stderr and "nothing recorded" in done.stderr
    assert not (root / "kxform.lock").exists() and not (tmp_path / "kept.json").exists()
    assert (root / "sgemm_tiled.cu").read_bytes() == before
