"""The original kernel instrumented to measure how much reordering its sums can move each output.

A rewrite that sums a loop's terms in another order (lanes of a row, blocks of a column,
a model's template) changes each sum by rounding alone. A float sum of n terms x_i whose
summation tree has height h (the most additions any term goes through) lies within
gamma_h * sum|x_i| of the exact sum (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., 4.2; gamma_k = k u / (1 - k u), u the unit roundoff of the
accumulator's type). The original adds its terms in a chain (h = n - 1); the rewrite's
height is what its pass states (`chain`: ceil(n / G) - 1 + log2 G for G lanes and a
butterfly), or n - 1, which bounds every order. So the original's and the rewrite's
values of one sum differ by at most delta = (gamma_{n-1} + gamma_chain) * sum|x_i|. That
bound is absolute: a sum that cancels to near zero (a dot product, a centred value) may
differ from the original by far more than its own magnitude times u and still be correct.

What reaches an output is the sum passed through the rest of the kernel (a mean
subtracted, a square root, a division). The probe measures that: the original is
rewritten so that each reordered sum also accumulates, in double, the magnitude of every
change its updates make (|acc after - acc before|, which is |x_i| up to one rounding, so
any update statement works, `acc += a * b` as well as `acc = fmaf(a, b, acc)`) and
counts them; after its loop, when the sum's macro `KX_PROBE_<j>` is 1, the sum is moved
by its delta. The verifier runs the original once per sum with that macro set: the
change of each output is the first-order effect of the largest reordering error of that
sum on that output, whatever happens to the sum after it. kxform.verify.probe turns the
runs into a per-output absolute tolerance. With every macro 0 (the default, defined at
the top of the file) the probe computes exactly what the original computes: the sum's
own updates are unchanged and the magnitudes are kept in variables of their own.

Only what can be instrumented in place is probed: the loop that carries the sum must be
a statement of a compound statement (so declarations before it and the move after it
stay in its scope), and the accumulator must be a float or a double; otherwise the probe
is refused with the reason (`ProbeRefused`) and the rewrite is not verified with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kxform.analysis.records import Loop, Reduction
from kxform.engine.edits import Edit, apply_edits
from kxform.engine.rewrite import in_block
from kxform.errors import CheckFailed
from kxform.frontend.model import Function, SourceModel

PROBE_MACRO = "KX_PROBE_{}"
"""The macro that moves sum j by its reordering bound when defined to 1."""
UNIT_ROUNDOFF = {"float": 2.0**-24, "double": 2.0**-53}


class ProbeRefused(CheckFailed):
    """A sum the probe cannot instrument in place (its reason says why)."""

    def __init__(self, cause: str) -> None:
        super().__init__("probe", cause, key="ProbeRefused")


@dataclass(frozen=True)
class ProbedSum:
    """One reordered sum of the original: its accumulator, where it is, the macro that moves it."""

    var: str
    ctype: str
    line: int
    macro: str

    def describe(self) -> str:
        return f"'{self.var}' ({self.ctype}, line {self.line})"


@dataclass(frozen=True)
class ReorderProbe:
    """The original's text with every reordered sum instrumented (see the module's docstring)."""

    source: str
    kernel: str
    sums: tuple[ProbedSum, ...]

    def describe(self) -> str:
        return ", ".join(s.describe() for s in self.sums)

    def to_json(self) -> dict[str, object]:
        return {"kernel": self.kernel, "sums": [{"var": s.var, "ctype": s.ctype, "line": s.line} for s in self.sums]}


ANY_ORDER = "{n} - 1"
"""The height of the tallest summation tree of n terms: a bound for any order."""


def build_probe(
    model: SourceModel,
    kernel: Function,
    reductions: Sequence[Reduction],
    loops: Mapping[int, Loop],
    chain: str = ANY_ORDER,
) -> ReorderProbe:
    """The probe of the `+` reductions among `reductions` (others reorder exactly: max, min,
    integer sums), each carried by `loops[r.loop]`; `chain` is the height of the rewrite's
    summation tree as a C expression of the number of terms `{n}`. Raises ProbeRefused when
    one of them cannot be instrumented; returns a probe with no sums when none needs one."""
    sums = [r for r in reductions if r.op == "+" and _is_float(r.ctype)]
    blocked = next((r for r in reductions if r.op == "+" and not _is_float(r.ctype) and not _is_integer(r.ctype)), None)
    if blocked is not None:
        raise ProbeRefused(f"'{blocked.var}' sums a {blocked.ctype}: only float and double sums are probed")
    source = model.source
    nl = source.newline
    edits: list[Edit] = []
    probed: list[ProbedSum] = []
    for j, r in enumerate(sums):
        loop = loops.get(r.loop)
        if loop is None:
            raise ProbeRefused(f"the loop that carries '{r.var}' is not known")
        start = _statement_start(model, loop)
        macro = PROBE_MACRO.format(j)
        mag, count = f"kx_probe_mag{j}", f"kx_probe_n{j}"
        edits.append(Edit(start, start, f"double {mag} = 0.0; long long {count} = 0; ", f"probe: {r.var}"))
        for update in r.updates:
            end = _statement_end(source.data, update.start, update.end)
            text = source.data[update.start : end].decode("utf-8")
            if end < 0:
                raise ProbeRefused(f"an update of '{r.var}' is not a statement of its own: '{text.strip()}'")
            was = f"kx_probe_was{j}"
            edits.append(
                Edit(
                    update.start,
                    end,
                    f"{{ const double {was} = (double)({r.var}); {text} "
                    f"{mag} += fabs((double)({r.var}) - {was}); {count} += 1; }}",
                    f"probe: {r.var} update",
                )
            )
        u = UNIT_ROUNDOFF["double" if "double" in r.ctype else "float"]
        height = f"(double)({chain.format(n=count)})"
        delta = f"({_gamma(f'({count} - 1)', u)} + {_gamma(height, u)}) * {mag}"
        edits.append(
            Edit(
                loop.span.end,
                loop.span.end,
                f"{nl}{source.indent_at(loop.span.start)}if ({macro} && {count} > 1) "
                f"{r.var} = {r.var} + (decltype({r.var}))({delta});",
                f"probe: {r.var} moved by its bound",
            )
        )
        probed.append(ProbedSum(r.var, r.ctype, source.line_col(r.updates[0].start)[0], macro))
    if probed:
        at = source.insertion_point(kernel.span.start)
        defaults = "".join(f"#ifndef {s.macro}{nl}#define {s.macro} 0{nl}#endif{nl}" for s in probed)
        edits.append(Edit(at, at, defaults, "probe: macros"))
    text = apply_edits(source, edits).data.decode("utf-8") if probed else source.text
    return ReorderProbe(text, kernel.name, tuple(probed))


def _statement_start(model: SourceModel, loop: Loop) -> int:
    """Where declarations before the loop go: before its `#pragma` if it has one. The loop
    must be a statement of a block (not the body of an `if`, an `else` or another loop),
    or a declaration there would change the program."""
    if not in_block(model, loop):
        raise ProbeRefused(
            f"the loop over '{loop.var or loop.kind}' (line {model.source.line_col(loop.span.start)[0]}) is not a "
            "statement of a block (it is the body of another statement): nothing can be declared before it"
        )
    return loop.pragma_span.start if loop.pragma_span is not None else loop.span.start


def _gamma(k: str, u: float) -> str:
    """gamma_k = k u / (1 - k u) as a C expression in double."""
    return f"({k} * {u!r} / (1.0 - {k} * {u!r}))"


def _statement_end(data: bytes, start: int, end: int) -> int:
    """The end of the expression statement [start, end) begins (just past its `;`), or -1
    when the update is not a whole statement (a `for` header's step, a comma expression)."""
    if data[start:end].rstrip().endswith(b";"):
        return end
    at = end
    while at < len(data) and data[at : at + 1].isspace():
        at += 1
    return at + 1 if data[at : at + 1] == b";" else -1


def _is_float(ctype: str) -> bool:
    return ctype.strip() in ("float", "double")


def _is_integer(ctype: str) -> bool:
    return any(t in ctype for t in ("int", "long", "short", "unsigned", "char", "size_t"))
