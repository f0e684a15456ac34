"""`kxform apply --proposer heuristic|lock|claude` from the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kxform.cli.main import main

from conftest import CORPORA, needs_nvcc, run_cli
from llm_replies import PLANTED_KEY, answer

GROUPED4 = (
    "per = gx <= 1073741823 ? 4 * gx : 4294967295\nfirst = (pid / per) * 4\nsize = min(gy - first, 4)\n"
    "lx = (pid % per) / size\n"
    "ly = first + (pid % per) % size"
)


@pytest.fixture
def sgemm(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sg")
    return tmp_path / "sg" / "sgemm_tiled.cu"


def _records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_default_proposer_is_the_heuristic(sgemm: Path, tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    done = run_cli("apply", "--pass", "swizzle", "--verify", "static", "--diff", "--log", str(log), str(sgemm))
    assert done.returncode == 0, done.stderr
    (kernel,) = [r for r in _records(log) if r["type"] == "kernel"]
    assert kernel["proposal"]["proposer"] == "heuristic" and kernel["proposal"]["params"]["pattern"] == "grouped"


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_lock_replays_a_recorded_formula(sgemm: Path, tmp_path: Path, suffix: str) -> None:
    record = tmp_path / f"decisions{suffix}"
    if suffix == ".json":
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
                            "payload": GROUPED4,
                            "proposer": "claude",
                            "model": "m",
                            "evidence": "measured",
                            "cost_usd": 0.5,
                            "tokens": 1234,
                        }
                    ],
                }
            )
        )
    else:
        body = GROUPED4.replace("\n", "\\n")
        record.write_text(
            f'version = 1\n[[decision]]\nkernel = "sgemm_tiled"\npass = "swizzle"\n'
            f'params = {{ pattern = "custom" }}\npayload = "{body}"\n'
        )
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
    assert done.returncode == 0, done.stderr
    assert "kxform_swizzle_custom_" in sgemm.read_text() and "(4 * gx) : 4294967295" in sgemm.read_text()
    (kernel,) = [r for r in _records(log) if r["type"] == "kernel"]
    assert kernel["outcome"] == "applied" and kernel["proposal"]["proposer"] == "lock"
    assert [c["name"] for c in kernel["checks"]][:2] == ["formula", "bijection"]
    assert kernel["proposal"]["payload"] == GROUPED4 and kernel["verify_policy"]["compare"]["mode"] == "exact"
    if suffix == ".json":  # what the record says of where the decision came from travels with the proposal
        assert kernel["proposal"]["provenance"] == {
            "proposer": "lock",
            "model": "m",
            "evidence": "measured",
            "cost_usd": 0.5,
            "tokens": 1234,
        }
        assert "recorded decision (claude, m)" in kernel["proposal"]["rationale"]
    else:
        assert kernel["proposal"]["provenance"] == {"proposer": "lock", "evidence": "rule"}


def test_lock_leaves_kernels_without_a_decision_alone(sgemm: Path, tmp_path: Path) -> None:
    record = tmp_path / "d.json"
    record.write_text(
        json.dumps(
            {
                "version": 1,
                "decisions": [
                    {
                        "file": "other/sgemm_tiled.cu",
                        "kernel": "sgemm_tiled",
                        "pass": "swizzle",
                        "params": {"pattern": "column"},
                    }
                ],
            }
        )
    )
    before = sgemm.read_bytes()
    done = run_cli(
        "apply", "--pass", "swizzle", "--proposer", "lock", "--lock", str(record), "--verify", "static", str(sgemm)
    )
    assert done.returncode == 0 and sgemm.read_bytes() == before
    assert "not applied to 'sgemm_tiled': no recorded decision in the lock record" in done.stderr


@pytest.mark.parametrize(
    "content, words",
    [
        ('{"decisions": []}', "needs `version = 1`"),
        (
            '{"version": 1, "decisions": [{"kernel": "k", "pass": "swizzle", "shell": "rm -rf /"}]}',
            "unknown key 'shell'",
        ),
        ('{"version": 1, "decisions": [{"kernel": 3, "pass": "swizzle"}]}', "`kernel` must be a non-empty string"),
        ('{"version": 1, "decisions": [{"kernel": "k", "pass": "swizzle", "params": {"g": [1]}}]}', "`params` must"),
        ("{not json", "not a valid JSON decision record"),
        (
            '{"version": 1, "decisions": [{"kernel": "k", "pass": "swizzle", "evidence": "vibes"}]}',
            "`evidence` must be",
        ),
        ('{"version": 1, "decisions": [{"kernel": "k", "pass": "swizzle", "cost_usd": "free"}]}', "`cost_usd` must be"),
    ],
)
def test_a_bad_record_is_a_one_line_usage_error(sgemm: Path, tmp_path: Path, content: str, words: str) -> None:
    record = tmp_path / "bad.json"
    record.write_text(content)
    before = sgemm.read_bytes()
    done = run_cli("apply", "--pass", "swizzle", "--proposer", "lock", "--lock", str(record), str(sgemm))
    assert done.returncode == 2 and words in done.stderr and str(record) in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and sgemm.read_bytes() == before


@pytest.mark.parametrize(
    "args, words",
    [
        (["--proposer", "oracle"], "unknown proposer 'oracle'"),
        (["--proposer", "lock"], "--proposer lock: no lockfile at"),  # it reads kxform.lock; there is none
        (["--lock", "x.json"], "the lockfile is TOML; a .json decision record is only replayed"),
        (["--relock"], "--relock goes with --lock"),
        (["--proposer", "lock", "--no-lock"], "--no-lock contradicts"),
        (["--attempts", "3"], "--attempts goes with --proposer claude"),
        (["--model", "claude-opus-4-5"], "--model goes with --proposer claude"),
    ],
)
def test_proposer_options_are_checked(sgemm: Path, args: list[str], words: str) -> None:
    done = run_cli("apply", "--pass", "swizzle", *args, str(sgemm))
    assert done.returncode == 2 and words in done.stderr, done.stderr


@pytest.mark.slow
def test_claude_without_a_key_is_a_clear_error_and_touches_nothing(sgemm: Path, tmp_path: Path) -> None:
    before = sgemm.read_bytes()
    done = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--proposer",
        "claude",
        str(sgemm),
        cwd=tmp_path,
        env={"ANTHROPIC_API_KEY": "", "KXFORM_LLM_REPLAY": ""},
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "needs ANTHROPIC_API_KEY" in done.stderr and "--proposer heuristic" in done.stderr
    assert sgemm.read_bytes() == before and not (tmp_path / ".kxform").exists()


@pytest.mark.slow
def test_claude_refuses_measure_without_a_gpu_before_asking(sgemm: Path, tmp_path: Path) -> None:
    replay = tmp_path / "empty.json"
    replay.write_text('{"version": 1, "exchanges": []}')
    done = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--proposer",
        "claude",
        "--measure",
        "--verify",
        "cpu",
        str(sgemm),
        cwd=tmp_path,
        env={"KXFORM_LLM_REPLAY": str(replay)},
    )
    assert done.returncode == 2 and "--measure needs the GPU runtime" in done.stderr


def test_claude_without_the_sdk_names_the_extra(
    sgemm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "anthropic", None)  # `import anthropic` fails as if absent
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    assert main(["apply", "--pass", "swizzle", "--proposer", "claude", str(sgemm)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'kxform[llm]'" in err and PLANTED_KEY not in err


def test_inspect_prompt_shows_what_the_model_would_see() -> None:
    done = run_cli("inspect", "--prompt", str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"), "--kernel", "sgemm_tiled")
    assert done.returncode == 0, done.stderr
    for words in (
        "=== system ===",
        "## Memory accesses",
        "A: depends on blockIdx.y only",
        "x-neighbour (1,0) 100%",
        "## Hardware",
        "132 SMs",
        "## How attempts are ranked",
        '"name": "propose_swizzle"',
        '"strict": true',
        "Formula (`formula` field)",
    ):
        assert words in done.stdout, words
    bad = run_cli("inspect", "--prompt", str(CORPORA / "chained_scan" / "chained_scan.cu"), "--kernel", "nope")
    assert bad.returncode == 2 and "no kernel 'nope'" in bad.stderr


@needs_nvcc
@pytest.mark.slow
def test_a_recorded_claude_session_from_the_command_line(sgemm: Path, tmp_path: Path) -> None:
    """Recorded HTTP traffic replayed (KXFORM_LLM_REPLAY) through the real client: the
    session, the apply run that follows, the log's token and cost records, and no key."""
    replay = tmp_path / "traffic.json"
    exchanges = [
        {"response": {"status": r.status, "headers": dict(r.headers), "body": r.body}}
        for r in (answer(formula="lx = bx; ly = by - 1"), answer(formula=GROUPED4))
    ]
    replay.write_text(json.dumps({"version": 1, "exchanges": exchanges}))
    log, decisions, cache = tmp_path / "run.jsonl", tmp_path / "kept.json", tmp_path / "cache"
    done = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "--proposer",
        "claude",
        "--attempts",
        "2",
        "--verify",
        "cpu",
        "--log",
        str(log),
        "--record",
        str(decisions),
        str(sgemm),
        cwd=tmp_path,
        env={"KXFORM_LLM_REPLAY": str(replay), "ANTHROPIC_API_KEY": PLANTED_KEY, "KXFORM_CACHE_DIR": str(cache)},
    )
    assert done.returncode == 0, done.stderr
    assert "attempt 1: swizzle{pattern=custom" in done.stderr and "failed (check)" in done.stderr
    assert "1 of 1 kernel(s) with a verified proposal" in done.stderr
    records = _records(log)
    attempts = [r for r in records if r["type"] == "llm_attempt"]
    assert [a["status"] for a in attempts] == ["failed", "verified"]
    assert all(a["usage"]["input_tokens"] == 6000 and a["usage"]["cost_usd"] == pytest.approx(0.024) for a in attempts)
    summary = next(r for r in records if r["type"] == "llm_summary")
    assert summary["usage"]["cost_usd"] == pytest.approx(0.048) and summary["decisions"] == 1
    prompt = next(r for r in records if r["type"] == "llm_prompt")
    assert "## Memory accesses" in prompt["context"] and prompt["tool"]["strict"] is True
    (kernel,) = [r for r in records if r["type"] == "kernel"]
    assert kernel["outcome"] == "applied" and "verify" in [c["name"] for c in kernel["checks"]]
    provenance = kernel["proposal"]["provenance"]
    assert (provenance["proposer"], provenance["model"], provenance["evidence"]) == (
        "claude",
        "claude-sonnet-4-6",
        "predicted",
    )  # no GPU here: ranked by prediction, and it says so
    assert provenance["cost_usd"] == pytest.approx(0.048) and provenance["tokens"] == 12800
    assert "(4 * gx) : 4294967295" in sgemm.read_text()
    assert json.loads(decisions.read_text())["decisions"][0]["payload"] == GROUPED4
    stored = log.read_text() + "".join(p.read_text(errors="replace") for p in cache.rglob("*.json"))
    assert PLANTED_KEY not in stored and PLANTED_KEY not in done.stderr + done.stdout
