"""NumPy reference for the fused residual + layer norm pair, in float64."""

import numpy as np


def residual_layernorm(size, inputs):
    # the residual is a single float32 addition, exact as float32 then widened
    residual = (inputs["inp1"] + inputs["inp2"]).astype(np.float64)
    centred = residual - residual.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt((centred**2).mean(axis=1, keepdims=True) + 1e-5)
    out = centred * rstd * inputs["weight"].astype(np.float64) + inputs["bias"].astype(np.float64)
    return {"residual": residual, "out": out}
