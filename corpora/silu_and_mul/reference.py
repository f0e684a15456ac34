"""NumPy reference for silu_and_mul.cu (bf16 data held as uint16 bits)."""

import numpy as np


def _bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _round_bf16(values):
    """Round to the nearest bf16 value (ties to even), through float32 like the kernel."""
    single = np.ascontiguousarray(values, dtype=np.float32)
    bits = single.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> 16) & 1)) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32).astype(np.float64)


def silu_and_mul(size, inputs):
    d = size["D"]
    values = _bf16_values(inputs["input"])
    gate, up = values[:, :d], values[:, d:]
    silu = _round_bf16(gate / (1.0 + np.exp(-gate)))
    # the product of two bf16 values is exact in float64; the harness rounds it to bf16
    return {"out": silu * up}
