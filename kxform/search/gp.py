"""A small Gaussian-process regressor for the model-guided strategy (numpy + scipy).

Matern-5/2 kernel with one length scale per input (automatic relevance), a signal
variance and a noise variance, fitted by maximising the log marginal likelihood with
L-BFGS-B and its analytic gradient. Kept here rather than taken from scikit-learn for
control of cost: the strategy refits hyperparameters only on a schedule and, between
refits, reuses them (one Cholesky factorisation per proposal), which is what keeps the
search's own time per proposal to a few milliseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from scipy.optimize import minimize

SQRT5 = math.sqrt(5.0)
LOG_BOUNDS_SCALE = (math.log(0.1), math.log(20.0))
LOG_BOUNDS_SIGNAL = (math.log(0.05), math.log(20.0))
LOG_BOUNDS_NOISE = (math.log(1e-4), math.log(1.0))


@dataclass(frozen=True)
class Hyper:
    """Log length scales (one per input), log signal variance, log noise variance."""

    log_scales: np.ndarray
    log_signal: float = 0.0
    log_noise: float = math.log(1e-3)

    def vector(self) -> np.ndarray:
        return np.concatenate([self.log_scales, [self.log_signal, self.log_noise]])

    @classmethod
    def from_vector(cls, theta: np.ndarray) -> Hyper:
        return cls(theta[:-2].copy(), float(theta[-2]), float(theta[-1]))

    @classmethod
    def initial(cls, dims: int) -> Hyper:
        return cls(np.full(dims, math.log(0.5)))


def _scaled_sq(a: np.ndarray, b: np.ndarray, scales: np.ndarray) -> np.ndarray:
    sa, sb = a / scales, b / scales
    sq = (sa * sa).sum(1)[:, None] + (sb * sb).sum(1)[None, :] - 2.0 * sa @ sb.T
    return np.maximum(sq, 0.0)


def matern52(a: np.ndarray, b: np.ndarray, hyper: Hyper) -> np.ndarray:
    r = np.sqrt(_scaled_sq(a, b, np.exp(hyper.log_scales)))
    return math.exp(hyper.log_signal) * (1.0 + SQRT5 * r + (5.0 / 3.0) * r * r) * np.exp(-SQRT5 * r)


def _nll_and_grad(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    hyper = Hyper.from_vector(theta)
    scales = np.exp(hyper.log_scales)
    signal, noise = math.exp(hyper.log_signal), math.exp(hyper.log_noise)
    n = x.shape[0]
    r = np.sqrt(_scaled_sq(x, x, scales))
    e = np.exp(-SQRT5 * r)
    k = signal * (1.0 + SQRT5 * r + (5.0 / 3.0) * r * r) * e
    k[np.diag_indices(n)] += noise + 1e-8
    try:
        chol = cholesky(k, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        return 1e10, np.zeros_like(theta)
    alpha = cho_solve((chol, True), y, check_finite=False)
    nll = 0.5 * float(y @ alpha) + float(np.log(np.diag(chol)).sum()) + 0.5 * n * math.log(2 * math.pi)
    inner = np.outer(alpha, alpha) - cho_solve((chol, True), np.eye(n), check_finite=False)
    grad = np.empty_like(theta)
    weighted = inner * (signal * (5.0 / 3.0) * (1.0 + SQRT5 * r) * e)
    # sum_ij W_ij (x_ik - x_jk)^2 = 2 sum_i x_ik^2 rowsum_i - 2 x_k^T W x_k (W symmetric)
    rowsum = weighted.sum(1)
    xs = x / scales
    grad[:-2] = -0.5 * (2.0 * (xs * xs * rowsum[:, None]).sum(0) - 2.0 * np.einsum("ik,ij,jk->k", xs, weighted, xs))
    k[np.diag_indices(n)] -= noise + 1e-8
    grad[-2] = -0.5 * float((inner * k).sum())
    grad[-1] = -0.5 * noise * float(np.trace(inner))
    return nll, grad


def _factor(k: np.ndarray, hyper: Hyper) -> np.ndarray:
    """Lower Cholesky factor of k + noise, with growing jitter if it is not positive."""
    k = k.copy()
    k[np.diag_indices(len(k))] += math.exp(hyper.log_noise) + 1e-8
    jitter = 1e-8
    while True:
        try:
            return cholesky(k, lower=True, check_finite=False)
        except np.linalg.LinAlgError:
            jitter *= 10
            k[np.diag_indices(len(k))] += jitter


def fit_hyper(x: np.ndarray, y: np.ndarray, start: Hyper, max_iter: int = 40, fresh: bool = True) -> Hyper:
    """Hyperparameters maximising the marginal likelihood, started from `start` and
    from the neutral initial values (the better of the two: a warm start alone can
    stay in the degenerate optimum that interpolates every point)."""
    bounds = [LOG_BOUNDS_SCALE] * x.shape[1] + [LOG_BOUNDS_SIGNAL, LOG_BOUNDS_NOISE]
    low, high = [b[0] for b in bounds], [b[1] for b in bounds]
    best: tuple[float, np.ndarray] | None = None
    starts = [start.vector()] + ([Hyper.initial(x.shape[1]).vector()] if fresh else [])
    for begin in starts:
        theta0 = np.clip(begin, low, high)
        result = minimize(
            _nll_and_grad,
            theta0,
            args=(x, y),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": max_iter},
        )
        if np.all(np.isfinite(result.x)) and (best is None or result.fun < best[0]):
            best = (float(result.fun), result.x)
    return Hyper.from_vector(best[1] if best is not None else np.clip(start.vector(), low, high))


class GaussianProcess:
    """Posterior of a zero-mean GP with fixed hyperparameters on (x, y)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, hyper: Hyper, chol: np.ndarray | None = None) -> None:
        self.x = x
        self.hyper = hyper
        self.chol = chol if chol is not None else _factor(matern52(x, x, hyper), hyper)
        self.alpha = cho_solve((self.chol, True), y, check_finite=False)

    def extended(self, x_new: np.ndarray, y: np.ndarray) -> GaussianProcess:
        """The posterior with the rows `x_new` appended (same hyperparameters) and
        targets `y` for all rows: the factor grows in O(n^2) instead of O(n^3)."""
        n, m = len(self.x), len(x_new)
        cross = matern52(self.x, x_new, self.hyper)
        left = solve_triangular(self.chol, cross, lower=True, check_finite=False)
        corner = matern52(x_new, x_new, self.hyper) - left.T @ left
        chol = np.zeros((n + m, n + m))
        chol[:n, :n] = self.chol
        chol[n:, :n] = left.T
        chol[n:, n:] = _factor(corner, self.hyper)
        return GaussianProcess(np.vstack([self.x, x_new]), y, self.hyper, chol)

    def mean(self, xs: np.ndarray) -> np.ndarray:
        """Posterior mean only (no variance: an O(n) product per point)."""
        return matern52(xs, self.x, self.hyper) @ self.alpha

    def predict(self, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation at `xs`."""
        ks = matern52(xs, self.x, self.hyper)
        mean = ks @ self.alpha
        v = solve_triangular(self.chol, ks.T, lower=True, check_finite=False)
        var = math.exp(self.hyper.log_signal) - (v * v).sum(0)
        return mean, np.sqrt(np.maximum(var, 1e-12))
