"""The `vectorize` pass: contiguous accesses of one-element-per-thread kernels widened to
vector loads and stores, rewritten byte for byte as reviewed, refused with the reason and
the line, and every applied width verified bit-exact on the CPU runtime, where planted
bugs (the tail left unhandled, the alignment check dropped, a lane skipped) must fail;
the run-time alignment fallback is run on buffers one element off their alignment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import CORPORA
from kxform.api import space_of
from kxform.engine.pass_api import Outcome
from kxform.engine.registry import default_registry
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import find_spec_for, load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import outcomes, remark_names, rewrite

NAIVE = CORPORA / "naive"
GOLDEN = Path(__file__).parents[1] / "golden"
GELU = NAIVE / "gelu_f32" / "naive.cu"
GELU_BF16 = NAIVE / "gelu_bf16" / "naive.cu"


def _rewrite(path: Path, spec: str) -> bytes:
    result = rewrite(path.read_bytes(), spec, path=str(path))
    assert result.changed, [r.format() for r in result.remarks]
    return result.new_data


@pytest.mark.parametrize(
    ("path", "spec", "golden"),
    [
        (GELU, "vectorize{width=4}", "gelu_f32.vectorize4.cu"),
        (GELU_BF16, "vectorize{width=8}", "gelu_bf16.vectorize8.cu"),
    ],
)
def test_golden_rewrite_and_idempotence(path: Path, spec: str, golden: str) -> None:
    result = rewrite(path.read_bytes(), spec, path=str(path))
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert result.new_data == (GOLDEN / golden).read_bytes()
    assert kernel.policy.compare.mode == "exact" and kernel.policy.required
    assert kernel.policy.launch.values and dict(kernel.policy.launch.defaults) == {f"{kernel.kernel.upper()}_VEC": 1}
    again = rewrite(result.new_data, spec, path=str(path))
    assert not again.changed and outcomes(again)[kernel.kernel] is Outcome.UNCHANGED


def test_the_grid_counts_vectors_and_composes_after_launch() -> None:
    text = _rewrite(GELU, "vectorize{width=2}").decode()
    assert "(((N + GELU_F32_NAIVE_VEC - 1) / GELU_F32_NAIVE_VEC) + block_size - 1) / block_size" in text
    both = rewrite(GELU.read_bytes(), "vectorize{width=4},launch", path=str(GELU))
    assert [p.name for p in default_registry().pipeline("vectorize{width=4},launch")] == ["launch", "vectorize"]
    assert both.changed and b"GELU_F32_NAIVE_BLOCK_X" in both.new_data and b"GELU_F32_NAIVE_VEC" in both.new_data
    (last,) = [r for r in both.results if r.pass_name == "vectorize"]
    assert last.outcome is Outcome.APPLIED
    assert dict(last.policy.launch.values) == {"GELU_F32_NAIVE_VEC": 4, "GELU_F32_NAIVE_BLOCK_X": 128}


@pytest.mark.parametrize(
    ("path", "key", "words"),
    [
        (NAIVE / "silu_and_mul" / "naive.cu", "MayAlias", "`inp` is read at a non-contiguous index"),
        (NAIVE / "jacobi2d" / "naive.cu", "NotElementwise", "(line 8)"),
        (NAIVE / "conv2d" / "naive.cu", "NotElementwise", "is not its bounds guard"),
        (NAIVE / "gemm" / "naive.cu", "NotElementwise", "is not its bounds guard"),
        (NAIVE / "layernorm" / "naive.cu", "NotContiguous", "stride C in threadIdx.x"),
    ],
)
def test_corpus_refusals_name_their_reason(path: Path, key: str, words: str) -> None:
    result = rewrite(path.read_bytes(), "vectorize{width=2}", path=str(path))
    assert not result.changed and key in remark_names(result)
    assert any(words in r.message for r in result.remarks if r.name == key), [r.format() for r in result.remarks]


def test_refusals_of_planted_shapes() -> None:
    offset = (
        "__global__ void k(float* out, const float* inp, int n) {\n    int i = blockIdx.x * blockDim.x + "
        "threadIdx.x;\n    if (i < n) out[i] = inp[i] + inp[i + 1];\n}\n"
        "void run(float* o, const float* x, int n) { k<<<(n + 255) / 256, 256>>>(o, x, n); }\n"
    )
    result = rewrite(offset, "vectorize{width=4}")
    (missed,) = [r for r in result.remarks if r.name == "NotContiguous"]
    assert "`inp[i + 1]` (line 3) is not `inp[i]`" in missed.message and not result.changed
    shared = offset.replace(
        "    if (i < n) out[i] = inp[i] + inp[i + 1];", "    __shared__ float s[256];\n    if (i < n) out[i] = inp[i];"
    )
    assert "Communicates" in remark_names(rewrite(shared, "vectorize{width=4}"))
    through = offset.replace(
        "    if (i < n) out[i] = inp[i] + inp[i + 1];",
        "    if (i < n) {\n        const float* x = inp + 1;\n        out[i] = x[i];\n    }",
    )
    refused = rewrite(through, "vectorize{width=4}")  # `x[i]` is `inp[i + 1]`: never widened as `inp`
    assert not refused.changed and "Escapes" in remark_names(refused)
    passed = offset.replace(
        "__global__ void k", "__device__ float g(const float* p, int i) { return p[i + 1]; }\n__global__ void k"
    ).replace("inp[i] + inp[i + 1]", "g(inp, i)")
    (escapes,) = [r for r in rewrite(passed, "vectorize{width=4}").remarks if r.name == "Escapes"]
    assert "`inp` is used other than by a subscript" in escapes.message
    wide = rewrite(GELU.read_bytes(), "vectorize{width=8}", path=str(GELU))
    (bad,) = [r for r in wide.remarks if r.name == "BadValue"]
    assert "width=8: not one of {2, 4}" in bad.message and not wide.changed
    assert "NoEvidence" in remark_names(rewrite(GELU.read_bytes(), "vectorize", path=str(GELU)))


def test_restrict_pointers_need_no_overlap_check() -> None:
    text = GELU.read_text().replace(
        "float* out, const float* inp", "float* __restrict__ out, const float* __restrict__ inp", 1
    )
    out = rewrite(text, "vectorize{width=4}", path=str(GELU)).new_data.decode()
    assert "% 16 == 0" in out and "(inp + (N))" not in out
    plain = _rewrite(GELU, "vectorize{width=4}").decode()
    assert "(unsigned long long)(inp + (N)) <= (unsigned long long)(out)" in plain


def test_space_and_spec_through_the_pass_api() -> None:
    assert default_registry().parse("vectorize{width=4}").spec() == "vectorize{width=4}"
    assert space_of(GELU.read_bytes(), "gelu_f32_naive", "vectorize", path=str(GELU)).param("width").values == (
        "2",
        "4",
    )  # no "1": the code as written is the pass-off point of a composed space
    assert space_of(GELU_BF16.read_bytes(), "gelu_bf16_naive", "vectorize", path=str(GELU_BF16)).param(
        "width"
    ).values == ("2", "4", "8")


def _verify(cpu, path: Path, kernel: str, new: bytes, spec: str):  # type: ignore[no-untyped-def]
    result = rewrite(path.read_bytes(), spec, path=str(path))
    (applied,) = result.results
    harness = load_spec(find_spec_for(path)).kernel(kernel)
    sizes = tuple(s.name for s in harness.sizes if not s.bench)
    return verify_pair(
        validate_bytes(str(path), path.read_bytes()),
        validate_bytes(str(path), new),
        harness,
        cpu,
        sizes=sizes,
        policy=applied.policy,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "kernel", "width"),
    [
        ("gelu_f32", "gelu_f32_naive", 2),
        ("gelu_f32", "gelu_f32_naive", 4),
        ("gelu_bf16", "gelu_bf16_naive", 8),
        ("residual_add", "residual_add_naive", 4),
        ("adamw", "adamw_naive", 4),
    ],
)
def test_applied_widths_verify_bit_exact_on_the_cpu_runtime(  # type: ignore[no-untyped-def]
    cpu, name: str, kernel: str, width: int
) -> None:
    path = NAIVE / name / "naive.cu"
    spec = f"vectorize{{width={width}}}"
    report = _verify(cpu, path, kernel, _rewrite(path, spec), spec)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["tail", "lane", "offset"])
def test_planted_bugs_fail_verification(cpu, plant: str) -> None:  # type: ignore[no-untyped-def]
    """The tail left to the vector path (N = 5003 is not a multiple of 4: the last vector
    runs past the buffer), a lane skipped, and the vectors of a buffer offset by one
    element (misaligned, and the wrong elements) must all be caught."""
    spec = "vectorize{width=4}"
    good = _rewrite(GELU, spec)
    if plant == "tail":
        broken = good.replace(b"kx_first + GELU_F32_NAIVE_VEC <= (N) &&", b"kx_first < (N) &&")
    elif plant == "offset":  # the vector of a buffer offset by one element
        broken = good.replace(
            b"reinterpret_cast<const uint4*>(inp)[kx_v]", b"reinterpret_cast<const uint4*>(inp + 1)[kx_v]"
        )
    else:
        broken = good.replace(
            b"kx_j < GELU_F32_NAIVE_VEC; ++kx_j) {\n            float x",
            b"kx_j < GELU_F32_NAIVE_VEC - 1; ++kx_j) {\n            float x",
        )
    assert broken != good
    report = _verify(cpu, GELU, "gelu_f32_naive", broken, spec)
    assert not report.ok


# -- the alignment fallback, run -----------------------------------------------------------

GELU_SIGNATURE = b"__global__ void gelu_f32_naive(float* out, const float* inp, int N)\n{"


def _shifted(data: bytes) -> bytes:
    """The kernel as a device function, launched through a kernel of the same signature
    that passes every buffer one element past its start (`out + 1`, `inp + 1`, `N - 1`):
    the runtime's buffers are 16-byte aligned, so each is then 4 bytes off, as a caller's
    sub-array would be. The wrapper writes `out[0]` itself so that every element is compared."""
    assert data.count(GELU_SIGNATURE) == 1
    body = data.replace(GELU_SIGNATURE, b"__device__ void kx_shifted_body(float* out, const float* inp, int N)\n{")
    end = body.index(b"\n}\n", body.index(b"kx_shifted_body")) + 3
    wrapper = GELU_SIGNATURE + (
        b"\n    if (blockIdx.x == 0 && threadIdx.x == 0)\n        out[0] = 0.0f;"
        b"\n    kx_shifted_body(out + 1, inp + 1, N - 1);\n}\n"
    )
    return body[:end] + wrapper + body[end:]


@pytest.mark.slow
@pytest.mark.parametrize("plant", [None, "vector-lane", "no-alignment-check"])
def test_misaligned_buffers_take_the_scalar_path(cpu, plant: str | None) -> None:  # type: ignore[no-untyped-def]
    """On buffers 4 bytes off a float4's alignment the rewrite must give the original's
    results bit-exactly, from its scalar path: a vector path broken on purpose (a lane
    skipped, caught on aligned buffers) goes unnoticed here because it never runs, and a
    rewrite without the alignment check loads float4s from misaligned addresses, which
    the CPU runtime reports as a failed run (the host's aligned vector load faults, as
    the GPU's does) where the original ran."""
    spec = "vectorize{width=4}"
    good = _rewrite(GELU, spec)
    new = good
    if plant == "vector-lane":
        new = good.replace(
            b"kx_j < GELU_F32_NAIVE_VEC; ++kx_j) {\n            float x",
            b"kx_j < GELU_F32_NAIVE_VEC - 1; ++kx_j) {\n            float x",
        )
        assert not _verify(cpu, GELU, "gelu_f32_naive", new, spec).ok  # aligned: the vector path runs
    elif plant == "no-alignment-check":
        new = re.sub(rb"\s*\(unsigned long long\)\((?:inp|out)\) % 16 == 0 &&", b"", good)
    assert new != good or plant is None
    shifted = (GELU.parent / "shifted.cu").as_posix()
    report = _verify_sources(cpu, _shifted(GELU.read_bytes()), _shifted(new), spec, shifted)
    if plant == "no-alignment-check":
        # every size whose buffers the spec places at their own allocations is shifted off
        # alignment; a size with a layout (`overlapping`) may shift them back onto it
        placed = {s.name for s in load_spec(find_spec_for(GELU)).kernel("gelu_f32_naive").sizes if s.layout}
        shifted_off = [s for s in report.sizes if s.size not in placed]
        assert shifted_off and not report.ok
        assert all(s.status == "mismatch" for s in shifted_off), [s.summary() for s in report.sizes]
        assert all("the rewritten kernel failed where the original ran" in (s.error or "") for s in shifted_off)
    else:
        assert report.ok, [s.summary() for s in report.sizes]
        assert all(o.comparison.max_abs == 0 for s in report.sizes for o in s.outputs)  # bit-exact


def _verify_sources(cpu, original: bytes, new: bytes, spec: str, path: str):  # type: ignore[no-untyped-def]
    result = rewrite(GELU.read_bytes(), spec, path=str(GELU))
    harness = load_spec(find_spec_for(GELU)).kernel("gelu_f32_naive")
    sizes = tuple(s.name for s in harness.sizes if not s.bench)
    return verify_pair(
        validate_bytes(path, original),
        validate_bytes(path, new),
        harness,
        cpu,
        sizes=sizes,
        policy=result.results[0].policy,
    )
