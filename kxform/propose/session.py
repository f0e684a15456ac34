"""The attempt loop of `--proposer claude`: propose -> check -> apply -> verify -> measure
(or predict) -> reflect, per kernel, keeping the best verified result.

Each turn sends the conversation so far (the kernel's context first, then every
attempt and its result) and forces the pass's tool. The answer is read like hostile
input (answer.py) and becomes a `Proposal` whose provenance names the model, the
attempt's tokens and cost, and the evidence it will be ranked on; it then runs through
the engine's own stages (evaluate.py); the outcome, with the stage and reason of the
engine's `Rejection` or the figures of a verified attempt, goes back as the tool's
result. The best verified attempt (by measured time with a GPU and `--measure`, else by
prediction, and the records say which) becomes the kernel's decision. The loop stops
after `attempts` turns, after `patience` turns in a row that did not improve on the
best, or when the API fails after the SDK's retries. Tokens and cost are recorded per
attempt. This is the one driver of its own the loop keeps: attempt by attempt, with the
model's reflection between them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from kxform.engine.pass_api import KernelAnalysis, Pass, PassContext, Provenance, Rejection
from kxform.engine.proposal import Evidence
from kxform.errors import KxformError, UsageError
from kxform.propose.answer import Answer, BadAnswer, read_response
from kxform.propose.client import ApiFailure, ClaudeClient
from kxform.propose.context import KernelContext
from kxform.propose.cost import Usage
from kxform.propose.evaluate import Evaluation, Evaluator
from kxform.propose.lock import Decision
from kxform.propose.prompt import SYSTEM, AttemptNote, first_message, result_message
from kxform.propose.tools import Tool

Record = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class SessionOptions:
    attempts: int = 4
    patience: int = 2
    """Stop after this many attempts in a row that do not improve a verified best."""
    measure: bool = False


@dataclass(frozen=True)
class Attempt:
    """One turn: the answer, what became of it, and what it cost."""

    index: int
    label: str
    status: str
    """`rejected` (the answer itself), `failed` (a later stage), `verified`, or `api-error`."""
    stage: str
    reason: str
    usage: Usage
    score: float | None = None
    improved: bool = False
    formula: str | None = None
    tool_input: Any = None
    stop_reason: str | None = None
    feedback: str = ""
    evaluation: Evaluation | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        ev = self.evaluation
        return {
            "attempt": self.index,
            "proposal": self.label,
            "status": self.status,
            "stage": self.stage,
            "reason": self.reason,
            "formula": self.formula,
            "tool_input": self.tool_input,
            "stop_reason": self.stop_reason,
            "score": self.score,
            "improved": self.improved,
            "time_ms": ev.time_ms if ev else None,
            "baseline_ms": ev.baseline_ms if ev else None,
            "prediction": ev.prediction.describe() if ev and ev.prediction else None,
            "checks": [c.to_json() for c in ev.checks] if ev else [],
            "feedback": self.feedback,
            "usage": self.usage.to_json(),
        }


@dataclass(frozen=True)
class KernelSession:
    file: str
    kernel: str
    pass_name: str
    model: str
    attempts: tuple[Attempt, ...]
    best: Attempt | None
    decision: Decision | None
    stop: str
    ranking: str
    api_failure: str | None = None
    """Why the API did not answer (after the SDK's retries): the search is incomplete, so
    the command line exits 2 and records nothing (a "left alone" would be a guess)."""

    @property
    def usage(self) -> Usage:
        total = Usage(cost_usd=0.0, cached=True)
        for attempt in self.attempts:
            total = total + attempt.usage
        return total


@dataclass
class _Conversation:
    messages: list[dict[str, Any]]

    def add_turn(self, content: list[Any], results: list[dict[str, Any]]) -> None:
        self.messages.append({"role": "assistant", "content": content})
        self.messages.append({"role": "user", "content": results})

    def add_note(self, text: str) -> None:
        """After an answer with no call to answer: text joins the last user turn."""
        self.messages[-1]["content"].append({"type": "text", "text": text})


def run_kernel(
    ctx: PassContext,
    analysis: KernelAnalysis,
    pass_: Pass,
    tool: Tool,
    context: KernelContext,
    evaluator: Evaluator,
    client: ClaudeClient,
    options: SessionOptions,
    record: Record,
) -> KernelSession:
    """The loop for one kernel; `record` receives the prompt and every attempt as log records."""
    model = client.options.model
    evidence: Evidence = "measured" if context.ranking == "time" else "predicted"
    opening = first_message(context, tool, options.attempts)
    chat = _Conversation(
        [{"role": "user", "content": [{"type": "text", "text": opening, "cache_control": {"type": "ephemeral"}}]}]
    )
    where = {"file": context.path, "kernel": context.kernel, "pass": pass_.name, "model": model}
    record(
        {
            "type": "llm_prompt",
            **where,
            "system": SYSTEM,
            "context": opening,
            "tool": tool.to_param(),
            "ranking": context.ranking,
        }
    )
    attempts: list[Attempt] = []
    best: tuple[Attempt, Answer] | None = None
    stale, stop, failed = 0, f"all {options.attempts} attempts used", None
    seen: dict[str, tuple[int, Evaluation]] = {}
    for index in range(1, options.attempts + 1):
        request = {
            "model": model,
            "max_tokens": client.options.max_tokens,
            "system": SYSTEM,
            "messages": chat.messages,
            "tools": [tool.to_param()],
            "tool_choice": tool.choice(),
        }
        started = time.perf_counter()
        try:
            response = client.send(request)
        except ApiFailure as failure:
            attempt = Attempt(index, "-", "api-error", "api", str(failure), Usage(cost_usd=0.0))
            attempts.append(attempt)
            record({"type": "llm_attempt", **where, **attempt.to_json(), "elapsed_s": time.perf_counter() - started})
            if failure.fatal:
                raise UsageError(f"--proposer claude: {failure}") from None
            stop, failed = f"API failure: {failure.kind}", str(failure)
            break
        provenance = Provenance("claude", model, response.usage.cost_usd, response.usage.tokens, evidence)
        outcome = read_response(response.body, tool, context.kernel, ctx.hw, provenance)
        attempt = _judge(
            index,
            outcome,
            evaluator,
            analysis,
            response.usage,
            response.body.get("stop_reason"),
            best[0] if best else None,
            seen,
        )
        left = options.attempts - index
        if attempt.improved and isinstance(outcome, Answer):
            best, stale = (attempt, outcome), 0
        else:
            stale += 1
        note = AttemptNote(
            index, attempt.label, _status_words(attempt, best[0] if best else None), attempt.reason, attempt.score
        )
        best_note = None if best is None else AttemptNote(best[0].index, best[0].label, "verified", "", best[0].score)
        feedback = result_message(note, best_note, left, context.ranking, tool)
        attempt = _with_feedback(attempt, feedback)
        if best is not None and best[0].index == index:
            best = (attempt, best[1])
        attempts.append(attempt)
        record(
            {
                "type": "llm_attempt",
                **where,
                "prompt_key": response.key,
                **attempt.to_json(),
                "elapsed_s": round(time.perf_counter() - started, 3),
            }
        )
        _reply(chat, response.body, outcome, feedback, attempt.status == "verified")
        if best is not None and stale >= options.patience and left > 0:
            stop = f"stopped early: {stale} attempts in a row did not improve on attempt {best[0].index}"
            break
    session = KernelSession(
        context.path,
        context.kernel,
        pass_.name,
        model,
        tuple(attempts),
        best[0] if best else None,
        None,
        stop,
        context.ranking,
        failed,
    )
    if best is not None:
        session = replace(session, decision=_decision(session, best[1], best[0]))
    record(
        {
            "type": "llm_session",
            **where,
            "attempts": len(attempts),
            "best_attempt": best[0].index if best else None,
            "best_proposal": best[0].label if best else None,
            "ranked_by": context.ranking,
            "stop": stop,
            "usage": session.usage.to_json(),
        }
    )
    return session


def _judge(
    index: int,
    outcome: Answer | BadAnswer,
    evaluator: Evaluator,
    analysis: KernelAnalysis,
    usage: Usage,
    stop_reason: Any,
    best: Attempt | None,
    seen: dict[str, tuple[int, Evaluation]],
) -> Attempt:
    stop = str(stop_reason) if stop_reason is not None else None
    if isinstance(outcome, BadAnswer):
        refused = outcome.rejection()
        return Attempt(
            index,
            refused.label,
            "rejected",
            refused.stage,
            refused.reason,
            usage,
            tool_input=outcome.tool_input,
            stop_reason=stop,
        )
    label = outcome.proposal.label()
    if label in seen:  # the same proposal again: its result is known (and nothing improves)
        earlier, evaluation = seen[label]
        return Attempt(
            index,
            label,
            "failed",
            "answer",
            f"repeats attempt {earlier} ({evaluation.summary()})",
            usage,
            formula=outcome.formula,
            tool_input=outcome.tool_input,
            stop_reason=stop,
            evaluation=evaluation,
        )
    try:
        evaluation = evaluator.evaluate(analysis, outcome.proposal)
    except KxformError as exc:
        evaluation = Evaluation(Rejection(label, "pipeline", str(exc)))
    seen[label] = (index, evaluation)
    if not evaluation.verified:
        return Attempt(
            index,
            label,
            "failed",
            evaluation.stage,
            evaluation.reason,
            usage,
            formula=outcome.formula,
            tool_input=outcome.tool_input,
            stop_reason=stop,
            evaluation=evaluation,
        )
    score = evaluation.score
    improved = best is None or (score is not None and (best.score is None or score < best.score))
    return Attempt(
        index,
        label,
        "verified",
        "done",
        evaluation.summary(),
        usage,
        score,
        improved,
        outcome.formula,
        outcome.tool_input,
        stop,
        evaluation=evaluation,
    )


def _status_words(attempt: Attempt, best: Attempt | None) -> str:
    """`verified, kept as the best so far` / `verified, not kept (attempt 2 is as good or better)` / ..."""
    if attempt.status != "verified":
        return {"rejected": "rejected (the answer itself)", "failed": f"rejected at {attempt.stage}"}.get(
            attempt.status, attempt.status
        )
    if attempt.improved or best is None or best.index == attempt.index:
        return "verified, kept as the best so far"
    return f"verified, not kept (attempt {best.index} is as good or better)"


def _with_feedback(attempt: Attempt, feedback: str) -> Attempt:
    return replace(attempt, feedback=feedback)


def _reply(chat: _Conversation, body: Any, outcome: Answer | BadAnswer, feedback: str, ok: bool) -> None:
    """Answer every tool call of the response (the first gets the result), or, when the
    response held no call to answer, add the result as text to the last user turn."""
    content = body.get("content") if isinstance(body, dict) else None
    calls = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"] if isinstance(content, list) else []
    )
    usable = calls and body.get("stop_reason") in ("tool_use", "end_turn")
    if not usable or not isinstance(content, list):
        chat.add_note(f"Your last answer was not usable. {feedback}")
        return
    results = [
        {
            "type": "tool_result",
            "tool_use_id": str(call.get("id", "")),
            "is_error": not ok,
            "content": feedback if i == 0 else "ignored: call the tool once per turn",
        }
        for i, call in enumerate(calls)
    ]
    chat.add_turn(content, results)


def _decision(session: KernelSession, answer: Answer, attempt: Attempt) -> Decision:
    """The kept attempt as a decision record: its values and formula, and as provenance the
    model, what the kernel's whole session cost, and whether it was ranked by time."""
    usage = session.usage
    proposal = answer.proposal
    return Decision(
        session.kernel,
        session.pass_name,
        proposal.values,
        session.file,
        proposal.payload or "",
        "claude",
        session.model,
        f"attempt {attempt.index}: {attempt.reason}"[:400],
        proposal.provenance.evidence,
        usage.cost_usd,
        usage.tokens,
    )
