"""CPU runtime against a real GPU: intrinsic results compared bit for bit.

The probe kernel below ran on an NVIDIA H200 (nvcc from CUDA 13, -arch=sm_90) with the
inputs of `probe_inputs()`; `GPU_DIGESTS` holds a digest of each output column it
produced. The CPU runtime must reproduce every column exactly: shuffles with widths
and out-of-range operands, votes under partial masks, match and reduce, barrier
reductions, saturating conversions, directed rounding, half/bf16 rounding and bit
intrinsics. Lines use the no-contraction `_rn` half intrinsics where nvcc would fuse
a multiply and an add (the CPU build never contracts).

To re-record: write the inputs with `probe_inputs()`, compile `PROBE` with a host main
that launches `probe<<<1, 64>>>` and dumps the three output buffers, run it on a GPU,
and replace the digests with `column_digests()` of the dumps.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from kxform.runtime.base import BufferArg, LaunchRequest
from kxform.runtime.cpu import CpuRuntime

NU, NF, NH, THREADS = 48, 24, 16, 64

PROBE = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define NU 48
#define NF 24
__global__ void probe(const float* fin, const unsigned* uin, unsigned* uo, float* fo, unsigned short* ho) {
  const int t = threadIdx.x, lane = t % 32;
  unsigned* U = uo + t * NU; float* F = fo + t * NF; unsigned short* H = ho + t * 16;
  const float a = fin[t], b = fin[t + 64], c = fin[t + 128];
  const unsigned x = uin[t], y = uin[t + 64], s = uin[t + 128];
  U[0] = __shfl_up_sync(0xffffffffu, x, 3, 8);
  U[1] = __shfl_down_sync(0xffffffffu, x, 5, 16);
  U[2] = __shfl_xor_sync(0xffffffffu, x, 5, 8);
  U[3] = __shfl_xor_sync(0xffffffffu, x, 19, 16);
  U[4] = __shfl_sync(0xffffffffu, x, lane * 7 + 3, 8);
  U[5] = __shfl_sync(0xffffffffu, x, -3);
  U[6] = __shfl_down_sync(0xffffffffu, x, 40);
  if (lane & 1) {
    U[7] = __ballot_sync(0xaaaaaaaau, x & 4);
    U[8] = __any_sync(0xaaaaaaaau, x == 7) + 2 * __all_sync(0xaaaaaaaau, x != 0);
    U[9] = __shfl_sync(0xaaaaaaaau, x, 3);
  } else { U[7] = U[8] = U[9] = 0; }
  U[10] = __match_any_sync(0xffffffffu, lane % 3);
  int pred = 0;
  U[11] = __match_all_sync(0xffffffffu, 5, &pred) + pred;
  U[12] = __reduce_add_sync(0xffffffffu, x);
  U[13] = (unsigned)__reduce_min_sync(0xffffffffu, (int)(x * 2654435761u));
  U[14] = (unsigned)__reduce_max_sync(0xffffffffu, (int)(x * 2654435761u));
  U[15] = __reduce_min_sync(0xffffffffu, x * 2654435761u);
  U[16] = __reduce_xor_sync(0xffffffffu, x);
  U[17] = __activemask();
  U[18] = __syncthreads_count(x & 1) + 1000 * __syncthreads_and(x != 12345) + 10000 * __syncthreads_or(x == 0);
  U[19] = (unsigned)__float2int_rn(a * 1e9f); U[20] = (unsigned)__float2int_rz(b * 3e9f);
  U[21] = (unsigned)__float2int_rd(c); U[22] = __float2uint_ru(-a * 10.f); U[23] = __float2uint_rn(a * 7e9f);
  U[24] = __brev(x); U[25] = __byte_perm(x, y, s); U[26] = __funnelshift_l(x, y, s % 40);
  U[27] = __funnelshift_lc(x, y, s % 40); U[28] = __funnelshift_r(x, y, s % 40);
  U[29] = __funnelshift_rc(x, y, s % 40);
  U[30] = __clz((int)x); U[31] = __ffs((int)x); U[32] = __popc(x); U[33] = (unsigned)__mulhi((int)x, (int)y);
  U[34] = __umulhi(x, y); U[35] = (unsigned)__mul24((int)x, (int)y); U[36] = __sad((int)x, (int)y, s);
  U[37] = (unsigned)__dp4a((int)x, (int)y, (int)s); U[38] = __dp4a(x, y, s);
  U[39] = (unsigned)__hadd((int)x, (int)y);
  U[40] = (unsigned)__rhadd((int)x, (int)y); U[41] = __usad(x, y, s);
  U[42] = (unsigned)__float2int_rn(__int_as_float(0x7fc00000)); U[43] = (unsigned)__float2ll_rz(a * 1e19f);
  __shared__ unsigned ctr[2];
  if (t == 0) { ctr[0] = 0; ctr[1] = 0; }
  __syncthreads();
  if (t < 20) { U[44] = atomicInc(&ctr[0], 7u); } else U[44] = 0;
  __syncthreads();
  if (t < 20) { U[45] = atomicDec(&ctr[1], 5u); } else U[45] = 0;
  __syncthreads();
  U[46] = ctr[0] + 100 * ctr[1];
  U[47] = __shfl_up_sync(0xffffffffu, x, 33);
  F[0] = __fadd_rz(a, b); F[1] = __fadd_ru(a, b); F[2] = __fadd_rd(a, b);
  F[3] = __fmul_rz(a, b); F[4] = __fmul_ru(a, b); F[5] = __fmul_rd(a, c);
  F[6] = __fdiv_rz(a, b); F[7] = __fdiv_ru(a, c); F[8] = __fdiv_rd(b, c);
  F[9] = __fsqrt_ru(fabsf(a)); F[10] = __fsqrt_rd(fabsf(b)); F[11] = __fsub_rz(a, c);
  F[12] = __frcp_rn(b); F[13] = __fdiv_rn(a, b); F[14] = __fmaf_rn(a, b, c); F[15] = __saturatef(a);
  __half ha = __float2half(a), hb = __float2half(b), hc = __float2half(c);
  F[16] = __half2float(__hfma(ha, hb, hc)); F[17] = __half2float(__hadd_rn(__hmul_rn(ha, hb), hc));
  F[18] = __half2float(__hdiv(ha, hb));
  __nv_bfloat16 ba = __float2bfloat16(a), bb = __float2bfloat16(b), bc = __float2bfloat16(c);
  F[19] = __bfloat162float(__hfma(ba, bb, bc)); F[20] = __bfloat162float(__hsub_rn(__hmul_rn(ba, bb), bc));
  F[21] = __bfloat162float(__hdiv(ba, bb));
  F[22] = __half2float(__hmax(ha, hb)) + __half2float(__habs(hc));
  F[23] = __bfloat162float(__float2bfloat16_rz(a * 3.3f));
  H[0] = __half_as_ushort(__float2half(a * 1000.f)); H[1] = __half_as_ushort(__float2half(b * 1e-5f));
  H[2] = __half_as_ushort(__float2half_rz(c * 70000.f)); H[3] = __half_as_ushort(__float2half(c * 1e-7f));
  H[4] = __bfloat16_as_ushort(__float2bfloat16(a * 1e30f)); H[5] = __bfloat16_as_ushort(__float2bfloat16(b));
  H[6] = __half_as_ushort(__double2half((double)a * 1.0000001));
  H[7] = __bfloat16_as_ushort(__double2bfloat16((double)b * 3.0000001));
  H[8] = __half_as_ushort(__float2half(__int_as_float(0x7f800001)));
  H[9] = __half_as_ushort(__hadd(ha, __float2half(65000.f)));
  H[10] = __half_as_ushort(__int2half_rn((int)(x % 100000)));
  H[11] = (unsigned short)__half2int_rn(ha * __float2half(100.f));
  H[12] = __half_as_ushort(__hsub(ha, hb)); H[13] = __half_as_ushort(hsqrt(__habs(ha)));
  H[14] = __bfloat16_as_ushort(__hmul(ba, bb)); H[15] = __half_as_ushort(__hmul_sat(ha, hb));
}
"""

