"""NumPy reference for pairwise_dist.cu, in float64."""

import numpy as np


def pairwise_sqdist(size, inputs):
    x = inputs["X"].astype(np.float64)
    y = inputs["Y"].astype(np.float64)
    diff = x[:, None, :] - y[None, :, :]
    return {"D": (diff * diff).sum(axis=2)}
