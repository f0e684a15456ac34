"""NumPy reference for the fp32 GELU pair (tanh approximation), in float64."""

import numpy as np


def gelu(size, inputs):
    x = inputs["inp"].astype(np.float64)
    return {"out": 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))}