SPECIAL = [
    0.0,
    -0.0,
    1e-40,
    -3.5,
    2.5,
    1.5,
    0.5,
    -0.5,
    65504.0,
    65520.0,
    1e-8,
    float("nan"),
    float("inf"),
    float("-inf"),
    3e38,
    1 / 3,
    7.0,
    1e-3,
    -1e-6,
    123456.7,
    2.0**-24,
    2.0**-25,
    0.1,
    0.2,
    33333.0,
    -2.5,
    1.0000001,
    5e-5,
    6e-8,
    1.0,
    2.0,
    3.0,
]


def _lcg(seed: int, count: int) -> list[int]:
    """A fixed 64-bit LCG (Knuth's MMIX constants): inputs independent of NumPy versions."""
    out, state = [], seed
    for _ in range(count):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(state >> 32)
    return out


def probe_inputs() -> tuple[np.ndarray, np.ndarray]:
    """192 floats (160 spread over magnitudes 1e-3..1e2, then SPECIAL) and 192 uints."""
    raw = _lcg(7, 2 * 160)
    spread = [((m / 2**32) * 2 - 1) * 10.0 ** (e % 6 - 3) for m, e in zip(raw[::2], raw[1::2], strict=True)]
    floats = np.array(spread + SPECIAL, dtype=np.float32)
    uints = np.array(_lcg(11, 192), dtype=np.uint32)
    uints[:8] = [0, 1, 7, 0x80000000, 0xFFFFFFFF, 12, 4, 0x7FFFFFFF]
    return floats, uints


