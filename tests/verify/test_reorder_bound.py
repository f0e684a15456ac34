"""The measured bound of reordered sums (kxform.engine.reorder_probe, kxform.verify.probe) is
sound and tight: on 10^4 random rows per reduction kind, built to cancel, it admits every
summation order (the exact float64 result, reversed and random sequential orders, numpy's
pairwise order, and the rows pass's lanes and blocks on the CPU runtime), and the planted
wrong reductions of tests/passes/test_rows.py stay far above it.

The kernels are one thread per row, as users write them; the orders are emulated in float32
with NumPy (cumsum is sequential in its dtype, np.sum is pairwise), so they are orders the
CPU runtime never takes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from kxform.analysis import AccessAnalysis
from kxform.build.extract import extract_kernel
from kxform.engine.pass_api import PassContext, RunOptions
from kxform.engine.reorder_probe import build_probe
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink
from kxform.runtime.base import BufferArg, LaunchRequest, ScalarArg
from kxform.verify.probe import probe_bounds
from swizzle_helpers import rewrite

pytestmark = pytest.mark.slow

ROWS, C = 10_000, 193
"""Rows per kind (each its own random input) and their length: odd, above a warp and a
block of 128, so every lane count's tail is ragged."""
BLOCK = 64

HEADER = "#include <cuda_runtime.h>\n#include <math.h>\n"
LAUNCHER = """
void launch(float* out, const float* x, const float* w, int N, int C) {{
    {name}<<<(N + {block} - 1) / {block}, {block}>>>(out, x, w, N, C);
}}
"""
SOURCES = {
    "sum": """
__global__ void k_sum(float* out, const float* x, const float* w, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    float s = 0.0f;
    for (int j = 0; j < C; j++)
        s += x[r * C + j];
    out[r * C] = s;
}""",
    "dot": """
__global__ void k_dot(float* out, const float* x, const float* w, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    float s = 0.0f;
    for (int j = 0; j < C; j++)
        s += x[r * C + j] * w[r * C + j];
    out[r * C] = s;
}""",
    "rms": """
__global__ void k_rms(float* out, const float* x, const float* w, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    float ss = 0.0f;
    for (int j = 0; j < C; j++) {
        float v = x[r * C + j];
        ss += v * v;
    }
    float scale = 1.0f / sqrtf(ss / C + 1e-6f);
    for (int j = 0; j < C; j++)
        out[r * C + j] = x[r * C + j] * scale * w[r * C + j];
}""",
    "layernorm": """
__global__ void k_layernorm(float* out, const float* x, const float* w, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    float sum = 0.0f;
    for (int j = 0; j < C; j++)
        sum += x[r * C + j];
    float mean = sum / C;
    float var = 0.0f;
    for (int j = 0; j < C; j++) {
        float d = x[r * C + j] - mean;
        var += d * d;
    }
    float rstd = 1.0f / sqrtf(var / C + 1e-5f);
    for (int j = 0; j < C; j++)
        out[r * C + j] = (x[r * C + j] - mean) * rstd * w[r * C + j];
}""",
    "softmax": """
__global__ void k_softmax(float* out, const float* x, const float* w, int N, int C) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    float m = -INFINITY;
    for (int j = 0; j < C; j++)
        m = fmaxf(m, x[r * C + j]);
    float s = 0.0f;
    for (int j = 0; j < C; j++)
        s += expf(x[r * C + j] - m);
    for (int j = 0; j < C; j++)
        out[r * C + j] = expf(x[r * C + j] - m) / s;
}""",
}

Summed = Callable[[np.ndarray], np.ndarray]
"""Sums float32 rows (axis 1) in some order, to float32."""


def _sequential(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x, axis=1, dtype=np.float32)[:, -1]


def _reversed(x: np.ndarray) -> np.ndarray:
    return _sequential(x[:, ::-1])


def _shuffled(x: np.ndarray) -> np.ndarray:
    order = np.random.default_rng(7).permuted(np.tile(np.arange(x.shape[1]), (x.shape[0], 1)), axis=1)
    return _sequential(np.take_along_axis(x, order, axis=1))


def _pairwise(x: np.ndarray) -> np.ndarray:
    return np.sum(x, axis=1, dtype=np.float32)


def _exact(x: np.ndarray) -> np.ndarray:
    return np.sum(x.astype(np.float64), axis=1)


ORDERS: dict[str, Summed] = {
    "sequential": _sequential,
    "reversed": _reversed,
    "shuffled": _shuffled,
    "pairwise": _pairwise,
}


def emulate(kind: str, x: np.ndarray, w: np.ndarray, total: Summed) -> np.ndarray:
    """The kernel `kind` in NumPy, its sums taken by `total` (float64 everywhere for `_exact`)."""
    wide = total is _exact
    f = np.float64 if wide else np.float32
    x, w = x.astype(f), w.astype(f)
    out = np.full(x.shape, np.nan)
    if kind == "sum":
        out[:, 0] = total(x)
    elif kind == "dot":
        out[:, 0] = total(x * w)
    elif kind == "rms":
        scale = f(1) / np.sqrt(total(x * x).astype(f) / f(C) + f(1e-6))
        out[:] = x * scale[:, None] * w
    elif kind == "layernorm":
        mean = (total(x).astype(f) / f(C)).astype(f)
        d = x - mean[:, None]
        rstd = f(1) / np.sqrt(total(d * d).astype(f) / f(C) + f(1e-5))
        out[:] = d * rstd[:, None] * w
    else:  # softmax
        e = np.exp(x - x.max(axis=1, keepdims=True))
        out[:] = e / total(e).astype(f)[:, None]
    return out


