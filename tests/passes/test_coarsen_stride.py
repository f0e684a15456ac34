"""`coarsen` on block-stride and grid-stride loops: each turn takes F elements, a stride
apart or adjacent; a grid-stride loop's grid divided by F where the launch is readable,
left as written where the launcher caps it; a loop that carries a value only strided
(its order kept). Refusals with the reason and the line; bit-exact on the CPU runtime,
where planted bugs (an element left out of a turn, a tail past the bound, turns whose
start is not scaled, which leave elements out) are rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.api import space_of
from kxform.engine.pass_api import Outcome
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import outcomes, remark_names, rewrite

GEGLU = (CORPORA / "naive" / "geglu" / "naive.cu", "geglu_naive", CORPORA / "naive" / "geglu" / "naive.kxspec.toml")
STRIDE = Path(__file__).parents[1] / "fixtures" / "stride"
AXPY = (STRIDE / "stride.cu", "axpy_gs", STRIDE / "stride.kxspec.toml")
RELU = (STRIDE / "stride.cu", "relu_gs", STRIDE / "stride.kxspec.toml")
ROWSCALE = (STRIDE / "stride.cu", "rowscale", STRIDE / "stride.kxspec.toml")


def test_a_block_stride_turn_takes_elements_a_block_apart_and_the_launch_stays() -> None:
    path = GEGLU[0]
    result = rewrite(path.read_bytes(), "coarsen{factor=4,layout=strided}", path=str(path))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    text = result.new_data.decode()
    assert "for (int i = threadIdx.x; i < D; i += (blockDim.x) * GEGLU_NAIVE_COARSEN) {" in text
    assert "const int i = kx_first + kx_f * (blockDim.x);" in text and "if (i < (D)) {" in text
    assert "geglu_naive<<<T, block_size>>>" in text and kernel.policy.launch.is_spec
    again = rewrite(result.new_data, "coarsen{factor=4,layout=strided}", path=str(path))
    assert not again.changed and outcomes(again)["geglu_naive"] is Outcome.UNCHANGED


def test_a_grid_stride_grid_is_divided_where_readable_and_kept_where_capped() -> None:
    path = STRIDE / "stride.cu"
    result = rewrite(path.read_bytes(), "coarsen{factor=2,layout=contiguous}", path=str(path))
    assert set(outcomes(result).values()) == {Outcome.APPLIED}
    text = result.new_data.decode()
    assert "relu_gs<<<((grid_size) + RELU_GS_COARSEN - 1) / RELU_GS_COARSEN, block_size>>>" in text
    assert "axpy_gs<<<grid_size, block_size>>>" in text  # the capped grid: its threads take many turns already
    assert "i = (blockIdx.x * blockDim.x + threadIdx.x) * RELU_GS_COARSEN; i < n;" in text
    relu = next(r for r in result.results if r.kernel == "relu_gs")
    assert dict(relu.policy.launch.values) == {"RELU_GS_COARSEN": 2}


KERNEL = """__global__ void k(float* out, const float* x, int D)
{{
    const int t = blockIdx.x;
{body}
}}
void run(float* out, const float* x, int T, int D) {{ k<<<T, 256>>>(out, x, D); }}
"""
CARRIED = (
    "    float run = 0.0f;\n    for (int i = threadIdx.x; i < D; i += blockDim.x) {\n"
    "        run += x[t * D + i];\n        out[t * D + i] = run;\n    }"
)


def test_a_loop_that_carries_a_value_is_offered_only_strided() -> None:
    space = space_of(KERNEL.format(body=CARRIED), "k", "coarsen", path="k.cu", hw="h100")
    assert space.is_valid({"factor": "4", "along": "x", "layout": "strided"})
    assert not space.is_valid({"factor": "4", "along": "x", "layout": "contiguous"})


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        (
            "    for (int i = threadIdx.x; i < D; i += blockDim.x) {\n        if (x[t * D + i] < 0.0f)\n"
            "            return;\n        out[t * D + i] = x[t * D + i];\n    }",
            "LoopShape",
            "an exit",
        ),
        (
            "    for (int i = threadIdx.x; i != D; i += blockDim.x)\n        out[t * D + i] = x[t * D + i];",
            "LoopShape",
            "is not `for (T i = START; i < B; i += STEP)`",
        ),
        (
            "    out[t] = 0.0f;\n    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += blockDim.x * "
            "gridDim.x)\n        out[i] = x[i];",
            "OutsideGridStride",
            "a smaller grid would change what it does",
        ),
    ],
    ids=["exit", "condition", "outside-grid-stride"],
)
def test_refusals_name_their_reason_and_line(body: str, key: str, words: str) -> None:
    result = rewrite(KERNEL.format(body=body), "coarsen{factor=2,layout=strided}")
    assert not result.changed and key in remark_names(result), [r.format() for r in result.remarks]
    assert any(words in r.message and "line" in r.message for r in result.remarks if r.name == key)


def _verify(cpu, case, options: str, plant: tuple[bytes, bytes] | None = None):  # type: ignore[no-untyped-def]
    path, kernel, spec_file = case
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, f"coarsen{{{options}}}", path=str(path), kernels=(kernel,))
    (applied,) = [r for r in result.results if r.kernel == kernel]
    assert applied.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    data = result.new_data
    if plant is not None:
        assert plant[0] in data, plant[0]
        data = data.replace(plant[0], plant[1], 1)
    sizes = tuple(s.name for s in spec.check_sizes)
    return verify_pair(original, validate_bytes(str(path), data), spec, cpu, sizes=sizes, policy=applied.policy)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "options"),
    [
        (GEGLU, "factor=4,layout=strided"),
        (GEGLU, "factor=2,layout=contiguous"),
        (RELU, "factor=4,layout=strided"),
        (AXPY, "factor=2,layout=contiguous"),
        (ROWSCALE, "factor=8,layout=strided"),
    ],
    ids=["geglu-strided", "geglu-contiguous", "relu-grid", "axpy-capped", "rowscale"],
)
def test_stride_loops_verify_bit_exact_on_the_cpu_runtime(cpu, case, options: str) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, case, options)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "options", "plant"),
    [
        (GEGLU, "factor=4,layout=strided", (b"kx_f < GEGLU_NAIVE_COARSEN;", b"kx_f < GEGLU_NAIVE_COARSEN - 1;")),
        (GEGLU, "factor=4,layout=strided", (b"if (i < (D))", b"if (i <= (D))")),
        (
            RELU,
            "factor=4,layout=contiguous",
            (b"(blockIdx.x * blockDim.x + threadIdx.x) * RELU_GS_COARSEN", b"(blockIdx.x * blockDim.x + threadIdx.x)"),
        ),
    ],
    ids=["element-left-out", "tail", "start-not-scaled"],
)
def test_planted_bugs_fail_verification(cpu, case, options: str, plant) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, case, options, plant)
    assert not report.ok, [s.summary() for s in report.sizes]
