"""NumPy reference for the SiLU-and-mul pair, in float64."""

import numpy as np


def silu_and_mul(size, inputs):
    d = size["D"]
    x = inputs["inp"].astype(np.float64)
    gate, up = x[:, :d], x[:, d:]
    return {"out": gate / (1.0 + np.exp(-gate)) * up}