def column_digests(uo: np.ndarray, fo: np.ndarray, ho: np.ndarray) -> dict[str, str]:
    """First 12 hex digits of the SHA-256 of each output column (all 64 threads).

    Float NaNs are made canonical first: the GPU returns 0x7fffffff for every NaN result
    while x86 arithmetic propagates input payloads, and no kernel can observe the
    difference without reinterpreting bits.
    """
    fo = np.where(np.isnan(fo), np.float32(np.nan), fo).astype(np.float32)
    digests: dict[str, str] = {}
    for name, data, width in (("U", uo, NU), ("F", fo, NF), ("H", ho, NH)):
        table = np.ascontiguousarray(data).reshape(THREADS, width)
        for k in range(width):
            digests[f"{name}[{k}]"] = hashlib.sha256(np.ascontiguousarray(table[:, k]).tobytes()).hexdigest()[:12]
    return digests


# Recorded on an NVIDIA H200, CUDA 13 (nvcc -O2 -arch=sm_90).
GPU_DIGESTS: dict[str, str] = {
    "U[0]": "316cbf74c2c1",
    "U[1]": "5b03bd9fb2c9",
    "U[2]": "e4ea2a019c02",
    "U[3]": "91ad03825230",
    "U[4]": "df5f1a36efd0",
    "U[5]": "d6437f58c81c",
    "U[6]": "30107974831a",
    "U[7]": "2745d6b239ab",
    "U[8]": "ef2ca5efe855",
    "U[9]": "554082a475a8",
    "U[10]": "38693b3a21c3",
    "U[11]": "5341e6b26469",
    "U[12]": "4c521f921dd7",
    "U[13]": "8aeb1b9ea16b",
    "U[14]": "0d636599988e",
    "U[15]": "def664c9830b",
    "U[16]": "9e9bbbb207eb",
    "U[17]": "3d6876a0146d",
    "U[18]": "8256a7f5081e",
    "U[19]": "db562f85bda1",
    "U[20]": "80b7230a16ed",
    "U[21]": "b40de88f33ae",
    "U[22]": "a1483c609f3d",
    "U[23]": "a0c9cf9b930d",
    "U[24]": "1006733251f9",
    "U[25]": "b1fdbc3c7fcd",
    "U[26]": "cbd134cc7fac",
    "U[27]": "21f412f6abc5",
    "U[28]": "fd284ab2402b",
    "U[29]": "f9f47796f913",
    "U[30]": "15d51210ef81",
    "U[31]": "6be0f6ded10d",
    "U[32]": "9eb66d9dee19",
    "U[33]": "b4023c3d6ec4",
    "U[34]": "3eae30fdb816",
    "U[35]": "50ae1397e140",
    "U[36]": "e8eba9bc0327",
    "U[37]": "cd78df5f513f",
    "U[38]": "f4dafc871563",
    "U[39]": "98ee7f82717e",
    "U[40]": "f6878abf491e",
    "U[41]": "3aa074ab55c4",
    "U[42]": "5341e6b26469",
    "U[43]": "5e9a51e27758",
    "U[44]": "b7fbd154edae",
    "U[45]": "36bcad79ef4b",
    "U[46]": "95c4d621e8c8",
    "U[47]": "83e2aeceb1c9",
    "F[0]": "418e20fe1c3d",
    "F[1]": "ce39beafc61c",
    "F[2]": "b530d27b1d84",
    "F[3]": "7b639133f8cb",
    "F[4]": "ba20f0b6e912",
    "F[5]": "e4056b1bc1c7",
    "F[6]": "18e579966f3a",
    "F[7]": "9ed615d49b73",
    "F[8]": "41a1016740b0",
    "F[9]": "1afa96a8d0f3",
    "F[10]": "8d8dbf94ce5f",
    "F[11]": "36c19d67908c",
    "F[12]": "3c877dc61174",
    "F[13]": "c5e9d18b6978",
    "F[14]": "5d6821c8071e",
    "F[15]": "6e5eb12d8fb8",
    "F[16]": "466f7f6a9e8a",
    "F[17]": "b4d17a1dd2ef",
    "F[18]": "4118702e5d38",
    "F[19]": "ff01245435cc",
    "F[20]": "f28b7fa03873",
    "F[21]": "bfdb875dbb89",
    "F[22]": "4d874212ecc4",
    "F[23]": "d3eab7327a4b",
    "H[0]": "d2c554ef938b",
    "H[1]": "c147e242a142",
    "H[2]": "7bbadc93e0b8",
    "H[3]": "0398b190dd16",
    "H[4]": "d4f370c6e1e8",
    "H[5]": "69921aad3cad",
    "H[6]": "b9b59868cf00",
    "H[7]": "0aec181d973d",
    "H[8]": "5bb3b0a3f4c1",
    "H[9]": "37dce3687983",
    "H[10]": "f470cf6188ad",
    "H[11]": "5f27a8838771",
    "H[12]": "459726383294",
    "H[13]": "524a715d2be5",
    "H[14]": "a3058c45592b",
    "H[15]": "ab36c82bbbdb",
}


