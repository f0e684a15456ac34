"""NumPy references for the three kernels of fdtd2d.cu, in float64.

The kernels use the float32 constants 0.5f and 0.7f; 0.7f is not 0.7, so the
reference uses the same float32 value.
"""

import numpy as np

HALF = 0.5
C_HZ = float(np.float32(0.7))


def fdtd_step1(size, inputs):
    nx = size["NX"]
    ey = inputs["ey"].astype(np.float64)
    hz = inputs["hz"].astype(np.float64)
    ey[0, :] = float(inputs["_fict_"][size["T"]])
    ey[1:nx, :] = ey[1:nx, :] - HALF * (hz[1:nx, :] - hz[0 : nx - 1, :])
    return {"ey": ey}


def fdtd_step2(size, inputs):
    ny = size["NY"]
    ex = inputs["ex"].astype(np.float64)
    hz = inputs["hz"].astype(np.float64)
    ex[:, 1:ny] = ex[:, 1:ny] - HALF * (hz[:, 1:ny] - hz[:, 0 : ny - 1])
    return {"ex": ex}


def fdtd_step3(size, inputs):
    nx, ny = size["NX"], size["NY"]
    ex = inputs["ex"].astype(np.float64)
    ey = inputs["ey"].astype(np.float64)
    hz = inputs["hz"].astype(np.float64)
    curl = ex[:, 1 : ny + 1] - ex[:, 0:ny] + ey[1 : nx + 1, :] - ey[0:nx, :]
    return {"hz": hz - C_HZ * curl}
