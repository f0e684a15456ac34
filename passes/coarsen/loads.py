"""coarsen's `loads=once`: an element two of a thread's outputs read is loaded once.

kxform.analysis.reuse finds the groups of loads whose elements coincide across outputs.
Each group gets registers, one per distinct element the thread's F outputs read, and a
flag per register saying whether it holds its element yet:

    (kx_h0[kx_f + 1] ? kx_r0[kx_f + 1] : (kx_h0[kx_f + 1] = true) ? (kx_r0[kx_f + 1] = A[(i + 1) * N + j])
                                                                   : kx_r0[kx_f + 1])

(the flag is set and tested in one conditional: a comma there is valid C++ that
tree-sitter-cuda does not parse, and every rewrite is re-parsed before it is kept).

A load happens where the original loads, under its own guards, the first time its
element is needed; later outputs that read it take the register. The loop is unrolled,
so the indices are constants and the arrays live in registers. Nothing is loaded that
the original would not load, and the arithmetic is the same: bit-exact.

The register is right only if no store in between wrote the element. Unless every pair
of a cached buffer and a stored buffer is declared `__restrict__` (the programmer's
promise, which the compiler also takes), each thread computes, before its loop, the
byte ranges of the elements it will cache and store; if any cached range overlaps a
stored one the thread runs the plain loop instead (the kernel as coarsened without
`once`).
"""

from __future__ import annotations

from dataclasses import dataclass

from kxform.analysis.affine import Affine
from kxform.analysis.reuse import LoadGroup, Reuse, StoreSite
from kxform.engine.params import Config
from kxform.engine.pass_api import CheckRecord
from kxform.errors import CheckFailed
from kxform.passes.coarsen.jam import Jam
from kxform.passes.coarsen.shape import Shape


@dataclass(frozen=True)
class Cached:
    """The text `loads=once` adds: declarations before the loop, the loads replaced, and
    the overlap check (empty when every pair is `__restrict__`)."""

    declarations: tuple[str, ...]
    replacements: tuple[tuple[int, int, str], ...]
    """(start, end, text) byte spans of the file: each cached load's new text."""
    check: tuple[str, ...]
    """Statements that set `kx_overlap`; empty: no run-time check is needed."""
    pairs: tuple[tuple[str, str], ...]
    """The (cached, stored) buffer pairs the check covers."""


def c_text(form: Affine) -> str:
    """An affine form as C, in `long long` (an index of a launch-sized grid may pass int)."""
    if not form.terms:
        return "0LL"
    parts = []
    for monomial, coeff in form.terms:
        factors = [f"(long long){symbol}" for symbol in monomial]
        if not factors:
            parts.append(f"{coeff}LL")
        elif coeff in (1, -1):
            parts.append(("-" if coeff < 0 else "") + " * ".join(factors))
        else:
            parts.append(" * ".join([f"{coeff}LL", *factors]))
    return "(" + " + ".join(parts).replace("+ -", "- ") + ")"


def cache_loads(reuse: Reuse, factor: int, axis: str, name: str, data: bytes) -> Cached | str:
    """The rewrite for `factor` outputs per thread (`name` is the factor's macro), or why
    no load is shared at that factor."""
    groups = reuse.shared(factor)
    if not groups:
        return f"no element is read by two of a thread's {factor} outputs"
    declarations, replacements = [], []
    for number, group in enumerate(groups):
        size = "1" if group.step.value == 0 else f"{name} + {group.high - group.low}"
        declarations += [f"{group.buffer.element} kx_r{number}[{size}];", f"bool kx_h{number}[{size}] = {{}};"]
        for load in group.loads:
            slot = group.slot(load)
            index = "0" if group.step.value == 0 else f"kx_f + {slot}" if slot else "kx_f"
            text = data[load.access.span.start : load.access.span.end].decode("utf-8")
            have, reg = f"kx_h{number}[{index}]", f"kx_r{number}[{index}]"
            replacements.append(
                (
                    load.access.span.start,
                    load.access.span.end,
                    f"({have} ? {reg} : ({have} = true) ? ({reg} = {text}) : {reg})",
                )
            )
    pairs = sorted(
        {
            (g.buffer.name, s.buffer.name)
            for g in groups
            for s in reuse.stores
            if not (g.buffer.restrict and s.buffer.restrict)
        }
    )
    check = _overlap_check(groups, reuse.stores, pairs, axis, name) if pairs else ()
    return Cached(tuple(declarations), tuple(sorted(replacements)), check, tuple(pairs))


