"""NumPy reference for smith_waterman.cu: one anti-diagonal of the score matrix."""

import numpy as np


def sw_diagonal(size, inputs):
    m, n, d = size["M"], size["N"], size["D"]
    h = inputs["H"].copy()
    a = inputs["a"]
    b = inputs["b"]
    match, mismatch, gap = int(inputs["match"]), int(inputs["mismatch"]), int(inputs["gap"])
    i = np.arange(max(1, d - n), min(m, d - 1) + 1)
    j = d - i
    score = np.where(a[i - 1] == b[j - 1], match, mismatch)
    best = np.maximum(0, h[i - 1, j - 1] + score)
    best = np.maximum(best, h[i - 1, j] - gap)
    best = np.maximum(best, h[i, j - 1] - gap)
    h[i, j] = best
    return {"H": h}
