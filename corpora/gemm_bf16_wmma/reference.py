"""NumPy reference for gemm_bf16_wmma.cu (bf16 inputs held as uint16 bits), in float64."""

import numpy as np


def _bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def gemm_bf16(size, inputs):
    return {"C": _bf16_values(inputs["A"]) @ _bf16_values(inputs["B"])}
