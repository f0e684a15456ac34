"""NumPy reference for the AdamW step pair, in float64."""

import numpy as np


def adamw(size, inputs):
    f = {k: float(inputs[k]) for k in ("lr", "beta1", "beta2", "beta1_correction", "beta2_correction", "eps",
                                       "weight_decay")}
    p = inputs["params"].astype(np.float64)
    g = inputs["grads"].astype(np.float64)
    m = f["beta1"] * inputs["m"].astype(np.float64) + (1.0 - f["beta1"]) * g
    v = f["beta2"] * inputs["v"].astype(np.float64) + (1.0 - f["beta2"]) * g * g
    update = m / f["beta1_correction"] / (np.sqrt(v / f["beta2_correction"]) + f["eps"])
    return {"params": p - f["lr"] * (update + f["weight_decay"] * p), "m": m, "v": v}
