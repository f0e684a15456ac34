"""NumPy reference for the matrix-vector product pair, in float64."""

import numpy as np


def matvec(size, inputs):
    return {"y": inputs["A"].astype(np.float64) @ inputs["x"].astype(np.float64)}
