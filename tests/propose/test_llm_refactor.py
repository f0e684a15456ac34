"""Model-written refactorings: hostile templates are refused with their reason key, and
recorded good templates on corpus naive kernels are validated, verified on the CPU
runtime, tuned over replayed times and written."""

from __future__ import annotations

import pytest

from llm_replies import PLANTED_KEY  # skips the module without the anthropic client
from refactor_helpers import reply, session
from template_inputs import BLOCK, GELU, GRID, OVERRUN, PARAMS, RACE_BY_BLOCK, gelu, with_body  # noqa: F401

FAST = [
    ("an include", gelu(before="#include <stdio.h>\n"), "validate", "include"),
    ("a define", gelu(before="#define VEC2 8\n"), "validate", "preprocessor"),
    ("inline asm", with_body('asm volatile("membar.gl;");'), "validate", "asm"),
    ("printf", with_body('printf("%d", i);'), "validate", "printf"),
    ("malloc", with_body("float* p = (float*)malloc(4);"), "validate", "printf"),
    ("a second function", gelu(before="__device__ float twice(float v) { return 2 * v; }\n"), "validate", "host-code"),
    ("a global", gelu(before="__device__ float stash[4];\n"), "validate", "global"),
    (
        "host code launching",
        gelu(after="\nvoid go(float* o, const float* i, int n) { gelu_f32_naive<<<1, 1>>>(o, i, n); }"),
        "validate",
        "host-code",
    ),
    (
        "signature changed",
        gelu(code=GELU.format(guard="if (i < N)", scale="").replace("int N)", "long N)")),
        "validate",
        "signature",
    ),
    (
        "kernel renamed",
        gelu(code=GELU.format(guard="if (i < N)", scale="").replace("gelu_f32_naive", "gelu2")),
        "validate",
        "not-the-kernel",
    ),
    ("atomics on a buffer never updated atomically", with_body("atomicAdd(&out[0], 0.0f);"), "validate", "atomic"),
    ("a cast to shared memory", with_body("float* s = (__shared__ float*)inp;"), "validate", "address-space"),
    (
        "an address-space conversion",
        with_body("size_t a = __cvta_generic_to_shared(inp);"),
        "validate",
        "address-space",
    ),
    ("a call outside the allow-list", with_body("int r = rand();"), "validate", "call"),
    (
        "an unbounded space",
        gelu(
            params=[
                {"name": "BLOCK", "values": list(range(32, 32 * 40, 32)), "original": None},
                {"name": "VEC", "values": [1], "original": None},
            ]
        ),
        "validate",
        "space-unbounded",
    ),
    (
        "a value out of range",
        gelu(
            params=[
                {"name": "BLOCK", "values": [128, 1 << 20], "original": None},
                {"name": "VEC", "values": [1], "original": None},
            ]
        ),
        "validate",
        "space-unbounded",
    ),
    ("a constraint that does not parse", gelu(constraints=["BLOCK === 3"]), "validate", "space-type"),
    ("a constraint over an unknown name", gelu(constraints=["WARPS * BLOCK <= 1024"]), "validate", "constraint-name"),
    ("constraints no configuration meets", gelu(constraints=["BLOCK > 4096"]), "validate", "space-empty"),
    ("a launch over an unknown name", gelu(grid=["ceil_div(M, BLOCK)"]), "validate", "launch-name"),
    ("a launch that does not parse", gelu(grid=["ceil_div(N,, BLOCK)"]), "validate", "launch-syntax"),
    ("code that does not parse", gelu(guard="if (i < N"), "validate", "parse"),
    (
        "a parameter named like the file's macro",
        gelu(params=[{"name": "GELU_SCALING_FACTOR", "values": [1], "original": None}]),
        "validate",
        "param-name",
    ),
    ("code over the size limit", with_body("/*" + "x" * 13000 + "*/"), "validate", "too-large"),
    (
        "one block: errors between blocks could not show",
        gelu(grid=["min(ceil_div(N, BLOCK * VEC), 1)"], guard="for (; i < N; i += BLOCK * VEC)"),
        "verify",
        "could-not-tell",
    ),
    ("a grid that divides by zero", gelu(grid=["ceil_div(N, BLOCK * VEC - 64)"]), "verify", "launch"),
    (
        "original values for some parameters only",
        gelu(params=[PARAMS[0], {**PARAMS[1], "original": None}]),
        "answer",
        "original",
    ),
]

SLOW = [
    ("wrong only at a ragged size", gelu(guard="if (i < (N / 64) * 64)"), "mismatch"),
    ("wrong only for one parameter value", gelu(scale="(VEC == 2 ? 1.5f : 1.0f) * "), "mismatch"),
    ("off by more than the tolerance", gelu(scale="1.0001f * "), "mismatch"),
    ("out of bounds for large parameters", OVERRUN, "mismatch"),
    ("a race that appears only for some block sizes", RACE_BY_BLOCK, "mismatch"),
    (
        "reading uninitialised shared memory",
        gelu(
            code=GELU.format(guard="if (i < N)", scale="s[threadIdx.x] * ").replace(
                "int base",
                "__shared__ float s[BLOCK];\n    if (threadIdx.x > 0) s[threadIdx.x] = 1.0f;\n    __syncthreads();"
                "\n    int base",
            )
        ),
        "mismatch",
    ),
]


@pytest.mark.parametrize("name, data, stage, key", FAST, ids=[c[0] for c in FAST])
def test_a_hostile_template_is_refused_before_it_runs(
    monkeypatch: pytest.MonkeyPatch, name: str, data: dict, stage: str, key: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    result, evaluator, _, _ = session("gelu_f32", [reply(data)])
    (attempt,) = result.attempts
    assert result.decision is None and not evaluator.kept
    assert attempt.stage == stage, attempt.reason
    assert (
        attempt.reason.split(":")[0] == key
        or attempt.reason.startswith(f"answer: {key}:")
        or attempt.reason.startswith(f"{key}:")
    ), attempt.reason


@pytest.mark.slow
@pytest.mark.parametrize("name, data, key", SLOW, ids=[c[0] for c in SLOW])
def test_a_wrong_template_fails_verification(monkeypatch: pytest.MonkeyPatch, name: str, data: dict, key: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    result, evaluator, _, _ = session("gelu_f32", [reply(data)])
    (attempt,) = result.attempts
    assert result.decision is None and not evaluator.kept
    assert (attempt.stage, attempt.reason.split(":")[0]) == ("verify", key), attempt.reason


def test_the_hostile_suite_is_large_enough() -> None:
    assert len(FAST) + len(SLOW) >= 25


@pytest.mark.slow
def test_the_reason_goes_back_and_the_next_template_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    wrong = next(d for n, d, _ in SLOW if n == "wrong only at a ragged size")
    result, evaluator, _, records = session("gelu_f32", [reply(wrong), reply(gelu())], attempts=2)
    first, second = result.attempts
    assert first.status == "failed" and "mismatch: at " in first.feedback and "ragged" in first.feedback
    assert second.status == "verified" and result.best is second and len(evaluator.kept) == 1
    assert result.decision is not None and result.decision.payload == evaluator.kept[second.label][0].payload()
    assert [r["type"] for r in records] == ["llm_prompt", "llm_attempt", "llm_attempt", "llm_session"]
