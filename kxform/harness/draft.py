"""The text of a drafted harness spec: what `kxform harness infer` found about a kernel
(`DraftPlan`), written out as TOML with a note on every line a person should review and
a `fill in` on every line it could not settle; and what a measuring run adds to it.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from kxform.frontend.model import Function
from kxform.frontend.source import SourceText
from kxform.harness.computes import compare_line, what_it_computes
from kxform.harness.dtypes import CTYPE_DTYPES, base_ctype
from kxform.harness.probe import FACTORS, MAX_DEGREE, ProbeResult
from kxform.harness.roles import Access

MAX_PROBE_ELEMENTS = 1 << 24
FLOAT_SCALAR = "0.75"
"""A float scalar's drafted value: neither 0 nor 1 (a weight of 1 or a decay of 0 would
leave an input unchanged and the comparison could not fail)."""
MIN_PROBE_ELEMENTS = 1 << 16
"""The least every buffer of the measuring run is over-allocated to."""
MAX_CUBE_ELEMENTS = 1 << 24
"""The most a buffer of a measuring run over-allocated to the cube of a size is."""


@dataclass
class DraftPlan:
    """Everything the draft says, before it is written out."""

    spelling: str
    source: SourceText
    kernel: Function
    size_vars: list[str]
    grid: list[str]
    block: list[str]
    shared: str
    launch_note: str
    roles: dict[str, Access]
    launch_todos: dict[str, str] = field(default_factory=dict)
    sizes: dict[str, list[int]] = field(default_factory=dict)
    """Values of the size variables at each drafted size (`ragged`, `tiles`)."""
    counts: dict[str, str] = field(default_factory=dict)
    count_notes: dict[str, str] = field(default_factory=dict)
    role_notes: dict[str, str] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    """Type names spelled through a macro or typedef (`DATA_TYPE` -> `float`)."""
    multiples: dict[str, int] = field(default_factory=dict)
    """Size variables the launcher requires to be a multiple of a constant (their values are)."""
    zeroed: dict[str, str] = field(default_factory=dict)
    """Buffers that start at zero (flags, counters), with why: a `volatile` pointer, or one
    the launching function clears (`cudaMemset(d_flags, 0, ...)`) before the launch."""
    cube: bool = False
    """Over-allocate the measuring run to the cube of the largest size variable: at the
    product of the variables the kernel read past a buffer (`in[z * n * n + ...]`)."""
    positive_fill: bool = False
    """Float inputs drawn from [0.5, 1.5]: from [-1, 1] the outputs were NaN or Inf."""
    affine_buffers: frozenset[str] = frozenset()
    """Buffers every access of the kernel indexes by an affine form (no index read from
    memory): the same extent at every size is then a constant of the kernel."""
    guessed: str = ""
    """Why the sizes are kxform's starting guesses, not values the measuring run confirmed
    (its failure): said at the top of the draft and on every size line."""

    @property
    def probe_product(self) -> str:
        """What the measuring run over-allocates a buffer to: the product of the size
        variables, or where that is too large (many integer parameters: scores, offsets,
        a diagonal) the largest count a probe can name, a factor times the product of the
        three variables with the largest values."""
        if not self.size_vars:
            return "65536"
        tiles = dict(zip(self.size_vars, self.sizes.get("tiles", ())))
        if math.prod(tiles.values()) <= MAX_PROBE_ELEMENTS:
            return " * ".join(self.size_vars)
        top = sorted(self.size_vars, key=lambda v: -tiles.get(v, 0))[:MAX_DEGREE]
        return " * ".join((str(max(FACTORS)), *top))

    @property
    def unused(self) -> frozenset[str]:
        """Parameters the kernel's body never names."""
        body = self.source.data[self.kernel.body.start : self.kernel.body.end].decode("utf-8", "replace")
        named = set(re.findall(r"[A-Za-z_]\w*", body))
        return frozenset(p.name for p in self.kernel.params if p.name not in named)

    @property
    def int_high(self) -> int:
        """The top of integer fills: below every size variable's value at every drafted size,
        so a value used as an index (`x[targets[b]]` into a row of V) stays inside a
        dimension, and a table indexed by it (`wte[token * C + c]`) spans `int_high + 1`
        rows."""
        values = [v for size in self.sizes.values() for v in size]
        return min(values) - 1 if values else 100


def _is_const(ctype: str) -> bool:
    return ctype.lstrip().startswith("const") or " const" in ctype.split("*")[0]


