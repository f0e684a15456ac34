"""Reads of the block index the source analysis cannot follow: refused, or rewritten so
that the compiled code confirms no physical read is left.

Each construct runs twice: with nvcc, where coverage is confirmed on the PTX of the
rewritten kernel's unit (its prologue given constants, any %ctaid.x/.y left is an
unmapped read), and without it, where the constructs the source analysis cannot see
through are refused. Either way a rewrite that is accepted must compile to PTX without
a %ctaid.x/.y read outside the prologue: that is checked here independently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import needs_nvcc
from kxform.engine.pass_api import Outcome
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import SourceText
from kxform.passes.swizzle import ptx_coverage
from kxform.passes.swizzle.swizzle import PROLOGUE_MARK
from swizzle_helpers import outcomes, rewrite

CG = "#include <cooperative_groups.h>\nnamespace cg = cooperative_groups;\n"
HEADER = "#define HDR_ROW (blockIdx.y)\n__device__ inline int hdr_col() { return blockIdx.x; }\n"

CONSTRUCTS = {
    "functor-operator-call": (
        "struct Row { __device__ int operator()() const { return blockIdx.y; } };\n"
        "__global__ void k(float* o, int n) { Row r; o[r() * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "constructor-initializer": (
        "struct Tile { int r; __device__ Tile() : r(blockIdx.y) {} };\n"
        "__global__ void k(float* o, int n) { Tile t; o[t.r * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "constructor-body": (
        "struct Tile { int r; __device__ Tile() { r = blockIdx.y; } };\n"
        "__global__ void k(float* o, int n) { Tile t; o[t.r * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "default-argument": (
        "__device__ int row(int b = blockIdx.y) { return b; }\n"
        "__global__ void k(float* o, int n) { o[row() * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "function-pointer": (
        "__device__ int row_of() { return blockIdx.y; }\n"
        "__global__ void k(float* o, int n) { int (*fp)() = row_of; o[fp() * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "function-pointer-to-a-called-carrier": (
        "__device__ int row_of() { return blockIdx.y; }\n"
        "__global__ void k(float* o, int n) { int (*fp)() = row_of; o[fp() * n + row_of() + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "token-pasting": (
        "#define IDX(a) block##Idx.a\n"
        "__global__ void k(float* o, int n) { o[IDX(y) * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "cooperative-groups-group-index": (
        CG + "__global__ void k(float* o, int n) { auto b = cg::this_thread_block();\n"
        "  o[b.group_index().y * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "inline-ptx-in-a-macro": (
        '#define CTAID_Y(r) asm("mov.u32 %0, %%ctaid.y;" : "=r"(r))\n'
        "__global__ void k(float* o, int n) { unsigned r; CTAID_Y(r); o[r * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "inline-ptx-through-a-register-name": (
        '#define SREG(r, name) asm("mov.u32 %0, %%" name ";" : "=r"(r))\n'
        '__global__ void k(float* o, int n) { unsigned r; SREG(r, "ctaid.y"); o[r * n + blockIdx.x] = (float)blockIdx.y; }\n'
    ),
    "header-macro-through-a-local-macro": (
        '#include "idx.h"\n#define MYROW HDR_ROW\n'
        "__global__ void k(float* o, int n) { o[MYROW * n + blockIdx.x] = (float)blockIdx.y; }\n"
    ),
    "header-helper-through-a-local-macro": (
        '#include "idx.h"\n#define MYCOL hdr_col()\n'
        "__global__ void k(float* o, int n) { o[blockIdx.y * n + MYCOL] = (float)blockIdx.x; }\n"
    ),
}


VACUOUS = ("PatternNeeds2DGrid", "NoBlockIndexRead", "NoProfitablePattern")
"""Reasons that would make a refusal say nothing about the construct."""


def _refused_for_the_construct(result) -> bool:  # type: ignore[no-untyped-def]
    (kernel,) = result.results
    return kernel.outcome is not Outcome.APPLIED and not any(r.startswith(VACUOUS) for r in kernel.reasons)


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "idx.h").write_text(HEADER)
    path = tmp_path / "k.cu"
    path.write_text(text)
    return path


def _ptx_reads_outside_prologue(path: Path, data: bytes) -> tuple[str, ...]:
    """Independent confirmation: compile the rewritten kernel with a constant prologue."""
    model = parse_model(SourceText(str(path), data))
    verdict = ptx_coverage.confirm(model, model.kernels[0], PROLOGUE_MARK)
    assert verdict.confirmed, verdict.why_not
    return verdict.unmapped


@pytest.fixture
def without_nvcc(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KXFORM_NVCC", "kxform-no-such-nvcc")
    ptx_coverage._builder.cache_clear()
    yield
    ptx_coverage._builder.cache_clear()


@needs_nvcc
@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_construct_with_nvcc_is_refused_or_confirmed(tmp_path: Path, name: str) -> None:
    path = _write(tmp_path, CONSTRUCTS[name])
    for semantic in (False, True):
        result = rewrite(path.read_bytes(), path=str(path), semantic=semantic, pattern="column")
        if outcomes(result)["k"] is Outcome.APPLIED:
            assert _ptx_reads_outside_prologue(path, result.new_data) == ()
        else:
            assert _refused_for_the_construct(result), result.results
            assert not result.changed


@needs_nvcc
@pytest.mark.parametrize("name", sorted(CONSTRUCTS))
def test_construct_without_nvcc_is_refused(tmp_path: Path, name: str, without_nvcc: None) -> None:
    path = _write(tmp_path, CONSTRUCTS[name])
    result = rewrite(path.read_bytes(), path=str(path), pattern="column")
    assert _refused_for_the_construct(result), (result.diff(), result.results)
    assert not result.changed


@needs_nvcc
def test_the_compiler_catches_what_the_source_analysis_missed(tmp_path: Path) -> None:
    """A read through a header macro reached by a local macro, with libclang off: only the
    PTX shows it, and the rewrite is refused at the coverage check with the line."""
    path = _write(tmp_path, CONSTRUCTS["header-macro-through-a-local-macro"])
    result = rewrite(path.read_bytes(), path=str(path), pattern="column")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.FAILED and kernel.stage == "coverage"
    assert "%ctaid.y" in kernel.reasons[0] and "compiled code" in kernel.reasons[0]


@needs_nvcc
def test_a_clean_rewrite_is_confirmed_by_nvcc(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "__global__ void k(float* o, int n) { o[blockIdx.y * n + blockIdx.x] = (float)blockIdx.y; }\n"
    )
    result = rewrite(path.read_bytes(), path=str(path), pattern="column")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED
    (coverage,) = [c for c in kernel.checks if c.name == "coverage"]
    assert "nvcc confirms no %ctaid.x/.y read in the PTX of k" in coverage.detail


def test_a_clean_rewrite_without_nvcc_says_it_is_source_only(tmp_path: Path, without_nvcc: None) -> None:
    path = _write(
        tmp_path, "__global__ void k(float* o, int n) { o[blockIdx.y * n + blockIdx.x] = (float)blockIdx.y; }\n"
    )
    result = rewrite(path.read_bytes(), path=str(path), pattern="column")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED
    (coverage,) = [c for c in kernel.checks if c.name == "coverage"]
    assert "source analysis only" in coverage.detail and "nvcc not found" in coverage.detail


ORDER_UNSAFE = {
    "spin-wait-through-a-cast": (
        "__global__ void k(int* flags, float* o) { if (blockIdx.x > 0)\n"
        "  while (((volatile int*)flags)[blockIdx.x - 1] == 0) {}\n  o[blockIdx.x] = 1.f; flags[blockIdx.x] = 1; }\n",
        "SpinWait",
    ),
    "do-while-atomic-poll": (
        "__global__ void k(int* flags, float* o) { int v; if (blockIdx.x > 0) do { v = atomicAdd(&flags[blockIdx.x - 1],"
        " 0); } while (v == 0);\n  o[blockIdx.x] = 1.f; atomicExch(&flags[blockIdx.x], 1); }\n",
        "SpinWait",
    ),
    "poll-inside-a-device-helper": (
        "__device__ bool ready(const int* f, int i) { return atomicAdd((int*)&f[i], 0) != 0; }\n"
        "__global__ void k(int* flags, float* o) { if (blockIdx.x > 0) while (!ready(flags, blockIdx.x - 1)) {}\n"
        "  o[blockIdx.x] = 1.f; flags[blockIdx.x] = 1; }\n",
        "SpinWait",
    ),
    "namespace-scope-volatile-flag": (
        "__device__ volatile int go;\n"
        "__global__ void k(float* o) { if (blockIdx.x == 0) go = 1; while (go == 0) {} o[blockIdx.x] = 1.f; }\n",
        "SpinWait",
    ),
    "cluster-dims-attribute": (
        "__global__ void __cluster_dims__(2, 1, 1) k(float* o) { o[blockIdx.y * gridDim.x + blockIdx.x] = (float)blockIdx.y; }\n",
        "ThreadBlockCluster",
    ),
    "this-cluster": (
        CG + "__global__ void k(float* o) { auto c = cg::this_cluster(); c.sync();\n"
        "  o[blockIdx.y * gridDim.x + blockIdx.x] = (float)blockIdx.y; }\n",
        "ThreadBlockCluster",
    ),
    "cluster-launch-attribute": (
        "__global__ void k(float* o) { o[blockIdx.y * gridDim.x + blockIdx.x] = (float)blockIdx.y; }\n"
        "void launch(float* o) { cudaLaunchConfig_t cfg = {}; cudaLaunchAttribute a[1];\n"
        "  a[0].id = cudaLaunchAttributeClusterDimension; a[0].val.clusterDim.x = 2; cfg.attrs = a;\n"
        "  cfg.numAttrs = 1; cudaLaunchKernelEx(&cfg, k, o); }\n",
        "ThreadBlockCluster",
    ),
}


@pytest.mark.parametrize("name", sorted(ORDER_UNSAFE))
def test_order_dependent_constructs_are_refused(name: str) -> None:
    text, key = ORDER_UNSAFE[name]
    result = rewrite(text, pattern="column")
    assert outcomes(result)["k"] is Outcome.MISSED, result.diff()
    assert key in {r.name for r in result.remarks}, [r.message for r in result.remarks]
    assert not result.changed


@needs_nvcc
def test_a_syntax_error_in_host_code_does_not_stop_the_confirmation(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "__global__ void k(float* o, int n) { o[blockIdx.y * n + blockIdx.x] = 1.f; }\n"
        "void host(float* o) { int x = = ; k<<<dim3(2, 2), 32>>>(o, 2); }\n",
    )
    result = rewrite(path.read_bytes(), path=str(path), pattern="column")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED
    (coverage,) = [c for c in kernel.checks if c.name == "coverage"]
    assert "nvcc confirms" in coverage.detail
    broken_in_kernel = _write(
        tmp_path, "__global__ void k(float* o, int n) { o[blockIdx.y * n + blockIdx.x] = = 1.f; }\n"
    )
    model = parse_model(SourceText(str(broken_in_kernel), broken_in_kernel.read_bytes()))
    verdict = ptx_coverage.confirm(model, model.kernels[0], b"int n")  # no prologue, but the error comes first
    assert not verdict.confirmed and "syntax error" in verdict.why_not
