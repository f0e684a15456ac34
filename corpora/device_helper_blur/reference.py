"""NumPy reference for box_blur.cu: 3x3 mean with clamp-to-edge borders, in float64."""

import numpy as np


def box_blur3x3(size, inputs):
    img = inputs["in"].astype(np.float64)
    h, w = img.shape
    padded = np.pad(img, 1, mode="edge")
    total = sum(padded[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3))
    return {"out": total / 9.0}
