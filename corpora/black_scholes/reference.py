"""NumPy reference for black_scholes.cu: the same formula and CND polynomial, in float64."""

import numpy as np

A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


def _cnd(d):
    k = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    cnd = RSQRT2PI * np.exp(-0.5 * d * d) * (k * (A1 + k * (A2 + k * (A3 + k * (A4 + k * A5)))))
    return np.where(d > 0, 1.0 - cnd, cnd)


def black_scholes(size, inputs):
    s = inputs["d_StockPrice"].astype(np.float64)
    x = inputs["d_OptionStrike"].astype(np.float64)
    t = inputs["d_OptionYears"].astype(np.float64)
    r = float(inputs["Riskfree"])
    v = float(inputs["Volatility"])
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / x) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    cnd1, cnd2 = _cnd(d1), _cnd(d2)
    exp_rt = np.exp(-r * t)
    return {
        "d_CallResult": s * cnd1 - x * exp_rt * cnd2,
        "d_PutResult": x * exp_rt * (1.0 - cnd2) - s * (1.0 - cnd1),
    }
