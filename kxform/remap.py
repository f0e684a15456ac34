"""The block-index remap patterns (the swizzle pass's library, shared with the locality
model, which predicts their effect, and the search, which tunes them).

Each pattern maps a physical block (bx, by) of a gx x gy grid to the logical tile
(lx, ly) it works on. Every pattern exists twice: as a Python reference (used by the
property tests and to explain the mapping) and as the C body of the emitted
`__device__` helper (what actually runs, and what the bijection check compiles).
Formulas: ../shared REFERENCE.md section 1, in our notation (pid = by*gx + bx).

The emitted helpers compute in 32-bit unsigned arithmetic: they are exact for every
grid with gx*gy < 2^32 and group*max(gx, gy) < 2^32, which covers every grid of up to
65535 x 65535 blocks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kxform.errors import UsageError

Params = Mapping[str, int | str]


@dataclass(frozen=True)
class ParamSpec:
    name: str
    default: int | str
    choices: tuple[int | str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None

    def parse(self, raw: str | int, pattern: str) -> int | str:
        if isinstance(self.default, int):
            try:
                value: int | str = int(raw)
            except ValueError:
                raise UsageError(f"pattern {pattern}: parameter {self.name} must be an integer, got {raw!r}") from None
            assert isinstance(value, int)
            if self.minimum is not None and value < self.minimum or self.maximum is not None and value > self.maximum:
                raise UsageError(
                    f"pattern {pattern}: parameter {self.name}={value} out of range [{self.minimum}, {self.maximum}]"
                )
        else:
            value = str(raw)
        if self.choices and value not in self.choices:
            allowed = ", ".join(str(c) for c in self.choices)
            raise UsageError(f"pattern {pattern}: parameter {self.name}={value} not one of {allowed}")
        return value


@dataclass(frozen=True)
class Pattern:
    """A named remap with typed parameters."""

    name: str
    summary: str
    params: tuple[ParamSpec, ...]
    dims: tuple[int, ...]  # grid dimensionalities it applies to: (1, 2) or (2,)
    reference: Callable[[int, int, int, int, Params], tuple[int, int]]
    c_body: Callable[[Params], str]
    formula: Callable[[Params], tuple[str, ...]] | None = None
    """The remap in kxform's formula language, as stages applied in turn (the second reads
    the first's (lx, ly) as its (bx, by)): what the solver proves, stage by stage, since
    bijections compose (proof.py); the compiled check then holds the emitted C to it
    block for block. None: the pattern has no formula, so no proof."""

    def resolve(self, raw: Mapping[str, str | int]) -> RemapConfig:
        known = {p.name: p for p in self.params}
        unknown = sorted(set(raw) - set(known))
        if unknown:
            names = ", ".join(known) or "none"
            raise UsageError(f"pattern {self.name}: unknown parameter {unknown[0]!r} (parameters: {names})")
        values = {p.name: p.parse(raw.get(p.name, p.default), self.name) for p in self.params}
        return RemapConfig(self, tuple(sorted(values.items())))


@dataclass(frozen=True)
class RemapConfig:
    """A pattern with all parameters bound: what a proposal carries and the helper emits."""

    pattern: Pattern
    values: tuple[tuple[str, int | str], ...]

    @property
    def params(self) -> dict[str, int | str]:
        return dict(self.values)

    def options(self) -> dict[str, str]:
        """The swizzle pass's options that select this configuration (`pattern` and
        each parameter, as `--pattern`/`--param` give them)."""
        return {"pattern": self.pattern.name, **{k: str(v) for k, v in self.values}}

    def label(self) -> str:
        inner = ",".join(f"{k}={v}" for k, v in self.values)
        return f"{self.pattern.name}({inner})" if inner else self.pattern.name

    def helper_name(self) -> str:
        suffix = "_".join(f"{k}{v}" for k, v in self.values)
        base = f"kxform_swizzle_{self.pattern.name.replace('-', '_')}"
        return f"{base}_{suffix}" if suffix else base

    def apply(self, bx: int, by: int, gx: int, gy: int) -> tuple[int, int]:
        return self.pattern.reference(bx, by, gx, gy, self.params)

    def stages(self) -> tuple[str, ...]:
        """The remap in the formula language, stage by stage (empty: the pattern has none)."""
        return self.pattern.formula(self.params) if self.pattern.formula is not None else ()

    def helper_source(self, newline: str = "\n") -> str:
        """The complete `__device__` helper definition, ending with a newline."""
        body = self.pattern.c_body(self.params).strip("\n")
        lines = [
            f"/* kxform swizzle {self.label()}: logical block (x, y) for physical block (bx, by).",
            "   A bijection on every gx x gy grid with gx*gy < 2^32 (checked by kxform). */",
            f"static __device__ __forceinline__ uint2 {self.helper_name()}(",
            "    const unsigned bx, const unsigned by, const unsigned gx, const unsigned gy)",
            "{",
            *("    " + line if line else "" for line in body.split("\n")),
            "}",
        ]
        return newline.join(lines) + newline


# --- shared pieces -------------------------------------------------------------------------


def _pow2_floor(value: int) -> int:
    return 1 << (value.bit_length() - 1)


def _square_remainder(pid: int, n: int, gx: int) -> tuple[int, int]:
    """Row-major position of the pid-th cell outside the n x n square in the corner."""
    rest = pid - n * n
    right = gx - n
    if rest < n * right:
        return n + rest % right, rest // right
    rest -= n * right
    return rest % gx, n + rest // gx


_PID = "const unsigned pid = by * gx + bx;"

_SQUARE_C = """\
const unsigned side = gx < gy ? gx : gy;
const unsigned n = 1u << (31 - __clz(side));  /* largest power of two <= min(gx, gy) */
if (pid >= n * n) {  /* outside the square: row-major over what is left */
    unsigned rest = pid - n * n;
    const unsigned right = gx - n;
    if (rest < n * right)
        return make_uint2(n + rest % right, rest / right);
    rest -= n * right;
    return make_uint2(rest % gx, n + rest / gx);
}"""


def _xcd_ref(pid: int, total: int, xcds: int) -> int:
    per = -(-total // xcds)
    tall = total % xcds or xcds
    xcd, local = pid % xcds, pid // xcds
    return xcd * per + local if xcd < tall else tall * per + (xcd - tall) * (per - 1) + local


_XCD_C = """\
const unsigned total = gx * gy;
const unsigned per = total / {x}u + (total % {x}u != 0u);  /* blocks per XCD, rounded up */
const unsigned tall = total % {x}u == 0u ? {x}u : total % {x}u;  /* XCDs that get `per` blocks */
const unsigned xcd = pid % {x}u, local = pid / {x}u;
const unsigned id = xcd < tall ? xcd * per + local : tall * per + (xcd - tall) * (per - 1u) + local;"""


def _grouped_ref(pid: int, gx: int, gy: int, group: int, along: str) -> tuple[int, int]:
    rows, cols = (gy, gx) if along == "y" else (gx, gy)
    per = group * cols
    first = (pid // per) * group
    size = min(rows - first, group)
    inner = pid % per
    major, minor = first + inner % size, inner // size
    return (minor, major) if along == "y" else (major, minor)


def _grouped_c(pid: str, group: int, along: str) -> str:
    rows, cols = ("gy", "gx") if along == "y" else ("gx", "gy")
    result = (
        "make_uint2(in_group / size, first + in_group % size)"
        if along == "y"
        else "make_uint2(first + in_group % size, in_group / size)"
    )
    return f"""\
