"""A remap that is a bijection on every sampled grid but not on all of them is refused
on every write path: a kxform.lock entry, `--proposer lock` and a recorded model answer
(through the real anthropic client over the recorded transport)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, logged_remarks, run_cli
from kxform.propose.lock import Decision
from kxform.propose.lockfile import digest, render
from llm_replies import PLANTED_KEY, answer

GX77 = "lx = select(gx == 77 && bx == 1, 0, bx)\nly = by"
REFUTED = "not a bijection: on grid 77x"


@pytest.fixture
def sgemm(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sg")
    return tmp_path / "sg" / "sgemm_tiled.cu"


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_lock_entry_with_the_gx77_formula_is_refused(sgemm: Path) -> None:
    text = sgemm.read_bytes()
    start = text.index(b"__global__ void sgemm_tiled")
    end = text.index(b"\n}\n", start) + 2
    entry = Decision(
        "sgemm_tiled",
        "swizzle",
        (("pattern", "custom"),),
        file="sgemm_tiled.cu",
        payload=GX77,
        proposer="claude",
        model="m",
        evidence="measured",
        source=digest(text[start:end]),
    )
    (sgemm.parent / "kxform.lock").write_bytes(render([entry]))
    log = sgemm.parent / "run.jsonl"
    done = run_cli(
        "apply", "--pass", "swizzle", "--verify", "static", "--lock", "--log", str(log), ".", cwd=sgemm.parent
    )
    assert done.returncode == 1, done.stderr
    assert sgemm.read_bytes() == text
    (kernel,) = [r for r in _records(log) if r["type"] == "kernel"]
    assert kernel["outcome"] == "failed" and REFUTED in " ".join(kernel["reasons"])


def test_proposer_lock_with_the_gx77_formula_is_refused(sgemm: Path, tmp_path: Path) -> None:
    record = tmp_path / "decisions.json"
    record.write_text(
        json.dumps(
            {
                "version": 1,
                "decisions": [
                    {
                        "file": "sg/sgemm_tiled.cu",
                        "kernel": "sgemm_tiled",
                        "pass": "swizzle",
                        "params": {"pattern": "custom"},
                        "payload": GX77,
                        "proposer": "claude",
                        "model": "m",
                        "evidence": "measured",
                    }
                ],
            }
        )
    )
    before = sgemm.read_bytes()
    log = tmp_path / "run.jsonl"
    done = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--proposer",
        "lock",
        "--lock",
        str(record),
        "--verify",
        "static",
        "--log",
        str(log),
        str(sgemm),
    )
    assert done.returncode == 1, done.stderr
    assert sgemm.read_bytes() == before and REFUTED in logged_remarks(done, sgemm.parent)
    (kernel,) = [r for r in _records(log) if r["type"] == "kernel"]
    assert kernel["outcome"] == "failed" and kernel["stage"] == "check"


@pytest.mark.slow
def test_a_recorded_model_answer_with_the_gx77_formula_is_refused(sgemm: Path, tmp_path: Path) -> None:
    replay = tmp_path / "traffic.json"
    reply = answer(formula=GX77)
    replay.write_text(
        json.dumps(
            {
                "version": 1,
                "exchanges": [
                    {"response": {"status": reply.status, "headers": dict(reply.headers), "body": reply.body}}
                ],
            }
        )
    )
    before = sgemm.read_bytes()
    log = tmp_path / "run.jsonl"
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
        "--log",
        str(log),
        "--record",
        str(tmp_path / "kept.json"),
        str(sgemm),
        cwd=tmp_path,
        env={"KXFORM_LLM_REPLAY": str(replay), "ANTHROPIC_API_KEY": PLANTED_KEY},
    )
    assert done.returncode == 0, done.stderr  # the model's answer was refused; nothing else went wrong
    assert sgemm.read_bytes() == before
    (attempt,) = [r for r in _records(log) if r["type"] == "llm_attempt"]
    assert (attempt["status"], attempt["stage"]) == ("failed", "check") and REFUTED in attempt["reason"]
    assert json.loads((tmp_path / "kept.json").read_text())["decisions"] == []
