"""Verdicts of verification, and the rules that keep "ok" honest.

A comparison is "ok" only when it could have failed. Two runs that agree prove nothing
when they agree on nothing: an output the original never wrote (still poisoned), NaN or
Inf on both sides although the inputs held none (a NaN copied from a poisoned buffer
the kernel reads equals itself bit for bit), or an output still identical to its initial
fill after both runs. Such a comparison is **inconclusive**: its own outcome, not ok and
not a mismatch, explained in one line. A kernel the runtime cannot run at all is
**unverified**, never a mismatch. Two versions of a kernel that leave the same elements
of an output unwritten (a stencil's border) agree there ("unwritten in both", counted,
not compared); an element only one of them wrote is a mismatch.

Outcomes of a whole report, strongest first: mismatch (proven different at some size),
unverified, inconclusive, ok (every size ok).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from kxform.harness.compare import Comparison
from kxform.harness.dtypes import FLOAT_DTYPES, to_float64
from kxform.runtime.base import poison_mask

Status = Literal["ok", "mismatch", "inconclusive", "unverified"]
RANK: dict[str, int] = {"ok": 0, "inconclusive": 1, "unverified": 2, "mismatch": 3}
WORD = {"ok": "verified", "mismatch": "MISMATCH", "inconclusive": "inconclusive", "unverified": "unverified"}


@dataclass(frozen=True)
class OutputCheck:
    """One output buffer at one size: the comparison, what the rewritten run left
    unwritten, and why the comparison could not have failed (None: it could)."""

    name: str
    comparison: Comparison
    unwritten: int
    vacuous: str | None = None

    @property
    def status(self) -> Status:
        if not self.comparison.ok or self.unwritten:
            return "mismatch"
        return "inconclusive" if self.vacuous else "ok"


@dataclass(frozen=True)
class SizeVerdict:
    """One size: its status, the outputs compared, and the one-line reason when the
    status comes from the size rather than an output (a failed or unsupported run)."""

    size: str
    status: Status
    outputs: tuple[OutputCheck, ...] = ()
    error: str | None = None
    seconds: float = 0.0
    tolerance: str = ""
    """The comparison used at this size when it was evaluated for it (a derived bound)."""
    spec_error: bool = False
    """The inconclusive status is the spec's fault (an `out` buffer the kernel reads), not
    the kernel's: it stays inconclusive, and names the size first."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def from_checks(cls, size: str, checks: tuple[OutputCheck, ...], seconds: float = 0.0) -> SizeVerdict:
        status: Status = max((c.status for c in checks), key=RANK.__getitem__, default="inconclusive")
        error = None if checks else "the kernel has no output buffer to compare"
        return cls(size, status, checks, error, seconds)

    def summary(self) -> str:
        line = self._summary()
        return f"{line} [{self.tolerance}]" if self.tolerance else line

    def _summary(self) -> str:
        if self.error:
            prefix = {"mismatch": "error", "unverified": "unverified", "inconclusive": "inconclusive"}.get(
                self.status, "error"
            )
            return f"{self.size}: {prefix}: {self.error}"
        bad = [o for o in self.outputs if o.status == self.status and o.status != "ok"]
        if not bad:
            off = [o for o in self.outputs if o.comparison.max_abs > 0]
            within = "; ".join(f"{o.name} within tolerance, max abs {o.comparison.max_abs:.3g}" for o in off)
            same = [o.name for o in self.outputs if o not in off]
            both = "".join(
                f"; {o.name}: {o.comparison.unwritten_both} elements unwritten in both"
                for o in self.outputs
                if o.comparison.unwritten_both
            )
            return (
                f"{self.size}: ok ({', '.join(same) + ' match' if same else ''}{'; ' if same and off else ''}"
                f"{within}{both})"
            )
        first = bad[0]
        if first.status == "inconclusive":
            return f"{self.size}: inconclusive: {first.vacuous}"
        note = f", {first.unwritten} elements never written" if first.unwritten else ""
        return f"{self.size}: {first.name}: {first.comparison.summary()}{note}"


