"""Model-written refactorings: hostile templates are refused with their reason key, and
recorded good templates on corpus naive kernels are validated, verified on the CPU
runtime, tuned over replayed times and written."""

from __future__ import annotations

import pytest

from llm_replies import PLANTED_KEY  # skips the module without the anthropic client
from refactor_helpers import reply, session, template_input

GELU = """__global__ void gelu_f32_naive(float* out, const float* inp, int N)
{{
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    for (int k = 0; k < VEC; k++) {{
        int i = base + k;
        {guard} {{
            float x = inp[i];
            float cube = 0.044715f * x * x * x;
            out[i] = {scale}0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
        }}
    }}
}}"""
PARAMS = [{"name": "BLOCK", "values": [64, 128, 256], "original": 128}, {"name": "VEC", "values": [1, 2, 4],
                                                                          "original": 1}]
GRID, BLOCK = ["ceil_div(N, BLOCK * VEC)"], ["BLOCK"]


def gelu(guard: str = "if (i < N)", scale: str = "", before: str = "", after: str = "", params=None,
         grid=None, block=None, constraints=None, code: str | None = None) -> dict:
    text = code if code is not None else before + GELU.format(guard=guard, scale=scale) + after
    return template_input(text, params if params is not None else PARAMS, grid or GRID, block or BLOCK,
                          constraints)


def with_body(extra: str) -> dict:
    return gelu(guard=f"{extra}\n        if (i < N)")


FAST = [
    ("an include", gelu(before="#include <stdio.h>\n"), "validate", "include"),
    ("a define", gelu(before="#define VEC2 8\n"), "validate", "preprocessor"),
    ("inline asm", with_body('asm volatile("membar.gl;");'), "validate", "asm"),
    ("printf", with_body('printf("%d", i);'), "validate", "printf"),
    ("malloc", with_body("float* p = (float*)malloc(4);"), "validate", "printf"),
    ("a second function", gelu(before="__device__ float twice(float v) { return 2 * v; }\n"), "validate",
     "host-code"),
    ("a global", gelu(before="__device__ float stash[4];\n"), "validate", "global"),
    ("host code launching", gelu(after="\nvoid go(float* o, const float* i, int n) { gelu_f32_naive<<<1, 1>>>(o, i, "
                                       "n); }"), "validate", "host-code"),
    ("signature changed", gelu(code=GELU.format(guard="if (i < N)", scale="").replace("int N)", "long N)")),
     "validate", "signature"),
    ("kernel renamed", gelu(code=GELU.format(guard="if (i < N)", scale="").replace("gelu_f32_naive", "gelu2")),
     "validate", "not-the-kernel"),
    ("atomics on a buffer never updated atomically", with_body("atomicAdd(&out[0], 0.0f);"), "validate", "atomic"),
    ("a cast to shared memory", with_body("float* s = (__shared__ float*)inp;"), "validate", "address-space"),
    ("an address-space conversion", with_body("size_t a = __cvta_generic_to_shared(inp);"), "validate",
     "address-space"),
    ("a call outside the allow-list", with_body("int r = rand();"), "validate", "call"),
    ("an unbounded space", gelu(params=[{"name": "BLOCK", "values": list(range(32, 32 * 40, 32)), "original": None},
                                        {"name": "VEC", "values": [1], "original": None}]), "validate",
     "space-unbounded"),
    ("a value out of range", gelu(params=[{"name": "BLOCK", "values": [128, 1 << 20], "original": None},
                                          {"name": "VEC", "values": [1], "original": None}]), "validate",
     "space-unbounded"),
    ("a constraint that does not parse", gelu(constraints=["BLOCK === 3"]), "validate", "space-type"),
    ("a constraint over an unknown name", gelu(constraints=["WARPS * BLOCK <= 1024"]), "validate",
     "constraint-name"),
    ("constraints no configuration meets", gelu(constraints=["BLOCK > 4096"]), "validate", "space-empty"),
    ("a launch over an unknown name", gelu(grid=["ceil_div(M, BLOCK)"]), "validate", "launch-name"),
    ("a launch that does not parse", gelu(grid=["ceil_div(N,, BLOCK)"]), "validate", "launch-syntax"),
    ("code that does not parse", gelu(guard="if (i < N"), "validate", "parse"),
    ("a parameter named like the file's macro", gelu(params=[{"name": "GELU_SCALING_FACTOR", "values": [1],
                                                              "original": None}]), "validate", "param-name"),
    ("code over the size limit", with_body("/*" + "x" * 13000 + "*/"), "validate", "too-large"),
    ("one block: errors between blocks could not show", gelu(grid=["min(ceil_div(N, BLOCK * VEC), 1)"],
                                                             guard="for (; i < N; i += BLOCK * VEC)"),
     "verify", "could-not-tell"),
    ("a grid that divides by zero", gelu(grid=["ceil_div(N, BLOCK * VEC - 64)"]), "verify", "launch"),
    ("original values for some parameters only", gelu(params=[PARAMS[0], {**PARAMS[1], "original": None}]),
     "answer", "original"),
]

