"""NumPy reference for the GeGLU (GELU-and-mul) pair, in float64."""

import numpy as np


def geglu(size, inputs):
    d = size["D"]
    x = inputs["inp"].astype(np.float64)
    gate, up = x[:, :d], x[:, d:]
    inner = 0.7978845608 * (gate + 0.044715 * gate**3)
    return {"out": 0.5 * gate * (1.0 + np.tanh(inner)) * up}