def _role(plan: DraftPlan, param_name: str, ctype: str) -> str:
    if param_name in plan.role_notes:
        return "inout"
    return plan.roles.get(param_name, Access(opaque=True)).role(_is_const(ctype))


def _fill(dtype: str, positive: bool, int_high: int) -> str:
    if dtype.startswith(("float", "bfloat")) and positive:
        return (
            '{ dist = "uniform", low = 0.5, high = 1.5 }  # review: positive, the outputs were NaN or Inf '
            "with inputs in [-1, 1]"
        )
    if dtype.startswith(("float", "bfloat")):
        return '{ dist = "uniform", low = -1.0, high = 1.0 }'
    return f'{{ dist = "int", low = 0, high = {int_high} }}'


def _over_allocated(plan: DraftPlan, product: str) -> str:
    """The measuring run's element count: the product of the size variables, or with
    `plan.cube` (a first run read past it) room for any count a probe can name: a factor
    times a product of three of the largest variable, within MAX_CUBE_ELEMENTS."""
    if not plan.cube or not plan.size_vars:
        return f"max({product}, {MIN_PROBE_ELEMENTS})"
    largest = f"max({', '.join(plan.size_vars)})" if len(plan.size_vars) > 1 else plan.size_vars[0]
    return f"max({product}, min({max(FACTORS)} * {largest} ** 3, {MAX_CUBE_ELEMENTS}), {MIN_PROBE_ELEMENTS})"


def render(plan: DraftPlan, over_allocate: bool, spec_dir: str | None = None) -> tuple[str, list[str]]:
    """The draft's text and the list of lines to fill in ("line N: why")."""
    lines: list[str] = []
    todos: list[str] = []

    def add(text: str, todo: str = "") -> None:
        lines.append(text + (f"  # fill in: {todo}" if todo else ""))
        if todo:
            todos.append(f"line {len(lines)}: {todo}")

    spelling = plan.spelling
    add(
        f"# DRAFT written by `kxform harness infer` from {plan.source.path}: review every line marked 'review'"
        " and fill in every line marked 'fill in'."
    )
    if plan.guessed:
        add(f"# WARNING: {plan.guessed}")
    add("version = 1")
    where = (
        plan.source.path.rsplit("/", 1)[-1]
        if spec_dir is None
        else os.path.relpath(os.path.abspath(plan.source.path), os.path.abspath(spec_dir)).replace(os.sep, "/")
    )
    add(f'file = "{where}"')
    add("")
    add(f'[kernel."{spelling}"]')
    add(f'description = "{spelling} (drafted; describe it)"')
    add("seed = 0")
    todos_of = plan.launch_todos
    add(
        f"grid = {_toml_list(plan.grid)}"
        + (f"  # {plan.launch_note}" if plan.launch_note and "grid" not in todos_of else ""),
        todos_of.get("grid", ""),
    )
    add(f"block = {_toml_list(plan.block)}", todos_of.get("block", ""))
    add(f'shared_bytes = "{plan.shared}"', todos_of.get("shared_bytes", ""))
    add(_compare(plan))
    add("")
    product = " * ".join(plan.size_vars) if plan.size_vars else "65536"
    for param in plan.kernel.params:
        base = base_ctype(param.ctype)
        dtype = CTYPE_DTYPES.get(plan.types.get(base, base))
        add(f'[[kernel."{spelling}".args]]')
        add(f'name = "{param.name}"')
        if "*" in param.ctype or "[" in param.ctype:
            add('kind = "buffer"')
            add(
                f'dtype = "{dtype or "float32"}"',
                "" if dtype else f"element type {base_ctype(param.ctype)!r} has no spec dtype",
            )
            if over_allocate:  # room for data-dependent indices too (an index buffer's values)
                add(f'count = "{_over_allocated(plan, plan.probe_product)}"')
            elif param.name in plan.counts and plan.count_notes[param.name].startswith("extent"):
                add(f'count = "{plan.counts[param.name]}"  # measured: {plan.count_notes[param.name]}')
            elif param.name in plan.counts:
                add(f'count = "{plan.counts[param.name]}"  # review: {plan.count_notes[param.name]}')
            else:
                add(f'count = "{product}"', plan.count_notes.get(param.name, "element count"))
            role = _role(plan, param.name, param.ctype)
            note = plan.role_notes.get(param.name, "from the kernel body")
            add(f'role = "{role}"  # {note}')
            if role != "out":
                add(
                    f'fill = {{ dist = "const", value = 0 }}  # review: {plan.zeroed[param.name]}'
                    if param.name in plan.zeroed
                    else f"fill = {_fill(dtype or 'float32', plan.positive_fill, plan.int_high)}"
                )
        else:
            add('kind = "scalar"')
            add(f'dtype = "{dtype or "int32"}"', "" if dtype else f"scalar type {base!r} has no spec dtype")
            add(
                f'value = "{param.name}"'
                if param.name in plan.size_vars
                else f'value = "{FLOAT_SCALAR}"  # review'
                if (dtype or "").startswith(("float", "bfloat"))
                else 'value = "1"  # review'
            )
        add("")
    for size, values in plan.sizes.items():
        add(f'[[kernel."{spelling}".sizes]]')
        add(f'name = "{size}"')
        caller_blocks = set(re.findall(r"[A-Za-z_]\w*", " ".join(plan.block)))
        for var, value in zip(plan.size_vars, values):
            step = plan.multiples.get(var)
            note = (
                f": a multiple of {step}, as the launcher requires"
                if step
                else ": the block size the launcher takes from its caller"
                if var in caller_blocks
                else ""
            )
            add(f"{var} = {value}  # " + ("guessed: the measuring run failed" if plan.guessed else "review") + note)
        add("")
    return "\n".join(lines), todos


