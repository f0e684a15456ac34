"""Verification policy: what a pass tells the verifier about its own rewrite.

The engine does not know what a rewrite changes, so it does not decide how to verify
it. A pass states, per proposal:

* how the rewritten version is launched: a remap launches exactly as the original did;
  a new tile changes the grid and the block, so the pass gives the launch expressions
  it found at the launch site (over the kernel's scalar parameters and its own
  parameters) and the values bound into them. The verifier evaluates them per size,
  after checking that at the original values they reproduce the harness spec's launch
  (otherwise the derived launch cannot be trusted and the answer is "could not tell");
* how outputs compare: bit-exact for a remap; for a change of summation order, an
  absolute bound per output element measured at each check size with the original's
  reorder probe (`bound`: kxform.engine.reorder_probe, kxform.verify.probe), or the spec's
  tolerance widened by a fixed factor where nothing better is known (`spec`);
* whether the rewrite may be written without a differential run at all;
* the scratch buffers the rewritten kernel takes after the original's parameters (a
  split reduction's partial sums and arrival counters): the verifier allocates them,
  zeroed, at the sizes the pass states, and holds a buffer the kernel must leave as it
  found it (counters a later launch reuses) to that.

Policies of the passes of one pipeline combine (`then`): the later launch wins where it
sets one, the looser comparison wins, and a required verification stays required.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from kxform.analysis.records import Loop, Reduction
from kxform.engine.reorder_probe import ANY_ORDER, ReorderProbe, build_probe
from kxform.frontend.model import Function, SourceModel

CompareMode = Literal["exact", "spec", "bound"]


@dataclass(frozen=True)
class Scratch:
    """A buffer the rewritten kernel takes as an extra parameter (after the original's,
    in order) and the caller allocates: the rewritten launcher does, and so does the
    verifier and the timer, zero-filled.

    `count` is an expression in kxform's expression language over the kernel's scalar
    parameters, the pass's parameters and the rewritten launch (`grid_x`, `grid_y`,
    `grid_z`, `block_x`, `block_y`, `block_z`). `restored`: the kernel must leave the
    buffer all zero, as it got it (arrival counters a later launch starts from); the
    verifier checks that after every run."""

    name: str
    dtype: str
    """A harness dtype (`float32`, `uint32`)."""
    count: str
    restored: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "count": self.count, "restored": self.restored}


@dataclass(frozen=True)
class LaunchBinding:
    """The launch of one version, as expressions in kxform's expression language.

    A dimension given as None (or a binding with no expressions at all) is the spec's
    own. Names in the expressions are the kernel's scalar parameters (bound per size from
    the spec's argument values) and the pass's parameters (bound from `values`).
    """

    grid: tuple[str | None, ...] | None = None
    block: tuple[str | None, ...] | None = None
    shared_bytes: str | None = None
    values: tuple[tuple[str, int], ...] = ()
    """The parameter values of this version."""
    defaults: tuple[tuple[str, int], ...] = ()
    """The parameter values of the original: at these the expressions must give the spec's launch."""
    origin: str = ""
    """Where the expressions were read (`sgemm.cu:92`), for messages."""
    anchored: bool = True
    """Whether the expressions must reproduce the spec's launch at `defaults` before they
    are trusted. A launch stated with a new kernel body (a model-written template) has no
    original values to anchor it: it is evaluated as stated."""
    inputs: tuple[tuple[str, str], ...] = ()
    """Names the launcher receives at run time (a block size its caller passes: `("block_size",
    "block.x")`), each read per size from the spec's launch of the original at the dimension
    it sets there (`grid.x`..`grid.z`, `block.x`..`block.z`, `shared`). A pass parameter whose
    original value is such a dimension is one too: `values` still set it in the rewritten
    version."""
    anchor: LaunchBinding | None = None
    """The original version's launch read from its own file (`kxform verify A B`): at
    `defaults` and `inputs` it must give the spec's launch; None: this binding's own
    expressions at `defaults` must."""
    scratch: tuple[Scratch, ...] = ()
    """Buffers the rewritten kernel takes after the original's parameters (see Scratch)."""

    @property
    def is_spec(self) -> bool:
        return self.grid is None and self.block is None and self.shared_bytes is None and not self.scratch

    def env(self, original: bool) -> dict[str, int]:
        return dict(self.defaults if original else self.values)

    def to_json(self) -> dict[str, Any]:
        if self.is_spec:
            return {"launch": "spec"}
        out: dict[str, Any] = {
            "grid": list(self.grid or ()),
            "block": list(self.block or ()),
            "shared_bytes": self.shared_bytes,
            "values": dict(self.values),
            "defaults": dict(self.defaults),
            "origin": self.origin,
            **({"scratch": [s.to_json() for s in self.scratch]} if self.scratch else {}),
        }
        if self.inputs:
            out["inputs"] = dict(self.inputs)
        if self.anchor is not None:
            out["anchor"] = self.anchor.to_json()
        return out

    def describe(self) -> str:
        """The launch in words: `grid [ceil_div(N, R)] block [R * L] at L=32,R=4 (from f.cu:31)`."""
        if self.is_spec:
            return "the spec's launch"
        dims = [
            f"{what} [{', '.join(e if e is not None else 'spec' for e in exprs)}]"
            for what, exprs in (("grid", self.grid), ("block", self.block))
            if exprs is not None
        ]
        if self.shared_bytes is not None:
            dims.append(f"shared {self.shared_bytes} B")
        runtime = f", {', '.join(f'{n} = spec {d}' for n, d in self.inputs)}" if self.inputs else ""
        return f"{' '.join(dims)} at {_values(self.values)}{runtime} (from {self.origin or 'the source'})"


