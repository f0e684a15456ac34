"""NumPy reference for sgemm_naive.hip: C = A @ B, in float64."""

import numpy as np


def sgemm_naive(size, inputs):
    return {"C": inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)}
