"""NumPy reference for sgemm_tiled.cu: C = alpha * A @ B + beta * C, in float64."""

import numpy as np


def sgemm_tiled(size, inputs):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    c = inputs["C"].astype(np.float64)
    alpha = float(inputs["alpha"])
    beta = float(inputs["beta"])
    return {"C": alpha * (a @ b) + beta * c}
