"""NumPy reference for sgemm_128.cu: C = alpha * A @ B + beta * C, in float64."""

import numpy as np


def sgemm_128(size, inputs):
    a = inputs["A"].astype(np.float64)
    b = inputs["B"].astype(np.float64)
    c = inputs["C"].astype(np.float64)
    alpha = float(inputs["alpha"])
    beta = float(inputs["beta"])
    return {"C": alpha * (a @ b) + beta * c}
