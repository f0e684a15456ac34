"""Validation of one `[kernel.<name>]` table into a `KernelSpec`.

Split from `spec.py` (file-level concerns) so each module stays small. Every check
raises through `Table.fail`, so messages read `kernel 'k' arg 'A': ...` and carry the
line of the offending key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

from kxform.errors import SpecError
from kxform.harness.dtypes import DTYPE_NAMES
from kxform.expr import FUNCTIONS, Expr
from kxform.harness.fields import Table
from kxform.harness.fills import CsrFill, FillSpec, parse_fill
from kxform.harness.locate import KeyPath
from kxform.harness.model import (
    ARG_KINDS,
    Placement,
    COMPARE_MODES,
    ROLES,
    ArgSpec,
    CompareSpec,
    CsrGroup,
    KernelSpec,
    Role,
    SizeSpec,
)

KERNEL_KEYS = (
    "description",
    "seed",
    "grid",
    "block",
    "shared_bytes",
    "compare",
    "reference",
    "args",
    "sizes",
)
SCALAR_KEYS = ("name", "kind", "dtype", "value")
BUFFER_KEYS = ("name", "kind", "dtype", "role", "count", "shape", "fill", "compare")
COMPARE_KEYS = {"exact": ("mode",), "ulp": ("mode", "ulps"), "allclose": ("mode", "rtol", "atol")}

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
KERNEL_NAME = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*(\s*<.*>)?\Z")
REFERENCE = re.compile(r"(?P<module>[^:]+\.py):(?P<function>[A-Za-z_]\w*)\Z")


def parse_kernel(name: str, table: Table, spec_dir: Path) -> KernelSpec:
    """Validate `[kernel.<name>]` and resolve every size once (so size errors are load errors)."""
    table.check_keys(KERNEL_KEYS)
    if not KERNEL_NAME.match(name):
        table.fail(None, "not a kernel name (expected `name` or `name<template args>`)")
    args = _parse_args(table, spec_dir)
    kernel = KernelSpec(
        name=name,
        description=table.string("description", "") or "",
        seed=table.integer("seed", 0, minimum=0),
        grid=table.expr_list("grid", 1, 3),
        block=table.expr_list("block", 1, 3),
        shared_bytes=table.expr("shared_bytes", "0"),
        compare=parse_compare(table.table("compare", table.label)) or CompareSpec(),
        args=args,
        sizes=_parse_sizes(table),
        reference=_parse_reference(table, spec_dir),
        csr_groups=_csr_groups(table, args),
        spec_dir=spec_dir,
        location=table.location(),
    )
    for size in kernel.sizes:
        _check_layout(table, kernel, size)
        kernel.launch(size)
    return kernel


def _check_layout(table: Table, kernel: KernelSpec, size: SizeSpec) -> None:
    """A layout places buffers of the kernel, inside buffers that are not placed inside
    another (one level), at offsets whole elements of both allow."""
    buffers = {a.name: a for a in kernel.args if a.kind == "buffer"}
    placed = dict(size.layout)
    for name, place in size.layout:
        where = f"size '{size.name}' layout of '{name}'"
        if name not in buffers:
            table.fail("sizes", f"{where}: no buffer argument '{name}'")
        if place.within:
            if place.within not in buffers or place.within == name:
                table.fail("sizes", f"{where}: 'within' must name another buffer argument, not '{place.within}'")
            if placed.get(place.within, Placement()).within:
                table.fail("sizes", f"{where}: '{place.within}' lies within another buffer itself")


def parse_compare(table: Table | None) -> CompareSpec | None:
    """A `compare = {mode = ...}` table; None when absent."""
    if table is None:
        return None
    mode = table.choice("mode", COMPARE_MODES)
    table.check_keys(COMPARE_KEYS[mode])
    if mode == "ulp":
        return CompareSpec("ulp", ulps=table.integer("ulps", minimum=0))
    if mode == "allclose":
        rtol, atol = table.number("rtol", 1e-5), table.number("atol", 1e-8)
        for key, value in (("rtol", rtol), ("atol", atol)):
            if value < 0:
                table.fail(key, f"'{key}' must be >= 0, got {value}")
        return CompareSpec("allclose", rtol=rtol, atol=atol)
    return CompareSpec("exact")


def _entry(table: Table, path: KeyPath, data: Mapping[str, object], what: str, index: int) -> Table:
    """A table for one entry of an array of tables, labelled by its name when it has one."""
    name = data.get("name")
    tag = f"'{name}'" if isinstance(name, str) else f"#{index + 1}"
    return Table(data, path, f"{table.label} {what} {tag}", table.source)


def _parse_args(table: Table, spec_dir: Path) -> tuple[ArgSpec, ...]:
    entries = table.table_array("args")
    if not entries:
        table.fail(None, "no [[args]] entries (list every kernel parameter in order)")
    args: list[ArgSpec] = []
    for index, (path, data) in enumerate(entries):
        entry = _entry(table, path, data, "arg", index)
        arg = _parse_arg(entry, spec_dir)
        if any(a.name == arg.name for a in args):
            entry.fail("name", f"duplicate arg name '{arg.name}'")
        args.append(arg)
    if not any(a.is_output for a in args):
        table.fail("args", "no out or inout buffer: nothing to verify")
    return tuple(args)


def _parse_arg(entry: Table, spec_dir: Path) -> ArgSpec:
    name = entry.required_string("name")
    if not IDENTIFIER.match(name):
        entry.fail("name", f"arg name '{name}' is not an identifier")
    kind = entry.choice("kind", ARG_KINDS)
    dtype = entry.choice("dtype", DTYPE_NAMES)
    if kind == "scalar":
        entry.check_keys(SCALAR_KEYS)
        return ArgSpec(name, "scalar", dtype, value=entry.expr("value"), location=entry.location())
    entry.check_keys(BUFFER_KEYS)
    role: Role = entry.choice("role", ROLES)  # type: ignore[assignment]  # checked against ROLES
    fill = _parse_buffer_fill(entry, role, dtype, spec_dir)
    count = entry.expr("count") if entry.has("count") else None
    shape = entry.expr_list("shape", 1, 8) if entry.has("shape") else None
    if count is not None and shape is not None:
        entry.fail("shape", "give 'count' or 'shape', not both")
    if count is None and shape is None and not isinstance(fill, CsrFill):
        entry.fail(None, "missing 'count' (or 'shape')")
    compare = parse_compare(entry.table("compare", entry.label))
    if compare is not None and role == "in":
        entry.fail("compare", "'compare' applies to out and inout buffers only")
    return ArgSpec(name, "buffer", dtype, role, count, shape, None, fill, compare, entry.location())


def _parse_buffer_fill(entry: Table, role: str, dtype: str, spec_dir: Path) -> FillSpec | None:
    fill_table = entry.table("fill", entry.label)
    if role == "out":
        if fill_table is not None:
            entry.fail(
                "fill",
                "an out buffer is poisoned before launch and takes no fill "
                '(use role = "inout" to give it initial data)',
            )
        return None
    if fill_table is None:
        entry.fail(None, f"missing 'fill' (role '{role}' needs initial data)")
    return parse_fill(fill_table, dtype, spec_dir)


def _parse_sizes(table: Table) -> tuple[SizeSpec, ...]:
    entries = table.table_array("sizes")
    if not entries:
        table.fail(None, "no [[sizes]] entries")
    sizes: list[SizeSpec] = []
    for index, (path, data) in enumerate(entries):
        entry = _entry(table, path, data, "size", index)
        size = _parse_size(entry)
        if any(s.name == size.name for s in sizes):
            entry.fail("name", f"duplicate size name '{size.name}'")
        sizes.append(size)
    if all(s.bench for s in sizes):
        table.fail("sizes", "every size is bench = true: add one for correctness checks")
    return tuple(sizes)


def _parse_size(entry: Table) -> SizeSpec:
    name = entry.required_string("name")
    bench = entry.boolean("bench", False)
    values: dict[str, int] = {}
    for key in entry.data:
        if key in ("name", "bench", "layout"):
            continue
        if not IDENTIFIER.match(key) or key in FUNCTIONS:
            entry.fail(key, f"'{key}' cannot be a size variable (needs an identifier, not a function name)")
        values[key] = entry.integer(key)
    return SizeSpec(name, bench, values, entry.location(), _parse_layout(entry))


def _parse_layout(entry: Table) -> tuple[tuple[str, Placement], ...]:
    """`layout = { x = { within = "y", offset = -1 }, w = { offset = 1 } }` (docs/harness-spec.md)."""
    table = entry.table("layout", entry.label)
    if table is None:
        return ()
    out = []
    for name in table.data:
        place = table.table(name, f"{entry.label} layout of '{name}'")
        assert place is not None
        place.check_keys(("within", "offset"))
        within = place.string("within", "") or ""
        offset = place.integer("offset", 0)
        if not within and offset < 0:
            place.fail("offset", "a buffer in an allocation of its own starts at offset >= 0 of it")
        out.append((name, Placement(offset, within)))
    return tuple(out)


def _parse_reference(table: Table, spec_dir: Path) -> str | None:
    text = table.string("reference", None)
    if text is None:
        return None
    match = REFERENCE.match(text)
    if not match:
        table.fail("reference", f"reference '{text}' must look like 'module.py:function'")
    module = (spec_dir / match["module"]).resolve()
    if not module.is_relative_to(spec_dir.resolve()):
        table.fail(
            "reference",
            f"reference module '{match['module']}' is outside the spec's directory (a spec "
            "runs only code beside it or below)",
        )
    if not module.is_file():
        table.fail("reference", f"reference module '{match['module']}' not found next to the spec")
    return text


def _csr_groups(table: Table, args: tuple[ArgSpec, ...]) -> dict[str, CsrGroup]:
    """Gather each CSR group's parts and dimensions, checking they are complete and agree."""
    parts: dict[str, dict[str, ArgSpec]] = {}
    for arg in args:
        if isinstance(arg.fill, CsrFill):
            group = parts.setdefault(arg.fill.group, {})
            if arg.fill.part in group:
                _fail_at(table, arg, f"csr group '{arg.fill.group}' has two {arg.fill.part} parts")
            group[arg.fill.part] = arg
    return {name: _csr_group(table, name, members) for name, members in parts.items()}


def _csr_group(table: Table, name: str, members: dict[str, ArgSpec]) -> CsrGroup:
    first = next(iter(members.values()))
    for needed in ("row_ptr", "col_idx"):
        if needed not in members:
            _fail_at(table, first, f"csr group '{name}' has no {needed} part")
    dims: dict[str, Expr] = {}
    for arg in members.values():
        assert isinstance(arg.fill, CsrFill)
        for key in ("rows", "cols", "nnz_per_row"):
            expr: Expr | None = getattr(arg.fill, key)
            if expr is None:
                continue
            if key in dims and dims[key].text != expr.text:
                _fail_at(table, arg, f"csr group '{name}' {key} '{expr}' disagrees with '{dims[key]}'")
            dims.setdefault(key, expr)
    for key in ("rows", "cols", "nnz_per_row"):
        if key not in dims:
            _fail_at(table, first, f"csr group '{name}' gives no '{key}' on any part")
    return CsrGroup(name, dims["rows"], dims["cols"], dims["nnz_per_row"])


def _fail_at(table: Table, arg: ArgSpec, message: str) -> NoReturn:
    raise SpecError(f"{table.label} arg '{arg.name}': {message}", arg.location)
