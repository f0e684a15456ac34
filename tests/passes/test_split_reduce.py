"""The `split-reduce` pass: a column's reduction loop split over threads and blocks,
rewritten byte for byte as reviewed, refused with its reasons, its space and spec through
the Pass API, and its rewrites verified on the CPU runtime, where planted wrong splits (a
missing partial, an off-by-one start, a bias counted in every worker, counters left
non-zero, a wrong combination) are rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT
from kxform.api import space_of
from kxform.engine.pass_api import Outcome
from kxform.engine.registry import default_registry
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import outcomes, rewrite

NAIVE = ROOT / "corpora" / "naive"
GOLDEN = Path(__file__).parents[1] / "golden"
COLSTATS = Path(__file__).parents[1] / "fixtures" / "split_reduce" / "colstats"
BIAS_GRAD = (NAIVE / "bias_grad" / "naive.cu", "bias_grad_naive", NAIVE / "bias_grad" / "naive.kxspec.toml")
COLSTATS_CASE = (COLSTATS / "colstats.cu", "colstats", COLSTATS / "colstats.kxspec.toml")


def test_golden_rewrite_and_a_second_run_changes_nothing() -> None:
    path = BIAS_GRAD[0]
    result = rewrite(path.read_bytes(), "split-reduce{threads=4,blocks=8}", path=str(path))
    assert outcomes(result)["bias_grad_naive"] is Outcome.APPLIED, [r.format(full=True) for r in result.remarks]
    assert result.new_data == (GOLDEN / "bias_grad_naive.split4x8.cu").read_bytes()
    again = rewrite(result.new_data, "split-reduce{threads=4,blocks=8}", path=str(path))
    assert not again.changed and outcomes(again)["bias_grad_naive"] is Outcome.UNCHANGED


def test_without_values_nothing_is_proposed() -> None:
    path = BIAS_GRAD[0]
    result = rewrite(path.read_bytes(), "split-reduce", path=str(path))
    assert not result.changed
    assert any("no workers per column" in r.format(full=True) for r in result.remarks)


KERNEL = """#include <cuda_runtime.h>
__global__ void k(float* out, const float* x, int* counts, int N, int C)
{{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
{body}
}}
void launch(float* out, const float* x, int* counts, int N, int C)
{{
    k<<<(C + 127) / 128, 128>>>({args});
}}
"""
SUM = "    float s = 0.0f;\n    for (int r = 0; r < N; r++)\n        s += x[r * C + c];\n"


@pytest.mark.parametrize(
    "body, remark",
    [
        (SUM + "    atomicAdd(&out[c], s);", "already updates memory atomically"),
        (
            "    float p = 1.0f;\n    for (int r = 0; r < N; r++)\n        p *= x[r * C + c];\n    out[c] = p;",
            "accumulates with '*'",
        ),
        ("    out[c] = 0.0f;\n" + SUM + "    out[c] = s;", "'out[c]' is stored before the loop"),
        (SUM.replace("r = 0", "r = threadIdx.y") + "    out[c] = s;", "reads `threadIdx.y`"),
        (
            "    float s = 0.0f;\n    for (int r = 0; r < N; r++) {\n        s += x[r * C + c];\n"
            "        out[r * C + c] = s;\n    }",
            "carries no reduction it could split: `s` is assigned in one iteration and read in another",
        ),
        ("    for (int r = 0; r < N; r++)\n        out[r * C + c] = x[r * C + c];", "no loop of 'k' carries"),
        (
            SUM + "    float m = 0.0f;\n    for (int r = 0; r < N; r++)\n        m = fmaxf(m, x[r * C + c]);\n"
            "    out[c] = s + m;",
            "2 loops of 'k' carry reductions",
        ),
        (
            "    __shared__ float t[128];\n" + SUM + "    t[threadIdx.x] = s;\n    out[c] = t[threadIdx.x];",
            "already communicate",
        ),
        (SUM.replace("r++", "r += counts[0]") + "    out[c] = s;", "cannot be split: its bound or step"),
        (
            "    float s = 0.5f;\n    if (N > 0)\n        for (int r = 0; r < N; r++)\n            s += x[r * C + c];\n"
            "    out[c] = s;",
            "is not a statement of a block",
        ),
    ],
    ids=[
        "atomics",
        "product",
        "store-before",
        "y-axis",
        "running-value",
        "no-reduction",
        "two-loops",
        "shared",
        "step",
        "unbraced-if",
    ],
)
def test_refusals_name_their_reason_and_line(body: str, remark: str) -> None:
    result = rewrite(KERNEL.format(body=body, args="out, x, counts, N, C"), "split-reduce{threads=4,blocks=8}")
    assert not result.changed
    said = " ".join(r.format(full=True) for r in result.remarks)
    assert remark in said and "(line " in said, said


def test_an_input_passed_as_the_buffer_the_loop_writes_is_refused_at_the_launch() -> None:
    body = (
        "    float s = 0.0f;\n    for (int r = 0; r < N; r++) {\n        s += x[r * C + c];\n"
        "        out[r * C + c] = 2.0f * x[r * C + c];\n    }\n    counts[c] = (int)s;"
    )
    apart = rewrite(KERNEL.format(body=body, args="out, x, counts, N, C"), "split-reduce{threads=4,blocks=8}")
    assert apart.changed
    same = rewrite(KERNEL.format(body=body, args="out, out, counts, N, C"), "split-reduce{threads=4,blocks=8}")
    said = " ".join(r.format(full=True) for r in same.remarks)
    assert not same.changed and "passes 'out' as both 'out', which the loop writes, and 'x'" in said, said


def test_an_update_in_place_after_the_loop_is_made_once_by_the_combining_worker() -> None:
    result = rewrite(
        KERNEL.format(body=SUM + "    out[c] += s;", args="out, x, counts, N, C"), "split-reduce{threads=2,blocks=4}"
    )
    assert result.changed
    text = result.new_data.decode()
    assert text.index("return;  // the column's last worker") < text.index("out[c] += s;")


def test_spec_round_trip_space_and_constraints() -> None:
    assert default_registry().parse("split-reduce{threads=4,blocks=8}").spec() == "split-reduce{threads=4,blocks=8}"
    path = BIAS_GRAD[0]
    space = space_of(path.read_bytes(), "bias_grad_naive", "split-reduce", path=str(path), hw="h100")
    assert space.names == ("threads", "blocks")
    assert space.defaults() == {"threads": 1, "blocks": 1}
    assert space.param("threads").values == (1, 2, 4, 8)  # a block of 128 threads grows to at most 1024
    assert space.is_valid({"threads": 8, "blocks": 256}) and not space.is_valid({"threads": 16, "blocks": 1})
    caller = COLSTATS_CASE[0]
    free = space_of(caller.read_bytes(), "colstats", "split-reduce", path=str(caller), hw="h100")
    assert free.param("threads").values == (1, 2, 4, 8, 16, 32)  # the caller's block: the launch halves y to fit
    assert getattr(type(default_registry().parse("split-reduce")), "structural", False)


def test_the_tolerance_is_measured_by_a_probe_of_the_split_sums_and_max_is_exact() -> None:
    path = BIAS_GRAD[0]
    policy = rewrite(path.read_bytes(), "split-reduce{threads=4,blocks=8}", path=str(path)).results[0].policy
    assert policy.compare.mode == "bound" and policy.required and policy.compare.probe is not None
    assert [(s.var, s.ctype) for s in policy.compare.probe.sums] == [("sum", "float")]
    assert "over 32 workers" in policy.compare.reason and "h = (n + 31) / 32 + 31" in policy.compare.reason
    # the probe moves the sum by (gamma_(n-1) + gamma_h) sum|x_i|, h the split's chain over the counted terms
    assert "(kx_probe_n0 + 31) / 32 + 31" in policy.compare.probe.source
    assert [s.name for s in policy.launch.scratch] == ["kx_part_sum", "kx_arrivals"]
    assert policy.launch.scratch[1].restored and not policy.launch.scratch[0].restored
    body = "    float m = -INFINITY;\n    for (int r = 0; r < N; r++)\n        m = fmaxf(m, x[r * C + c]);\n    out[c] = m;"
    exact = rewrite(KERNEL.format(body=body, args="out, x, counts, N, C"), "split-reduce{threads=4,blocks=8}")
    assert exact.results[0].policy.compare.mode == "exact" and "max" in exact.results[0].policy.compare.reason


def _verify(cpu, case, options: str, plant: tuple[bytes, bytes] | None):  # type: ignore[no-untyped-def]
    path, kernel, spec_file = case
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, f"split-reduce{{{options}}}", path=str(path))
    assert result.changed, [r.format(full=True) for r in result.remarks]
    data = result.new_data
    if plant is not None:
        assert plant[0] in data, plant[0]
        data = data.replace(plant[0], plant[1], 1)
    return verify_pair(
        original,
        validate_bytes(str(path), data),
        spec,
        cpu,
        sizes=tuple(s.name for s in spec.check_sizes),
        policy=result.results[0].policy,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, options",
    [
        (BIAS_GRAD, "threads=4,blocks=8"),
        (BIAS_GRAD, "threads=8,blocks=32"),
        (COLSTATS_CASE, "threads=2,blocks=64"),
        (COLSTATS_CASE, "threads=16,blocks=1"),
    ],
)
def test_rewrites_verify_on_the_cpu_runtime(cpu, case, options: str) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, case, options, None)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, plant",
    [
        (BIAS_GRAD, (b"kx_w < kx_splits;", b"kx_w < kx_splits - 1;")),  # the last worker's partial is left out
        (BIAS_GRAD, (b"int r = kx_split;", b"int r = kx_split + 1;")),  # every worker starts one row late
        (BIAS_GRAD, (b"r < N;", b"r < N - 1;")),  # the last row is missed
        (COLSTATS_CASE, (b"s = 0.0f;\n", b"s = s;\n")),  # the bias counted in every worker: a wrong identity
        (COLSTATS_CASE, (b"m = fmaxf(m, __ldcg", b"m = fminf(m, __ldcg")),  # the partials combined with min
        (BIAS_GRAD, (b"kx_arrivals[kx_column] = 0u;", b";")),  # counters left for the next launch
    ],
    ids=["missing-partial", "off-by-one-start", "missed-tail", "wrong-identity", "wrong-combine", "counter-kept"],
)
def test_planted_wrong_splits_are_rejected(cpu, case, plant) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, case, "threads=4,blocks=8", plant)
    assert not report.ok, [s.summary() for s in report.sizes]


@pytest.fixture(scope="module")
def gpu():  # type: ignore[no-untyped-def]
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    return runtime


LAYERNORM_WGRAD = (
    NAIVE / "layernorm_wgrad" / "naive.cu",
    "layernorm_wgrad_naive",
    NAIVE / "layernorm_wgrad" / "naive.kxspec.toml",
)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [BIAS_GRAD, LAYERNORM_WGRAD, COLSTATS_CASE], ids=lambda c: c[1])
@pytest.mark.parametrize("options", ["threads=8,blocks=1", "threads=4,blocks=64", "threads=1,blocks=256"])
def test_splits_verify_on_the_gpu(case, options: str, gpu) -> None:  # type: ignore[no-untyped-def]
    """The fences, the arrival counters and `__ldcg` on real concurrent blocks: the
    derived bound holds and the counters come back zero."""
    report = _verify(gpu, case, options, None)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "plant",
    [(b"kx_w < kx_splits;", b"kx_w < kx_splits - 1;"), (b"kx_arrivals[kx_column] = 0u;", b";")],
    ids=["missing-partial", "counter-kept"],
)
def test_planted_wrong_splits_are_rejected_on_the_gpu(plant, gpu) -> None:  # type: ignore[no-untyped-def]
    report = _verify(gpu, BIAS_GRAD, "threads=4,blocks=8", plant)
    assert not report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
def test_after_launch_the_block_is_launchs_and_the_workers_are_this_passs(cpu) -> None:  # type: ignore[no-untyped-def]
    path, kernel, spec_file = BIAS_GRAD
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    pipeline = "launch{BIAS_GRAD_NAIVE_BLOCK_X=64},split-reduce{threads=8,blocks=4}"
    result = rewrite(original.data, pipeline, path=str(path))
    assert [r.outcome for r in result.results] == [Outcome.APPLIED, Outcome.APPLIED]
    policy = result.results[0].policy.then(result.results[1].policy)
    assert dict(policy.launch.values)["BIAS_GRAD_NAIVE_BLOCK_X"] == 64 and policy.launch.scratch
    sizes = tuple(s.name for s in spec.check_sizes)
    report = verify_pair(original, validate_bytes(str(path), result.new_data), spec, cpu, sizes=sizes, policy=policy)
    assert report.ok, [s.summary() for s in report.sizes]
