"""Per-output absolute tolerances of a rewrite that reorders sums, measured with the
original's reorder probe (kxform.engine.reorder_probe).

At one size, on the inputs both versions run on, the original instrumented as the probe
runs once per reordered sum j with that sum moved by its reordering bound
delta_j = (gamma_{n-1} + gamma_h) sum|x_i| (every thread's own n and sum|x_i|; h the
height of the rewrite's summation tree). The change
d_ji = |probe_j(i) - original(i)| of output i is, to first order, the largest change any
summation order of sum j can make there. The tolerance of output i is

    bound_i = MARGIN * sum_j d_ji + FLOOR_ULPS * u_out * |original(i)|

MARGIN (1.25) covers what the first-order argument leaves out: the curvature of what
follows the sum over a step of size delta (relative size about n u: below 10^-3 at the
check sizes, so its second-order share is smaller still) and the rounding of later
operations, which can land on either side in the two versions but is a few units of their
own last place, where the measured effect is about n of them. The
floor is a few units in the last place of the output's own type: an output that reordering
cannot move (a copy, a max) may still round differently when it is stored. The sums'
errors add (triangle inequality), so several reordered sums cost one run each and their
bounds add. A sum that is never moved (no thread ran two of its updates) contributes 0.

The bound is absolute: a dot product that cancels to near zero gets the tolerance of its
terms' magnitudes, not of its result. It is also tight where it matters: a missing term
x_k changes an output by |x_k| (through the same derivative the probe measures), while
the bound is about 1.25 (n + h) u sum|x_i|, so at the check sizes (rows of a few hundred) a lost
term of ordinary size is hundreds of times above it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from kxform.engine.reorder_probe import ReorderProbe
from kxform.harness.dtypes import to_float64

MARGIN = 1.25
"""Safety factor on the measured first-order effect (see the module docstring)."""
FLOOR_ULPS = 4.0
"""Units in the last place of the output type every element may differ by."""
SPACING_TYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64}

ProbeRun = Callable[[str], Mapping[str, np.ndarray]]
"""Runs the probe with one macro defined to 1 and returns its outputs by name."""


@dataclass(frozen=True)
class ProbeBounds:
    """The tolerance of every output element at one size, and how it was obtained."""

    bounds: dict[str, np.ndarray]
    largest: float
    where: str

    def describe(self, probe: ReorderProbe) -> str:
        return (
            f"absolute bound per output: {MARGIN:g} x the measured effect of moving each reordered sum "
            f"({probe.describe()}) by its reordering bound, + {FLOOR_ULPS:g} ulps of the output; "
            f"largest {self.largest:.3g} at {self.where}"
        )


def probe_bounds(
    probe: ReorderProbe, original: Mapping[str, np.ndarray], dtypes: Mapping[str, str], run: ProbeRun
) -> ProbeBounds:
    """The per-element bounds of every output in `original` (the original's outputs at this
    size, by name; `dtypes` their spec dtypes), running the probe once per sum through `run`."""
    bounds = {name: _floor(values, dtypes[name]) for name, values in original.items()}
    for s in probe.sums:
        moved = run(s.macro)
        for name, values in original.items():
            base, other = to_float64(values, dtypes[name]), to_float64(moved[name], dtypes[name])
            with np.errstate(invalid="ignore", over="ignore"):
                change = np.abs(other - base)
            change = np.where(np.isnan(base) & np.isnan(other), 0.0, change)  # unwritten in both
            change = np.where(np.isnan(change), np.inf, change)  # the move made a NaN: the element is unbounded
            bounds[name] = bounds[name] + MARGIN * change.reshape(bounds[name].shape)
    largest, where = 0.0, "no element"
    for name, limit in bounds.items():
        finite = np.where(np.isfinite(limit), limit, 0.0)
        if finite.size and float(finite.max()) >= largest:
            index = int(np.argmax(finite))
            largest, where = float(finite.reshape(-1)[index]), f"{name}[{index}]"
    return ProbeBounds(bounds, largest, where)


def _floor(values: np.ndarray, dtype: str) -> np.ndarray:
    """FLOOR_ULPS units in the last place of each value in its own type (subnormals' fixed
    spacing included, so an output that underflows may still round differently); 0 for
    integers."""
    magnitude = np.abs(to_float64(values, dtype))
    finite = np.isfinite(magnitude)
    if dtype == "bfloat16":  # 8 significant bits: the float32 spacing scaled, never below bf16's smallest step
        ulp = np.maximum(np.spacing(magnitude.astype(np.float32)).astype(np.float64) * 2.0**16, 2.0**-133)
    elif dtype in SPACING_TYPES:
        ulp = np.spacing(magnitude.astype(SPACING_TYPES[dtype])).astype(np.float64)
    else:
        return np.zeros(magnitude.shape)
    floor: np.ndarray = np.where(finite, FLOOR_ULPS * ulp, 0.0)
    return floor
