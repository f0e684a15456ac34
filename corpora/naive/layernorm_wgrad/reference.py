"""NumPy reference for the layer norm weight-gradient pair, in float64."""

import numpy as np


def layernorm_wgrad(size, inputs):
    dout = inputs["dout"].astype(np.float64)
    xhat = (inputs["inp"].astype(np.float64) - inputs["mean"].astype(np.float64)[:, None]) * inputs[
        "rstd"
    ].astype(np.float64)[:, None]
    return {
        "dweight": inputs["dweight"].astype(np.float64) + (dout * xhat).sum(axis=0),
        "dbias": inputs["dbias"].astype(np.float64) + dout.sum(axis=0),
    }
