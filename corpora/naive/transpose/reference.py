"""NumPy reference for the transpose pair."""

import numpy as np


def transpose(size, inputs):
    return {"out": np.ascontiguousarray(inputs["in"].reshape(size["rows"], size["cols"]).T)}
