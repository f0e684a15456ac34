"""`vectorize` on block-stride and grid-stride loops: the loop's start and step scaled by
the width, a vector path per turn where the turn's elements are whole and aligned, a
scalar path otherwise; rewritten byte for byte as reviewed, refused with the reason and
the line, verified bit-exact on the CPU runtime (rows that are aligned and rows that are
not), and planted bugs (a tail past the bound, a lane skipped, the alignment check
dropped, the start left unscaled) rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.engine.pass_api import Outcome
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import outcomes, remark_names, rewrite

GOLDEN = Path(__file__).parents[1] / "golden"
GEGLU = (CORPORA / "naive" / "geglu" / "naive.cu", "geglu_naive", CORPORA / "naive" / "geglu" / "naive.kxspec.toml")
STRIDE = Path(__file__).parents[1] / "fixtures" / "stride"
AXPY = (STRIDE / "stride.cu", "axpy_gs", STRIDE / "stride.kxspec.toml")
ROWSCALE = (STRIDE / "stride.cu", "rowscale", STRIDE / "stride.kxspec.toml")
SILU_BF16 = (
    CORPORA / "silu_and_mul" / "silu_and_mul.cu",
    "silu_and_mul_kernel",
    CORPORA / "silu_and_mul" / "silu_and_mul.kxspec.toml",
)


def test_golden_block_stride_rewrite_and_idempotence() -> None:
    path = GEGLU[0]
    result = rewrite(path.read_bytes(), "vectorize{width=4}", path=str(path))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == (GOLDEN / "geglu_naive.vectorize4.cu").read_bytes()
    assert kernel.policy.compare.mode == "exact" and kernel.policy.required and kernel.policy.launch.is_spec
    again = rewrite(result.new_data, "vectorize{width=4}", path=str(path))
    assert not again.changed and outcomes(again)["geglu_naive"] is Outcome.UNCHANGED


def test_grid_stride_loops_through_locals_and_the_launch_left_as_written() -> None:
    path = STRIDE / "stride.cu"
    result = rewrite(path.read_bytes(), "vectorize{width=4}", path=str(path))
    assert outcomes(result) == {"axpy_gs": Outcome.APPLIED, "relu_gs": Outcome.APPLIED, "rowscale": Outcome.APPLIED}
    text = result.new_data.decode()
    assert "i = (blockIdx.x * blockDim.x + threadIdx.x) * AXPY_GS_VEC; i < n; i += (stride) * AXPY_GS_VEC) {" in text
    assert "axpy_gs<<<grid_size, block_size>>>" in text and "rowscale<<<grid, block>>>" in text
    # y is read and written at one index: one vector, loaded, updated and stored
    assert "kx_e1[kx_j] = a * kx_e0[kx_j] + kx_e1[kx_j];" in text
    # a value per row read inside the loop stays as written; the row's pointers are widened
    assert "kx_e1[kx_j] = v + scale[blockIdx.x];" in text and "(unsigned long long)(&row[i]) % 16 == 0" in text


LOOP = """__global__ void k(float* out, const float* x, const float* w, int D)
{{
    const int t = blockIdx.x;
    for (int i = threadIdx.x; i < D; i += blockDim.x) {{
{body}
    }}
}}
void run(float* out, const float* x, const float* w, int T, int D) {{ k<<<T, 256>>>(out, x, w, D); }}
"""


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        ("        out[t] += x[t * D + i];", "Dependence", "carries a value from one turn to the next"),
        ("        out[t * D + i] = x[t * 2 * D + 2 * i];", "NotContiguous", "neither `base + i` nor fixed"),
        ("        if (x[t * D + i] > 0.0f)\n            out[t * D + i] = 1.0f;", "NotContiguous", "under a condition"),
        (
            "        const int row = t * D;\n        out[row + i] = x[row + i];",
            "LoopShape",
            "declared inside the stride loop",
        ),
        ("        if (i == 3) continue;\n        out[t * D + i] = x[t * D + i];", "LoopShape", "an exit"),
        ("        out[t * D + i] = x[t * D + i] * w[t];", "MayAlias", "may overlap a buffer the loop writes"),
    ],
    ids=["reduction", "stride-2", "condition", "local-base", "continue", "alias"],
)
def test_refusals_name_their_reason_and_line(body: str, key: str, words: str) -> None:
    result = rewrite(LOOP.format(body=body), "vectorize{width=4}")
    assert not result.changed and key in remark_names(result), [r.format() for r in result.remarks]
    message = next(r.message for r in result.remarks if r.name == key)
    assert words in message and "(line " in message, message


def test_a_restrict_row_read_inside_the_loop_is_kept_as_written() -> None:
    body = "        out[t * D + i] = x[t * D + i] * w[t];"
    text = LOOP.format(body=body).replace("const float* w", "const float* __restrict__ w")
    text = text.replace("float* out,", "float* __restrict__ out,")
    result = rewrite(text, "vectorize{width=4}")
    assert result.changed and b"kx_e1[kx_j] = kx_e0[kx_j] * w[t];" in result.new_data


def _verify(cpu, case, width: int, plant: tuple[bytes, bytes] | None = None):  # type: ignore[no-untyped-def]
    path, kernel, spec_file = case
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, f"vectorize{{width={width}}}", path=str(path), kernels=(kernel,))
    (applied,) = [r for r in result.results if r.kernel == kernel]
    assert applied.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    data = result.new_data
    if plant is not None:
        assert plant[0] in data, plant[0]
        data = data.replace(plant[0], plant[1], 1)
    sizes = tuple(s.name for s in spec.check_sizes)
    return verify_pair(original, validate_bytes(str(path), data), spec, cpu, sizes=sizes, policy=applied.policy)


@pytest.mark.slow
@pytest.mark.parametrize(("case", "width"), [(GEGLU, 4), (GEGLU, 2), (AXPY, 4), (ROWSCALE, 2), (SILU_BF16, 8)], ids=str)
def test_stride_loops_verify_bit_exact_on_the_cpu_runtime(cpu, case, width: int) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, case, width)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
@pytest.mark.parametrize(
    "plant",
    [
        (b"kx_first + kx_j < (D)", b"kx_first + kx_j <= (D)"),  # the tail runs one element past the bound
        (b"for (int kx_j = 0; kx_j < GEGLU_NAIVE_VEC; ++kx_j)", b"for (int kx_j = 1; kx_j < GEGLU_NAIVE_VEC; ++kx_j)"),
        (b" % 16 == 0 &&\n            (unsigned long long)(&inp[(size_t)t * 2 * D + D + i]) % 16 == 0", b" % 4 == 0"),
        (b"(threadIdx.x) * GEGLU_NAIVE_VEC", b"(threadIdx.x)"),  # turns that overlap and leave elements out
    ],
    ids=["tail", "lane", "no-alignment-check", "start"],
)
def test_planted_bugs_fail_verification(cpu, plant) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, GEGLU, 4, plant)
    assert not report.ok, [s.summary() for s in report.sizes]


@pytest.fixture(scope="module")
def gpu():  # type: ignore[no-untyped-def]
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    return runtime


@pytest.mark.gpu
@pytest.mark.parametrize(("case", "width"), [(GEGLU, 4), (AXPY, 4), (ROWSCALE, 2), (SILU_BF16, 8)], ids=str)
def test_stride_loops_verify_bit_exact_on_the_gpu(gpu, case, width: int) -> None:  # type: ignore[no-untyped-def]
    """Misaligned rows take the scalar path on the GPU too (a misaligned 16-byte load faults there)."""
    report = _verify(gpu, case, width)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
def test_after_launch_the_block_is_free_and_the_turns_are_vectors(cpu) -> None:  # type: ignore[no-untyped-def]
    """On a block-per-row kernel `launch` changes the stride (the block) and `vectorize`
    the turn: composed, verified as one."""
    path, kernel, spec_file = GEGLU
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, "launch{GEGLU_NAIVE_BLOCK_X=96},vectorize{width=4}", path=str(path))
    assert [r.outcome for r in result.results] == [Outcome.APPLIED, Outcome.APPLIED]
    policy = result.results[0].policy.then(result.results[1].policy)
    sizes = tuple(s.name for s in spec.check_sizes)
    report = verify_pair(original, validate_bytes(str(path), result.new_data), spec, cpu, sizes=sizes, policy=policy)
    assert report.ok, [s.summary() for s in report.sizes]
