"""Template inputs (what a model's `propose_refactor` call carries) for the refactoring
tests, free of the LLM client, so that the GPU tests that use them run where the client is
not installed."""

from __future__ import annotations

from typing import Any


def template_input(
    code: str, params: list[dict[str, Any]], grid: list[str], block: list[str], constraints: list[str] | None = None
) -> dict[str, Any]:
    return {
        "last_attempt": "first attempt",
        "expectation": "fewer, wider accesses per thread",
        "code": code,
        "params": params,
        "constraints": constraints or [],
        "grid": grid,
        "block": block,
    }


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
PARAMS = [
    {"name": "BLOCK", "values": [64, 128, 256], "original": 128},
    {"name": "VEC", "values": [1, 2, 4], "original": 1},
]
GRID, BLOCK = ["ceil_div(N, BLOCK * VEC)"], ["BLOCK"]


def gelu(
    guard: str = "if (i < N)",
    scale: str = "",
    before: str = "",
    after: str = "",
    params=None,
    grid=None,
    block=None,
    constraints=None,
    code: str | None = None,
) -> dict:
    text = code if code is not None else before + GELU.format(guard=guard, scale=scale) + after
    return template_input(text, params if params is not None else PARAMS, grid or GRID, block or BLOCK, constraints)


def with_body(extra: str) -> dict:
    return gelu(guard=f"{extra}\n        if (i < N)")


OVERRUN = gelu(guard="if (VEC == 4 || i < N)")
"""Writes past the end for VEC=4 (out of bounds for large parameters)."""
RACE_BY_BLOCK = gelu(
    code=GELU.format(guard="if (i < N)", scale="r * ").replace(
        "int base",
        "__shared__ float s[BLOCK];\n    s[threadIdx.x] = 1.0f;\n    float r = BLOCK >= 256 ? "
        "s[BLOCK - 1 - threadIdx.x] : s[threadIdx.x];\n    int base",
    )
)
"""Reads another thread's shared element without a barrier, only for BLOCK >= 256."""
