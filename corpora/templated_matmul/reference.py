"""NumPy reference for matmul_tiled.cu (both instantiations): C = A @ B in float64."""

import numpy as np


def matmul(size, inputs):
    return {"C": inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)}
