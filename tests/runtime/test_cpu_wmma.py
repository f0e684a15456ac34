"""Tensor-core fragments (nvcuda::wmma) on the CPU runtime, against NumPy.

One warp computes D = 2 * (A * B + C) for every input type the emulation supports
(half, bf16, tf32) and every layout combination, with the accumulator loaded and stored
row- and column-major, and an element-wise loop over `num_elements` in between. A
wrong layout, a dropped term or a lost element-wise update changes the result far
beyond the tolerance, which only covers float summation order.
"""

from __future__ import annotations

import numpy as np
import pytest

from kxform.harness.dtypes import float_to_bf16
from kxform.runtime.base import BufferArg, LaunchRequest, ScalarArg, Unsupported

SOURCE = r"""
#include <mma.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
using namespace nvcuda;

template <class FT, class MT, class LA, class LB, int M, int N, int K, bool TF32>
__global__ void mm(const MT* a, const MT* b, const float* c, float* d, int lda, int ldb, int col_acc) {
    wmma::fragment<wmma::matrix_a, M, N, K, FT, LA> fa;
    wmma::fragment<wmma::matrix_b, M, N, K, FT, LB> fb;
    wmma::fragment<wmma::accumulator, M, N, K, float> fc;
    wmma::fill_fragment(fc, 100.0f);  // overwritten by the load below
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::load_matrix_sync(fc, c, col_acc ? M : N, col_acc ? wmma::mem_col_major : wmma::mem_row_major);
    if (TF32) {
        for (int i = 0; i < fa.num_elements; ++i) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
        for (int i = 0; i < fb.num_elements; ++i) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    }
    wmma::mma_sync(fc, fa, fb, fc);
    for (int i = 0; i < fc.num_elements; ++i) fc.x[i] *= 2.0f;
    wmma::store_matrix_sync(d, fc, col_acc ? M : N, col_acc ? wmma::mem_col_major : wmma::mem_row_major);
}
"""

INT8 = r"""
#include <mma.h>
using namespace nvcuda;
__global__ void int8_mma(const signed char* a, int* d) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> fa;
    wmma::load_matrix_sync(fa, a, 16);
    d[0] = 0;
}
"""

KINDS = {  # name -> (fragment type, memory type, numpy storage dtype, shapes)
    "half": ("__half", "__half", np.float16, [(16, 16, 16), (32, 8, 16), (8, 32, 16)]),
    "bf16": ("__nv_bfloat16", "__nv_bfloat16", np.uint16, [(16, 16, 16), (32, 8, 16)]),
    "tf32": ("wmma::precision::tf32", "float", np.float32, [(16, 16, 8)]),
}
CASES = [
    pytest.param(kind, shape, la, lb, col_acc, id=f"{kind}-{shape[0]}x{shape[1]}x{shape[2]}-{la}-{lb}-acc{col_acc}")
    for kind, (_, _, _, shapes) in KINDS.items()
    for shape in shapes
    for la in ("row", "col")
    for lb in ("row", "col")
    for col_acc in (0, 1)
    if shape == shapes[0] or (la, lb, col_acc) == ("row", "col", 1)
]


def _tf32(x: np.ndarray) -> np.ndarray:
    bits = x.astype(np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _storage(values: np.ndarray, kind: str) -> np.ndarray:
    if kind == "bf16":
        return float_to_bf16(values.astype(np.float32))
    return values.astype(KINDS[kind][2])


def _as_float(stored: np.ndarray, kind: str) -> np.ndarray:
    if kind == "bf16":
        return (stored.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "tf32":
        return _tf32(stored).astype(np.float64)
    return stored.astype(np.float64)


@pytest.mark.parametrize(("kind", "shape", "la", "lb", "col_acc"), CASES)
def test_mma_matches_numpy(
    cpu,
    kind: str,
    shape: tuple[int, int, int],
    la: str,
    lb: str,  # type: ignore[no-untyped-def]
    col_acc: int,
) -> None:
    m, n, k = shape
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a = rng.uniform(-1, 1, (m, k))
    b = rng.uniform(-1, 1, (k, n))
    c = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    a_mem = np.ascontiguousarray(a if la == "row" else a.T)
    b_mem = np.ascontiguousarray(b if lb == "row" else b.T)
    a_st, b_st = _storage(a_mem, kind), _storage(b_mem, kind)
    c_mem = np.ascontiguousarray(c if not col_acc else c.T)
    ftype, mtype, _, _ = KINDS[kind]
    spelling = (
        f"mm<{ftype}, {mtype}, wmma::{la}_major, wmma::{lb}_major, {m}, {n}, {k}, "
        f"{'true' if kind == 'tf32' else 'false'}>"
    )
    lda = k if la == "row" else m
    ldb = n if lb == "row" else k
    result = cpu.run(
        LaunchRequest(
            source=SOURCE,
            kernel=spelling,
            params=(),
            args=(
                BufferArg("a", a_st.reshape(-1), "in"),
                BufferArg("b", b_st.reshape(-1), "in"),
                BufferArg("c", c_mem.reshape(-1), "in"),
                BufferArg("d", np.zeros(m * n, np.float32), "out"),
                ScalarArg("lda", np.int32(lda)),
                ScalarArg("ldb", np.int32(ldb)),
                ScalarArg("col", np.int32(col_acc)),
            ),
            grid=(1, 1, 1),
            block=(32, 1, 1),
            label=f"wmma {kind}",
        )
    )
    a_val = _as_float(a_st, kind).reshape(a_mem.shape)
    b_val = _as_float(b_st, kind).reshape(b_mem.shape)
    a_val = a_val if la == "row" else a_val.T
    b_val = b_val if lb == "row" else b_val.T
    expected = 2.0 * (a_val @ b_val + c.astype(np.float64))
    got = result.outputs["d"].reshape((m, n) if not col_acc else (n, m))
    got = got if not col_acc else got.T
    assert result.unwritten["d"] == 0
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_a_fragment_type_the_emulation_lacks_is_unsupported(cpu) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Unsupported, match="cannot run on the CPU runtime: uses this nvcuda::wmma element type"):
        cpu.run(
            LaunchRequest(
                source=INT8,
                kernel="int8_mma",
                params=(),
                args=(BufferArg("a", np.zeros(256, np.int8), "in"), BufferArg("d", np.zeros(1, np.int32), "out")),
                grid=(1, 1, 1),
                block=(32, 1, 1),
                label="int8 wmma",
            )
        )
