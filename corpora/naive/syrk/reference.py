"""NumPy reference for the SYRK pair (lower triangle updated, upper kept), in float64."""

import numpy as np


def syrk(size, inputs):
    n = size["N"]
    a = inputs["A"].astype(np.float64).reshape(n, size["M"])
    c = inputs["C"].astype(np.float64).reshape(n, n)
    updated = float(inputs["beta"]) * c + float(inputs["alpha"]) * (a @ a.T)
    lower = np.tril(np.ones((n, n), dtype=bool))
    return {"C": np.where(lower, updated, c)}
