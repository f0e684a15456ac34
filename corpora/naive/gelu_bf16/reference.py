"""NumPy reference for the bf16 GELU pair (bf16 data held as uint16 bits)."""

import numpy as np


def gelu(size, inputs):
    x = (inputs["inp"].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    # computed in float64; the harness rounds the result to bf16
    return {"out": 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))}