def inputs(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows built to be hard: a third centred (dot products and sums cancel), a third on a
    large offset (the mean subtracted cancels catastrophically), a third spanning ten
    orders of magnitude with random signs."""
    rng = np.random.default_rng(sum(map(ord, kind)))
    third = ROWS // 3
    x = np.empty((ROWS, C), np.float32)
    x[:third] = rng.normal(0.0, 1.0, (third, C))
    x[third : 2 * third] = 1000.0 + rng.normal(0.0, 1.0, (third, C))
    x[2 * third :] = np.exp(rng.normal(0.0, 5.0, (ROWS - 2 * third, C))) * rng.choice(
        [-1.0, 1.0], (ROWS - 2 * third, C)
    )
    if kind == "softmax":
        x = np.clip(x, -60.0, 60.0)
    w = rng.normal(0.0, 1.0, (ROWS, C)).astype(np.float32)
    if kind == "dot":
        w[third : 2 * third] = -1.0  # (1000 + e) * -1 + ...: large terms summing to little
        w[third : 2 * third, ::2] = 1.0
    return x, w


@dataclass
class Runner:
    cpu: object
    x: np.ndarray
    w: np.ndarray

    def __call__(
        self, source: str, name: str, lanes: int = 1, rows_per_block: int = BLOCK, defines: tuple[str, ...] = ()
    ) -> np.ndarray:
        """One launch over every row: `rows_per_block` rows of `lanes` threads per block."""
        rows = self.x.shape[0]
        unit = extract_kernel(SourceText("k.cu", source.encode()), name)
        request = LaunchRequest(
            source=unit.source,
            kernel=unit.entry,
            params=unit.params,
            args=(
                BufferArg("out", np.zeros_like(self.x), "out"),
                BufferArg("x", self.x, "in"),
                BufferArg("w", self.w, "in"),
                ScalarArg("N", np.int32(rows)),
                ScalarArg("C", np.int32(C)),
            ),
            grid=((rows + rows_per_block - 1) // rows_per_block, 1, 1),
            block=(lanes * rows_per_block, 1, 1),
            label=f"{name}",
            defines=defines,
            timeout_s=600,
        )
        out: np.ndarray = self.cpu.run(request).outputs["out"]  # type: ignore[attr-defined]
        return out


def source_of(kind: str) -> str:
    return HEADER + SOURCES[kind] + LAUNCHER.format(name=f"k_{kind}", block=BLOCK)


def any_order_probe(text: str, name: str):  # type: ignore[no-untyped-def]
    model = parse_model(SourceText("k.cu", text.encode()))
    kernel = next(k for k in model.kernels if k.name == name)
    ctx = PassContext(model, load_profile("h100"), RunOptions(), RemarkSink())
    analysis = ctx.analysis(AccessAnalysis, kernel)
    reductions = [r for loop in analysis.loops for r in loop.reductions if r.loop == loop.id]
    return build_probe(model, kernel, reductions, {loop.id: loop for loop in analysis.loops})


def bounds_of(probe, run: Runner, original: np.ndarray, name: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    def moved(macro: str) -> dict[str, np.ndarray]:
        return {"out": run(probe.source, name, defines=(f"{macro}=1",))}

    measured = probe_bounds(probe, {"out": original}, {"out": "float32"}, moved)
    bound: np.ndarray = measured.bounds["out"]
    return bound


def worst(candidate: np.ndarray, original: np.ndarray, bound: np.ndarray) -> float:
    """The largest |candidate - original| / bound over written elements (<= 1: admitted)."""
    written = ~np.isnan(original)
    gap = np.abs(candidate.astype(np.float64) - original.astype(np.float64))[written]
    return float(np.max(np.where(gap == 0, 0.0, gap / bound[written])))


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_the_probe_with_its_macros_off_computes_what_the_original_computes(cpu, kind: str) -> None:  # type: ignore[no-untyped-def]
    text = source_of(kind)
    probe = any_order_probe(text, f"k_{kind}")
    assert probe.sums and probe.source != text
    x, w = inputs(kind)
    run = Runner(cpu, np.ascontiguousarray(x[::20]), np.ascontiguousarray(w[::20]))
    assert np.array_equal(run(text, f"k_{kind}"), run(probe.source, f"k_{kind}"), equal_nan=True)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_the_bound_admits_every_order_of_ten_thousand_hard_rows(cpu, kind: str) -> None:  # type: ignore[no-untyped-def]
    text, name = source_of(kind), f"k_{kind}"
    x, w = inputs(kind)
    run = Runner(cpu, x, w)
    original = run(text, name)
    bound = bounds_of(any_order_probe(text, name), run, original, name)
    ratios = {order: worst(emulate(kind, x, w, total), original, bound) for order, total in ORDERS.items()}
    ratios["exact (float64)"] = worst(emulate(kind, x, w, _exact), original, bound)
    assert max(ratios.values()) <= 1.0, ratios
    # the rows pass's own orders, each held to the bound its policy's probe measures
    for lanes, rows_per_block in ((32, 2), (256, 1)):
        done = rewrite(text, f"rows{{lanes={lanes},rows={rows_per_block}}}", path="k.cu")
        (result,) = done.results
        assert result.policy.compare.mode == "bound", result.policy.compare
        own = bounds_of(result.policy.compare.probe, run, original, name)
        rewritten = run(done.new_data.decode(), name, lanes, rows_per_block)
        ratio = worst(rewritten, original, own)
        assert ratio <= 1.0, (lanes, ratio)