def _overlap_check(
    groups: tuple[LoadGroup, ...], stores: tuple[StoreSite, ...], pairs: list[tuple[str, str]], axis: str, name: str
) -> tuple[str, ...]:
    """`kx_overlap`: whether the elements this thread caches through a buffer and those it
    stores through another may share a byte. Each range is [lowest, highest] element over
    the thread's outputs (an affine index is monotone in the output, so its ends are at
    the first and the last output)."""
    lines = [
        f"const long long kx_v0 = (long long)(blockIdx.{axis} * blockDim.{axis} + threadIdx.{axis}) * {name};",
        "bool kx_overlap = false;",
    ]
    ends: dict[str, list[str]] = {}
    for group in groups:
        at = ("kx_v0",) if group.step.value == 0 else (f"kx_v0 + ({group.low})", f"kx_v0 + ({group.high}) + {name} - 1")
        ends.setdefault(group.buffer.name, []).extend(
            f"{c_text(group.step)} * ({a}) + {c_text(group.rest)}" for a in at
        )
    stored: dict[str, list[str]] = {}
    for site in stores:
        for at in ("kx_v0", f"kx_v0 + {name} - 1"):
            text = f"{c_text(site.split.step)} * ({at}) + {c_text(site.split.rest)}"
            if text not in stored.setdefault(site.buffer.name, []):
                stored[site.buffer.name].append(text)
    ranges: dict[str, str] = {}
    for buffer, texts in [*ends.items(), *stored.items()]:  # a cached buffer is never stored: no name twice
        var = f"kx_{buffer}"
        lines.append(f"long long {var}_lo = {texts[0]}, {var}_hi = {var}_lo;")
        for text in texts[1:]:
            lines += [
                f"{{ const long long kx_e = {text};",
                f"  {var}_lo = kx_e < {var}_lo ? kx_e : {var}_lo; {var}_hi = kx_e > {var}_hi ? kx_e : {var}_hi; }}",
            ]
        ranges[buffer] = var
    for cached, store in pairs:
        a, b = ranges[cached], ranges[store]
        lines.append(
            f"kx_overlap = kx_overlap || ({_byte(cached, a + '_lo')} < {_byte(store, b + '_hi + 1')} && "
            f"{_byte(store, b + '_lo')} < {_byte(cached, a + '_hi + 1')});"
        )
    return tuple(lines)


def _byte(buffer: str, element: str) -> str:
    """The byte address of element `element` of `buffer`, as an integer (no pointer is formed
    outside the allocation)."""
    return f"((long long)({buffer}) + ({element}) * (long long)sizeof({buffer}[0]))"


def cached_along(shape: Shape, axis: str, factor: int, name: str, data: bytes) -> Cached | str:
    """The registers `loads=once` gives the loads `shape`'s outputs share along `axis`, or
    why none (a jammed loop shares its loads instead)."""
    reuse = shape.reuse_along(axis)
    if isinstance(shape.jam_along(axis), Jam):
        return "the outputs' loop is jammed instead"
    if isinstance(reuse, str):
        return reuse
    return cache_loads(reuse, factor, axis, name, data)


def loads_record(data: bytes, shape: Shape, config: Config) -> CheckRecord:
    """loads=once: which loads share registers, and how stores are kept from them."""
    jam = shape.jam_along(str(config["along"]))
    if isinstance(jam, Jam):
        count = sum(len(h.spans) for h in jam.hoisted)
        return CheckRecord(
            "loads",
            True,
            f"the outputs' loops run as one; {count} loads of an element every output "
            "reads at an iteration are made once per iteration, outside any condition the loop adds; "
            "nothing is stored inside the loop, so no check is needed",
        )
    if config["layout"] != "contiguous":
        raise CheckFailed("loads", "loads=once needs layout=contiguous: outputs a block apart share no element")
    cached = cached_along(shape, str(config["along"]), int(str(config["factor"])), "F", data)
    if isinstance(cached, str):
        raise CheckFailed("loads", cached)
    shared = len(cached.replacements)
    if not cached.pairs:
        return CheckRecord(
            "loads",
            True,
            f"{shared} loads share registers; no store can write a cached element "
            "(every cached and stored buffer is __restrict__, or nothing is stored)",
        )
    pairs = ", ".join(f"{a}/{b}" for a, b in cached.pairs)
    return CheckRecord(
        "loads",
        True,
        f"{shared} loads share registers; a thread whose cached and stored elements "
        f"may overlap ({pairs}: not both __restrict__) runs the plain loop (checked at run time)",
    )
