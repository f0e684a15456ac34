"""Adversarial answers: every one goes through the real anthropic client (an injected
transport serving wire-format responses) and kxform's whole attempt loop, and none is
accepted; each is rejected at the right stage with the right reason."""

from __future__ import annotations

import pytest

from kxform.engine.pass_api import PassContext, RunOptions
from kxform.orchestrate.runner import ApplyConfig
from kxform.errors import UsageError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink
from kxform.passes.swizzle import Swizzle
from kxform.propose.context import build_context
from kxform.propose.evaluate import Evaluator
from kxform.propose.prompt import space_text
from kxform.propose.session import SessionOptions, run_kernel
from kxform.propose.tools import tool_for
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.stage import spec_for_file

from conftest import CORPORA
from llm_replies import PLANTED_KEY, answer, client, error, message, raw_answer, tool_use

GOOD = {
    "last_attempt": "x",
    "expectation": "y",
    "pattern": "grouped",
    "group": 8,
    "along": "y",
    "xcds": None,
    "formula": None,
}
C_INJECTION = "lx = bx; ly = by; }\n__global__ void evil(int *p) { p[0] = 1; }\nstatic void f() {"

# (id, replies, status, stage, words in the reason)
CASES = [
    ("non-bijective formula", [answer(formula="lx = bx\nly = by / 2 * 2")], "failed", "check", "bijection"),
    (
        "non-bijective formula, in range",
        [answer(formula="lx = (bx + by) % gx\nly = by % 2")],
        "failed",
        "check",
        "already taken",
    ),
    (
        "overflow at large grids",
        [answer(formula="lx = pid * 4096 % gx\nly = by")],
        "failed",
        "check",
        "formula: overflow",
    ),
    (
        "wrap-around below zero at some shapes",
        [answer(formula="lx = bx\nly = (by + 8 - gy) % gy")],
        "failed",
        "check",
        "subtraction below zero",
    ),
    (
        "division by zero at some shapes",
        [answer(formula="lx = bx % (gx / 2)\nly = by")],
        "failed",
        "check",
        "division-by-zero",
    ),
    ("shift by 32 or more", [answer(formula="lx = bx + (gx >> (gy + 31))\nly = by")], "failed", "check", "shift"),
    ("maps outside the grid", [answer(formula="lx = bx + 1\nly = by")], "failed", "check", "outside the grid"),
    ("parameter out of range", [answer("grouped", group=0, along="y")], "rejected", "answer", "schema"),
    ("parameter mistyped (string)", [answer("grouped", group="8", along="y")], "rejected", "answer", "schema"),
    (
        "parameter mistyped (float)",
        [answer("grouped", group=8.0, along="y")],
        "rejected",
        "answer",
        "expected an integer",
    ),
    ("parameter mistyped (bool)", [answer("grouped", group=True, along="y")], "rejected", "answer", "schema"),
    ("unknown pattern", [answer("row")], "rejected", "answer", "schema"),
    ("parameter the pattern does not take", [answer("column", group=4)], "rejected", "answer", "must be null"),
    (
        "formula with a library pattern",
        [answer("grouped", formula="lx = bx\nly = by", group=8, along="y")],
        "rejected",
        "answer",
        "use pattern = custom",
    ),
    ("custom without formula", [answer("custom")], "rejected", "answer", "formula-missing"),
    ("injected C", [answer(formula=C_INJECTION)], "rejected", "answer", "formula-grammar"),
    ("preprocessor text", [answer(formula="#define lx bx\nlx = bx\nly = by")], "rejected", "answer", "character '#'"),
    ("inline asm", [answer(formula='lx = bx; ly = by; asm("exit;")')], "rejected", "answer", "formula-grammar"),
    ("huge expression", [answer(formula="lx = bx" + " + 0" * 700 + "\nly = by")], "rejected", "answer", "formula-size"),
    ("huge reasoning", [raw_answer({**GOOD, "expectation": "z" * 20000})], "rejected", "answer", "too-large"),
    (
        "extra field ignoring the schema",
        [raw_answer({**GOOD, "code": "__global__ void k() {}"})],
        "rejected",
        "answer",
        "Additional properties",
    ),
    (
        "missing field",
        [raw_answer({k: v for k, v in GOOD.items() if k != "along"})],
        "rejected",
        "answer",
        "required property",
    ),
    ("input not an object", [raw_answer(["grouped", 8])], "rejected", "answer", "schema"),
    ("another tool", [raw_answer(GOOD, name="write_file")], "rejected", "answer", "wrong-tool"),
    (
        "text instead of a call",
        [message([{"type": "text", "text": "Use grouped with group 8."}], stop="end_turn")],
        "rejected",
        "answer",
        "no-tool-call",
    ),
    ("two calls", [message([tool_use(GOOD), tool_use(GOOD)])], "rejected", "answer", "several-calls"),
    (
        "refusal",
        [message([], stop="refusal", stop_details={"type": "refusal", "category": "cyber", "explanation": "declined"})],
        "rejected",
        "answer",
        "refusal",
    ),
    (
        "truncated at max_tokens",
        [message([tool_use({"last_attempt": "..."})], stop="max_tokens")],
        "rejected",
        "answer",
        "truncated",
    ),
    (
        "rate limited (429) on every retry",
        [error(429, "rate_limit_error", "Number of request tokens exceeded")] * 3,
        "api-error",
        "api",
        "rate-limit",
    ),
    (
        "server error (500) on every retry",
        [error(500, "api_error", "Internal server error")] * 3,
        "api-error",
        "api",
        "server-error",
    ),
    (
        "overloaded (529) on every retry",
        [error(529, "overloaded_error", "Overloaded")] * 3,
        "api-error",
        "api",
        "overloaded",
    ),
    ("an error body with status 200", [error(200, "api_error", "odd")], "rejected", "answer", "not-a-message"),
]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """sgemm_tiled with its context and evaluator, built once for every case."""
    path = str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu")
    hw = load_profile("h100")
    model = parse_model(read_source(path))
    ctx = PassContext(model, hw, RunOptions(arch=hw.arch), RemarkSink())
    pass_ = Swizzle()
    analysis = pass_.analyse(ctx)["sgemm_tiled"]
    space = pass_.space(ctx, analysis)
    assert len(space)
    tool = tool_for("swizzle", space)
    spec = spec_for_file(path).find("sgemm_tiled")  # type: ignore[union-attr]
    runtime = CpuRuntime()
    context = build_context(ctx, analysis, spec, runtime, False, space_text(tool, space))
    config = ApplyConfig("swizzle", hw=hw, verify="cpu", semantic=False)
    evaluator = Evaluator(model.source, pass_, config, runtime, spec, context.footprint)
    return ctx, analysis, pass_, tool, context, evaluator


