"""A small exact affine form: the index expressions of the access analysis.

An `Affine` is a sum of integer-weighted monomials over named symbols plus a constant,
`{("blockIdx.x", "blockDim.x"): 1, ("threadIdx.x",): 1, (): 0}`. Symbols are of two
sorts, and the evaluator (kxform.analysis.evaluate) keeps every monomial to at most one
*variable*: the thread and block indices (`threadIdx.x`, `blockIdx.y`) and loop
variables vary, the rest are *parameters* that are fixed for a launch (`blockDim.x`,
`gridDim.y`, scalar kernel parameters, template parameters, unresolved constants). So
`row * K + k` with `row = blockIdx.y * blockDim.y + threadIdx.y` is affine in the
variables with parameter coefficients (`coefficient("threadIdx.y") == K`), which is the
form coalescing, vectorisation and tiling reason with. Exact integers only: no floats,
no sympy, so equal forms compare equal and hash alike.

`NotAffine` says why an index is not of that form ("integer division by hidden",
"`col` is loaded from memory") and still lists the symbols it depends on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

Monomial = tuple[str, ...]
"""A product of symbols, sorted (a repeated symbol is a power); () is the constant 1."""

THREAD_AXES = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
BLOCK_AXES = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
INDEX_VARIABLES = frozenset(THREAD_AXES + BLOCK_AXES)


@dataclass(frozen=True)
class Affine:
    """`sum(coefficient * monomial)`: terms sorted by monomial, no zero coefficients."""

    terms: tuple[tuple[Monomial, int], ...] = ()

    # -- construction --------------------------------------------------------------

    @staticmethod
    def of(mapping: Mapping[Monomial, int]) -> Affine:
        return Affine(tuple(sorted((tuple(sorted(m)), c) for m, c in mapping.items() if c != 0)))

    @staticmethod
    def const(value: int) -> Affine:
        return Affine.of({(): value})

    @staticmethod
    def symbol(name: str) -> Affine:
        return Affine.of({(name,): 1})

    # -- arithmetic ----------------------------------------------------------------

    def _mapping(self) -> dict[Monomial, int]:
        return dict(self.terms)

    def __add__(self, other: Affine) -> Affine:
        out = self._mapping()
        for monomial, coeff in other.terms:
            out[monomial] = out.get(monomial, 0) + coeff
        return Affine.of(out)

    def __neg__(self) -> Affine:
        return Affine(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: Affine) -> Affine:
        return self + (-other)

    def __mul__(self, other: Affine) -> Affine:
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                key = tuple(sorted(m1 + m2))
                out[key] = out.get(key, 0) + c1 * c2
        return Affine.of(out)

    def scaled(self, factor: int) -> Affine:
        return Affine.of({m: c * factor for m, c in self.terms})

    def substitute(self, name: str, value: Affine) -> Affine:
        """`self` with `name` replaced by `value` (products expanded)."""
        out = Affine()
        for monomial, coeff in self.terms:
            term = Affine.const(coeff)
            for symbol in monomial:
                term = term * (value if symbol == name else Affine.symbol(symbol))
            out = out + term
        return out

    # -- questions -----------------------------------------------------------------

    @property
    def symbols(self) -> frozenset[str]:
        return frozenset(s for m, _ in self.terms for s in m)

    @property
    def is_constant(self) -> bool:
        return all(not m for m, _ in self.terms)

    @property
    def value(self) -> int | None:
        """The integer value when the form is a constant."""
        return dict(self.terms).get((), 0) if self.is_constant else None

    def coefficient(self, variable: str) -> Affine:
        """The (parameter) coefficient of `variable`: 0 when it does not occur. Meaningful
        when `variable` occurs at most once per monomial, which the evaluator ensures for
        variables."""
        out: dict[Monomial, int] = {}
        for monomial, coeff in self.terms:
            if variable in monomial:
                rest = list(monomial)
                rest.remove(variable)
                out[tuple(rest)] = out.get(tuple(rest), 0) + coeff
        return Affine.of(out)

    def stride(self, variable: str) -> int | None:
        """The integer coefficient of `variable` (0 when absent), None when it is a
        parameter expression (`K`, `blockDim.x`)."""
        return self.coefficient(variable).value

    def multiple_of(self, k: int) -> bool:
        """Proven a multiple of `k` for every value of its (integer) symbols: each
        coefficient is (the sufficient condition alignment proofs use: `4*tid + 8` is a
        multiple of 4; `n*row` is not proven)."""
        return k != 0 and all(c % k == 0 for _, c in self.terms)

    def without(self, variables: Iterable[str]) -> Affine:
        """The terms that mention none of `variables` (the part fixed for a thread)."""
        drop = set(variables)
        return Affine(tuple((m, c) for m, c in self.terms if not drop & set(m)))

    def degree_in(self, variables: frozenset[str]) -> int:
        """The most `variables` in one monomial (1 for an affine form over them)."""
        return max((sum(s in variables for s in m) for m, _ in self.terms), default=0)

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for monomial, coeff in sorted(self.terms, key=lambda t: (not t[0], t[0])):
            name = "*".join(monomial)
            if not name:
                parts.append(str(coeff))
            elif coeff == 1:
                parts.append(name)
            elif coeff == -1:
                parts.append(f"-{name}")
            else:
                parts.append(f"{coeff}*{name}")
        return " + ".join(parts).replace("+ -", "- ")


@dataclass(frozen=True)
class NotAffine:
    """An index that is not an affine form, why not, and what it depends on."""

    reason: str
    depends: frozenset[str] = frozenset()

    @property
    def symbols(self) -> frozenset[str]:
        return self.depends

    def __str__(self) -> str:
        return f"not affine, because {self.reason}"


Index = Affine | NotAffine


def c_text(form: Affine, rename: Mapping[str, str] | None = None) -> str:
    """An affine form as C, in `long long` (an index of a launch-sized grid may pass int);
    `rename` spells symbols otherwise (`threadIdx.x` -> `(threadIdx.x / LANES)`)."""
    if not form.terms:
        return "0LL"
    rename = rename or {}
    parts = []
    for monomial, coeff in form.terms:
        factors = [f"(long long){rename.get(symbol, symbol)}" for symbol in monomial]
        if not factors:
            parts.append(f"{coeff}LL")
        elif coeff in (1, -1):
            parts.append(("-" if coeff < 0 else "") + " * ".join(factors))
        else:
            parts.append(" * ".join([f"{coeff}LL", *factors]))
    return "(" + " + ".join(parts).replace("+ -", "- ") + ")"