SLOW = [
    ("wrong only at a ragged size", gelu(guard="if (i < (N / 64) * 64)"), "mismatch"),
    ("wrong only for one parameter value", gelu(scale="(VEC == 2 ? 1.5f : 1.0f) * "), "mismatch"),
    ("off by more than the tolerance", gelu(scale="1.0001f * "), "mismatch"),
    ("out of bounds for large parameters", gelu(guard="if (VEC == 4 || i < N)"), "mismatch"),
    ("a race that appears only for some block sizes",
     gelu(code=GELU.format(guard="if (i < N)", scale="r * ").replace(
         "int base", "__shared__ float s[BLOCK];\n    s[threadIdx.x] = 1.0f;\n    float r = BLOCK >= 256 ? "
         "s[BLOCK - 1 - threadIdx.x] : s[threadIdx.x];\n    int base")), "mismatch"),
    ("reading uninitialised shared memory",
     gelu(code=GELU.format(guard="if (i < N)", scale="s[threadIdx.x] * ").replace(
         "int base", "__shared__ float s[BLOCK];\n    if (threadIdx.x > 0) s[threadIdx.x] = 1.0f;\n    __syncthreads();"
         "\n    int base")), "mismatch"),
]


@pytest.mark.parametrize("name, data, stage, key", FAST, ids=[c[0] for c in FAST])
def test_a_hostile_template_is_refused_before_it_runs(monkeypatch: pytest.MonkeyPatch, name: str, data: dict,
                                                      stage: str, key: str) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    result, evaluator, _, _ = session("gelu_f32", [reply(data)])
    (attempt,) = result.attempts
    assert result.decision is None and not evaluator.kept
    assert attempt.stage == stage, attempt.reason
    assert attempt.reason.split(":")[0] == key or attempt.reason.startswith(f"answer: {key}:") or \
        attempt.reason.startswith(f"{key}:"), attempt.reason


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


def _gpu_or_skip() -> None:
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime(sanitize=True)
    try:
        ok, why = runtime.available()
    finally:
        runtime.close()
    if not ok:
        pytest.skip(f"gpu runtime with compute-sanitizer unavailable: {why}")


@pytest.mark.gpu
@pytest.mark.parametrize("name, expected", [("a race that appears only for some block sizes", "racecheck"),
                                            ("out of bounds for large parameters", "memcheck")])
def test_the_sanitizers_reject_a_planted_template_on_the_gpu(name: str, expected: str) -> None:
    """racecheck sees the missing barrier and memcheck the overrun, on the sampled configurations."""
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec
    from kxform.hw import load_profile
    from kxform.propose.template import read_template
    from kxform.propose.template_verify import covering_sample, sanitize_template
    from refactor_helpers import NAIVE

    _gpu_or_skip()
    data = next(d for n, d, _ in SLOW if n == name)
    template = read_template(data, "gelu_f32_naive")
    model = parse_model(read_source(NAIVE / "gelu_f32" / "naive.cu"))
    kernel = next(f for f in model.functions if f.name == "gelu_f32_naive")
    spec = load_spec(NAIVE / "gelu_f32" / "kxform.toml").kernel("gelu_f32_naive")
    sample = covering_sample(template.space(), load_profile("h100"), dict(template.original or ()))
    found = sanitize_template(model.source, kernel, template, spec, sample)
    assert found is not None and found.key in ("memcheck", "racecheck"), found
    if expected == "memcheck":  # the overrun is memcheck's finding, whatever the outputs
        assert found.key == "memcheck", found
    else:  # the race shows only where the reversed read crosses warps: BLOCK = 256
        assert "BLOCK=256" in found.message, found
    clean = read_template(gelu(), "gelu_f32_naive")
    assert sanitize_template(model.source, kernel, clean, spec, covering_sample(clean.space(), load_profile("h100")))\
        is None


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