def test_intrinsics_match_the_gpu_bit_for_bit(cpu: CpuRuntime) -> None:
    floats, uints = probe_inputs()
    args = (
        BufferArg("fin", floats, "in"),
        BufferArg("uin", uints, "in"),
        BufferArg("uo", np.zeros(THREADS * NU, np.uint32), "out"),
        BufferArg("fo", np.zeros(THREADS * NF, np.float32), "out"),
        BufferArg("ho", np.zeros(THREADS * NH, np.uint16), "out"),
    )
    result = cpu.run(
        LaunchRequest(
            source=PROBE,
            kernel="probe",
            params=(),
            args=args,
            grid=(1, 1, 1),
            block=(THREADS, 1, 1),
            label="parity-probe",
        )
    )
    got = column_digests(result.outputs["uo"], result.outputs["fo"], result.outputs["ho"])
    assert set(got) == set(GPU_DIGESTS)
    differing = [name for name, digest in GPU_DIGESTS.items() if got[name] != digest]
    assert not differing, f"columns that differ from the GPU: {differing}"


@pytest.mark.gpu
def test_recorded_digests_are_what_the_gpu_produces_now() -> None:
    """Keeps the recording honest: the same probe on the GPU runtime gives the same digests."""
    from kxform.runtime.gpu import GpuRuntime

    with GpuRuntime() as gpu:
        ok, why = gpu.available()
        if not ok:
            pytest.skip(f"gpu runtime unavailable: {why}")
        floats, uints = probe_inputs()
        args = (
            BufferArg("fin", floats, "in"),
            BufferArg("uin", uints, "in"),
            BufferArg("uo", np.zeros(THREADS * NU, np.uint32), "out"),
            BufferArg("fo", np.zeros(THREADS * NF, np.float32), "out"),
            BufferArg("ho", np.zeros(THREADS * NH, np.uint16), "out"),
        )
        result = gpu.run(
            LaunchRequest(
                source=PROBE,
                kernel="probe",
                params=(),
                args=args,
                grid=(1, 1, 1),
                block=(THREADS, 1, 1),
                label="parity-probe",
            )
        )
    got = column_digests(result.outputs["uo"], result.outputs["fo"], result.outputs["ho"])
    assert {k: v for k, v in got.items() if GPU_DIGESTS[k] != v} == {}