@dataclass(frozen=True)
class VerifyReport:
    """Every size of one kernel (one instantiation) against the rewritten version or the
    NumPy reference. `notes` carry what the verdict does not cover (e.g. instantiations
    of a template that the spec does not list)."""

    kernel: str
    runtime: str
    against: str  # "rewritten" or "reference"
    sizes: tuple[SizeVerdict, ...] = field(default=())
    notes: tuple[str, ...] = ()

    @property
    def status(self) -> Status:
        if not self.sizes:
            return "inconclusive"
        return max((s.status for s in self.sizes), key=RANK.__getitem__)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def reason(self) -> str:
        """The first size that decided the status, as one line ("" when ok)."""
        if not self.sizes:
            return "no check sizes in the spec"
        status = self.status
        deciding = [s for s in self.sizes if s.status == status]
        first = next((s for s in deciding if s.spec_error), deciding[0] if deciding else None)
        return "" if first is None or status == "ok" else first.summary()

    def summary(self) -> str:
        what = "original vs rewritten" if self.against == "rewritten" else "kernel vs NumPy reference"
        line = f"{self.kernel}: {WORD[self.status]} on the {self.runtime} runtime ({what}, {len(self.sizes)} sizes)"
        if self.status in ("inconclusive", "unverified"):
            line += f": {self.reason}"
        return line


def combined_status(reports: list[VerifyReport] | tuple[VerifyReport, ...]) -> Status:
    """The status of several reports (instantiations of one template) together."""
    return max((r.status for r in reports), key=RANK.__getitem__, default="inconclusive")


def inputs_finite(inputs: Mapping[str, np.ndarray | np.generic], dtypes: Mapping[str, str], outputs: set[str]) -> bool:
    """Whether every input value (in/inout buffers as filled, scalars) is finite; `out`
    buffers (poisoned) do not count."""
    for name, value in inputs.items():
        dtype = dtypes.get(name, "")
        if name in outputs or dtype not in FLOAT_DTYPES:
            continue
        if not np.isfinite(to_float64(np.asarray(value).reshape(-1), dtype)).all():
            return False
    return True


def vacuity(
    name: str,
    role: str,
    dtype: str,
    initial: np.ndarray,
    original: np.ndarray,
    other: np.ndarray,
    finite_inputs: bool,
    partial_ok: bool = False,
) -> str | None:
    """Why a comparison of output `name` could not have failed, or None.

    `initial` is the buffer as passed in (poison for `out`), `original` what the
    original kernel left there, `other` the rewritten kernel's (or the reference's)
    result. The checks run in order: never written by the original (for integer buffers,
    whose poison -1 is also a legitimate value: not a single element written), unchanged
    from its fill in both runs, non-finite on both sides with finite inputs. With
    `partial_ok` (two versions compared, the elements neither wrote skipped) an `out`
    buffer the original wrote in part is no reason: only one it never wrote is.
    """
    total = original.size
    if role == "out":
        stale = int(poison_mask(original).sum())
        if (dtype not in FLOAT_DTYPES or partial_ok) and stale < total:
            stale = 0  # all bytes 0xFF is a legitimate integer (-1): only an untouched buffer tells
        if stale:
            whole = "all" if stale == total else f"{stale} of {total}"
            return (
                f"'{name}' still holds the poison in {whole} elements after the original ran (never written, "
                "or computed from unwritten data): an error of the spec or the kernel (a count larger than what "
                f"the kernel writes, elements it skips, or a read of it: declare '{name}' inout)"
            )
    elif np.array_equal(initial.view(np.uint8), original.view(np.uint8)) and np.array_equal(
        initial.view(np.uint8), other.view(np.uint8)
    ):
        return f"'{name}' is identical to its initial fill after both runs: nothing the kernel does shows in it"
    if dtype in FLOAT_DTYPES and finite_inputs:
        with np.errstate(invalid="ignore"):
            both = ~np.isfinite(to_float64(original.reshape(-1), dtype)) & ~np.isfinite(
                to_float64(other.reshape(-1), dtype)
            )
        if partial_ok and role == "out":  # the poison neither version overwrote is no value either computed
            both &= ~(poison_mask(original) & poison_mask(other))
        count = int(both.sum())
        if count:
            whole = "all" if count == total else f"{count} of {total}"
            return (
                f"'{name}': {whole} elements are NaN or Inf in both runs although the inputs hold none; equal "
                "non-finite values prove nothing (does the kernel read an 'out' buffer it should declare inout?)"
            )
    return None