def _compare(plan: DraftPlan) -> str:
    """The comparison from what the kernel computes (kxform.harness.computes)."""
    body = plan.source.data[plan.kernel.body.start : plan.kernel.body.end].decode("utf-8", "replace")
    computes = what_it_computes(body, plan.source.line_col(plan.kernel.body.start)[0])
    outputs = [
        p for p in plan.kernel.params if ("*" in p.ctype or "[" in p.ctype) and _role(plan, p.name, p.ctype) != "in"
    ]
    dtypes = [CTYPE_DTYPES.get(plan.types.get(base_ctype(p.ctype), base_ctype(p.ctype))) or "float32" for p in outputs]
    integer = bool(dtypes) and not any(d.startswith(("float", "bfloat")) for d in dtypes)
    return compare_line(computes, integer)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def apply_probe(plan: DraftPlan, result: ProbeResult) -> None:
    for name, extents in result.extents.items():
        rows, reach = f"{plan.int_high + 1} * ", str(plan.int_high + 1)
        ctype = next((p.ctype for p in plan.kernel.params if p.name == name), "")
        if (
            name in result.counts
            and plan.size_vars
            and result.counts[name].isdigit()
            and name not in plan.affine_buffers
            and int(result.counts[name]) <= plan.int_high + 1
            and _role(plan, name, ctype) != "out"
        ):  # reached through values read from memory: they stop at the fill's top
            plan.counts[name] = reach
            plan.count_notes[name] = (
                f"extent touched at sizes ragged, tiles: {', '.join(map(str, extents))} "
                f"(indices or bounds read from memory reach at most {reach}: integer inputs "
                f"are filled 0..{plan.int_high})"
            )
        elif (
            name in result.counts
            and plan.size_vars
            and result.counts[name].isdigit()
            and name not in plan.affine_buffers
        ):
            plan.count_notes[name] = (
                f"the same extent ({result.counts[name]}) at both sizes: a constant, or one "
                "the data sets (indices read from another buffer)"
            )
        elif name in result.counts:
            plan.counts[name] = result.counts[name]
            plan.count_notes[name] = f"extent touched at sizes ragged, tiles: {', '.join(map(str, extents))}"
            if name in result.partial:
                plan.count_notes[name] += ", its last row read in part"
            elif result.counts[name].isdigit() and plan.size_vars:
                plan.count_notes[name] += " (every index of it is affine: a constant of the kernel)"
            elif result.counts[name].startswith(rows) and plan.int_high + 1 not in FACTORS:
                plan.count_notes[name] += (
                    f" ({plan.int_high + 1} rows: its row index is read from memory, and "
                    f"integer inputs are filled 0..{plan.int_high})"
                )
        elif not any(extents) and name in plan.unused:
            plan.counts[name] = "1"
            plan.count_notes[name] = "the kernel never names this parameter"
        elif not any(extents):
            plan.count_notes[name] = "the kernel did not touch this buffer at the drafted sizes"
        else:
            plan.count_notes[name] = (
                f"extents touched ({', '.join(map(str, extents))} elements) match no product of the size variables"
            )
    for name, read in result.unwritten_reads.items():
        plan.role_notes[name] = f"measured: {read.describe().split(';')[0]}"
