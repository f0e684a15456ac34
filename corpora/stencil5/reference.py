"""NumPy reference for stencil5.cu: one five-point Jacobi sweep, in float64."""

import numpy as np


def jacobi5(size, inputs):
    u = inputs["in"].astype(np.float64)
    c0, c1 = float(inputs["c0"]), float(inputs["c1"])
    out = u.copy()
    if u.shape[0] > 2 and u.shape[1] > 2:
        neighbours = u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1]
        out[1:-1, 1:-1] = c0 * u[1:-1, 1:-1] + c1 * neighbours
    return {"out": out}
