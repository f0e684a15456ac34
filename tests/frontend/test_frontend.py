from __future__ import annotations

from kxform.frontend import FunctionKind, parse_model
from kxform.frontend.source import validate_bytes

SRC = r"""#include "common.cuh"
#define ROW (blockIdx.y * 16 + threadIdx.y)
#define KERNEL __global__

template <typename T, int TILE>
__global__ void __launch_bounds__(256, 2) gemm(const T* __restrict__ a, int n = 4) {
    int r = ROW + helper(n);
    dim3 whole = gridDim;
}

static __device__ __forceinline__ int helper(int v) { return blockIdx.x + v; }

__host__ __device__ int both(int v) { return v; }

KERNEL void wrapped(int* p) { p[hipBlockIdx_x] = hipGridDim_y; }

#if USE_Z
__global__ void batched(float* x) { x[blockIdx.z] = 1.f; }
#endif

void launch(float* a, cudaStream_t s) {
    gemm<float, 16><<<dim3(4, 4), 256, 0, s>>>(a, 3);
    hipLaunchKernelGGL(HIP_KERNEL_NAME(gemm<float, 16>), dim3(1), dim3(64), 0, 0, a, 3);
    void* args[] = {&a};
    cudaLaunchKernel((void*)batched, dim3(2), dim3(32), args, 0, s);
}
"""


def model():
    return parse_model(validate_bytes("k.cu", SRC.encode()))


def test_functions_kinds_templates_and_launch_bounds() -> None:
    m = model()
    kinds = {f.name: f.kind for f in m.functions}
    assert kinds == {
        "gemm": FunctionKind.KERNEL,
        "helper": FunctionKind.DEVICE,
        "both": FunctionKind.DEVICE,
        "wrapped": FunctionKind.KERNEL,
        "batched": FunctionKind.KERNEL,
        "launch": FunctionKind.HOST,
    }
    gemm = m.functions_named("gemm")[0]
    assert gemm.template_params == "<typename T, int TILE>"
    assert gemm.launch_bounds == "__launch_bounds__(256, 2)"
    assert [(p.ctype, p.name) for p in gemm.params] == [("const T* __restrict__", "a"), ("int", "n")]
    assert m.source.data[gemm.span.start :].startswith(b"template")
    assert m.functions_named("both")[0].host_too
    assert m.functions_named("wrapped")[0].attribute_macro == "KERNEL"


def test_index_reads_with_spans_functions_and_macros() -> None:
    m = model()
    reads = [(r.spelling, r.builtin, r.axis, r.function, r.macro) for r in m.index_reads]
    assert ("blockIdx.y", "blockIdx", "y", None, "ROW") in reads
    assert ("gridDim", "gridDim", "", "gemm", None) in reads
    assert ("blockIdx.x", "blockIdx", "x", "helper", None) in reads
    assert ("hipBlockIdx_x", "blockIdx", "x", "wrapped", None) in reads
    assert ("hipGridDim_y", "gridDim", "y", "wrapped", None) in reads
    assert ("blockIdx.z", "blockIdx", "z", "batched", None) in reads
    for read in m.index_reads:
        assert m.source.data[read.span.start : read.span.end].decode() == read.spelling


def test_launch_sites_in_three_styles() -> None:
    launches = model().launches
    assert [(s.kernel, s.style, s.template_args) for s in launches] == [
        ("gemm", "chevron", "<float, 16>"),
        ("gemm", "hipLaunchKernelGGL", "<float, 16>"),
        ("batched", "cudaLaunchKernel", None),
    ]
    assert launches[0].config == ("dim3(4, 4)", "256", "0", "s")
    assert launches[1].config == ("dim3(1)", "dim3(64)", "0", "0") and launches[1].args == ("a", "3")
    assert all(s.function == "launch" for s in launches)


def test_call_graph_reaches_helpers_and_macros() -> None:
    m = model()
    assert m.closure("gemm") == {"gemm", "helper", "<macro ROW>"}
    assert m.call_graph.has_edge("launch", "gemm")
    assert [i.target for i in m.includes] == ["common.cuh"]


def test_crlf_tabs_and_non_ascii_do_not_shift_spans() -> None:
    text = "// nové jádro\r\n__global__ void k(int* o) {\r\n\to[blockIdx.x] = 1;\r\n}\r\n"
    m = parse_model(validate_bytes("k.cu", text.encode()))
    (read,) = m.index_reads
    assert m.source.data[read.span.start : read.span.end] == b"blockIdx.x"
    assert m.source.line_col(read.span.start) == (3, 4)
    assert not m.syntax_issues


def test_syntax_errors_are_located() -> None:
    m = parse_model(validate_bytes("bad.cu", b"__global__ void k(int* o) {\n  o[0] = (1 + ;\n}\n"))
    assert m.syntax_issues
    assert m.source.line_col(m.syntax_issues[0].span.start)[0] == 2


def test_pragma_between_loop_header_and_body_parses() -> None:
    src = (
        "__global__ void k(float* o) {\n  float s = 0;\n#pragma unroll\n  for (int i = 0; i < 3; ++i)\n"
        "#pragma unroll\n    for (int j = 0; j < 3; ++j) s += i * j;\n  o[blockIdx.x] = s;\n}\n"
    )
    m = parse_model(validate_bytes("k.cu", src.encode()))
    assert not m.syntax_issues
    (read,) = m.index_reads
    assert m.source.data[read.span.start : read.span.end] == b"blockIdx.x"
