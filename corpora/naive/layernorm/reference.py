"""NumPy reference for the layer norm pair, in float64."""

import numpy as np


def layernorm(size, inputs):
    x = inputs["inp"].astype(np.float64)
    centred = x - x.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt((centred**2).mean(axis=1, keepdims=True) + 1e-5)
    return {"out": centred * rstd * inputs["weight"].astype(np.float64) + inputs["bias"].astype(np.float64)}
