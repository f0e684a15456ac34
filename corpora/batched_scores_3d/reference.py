"""NumPy reference for batched_scores.cu, in float64."""

import numpy as np


def batched_qk_scores(size, inputs):
    q = inputs["Q"].astype(np.float64)
    k = inputs["K"].astype(np.float64)
    return {"S": float(inputs["scale"]) * np.einsum("bqd,bkd->bqk", q, k)}
