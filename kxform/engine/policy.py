"""Verification policy: what a pass tells the verifier about its own rewrite.

The engine does not know what a rewrite changes, so it does not decide how to verify
it. A pass states, per proposal:

* how the rewritten version is launched: a remap launches exactly as the original did;
  a new tile changes the grid and the block, so the pass gives the launch expressions
  it found at the launch site (over the kernel's scalar parameters and its own
  parameters) and the values bound into them. The verifier evaluates them per size,
  after checking that at the original values they reproduce the harness spec's launch
  (otherwise the derived launch cannot be trusted and the answer is "could not tell");
* how outputs compare: bit-exact for a remap; for a change of summation order, a
  relative bound the pass derives as an expression over the kernel's scalar parameters
  (the row length), evaluated at each check size (`bound`), or the spec's tolerance
  widened by a fixed factor where nothing better is known (`spec`);
* whether the rewrite may be written without a differential run at all.

Policies of the passes of one pipeline combine (`then`): the later launch wins where it
sets one, the looser comparison wins, and a required verification stays required.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from kxform.expr import parse_expr

CompareMode = Literal["exact", "spec", "bound"]


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

    @property
    def is_spec(self) -> bool:
        return self.grid is None and self.block is None and self.shared_bytes is None

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
    bound: str = ""
    """For `bound`: the error bound in units of `unit`, an expression over the kernel's
    scalar parameters (`(C - 1) + (C + 31)/32 + 4`); the relative tolerance at a size is
    its value there times `unit`."""
    unit: float = 0.0
    """For `bound`: the unit roundoff of the summed type."""

    def relative(self, env: Mapping[str, int]) -> float:
        """The `bound` comparison's relative tolerance at the size whose scalars are `env`
        (raises SpecError naming the expression when a name is unbound)."""
        return float(parse_expr(self.bound).evaluate(env)) * self.unit

    def describe(self) -> str:
        if self.mode == "exact":
            what = "bit-exact"
        elif self.mode == "bound":
            what = f"relative bound ({self.bound}) * {self.unit:.3g} at each size"
        else:
            what = "the spec's tolerance" + (f" x{self.scale:g}" if self.scale != 1.0 else "")
        return f"{what} ({self.reason})" if self.reason else what


EXACT = OutputCompare("exact", reason="the rewrite changes no arithmetic")


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
            launch = replace(later.launch, defaults=tuple(defaults.items()))
        compare = _looser(self.compare, later.compare)
        return VerifyPolicy(launch, compare, self.required or later.required)

    def describe(self) -> str:
        launch = (
            "the spec's launch"
            if self.launch.is_spec
            else f"launch from {self.launch.origin or 'the source'} at {_values(self.launch.values)}"
            + "".join(f", {n} = the spec's {d}" for n, d in self.launch.inputs)
        )
        return f"{launch}; outputs {self.compare.describe()}"

    def to_json(self) -> dict[str, Any]:
        compare: dict[str, Any] = {
            "mode": self.compare.mode,
            "scale": self.compare.scale,
            "reason": self.compare.reason,
        }
        if self.compare.mode == "bound":
            compare.update(bound=self.compare.bound, unit=self.compare.unit)
        return {"launch": self.launch.to_json(), "compare": compare, "required": self.required}


def _looser(first: OutputCompare, second: OutputCompare) -> OutputCompare:
    """The comparison of two rewrites in a row: the spec's (widest scale) over a derived
    bound, two derived bounds add (each rewrite's error adds to the other's), exact last."""
    spec = [c for c in (first, second) if c.mode == "spec"]
    if spec:
        return max(spec, key=lambda c: c.scale)
    bounds = [c for c in (first, second) if c.mode == "bound"]
    if len(bounds) == 2:
        return OutputCompare(
            "bound",
            reason=f"{first.reason}; then {second.reason}",
            bound=f"({first.bound}) + ({second.bound})",
            unit=max(first.unit, second.unit),
        )
    if bounds:
        return bounds[0]
    return second if second != EXACT else first


def _values(values: tuple[tuple[str, int], ...] | Mapping[str, int]) -> str:
    items = values.items() if isinstance(values, Mapping) else values
    return ",".join(f"{k}={v}" for k, v in items) or "the original values"


DEFAULT_POLICY = VerifyPolicy()
