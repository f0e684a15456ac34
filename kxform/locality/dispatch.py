"""Block orders: which logical tile the hardware's n-th dispatched block works on.

The GPU dispatches blocks in linear index order (pid = by*gx + bx, z slowest) and the
swizzle helper maps each physical block to the logical tile it computes. The model needs
that map for up to millions of blocks per candidate, so every library pattern of
kxform.passes.swizzle.patterns has a NumPy twin here; tests/test_locality_dispatch.py checks each
twin against the pattern's Python reference on many grids. A pattern without a twin
falls back to its reference, one block at a time (correct, slower).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kxform.remap import RemapConfig

Arrays = tuple[np.ndarray, np.ndarray]


def _row(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
    return pid % gx, pid // gx


def _column(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
    return pid // gy, pid % gy


def _grouped_ids(pid: np.ndarray, gx: int, gy: int, group: int, along: str) -> Arrays:
    rows, cols = (gy, gx) if along == "y" else (gx, gy)
    per = group * cols
    first = (pid // per) * group
    size = np.minimum(rows - first, group)
    inner = pid % per
    major, minor = first + inner % size, inner // size
    return (minor, major) if along == "y" else (major, minor)


def _grouped(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
    return _grouped_ids(pid, gx, gy, int(p["group"]), str(p["along"]))


def _diagonal(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
    ly = pid % gy
    return (pid // gy + ly) % gx, ly


def _xcd_ids(pid: np.ndarray, total: int, xcds: int) -> np.ndarray:
    per = -(-total // xcds)
    tall = total % xcds or xcds
    xcd, local = pid % xcds, pid // xcds
    return np.where(xcd < tall, xcd * per + local, tall * per + (xcd - tall) * (per - 1) + local)


def _xcd(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
    new = _xcd_ids(pid, gx * gy, int(p["xcds"]))
    return new % gx, new // gx


def _xcd_grouped(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
    new = _xcd_ids(pid, gx * gy, int(p["xcds"]))
    return _grouped_ids(new, gx, gy, int(p["group"]), str(p["along"]))


def _square_rest(pid: np.ndarray, n: int, gx: int) -> Arrays:
    """Row-major position of cells outside the n x n corner square (kxform.remap._square_remainder)."""
    rest = pid - n * n
    right = gx - n
    in_right = rest < n * right
    safe_right = max(right, 1)
    tail = rest - n * right
    x = np.where(in_right, n + rest % safe_right, tail % gx)
    y = np.where(in_right, rest // safe_right, n + tail // gx)
    return x, y


def _hilbert_d2xy(n: int, d: np.ndarray) -> Arrays:
    x = np.zeros_like(d)
    y = np.zeros_like(d)
    s = 1
    while s < n:
        rx = 1 & (d // 2)
        ry = 1 & (d ^ rx)
        flip = (ry == 0) & (rx == 1)
        x = np.where(flip, s - 1 - x, x)
        y = np.where(flip, s - 1 - y, y)
        swap = ry == 0
        x, y = np.where(swap, y, x), np.where(swap, x, y)
        x = x + s * rx
        y = y + s * ry
        d = d // 4
        s *= 2
    return x, y


def _morton_d2xy(n: int, d: np.ndarray) -> Arrays:
    x = np.zeros_like(d)
    y = np.zeros_like(d)
    for bit in range(max(1, n.bit_length())):
        x |= ((d >> (2 * bit)) & 1) << bit
        y |= ((d >> (2 * bit + 1)) & 1) << bit
    return x, y


def _curve(curve: Callable[[int, np.ndarray], Arrays]) -> Callable[[np.ndarray, int, int, dict], Arrays]:
    def order(pid: np.ndarray, gx: int, gy: int, p: dict) -> Arrays:
        n = 1 << (min(gx, gy).bit_length() - 1)
        inside = pid < n * n
        cx, cy = curve(n, np.where(inside, pid, 0))
        rx, ry = _square_rest(pid, n, gx)
        return np.where(inside, cx, rx), np.where(inside, cy, ry)

    return order


VECTORISED: dict[str, Callable[[np.ndarray, int, int, dict], Arrays]] = {
    "row": _row,
    "column": _column,
    "grouped": _grouped,
    "diagonal": _diagonal,
    "hilbert": _curve(_hilbert_d2xy),
    "morton": _curve(_morton_d2xy),
    "xcd": _xcd,
    "xcd-grouped": _xcd_grouped,
}


def logical_tiles(config: RemapConfig | None, pid: np.ndarray, gx: int, gy: int) -> Arrays:
    """(lx, ly) of the blocks with 2-D linear indices `pid` (int64) under `config` (None: row)."""
    pid = np.asarray(pid, dtype=np.int64)
    if config is None:
        return _row(pid, gx, gy, {})
    fast = VECTORISED.get(config.pattern.name)
    if fast is not None:
        lx, ly = fast(pid, gx, gy, config.params)
        return np.asarray(lx, dtype=np.int64), np.asarray(ly, dtype=np.int64)
    pairs = [config.apply(int(p) % gx, int(p) // gx, gx, gy) for p in pid]
    out = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return out[:, 0], out[:, 1]


def blocks_for(config: RemapConfig | None, grid: tuple[int, int, int], linear: np.ndarray) -> np.ndarray:
    """Logical (x, y, z) of the blocks with linear indices `linear` (dispatch positions), as
    an (n, 3) int64 array. z is never remapped: the pattern applies within each z slice."""
    gx, gy, _ = grid
    linear = np.asarray(linear, dtype=np.int64)
    plane = gx * gy
    lx, ly = logical_tiles(config, linear % plane, gx, gy)
    return np.stack([lx, ly, linear // plane], axis=1)
