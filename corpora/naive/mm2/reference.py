"""NumPy references for the two kernels of the 2MM pair, in float64."""

import numpy as np


def mm2_tmp(size, inputs):
    a = inputs["A"].astype(np.float64).reshape(size["NI"], size["NK"])
    b = inputs["B"].astype(np.float64).reshape(size["NK"], size["NJ"])
    return {"tmp": float(inputs["alpha"]) * (a @ b)}


def mm2_d(size, inputs):
    tmp = inputs["tmp"].astype(np.float64).reshape(size["NI"], size["NJ"])
    c = inputs["C"].astype(np.float64).reshape(size["NJ"], size["NL"])
    d = inputs["D"].astype(np.float64).reshape(size["NI"], size["NL"])
    return {"D": tmp @ c + float(inputs["beta"]) * d}