/* blocks in one group of {group} {"rows" if along == "y" else "columns"} (a group past 2^32 - 1 holds every block) */
const unsigned per_group = {cols} <= 0xffffffffu / {group}u ? {group}u * {cols} : 0xffffffffu;
const unsigned first = ({pid} / per_group) * {group}u;
const unsigned size = {rows} - first < {group}u ? {rows} - first : {group}u;  /* last group may be short */
const unsigned in_group = {pid} % per_group;
return {result};"""


# --- the patterns ------------------------------------------------------------------------


def _row_ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
    return bx, by


def _column_ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
    pid = by * gx + bx
    return pid // gy, pid % gy


def _grouped_pattern_ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
    return _grouped_ref(by * gx + bx, gx, gy, int(p["group"]), str(p["along"]))


def _diagonal_ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
    pid = by * gx + bx
    ly = pid % gy
    return (pid // gy + ly) % gx, ly


def _hilbert_d2xy(n: int, d: int) -> tuple[int, int]:
    x = y = 0
    s = 1
    while s < n:
        rx = 1 & (d // 2)
        ry = 1 & (d ^ rx)
        if ry == 0:
            if rx == 1:
                x, y = s - 1 - x, s - 1 - y
            x, y = y, x
        x += s * rx
        y += s * ry
        d //= 4
        s *= 2
    return x, y


def _morton_d2xy(d: int) -> tuple[int, int]:
    x = y = 0
    bit = 0
    while d >> (2 * bit):
        x |= ((d >> (2 * bit)) & 1) << bit
        y |= ((d >> (2 * bit + 1)) & 1) << bit
        bit += 1
    return x, y


def _curve_ref(curve: Callable[[int, int], tuple[int, int]]) -> Callable[..., tuple[int, int]]:
    def ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
        pid = by * gx + bx
        n = _pow2_floor(min(gx, gy))
        if pid >= n * n:
            return _square_remainder(pid, n, gx)
        return curve(n, pid)

    return ref


def _xcd_pattern_ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
    new = _xcd_ref(by * gx + bx, gx * gy, int(p["xcds"]))
    return new % gx, new // gx


def _xcd_grouped_ref(bx: int, by: int, gx: int, gy: int, p: Params) -> tuple[int, int]:
    new = _xcd_ref(by * gx + bx, gx * gy, int(p["xcds"]))
    return _grouped_ref(new, gx, gy, int(p["group"]), str(p["along"]))


_HILBERT_C = """\
unsigned x = 0, y = 0, d = pid;
for (unsigned s = 1; s < n; s *= 2u) {
    const unsigned rx = 1u & (d / 2u);
    const unsigned ry = 1u & (d ^ rx);
    if (ry == 0u) {
        if (rx == 1u) { x = s - 1u - x; y = s - 1u - y; }
        const unsigned t = x; x = y; y = t;
    }
    x += s * rx;
    y += s * ry;
    d /= 4u;
}
return make_uint2(x, y);"""

_MORTON_C = """\
unsigned x = 0, y = 0;
for (unsigned bit = 0; (pid >> (2u * bit)) != 0u; ++bit) {
    x |= ((pid >> (2u * bit)) & 1u) << bit;
    y |= ((pid >> (2u * bit + 1u)) & 1u) << bit;
}
return make_uint2(x, y);"""


def _grouped_formula(group: int, along: str) -> str:
    rows, cols = ("gy", "gx") if along == "y" else ("gx", "gy")
    lx, ly = ("inner / size", "first + inner % size") if along == "y" else ("first + inner % size", "inner / size")
    return (
        f"span = {cols} <= 4294967295 / {group} ? {group} * {cols} : 4294967295\n"
        f"first = (pid / span) * {group}\nsize = min({rows} - first, {group})\ninner = pid % span\n"
        f"lx = {lx}\nly = {ly}"
    )


def _xcd_formula(x: int) -> str:
    return (
        f"per = total / {x} + (total % {x} != 0)\ntall = total % {x} == 0 ? {x} : total % {x}\n"
        f"chip = pid % {x}\nlocal = pid / {x}\n"
        "id = chip < tall ? chip * per + local : tall * per + (chip - tall) * (per - 1) + local\n"
        "lx = id % gx\nly = id / gx"
    )


GROUP = ParamSpec("group", 8, minimum=1, maximum=64)
ALONG = ParamSpec("along", "y", choices=("y", "x"))
XCDS = ParamSpec("xcds", 8, minimum=1, maximum=64)

PATTERNS: dict[str, Pattern] = {
    p.name: p
    for p in (
        Pattern(
            "row",
            "row raster: the hardware order (identity)",
            (),
            (1, 2),
            _row_ref,
            lambda p: "return make_uint2(bx, by);",
            lambda p: ("lx = bx\nly = by",),
        ),
        Pattern(
            "column",
            "column raster: consecutive blocks walk down a column",
            (),
            (2,),
            _column_ref,
            lambda p: f"{_PID}\nreturn make_uint2(pid / gy, pid % gy);",
            lambda p: ("lx = pid / gy\nly = pid % gy",),
        ),
        Pattern(
            "grouped",
            "grouped raster: `group` rows (or columns) at a time (Triton GROUP_M)",
            (GROUP, ALONG),
            (2,),
            _grouped_pattern_ref,
            lambda p: f"{_PID}\n{_grouped_c('pid', int(p['group']), str(p['along']))}",
            lambda p: (_grouped_formula(int(p["group"]), str(p["along"])),),
        ),
        Pattern(
            "diagonal",
            "diagonal: consecutive blocks on a wrapped diagonal (partition camping)",
            (),
            (2,),
            _diagonal_ref,
            lambda p: f"{_PID}\nconst unsigned ly = pid % gy;\nreturn make_uint2((pid / gy + ly) % gx, ly);",
            # as two stages that compose to the same map: the column raster, then a cyclic
            # shift of each column's tiles by its row, written without a modulo of a sum
            # ((bx + by) % gx as bx + (by % gx), less gx where it reaches gx): each stage is
            # proven in a fraction of a second by every z3 release; the one-stage formula,
            # and z3 4.15 on `(bx + by) % gx`, run past the solver's limit
            lambda p: ("lx = pid / gy\nly = pid % gy", "s = bx + by % gx\nlx = select(s >= gx, s - gx, s)\nly = by"),
        ),
        Pattern(
            "hilbert",
            "Hilbert curve over the largest power-of-two square, remainder row-major",
            (),
            (2,),
            _curve_ref(_hilbert_d2xy),
            lambda p: f"{_PID}\n{_SQUARE_C}\n{_HILBERT_C}",
        ),
        Pattern(
            "morton",
            "Morton (Z-order) over the largest power-of-two square, remainder row-major",
            (),
            (2,),
            _curve_ref(lambda n, d: _morton_d2xy(d)),
            lambda p: f"{_PID}\n{_SQUARE_C}\n{_MORTON_C}",
        ),
        Pattern(
            "xcd",
            "XCD-aware: blocks dispatched to one chiplet (pid % xcds) get contiguous tiles",
            (XCDS,),
            (1, 2),
            _xcd_pattern_ref,
            lambda p: f"{_PID}\n{_XCD_C.format(x=p['xcds'])}\nreturn make_uint2(id % gx, id / gx);",
            lambda p: (_xcd_formula(int(p["xcds"])),),
        ),
        Pattern(
            "xcd-grouped",
            "XCD-aware, then grouped raster within the chiplet order",
            (XCDS, GROUP, ALONG),
            (2,),
            _xcd_grouped_ref,
            lambda p: f"{_PID}\n{_XCD_C.format(x=p['xcds'])}\n{_grouped_c('id', int(p['group']), str(p['along']))}",
            lambda p: (_xcd_formula(int(p["xcds"])), _grouped_formula(int(p["group"]), str(p["along"]))),
        ),
    )
}


def get_pattern(name: str) -> Pattern:
    try:
        return PATTERNS[name]
    except KeyError:
        raise UsageError(f"unknown swizzle pattern {name!r} (patterns: {', '.join(PATTERNS)})") from None
