"""The validated, immutable form of a harness spec.

These dataclasses are what `spec.load_spec` returns; everything in them has been
checked, so consumers (input generation, runtimes, the verifier) never re-validate.
They are frozen so a spec can be shared across threads and cached safely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from kxform.errors import Location, SpecError
from kxform.expr import Expr
from kxform.harness.fills import FillSpec

if TYPE_CHECKING:
    from kxform.harness.launch import ResolvedLaunch

Role = Literal["in", "out", "inout"]
ArgKind = Literal["buffer", "scalar"]
CompareMode = Literal["exact", "ulp", "allclose"]

ROLES: tuple[Role, ...] = ("in", "out", "inout")
ARG_KINDS: tuple[ArgKind, ...] = ("buffer", "scalar")
COMPARE_MODES: tuple[CompareMode, ...] = ("exact", "ulp", "allclose")

_NO_LOCATION = Location("")


@dataclass(frozen=True)
class CompareSpec:
    """How outputs are compared: bit-exact, within `ulps`, or numpy-style allclose."""

    mode: CompareMode = "exact"
    ulps: int = 0
    rtol: float = 0.0
    atol: float = 0.0

    def __str__(self) -> str:
        if self.mode == "ulp":
            return f"ulp(ulps={self.ulps})"
        if self.mode == "allclose":
            return f"allclose(rtol={self.rtol:g}, atol={self.atol:g})"
        return "exact"


@dataclass(frozen=True)
class CsrGroup:
    """Dimensions of one random CSR matrix whose parts are several kernel arguments."""

    name: str
    rows: Expr
    cols: Expr
    nnz_per_row: Expr


@dataclass(frozen=True)
class ArgSpec:
    """One kernel parameter, in declaration order.

    Buffers have `count` or `shape` (a CSR part may have neither: it is derived),
    a `role` and, unless `out`, a `fill`; scalars have a `value` expression.
    `compare` overrides the kernel's comparison for this output.
    """

    name: str
    kind: ArgKind
    dtype: str
    role: Role = "in"
    count: Expr | None = None
    shape: tuple[Expr, ...] | None = None
    value: Expr | None = None
    fill: FillSpec | None = None
    compare: CompareSpec | None = None
    location: Location = field(default=_NO_LOCATION, compare=False)

    @property
    def is_output(self) -> bool:
        """Whether the kernel writes this buffer (role out or inout)."""
        return self.kind == "buffer" and self.role in ("out", "inout")


@dataclass(frozen=True)
class Placement:
    """Where one buffer lies at a size (`layout`): `offset` elements into an allocation of
    its own (a misaligned pointer), or, `within` another buffer, `offset` elements (its
    own) from that buffer's pointer (negative: before it): the two overlap."""

    offset: int = 0
    within: str = ""


@dataclass(frozen=True)
class SizeSpec:
    """One problem size: integer values of the size variables, and the buffers it places
    otherwise than one allocation each (`layout`: misaligned or overlapping)."""

    name: str
    bench: bool
    values: dict[str, int]
    location: Location = field(default=_NO_LOCATION, compare=False)
    layout: tuple[tuple[str, Placement], ...] = ()

    @property
    def overlapping(self) -> bool:
        """Whether the layout places a buffer inside another: a kernel whose threads each read
        and write elements of their own then touch others' (a race on a GPU: an in-place
        stencil, a shifted copy), so the size is defined by the CPU runtime's sequential
        thread order only."""
        return any(p.within for _, p in self.layout)


@dataclass(frozen=True)
class KernelSpec:
    """How to launch, feed and check one kernel (a templated one: one instantiation)."""

    name: str
    description: str
    seed: int
    grid: tuple[Expr, ...]
    block: tuple[Expr, ...]
    shared_bytes: Expr
    compare: CompareSpec
    args: tuple[ArgSpec, ...]
    sizes: tuple[SizeSpec, ...]
    reference: str | None = None
    csr_groups: dict[str, CsrGroup] = field(default_factory=dict)
    spec_dir: Path = field(default=Path("."), compare=False)
    location: Location = field(default=_NO_LOCATION, compare=False)

    @property
    def base_name(self) -> str:
        """The function name without template arguments (`gemm` for `gemm<float, 64>`)."""
        return self.name.split("<", 1)[0].strip()

    def arg(self, name: str) -> ArgSpec:
        """The argument called `name`."""
        for arg in self.args:
            if arg.name == name:
                return arg
        raise KeyError(name)

    def size(self, name: str) -> SizeSpec:
        """The size called `name`; SpecError naming the known sizes otherwise."""
        for size in self.sizes:
            if size.name == name:
                return size
        known = ", ".join(s.name for s in self.sizes)
        raise SpecError(f"kernel '{self.name}': no size '{name}' (sizes: {known})", self.location)

    @property
    def check_sizes(self) -> tuple[SizeSpec, ...]:
        """Sizes used for correctness checks (not marked `bench`)."""
        return tuple(s for s in self.sizes if not s.bench)

    @property
    def bench_sizes(self) -> tuple[SizeSpec, ...]:
        """Sizes used for timing."""
        return tuple(s for s in self.sizes if s.bench)

    @property
    def outputs(self) -> tuple[ArgSpec, ...]:
        """Buffers the kernel writes, in parameter order."""
        return tuple(a for a in self.args if a.is_output)

    def compare_for(self, arg_name: str) -> CompareSpec:
        """The comparison for output `arg_name`: its own if given, else the kernel's."""
        return self.arg(arg_name).compare or self.compare

    def launch(self, size: SizeSpec | str) -> ResolvedLaunch:
        """Concrete grid, block, shared bytes and argument shapes for `size`."""
        from kxform.harness.launch import resolve  # launch imports this module's types

        return resolve(self, size if isinstance(size, SizeSpec) else self.size(size))


@dataclass(frozen=True)
class HarnessSpec:
    """A whole spec file: the source it describes and its kernels by name."""

    path: Path
    source: Path
    kernels: dict[str, KernelSpec]

    def find(self, name: str) -> KernelSpec | None:
        """The kernel called `name`, or whose base name it is (`gemm` for `gemm<float, 64>`)."""
        if name in self.kernels:
            return self.kernels[name]
        return next((k for k in self.kernels.values() if k.base_name == name), None)

    def instantiations(self, name: str) -> tuple[KernelSpec, ...]:
        """Every kernel entry for `name`: the entry itself, or each instantiation of the
        template `name` (`gemm<float, 64>` and `gemm<double, 32>` for `gemm`), in spec order."""
        if name in self.kernels:
            return (self.kernels[name],)
        return tuple(k for k in self.kernels.values() if k.base_name == name)

    def kernel(self, name: str) -> KernelSpec:
        """The kernel called `name` (see `find`); SpecError naming the known kernels otherwise."""
        found = self.find(name)
        if found is not None:
            return found
        known = ", ".join(self.kernels)
        raise SpecError(f"no kernel '{name}' in spec (kernels: {known})", Location(str(self.path)))