SPEC_LAUNCH = LaunchBinding()


@dataclass(frozen=True)
class OutputCompare:
    """How the rewritten version's outputs are compared with the original's."""

    mode: CompareMode = "exact"
    scale: float = 1.0
    """For `spec`: the spec's tolerance is multiplied by this."""
    reason: str = ""
    """Why this comparison is right for the rewrite (stated in the log)."""
    probe: ReorderProbe | None = None
    """For `bound`: the original with its reordered sums instrumented; the verifier runs it
    to measure each output's tolerance (kxform.verify.probe)."""

    def describe(self) -> str:
        if self.mode == "exact":
            what = "bit-exact"
        elif self.mode == "bound":
            sums = self.probe.describe() if self.probe is not None else "no probe"
            what = f"an absolute bound per output, measured by the reorder probe ({sums})"
        else:
            what = "the spec's tolerance" + (f" x{self.scale:g}" if self.scale != 1.0 else "")
        return f"{what} ({self.reason})" if self.reason else what

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "scale": self.scale, "reason": self.reason}
        if self.probe is not None:
            out["probe"] = self.probe.to_json()
        return out


EXACT = OutputCompare("exact", reason="the rewrite changes no arithmetic")


def reordered_sums(
    model: SourceModel,
    kernel: Function,
    reductions: Sequence[Reduction],
    loops: Mapping[int, Loop],
    how: str,
    chain: str = ANY_ORDER,
) -> OutputCompare:
    """The comparison of a rewrite that combines `reductions` of the original in a new order
    (`how`, for the log; `chain`: the height of its summation tree over `{n}` terms, see
    kxform.engine.reorder_probe): bit-exact where none is a float or double sum (max, min and
    integer sums give the same value in any order), else the absolute per-output bound the
    original's reorder probe measures. Raises ProbeRefused (a CheckFailed) when a reordered
    sum cannot be probed: such a rewrite cannot be verified."""
    probe = build_probe(model, kernel, reductions, loops, chain)
    if not probe.sums:
        ops = sorted({r.op for r in reductions})
        why = (
            f"only {' and '.join(ops)} reductions are reordered: exact in any order"
            if reductions
            else "no reduction is reordered: every element is computed as before"
        )
        return OutputCompare("exact", reason=why)
    return OutputCompare(
        "bound",
        reason=f"{how} reorders the sums {probe.describe()}: a sum whose summation tree has height h lies within "
        f"gamma_h sum|x_i| of the exact sum (Higham 4.2); the original's chain has h = n - 1, the rewrite's "
        f"h = {chain.format(n='n')}, so the versions' sums differ by at most (gamma_(n-1) + gamma_h) sum|x_i|; "
        "each output is held to the measured effect of that difference, per size",
        probe=probe,
    )


@dataclass(frozen=True)
class VerifyPolicy:
    """What a pass asks of the differential verification of one proposal."""

    launch: LaunchBinding = SPEC_LAUNCH
    compare: OutputCompare = EXACT
    required: bool = False
    """The rewrite may only be written after a differential run passed (a new tile)."""

    def then(self, later: VerifyPolicy) -> VerifyPolicy:
        """The policy of this rewrite followed by `later` on its output."""
        launch = later.launch if not later.launch.is_spec else self.launch
        if not later.launch.is_spec and not self.launch.is_spec:
            # a parameter both read keeps the original value the earlier rewrite knew
            earlier = dict(self.launch.defaults)
            defaults = {k: earlier.get(k, v) for k, v in later.launch.defaults}
            launch = replace(
                later.launch, defaults=tuple(defaults.items()), scratch=self.launch.scratch + later.launch.scratch
            )
        return VerifyPolicy(launch, _combined(self, later), self.required or later.required)

    def describe(self) -> str:
        launch = (
            "the spec's launch"
            if self.launch.is_spec
            else f"launch from {self.launch.origin or 'the source'} at {_values(self.launch.values)}"
            + "".join(f", {n} = the spec's {d}" for n, d in self.launch.inputs)
        )
        return f"{launch}; outputs {self.compare.describe()}"

    def to_json(self) -> dict[str, Any]:
        return {"launch": self.launch.to_json(), "compare": self.compare.to_json(), "required": self.required}


def _combined(first: VerifyPolicy, second: VerifyPolicy) -> OutputCompare:
    """The comparison of two rewrites in a row: the spec's (widest scale) over a measured
    bound, exact last. A reorder probe instruments the input of its own rewrite and runs at
    the spec's launch, so it stands for the pair only when that input computes what the
    original computes at that launch: it is the first rewrite's, or the first rewrite is
    exact at the spec's launch. Otherwise nothing measures the pair's error: the spec's
    tolerance, doubled (each version within it of the exact result)."""
    a, b = first.compare, second.compare
    spec = [c for c in (a, b) if c.mode == "spec"]
    if spec:
        return max(spec, key=lambda c: c.scale)
    if b.mode == "bound" and (a.mode == "bound" or not first.launch.is_spec):
        return OutputCompare(
            "spec",
            2.0,
            f"{a.reason}; then {b.reason}: the second rewrite's probe does not describe the first one's output "
            "at the spec's launch, so the pair is held to the spec's tolerance of the exact result, twice",
        )
    if a.mode == "bound":
        return a
    return b if b != EXACT else a


def _values(values: tuple[tuple[str, int], ...] | Mapping[str, int]) -> str:
    items = values.items() if isinstance(values, Mapping) else values
    return ",".join(f"{k}={v}" for k, v in items) or "the original values"


DEFAULT_POLICY = VerifyPolicy()
