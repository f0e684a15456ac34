"""NumPy reference for spmv_csr.cu: y = A @ x with A in CSR form, in float64."""

import numpy as np


def spmv_csr(size, inputs):
    row_ptr = inputs["row_ptr"].astype(np.int64)
    rows = row_ptr.size - 1
    row_of = np.repeat(np.arange(rows), np.diff(row_ptr))
    products = inputs["values"].astype(np.float64) * inputs["x"].astype(np.float64)[inputs["col_idx"]]
    return {"y": np.bincount(row_of, weights=products, minlength=rows)}
