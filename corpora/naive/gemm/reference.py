"""NumPy reference for the GEMM pair, in float64."""

import numpy as np


def gemm(size, inputs):
    a = inputs["A"].astype(np.float64).reshape(size["M"], size["K"])
    b = inputs["B"].astype(np.float64).reshape(size["K"], size["N"])
    c = inputs["C"].astype(np.float64).reshape(size["M"], size["N"])
    return {"C": float(inputs["alpha"]) * (a @ b) + float(inputs["beta"]) * c}