def _run(kernel, replies, attempts=1):  # type: ignore[no-untyped-def]
    ctx, analysis, pass_, tool, context, evaluator = kernel
    claude, transport = client(replies, retries=2, use_cache=False)
    records: list[dict] = []
    session = run_kernel(
        ctx, analysis, pass_, tool, context, evaluator, claude, SessionOptions(attempts, 2), records.append
    )
    return session, records, transport


@pytest.mark.parametrize("name, replies, status, stage, words", CASES, ids=[c[0] for c in CASES])
def test_adversarial_answer_is_not_accepted(
    kernel, monkeypatch: pytest.MonkeyPatch, name: str, replies: list, status: str, stage: str, words: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    session, records, transport = _run(kernel, replies)
    (attempt,) = session.attempts
    assert session.decision is None and session.best is None
    assert (attempt.status, attempt.stage) == (status, stage), attempt.reason
    assert words in attempt.reason, attempt.reason
    if status == "api-error":
        assert len(transport.exchanges) == 3  # the SDK retried twice before giving up
        assert session.stop.startswith("API failure")
    logged = repr(records)
    assert PLANTED_KEY not in logged and PLANTED_KEY not in attempt.reason


def test_the_suite_is_large_enough() -> None:
    assert len(CASES) >= 20


def test_a_rejection_reason_goes_back_and_the_next_answer_is_used(kernel, monkeypatch: pytest.MonkeyPatch) -> None:
    """Recovery: a transient 429, a refusal, then a valid answer that is verified and kept."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    replies = [error(429, "rate_limit_error", "slow down"), message([], stop="refusal"), raw_answer(GOOD)]
    session, records, transport = _run(kernel, replies, attempts=2)
    first, second = session.attempts
    assert first.status == "rejected" and "refusal" in first.reason
    assert second.status == "verified" and session.decision is not None
    assert session.decision.params == (("pattern", "grouped"), ("group", 8), ("along", "y"))
    assert (session.decision.proposer, session.decision.model, session.decision.evidence) == (
        "claude",
        "claude-sonnet-4-6",
        "predicted",
    )  # ranked by prediction: no GPU timing here
    assert session.decision.cost_usd == pytest.approx(session.usage.cost_usd) and session.decision.tokens == 12800
    # no tool call to answer after a refusal: the reason joins the next user turn as text
    last_user = transport.exchanges[-1].request_body["messages"][-1]
    assert last_user["role"] == "user" and "not usable" in last_user["content"][-1]["text"]
    assert "refusal" in last_user["content"][-1]["text"]


def test_rejected_credentials_stop_with_a_clear_error(kernel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    with pytest.raises(UsageError) as err:
        _run(kernel, [error(401, "authentication_error", "invalid x-api-key")])
    assert "ANTHROPIC_API_KEY" in str(err.value) and PLANTED_KEY not in str(err.value)


@pytest.mark.slow
def test_attempts_stop_early_when_they_stop_improving(kernel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    worse = {**GOOD, "group": 2}
    replies = [
        raw_answer(GOOD),
        raw_answer(worse),
        raw_answer({**GOOD, "pattern": "column", "group": None, "along": None}),
        raw_answer(GOOD),
    ]
    session, records, transport = _run(kernel, replies, attempts=4)
    assert [a.status for a in session.attempts] == ["verified", "verified", "verified"]
    assert [a.improved for a in session.attempts] == [True, False, False]
    assert session.stop.startswith("stopped early") and len(transport.exchanges) == 3
    assert session.best is not None and session.best.index == 1


def test_a_repeated_proposal_is_not_evaluated_again(kernel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    ctx, analysis, pass_, tool, context, evaluator = kernel
    claude, transport = client([raw_answer(GOOD), raw_answer(GOOD)], use_cache=False)
    session = run_kernel(ctx, analysis, pass_, tool, context, evaluator, claude, SessionOptions(2, 5), lambda r: None)
    first, second = session.attempts
    assert first.status == "verified" and second.status == "failed" and "repeats attempt 1" in second.reason
    assert not second.improved and session.best is first
