"""End-to-end `--proposer claude` sessions on corpus kernels, through the real anthropic
client with written wire-format answers: a rejected first answer, its reason sent
back, then a custom formula that kxform proves, applies and verifies on the CPU
runtime; a re-run answered from the cache; the key never stored."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from kxform.engine.pass_api import Outcome
from kxform.orchestrate.runner import ApplyConfig, run_apply
from kxform.hw import load_profile
from kxform.log.report import WriteBack
from kxform.propose.registry import ProposerSpec
from kxform.propose.search import search
from kxform.propose.session import SessionOptions

from conftest import CORPORA, needs_nvcc
from llm_replies import PLANTED_KEY, answer, client, raw_answer

SESSIONS = [
    # (corpus dir, file, kernel, a formula kxform must reject, the reason, the formula it proves)
    (
        "sgemm_tiled",
        "sgemm_tiled.cu",
        "sgemm_tiled",
        "lx = (bx + by) % gx\nly = by / 2",
        "bijection",
        "per = gx <= 1073741823 ? 4 * gx : 4294967295\nfirst = (pid / per) * 4\nsize = min(gy - first, 4)\n"
        "lx = (pid % per) / size\n"
        "ly = first + (pid % per) % size",
    ),
    (
        "transpose",
        "transpose.cu",
        "transposeNoBankConflicts",
        "ly = pid % gy\nlx = (pid / gy + ly) % (gx - 1)",
        "division-by-zero",
        "ly = pid % gy\nlx = pid / gy",
    ),  # column-major: a skewed `(pid / gy + ly) % gx` takes the solver ~60 s
    (
        "templated_matmul",
        "matmul_tiled.cu",
        "matmul_tiled",
        "row = pid / gx\ncol = pid % gx\nlx = row % 2 == 0 ? col : gx - col\nly = row",
        "range",
        "row = pid / gx\ncol = pid % gx\nlx = row % 2 == 0 ? col : gx - 1 - col\nly = row",
    ),
]


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)


def _copy(tmp_path: Path, corpus: str) -> Path:
    target = tmp_path / corpus
    shutil.copytree(CORPORA / corpus, target)
    return target


def _session(paths: list[str], replies: list, cache: Path, records: list[dict]):  # type: ignore[no-untyped-def]
    claude, transport = client(replies, cache_dir=str(cache))
    config = ApplyConfig("swizzle", hw=load_profile("h100"), verify="cpu", semantic=False)
    return search(paths, config, SessionOptions(attempts=2, patience=2), claude, records.append), transport, config


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize("corpus, name, kernel, bad, why, good", SESSIONS, ids=[s[0] for s in SESSIONS])
def test_a_written_answer_is_proved_applied_and_verified(
    tmp_path: Path, keyed: None, corpus: str, name: str, kernel: str, bad: str, why: str, good: str
) -> None:
    path = str(_copy(tmp_path, corpus) / name)
    records: list[dict] = []
    result, transport, config = _session([path], [answer(formula=bad), answer(formula=good)], tmp_path / "llm", records)
    first, second = [r for r in records if r["type"] == "llm_attempt"]
    assert first["status"] == "failed" and first["stage"] == "check" and why in first["reason"]
    assert second["status"] == "verified" and second["improved"], {k: second.get(k) for k in ("stage", "reason")}
    assert [c["name"] for c in second["checks"]][:2] == ["formula", "bijection"]
    assert "verified on the cpu runtime" in next(c["detail"] for c in second["checks"] if c["name"] == "verify")
    # the rejection went back to the model as the tool result of its first call
    sent = transport.exchanges[1].request_body["messages"]
    assert sent[-1]["content"][0]["type"] == "tool_result" and sent[-1]["content"][0]["is_error"] is True
    assert why in sent[-1]["content"][0]["content"]
    # tokens and cost per attempt, and the session total
    assert first["usage"]["input_tokens"] == 6000 and first["usage"]["cost_usd"] == pytest.approx(0.024)
    summary = next(r for r in records if r["type"] == "llm_session")
    assert summary["usage"]["requests"] == 2 and summary["usage"]["cost_usd"] == pytest.approx(0.048)
    (decision,) = result.decisions
    assert decision.payload == good and decision.kernel == kernel
    # the ordinary pipeline applies the decision: every check again, then verification
    before = Path(path).read_bytes()
    report, outcomes = run_apply(
        [path], replace(config, proposer=ProposerSpec("lock", result.decisions), write_back=WriteBack.WRITE, jobs=1)
    )
    (outcome,) = outcomes
    applied = [r for r in outcome.results if r.outcome is Outcome.APPLIED]
    assert len(applied) == 1 and report.exit_code == 0
    names = [c.name for c in applied[0].checks]
    assert names[:2] == ["formula", "bijection"] and "compile" in names and "verify" in names
    verify = next(c for c in applied[0].checks if c.name == "verify")
    assert verify.ok and "verified on the cpu runtime" in verify.detail
    text = Path(path).read_text()
    assert text != before.decode() and "kxform_swizzle_custom_" in text
    # the formula as its typed tree prints it: each name of the answer, prefixed, assigned once
    names = [line.split("=", 1)[0].strip() for line in good.splitlines()]
    helper = text[text.index("kxform_swizzle_custom_") :]
    assert all(f"const unsigned kx_{n} = " in helper or n in ("lx", "ly") for n in names), helper[:1500]


@needs_nvcc
@pytest.mark.slow
def test_a_rerun_is_answered_from_the_cache_for_free(tmp_path: Path, keyed: None) -> None:
    corpus, name, _, bad, _, good = SESSIONS[0]
    path = str(_copy(tmp_path, corpus) / name)
    first: list[dict] = []
    result, transport, _ = _session([path], [answer(formula=bad), answer(formula=good)], tmp_path / "llm", first)
    assert len(transport.exchanges) == 2
    again: list[dict] = []
    result2, transport2, _ = _session([path], [], tmp_path / "llm", again)
    assert transport2.exchanges == []  # nothing reached the transport: no request, no cost
    attempts = [r for r in again if r["type"] == "llm_attempt"]
    assert [a["status"] for a in attempts] == ["failed", "verified"]
    assert all(a["usage"]["cached"] and a["usage"]["cost_usd"] == 0 and a["usage"]["requests"] == 0 for a in attempts)
    assert result2.decisions == result.decisions
    stored = "".join(p.read_text() for p in (tmp_path / "llm").iterdir())
    assert PLANTED_KEY not in stored and "authorization" not in stored.lower()
    assert set(transport.keys_seen) == {PLANTED_KEY}  # the SDK did send it; nothing kept it
    assert all(not {"x-api-key", "authorization"} & {h.lower() for h in e.request_headers} for e in transport.exchanges)
    log_text = json.dumps(first) + json.dumps(again)
    assert PLANTED_KEY not in log_text


@pytest.mark.slow
def test_a_tile_answer_is_asked_in_the_pass_space_and_verified_under_its_policy(tmp_path: Path, keyed: None) -> None:
    """The tile tool is generated from the tile pass's space for the kernel (the space
    `kxform.api.space_of` gives a tuner); an answer that breaks a derived constraint is
    refused by kxform, the next one is verified on the CPU runtime at its own launch (the
    pass's policy) and then applied by the ordinary pipeline, carrying claude's provenance."""
    from kxform.api import space_of

    path = str(_copy(tmp_path, "sgemm_tiled") / "sgemm_tiled.cu")
    space = space_of(Path(path).read_bytes(), "sgemm_tiled", path=path)
    assert space.names == ("TILE",)

    def tile(value: int) -> object:
        return raw_answer(
            {"last_attempt": "-", "expectation": "smaller tiles, more blocks per SM", "TILE": value},
            name="propose_tile",
        )

    claude, transport = client([tile(64), tile(8)], cache_dir=str(tmp_path / "llm"))
    config = ApplyConfig("tile", hw=load_profile("h100"), verify="cpu", semantic=False)
    records: list[dict] = []
    result = search([path], config, SessionOptions(attempts=2, patience=2), claude, records.append)
    prompt = next(r for r in records if r["type"] == "llm_prompt")
    schema = prompt["tool"]["input_schema"]["properties"]
    assert prompt["tool"]["name"] == "propose_tile" and set(schema) == {"last_attempt", "expectation", "TILE"}
    assert (
        "1..1024" in schema["TILE"]["description"]
        and "TILE * TILE <= hw.max_threads_per_block" in prompt["tool"]["description"]
    )
    first, second = [r for r in records if r["type"] == "llm_attempt"]
    assert first["status"] == "rejected" and first["stage"] == "answer" and "constraint" in first["reason"]
    assert second["status"] == "verified" and second["proposal"] == "tile{TILE=8}"
    verify = next(c["detail"] for c in second["checks"] if c["name"] == "verify")
    assert "verified on the cpu runtime" in verify and "launch from" in verify  # the tile pass's launch policy
    (decision,) = result.decisions
    assert decision.params == (("TILE", 8),) and decision.evidence == "predicted"
    report, outcomes = run_apply(
        [path],
        replace(
            config, proposer=ProposerSpec("claude", result.decisions, "session"), write_back=WriteBack.WRITE, jobs=1
        ),
    )
    (applied,) = [r for r in outcomes[0].results if r.outcome is Outcome.APPLIED]
    assert report.exit_code == 0 and applied.proposal is not None
    assert applied.proposal.provenance.proposer == "claude" and applied.proposal.provenance.model == decision.model
    assert applied.policy.required and any(c.name == "verify" and c.ok for c in applied.checks)
    assert "#define TILE 8" in Path(path).read_text()


@pytest.mark.parametrize("value", ['16\nstatic int x = system("touch pwned");', "32", 4096, 999])
def test_a_tile_answer_outside_the_typed_checked_space_is_refused_and_nothing_written(
    tmp_path: Path, keyed: None, value: object
) -> None:
    """A recorded model answer is data typed against the pass's space, never text for the
    source: a string (even "32"), a value outside the domain or one that breaks a derived
    constraint is refused at the answer stage and nothing is decided or written."""
    path = str(_copy(tmp_path, "sgemm_tiled") / "sgemm_tiled.cu")
    before = Path(path).read_bytes()
    reply = raw_answer({"last_attempt": "-", "expectation": "-", "TILE": value}, name="propose_tile")
    claude, _ = client([reply], cache_dir=str(tmp_path / "llm"))
    config = ApplyConfig("tile", hw=load_profile("h100"), verify="cpu", semantic=False)
    records: list[dict] = []
    result = search([path], config, SessionOptions(attempts=1, patience=1), claude, records.append)
    (attempt,) = [r for r in records if r["type"] == "llm_attempt"]
    assert attempt["status"] == "rejected" and attempt["stage"] == "answer", attempt
    assert not result.decisions and Path(path).read_bytes() == before
