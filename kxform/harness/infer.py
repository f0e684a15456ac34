"""`kxform harness infer`: draft a harness spec from a file's own kernel and launch site.

What the file says is used where it can be read: the kernel's parameters (pointers become
buffers, integer scalars size variables), the launch configuration (`dim3 grid(...)`
declarations and `<<<...>>>` arguments, numeric `#define`s substituted), and each
buffer's role from the kernel body (`kxform.harness.roles`: read only -> in, written only
-> out, both -> inout). Element counts are measured: the CPU runtime runs the kernel at
the draft's sizes and reports the extent each buffer spans, and reads of `out` buffers
before any write turn them `inout` (`kxform.harness.probe`). Where the file cannot say
(a grid computed in host code, a size hidden in a macro that is not a number, a probe
that cannot run), the draft says exactly which line to fill in; the result always says
it is a draft in its first line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from kxform.build.extract import find_kernel, split_spelling
from kxform.errors import SpecError
from kxform.expr import parse_expr
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import Function, LaunchSite, SourceModel
from kxform.frontend.source import SourceText
from kxform.harness.dtypes import CTYPE_DTYPES, base_ctype
from kxform.harness.probe import ProbeResult, probe
from kxform.harness.roles import Access, draft_roles
from kxform.runtime.base import Runtime

INT_CTYPES = ("int", "unsigned", "unsigned int", "int64_t", "size_t", "long long", "int32_t", "uint32_t",
              "long", "unsigned long", "unsigned long long", "uint64_t")
RAGGED = (70, 45, 33, 37, 29, 23, 19, 17)
TILES = (64, 48, 32, 80, 96, 112, 16, 128)
"""Values of the size variables (in parameter order) at the two drafted sizes: one that
divides no tile and one of tile multiples; all distinct, so counts can be told apart."""
MAX_PROBE_ELEMENTS = 1 << 24
MIN_PROBE_ELEMENTS = 1 << 16


@dataclass(frozen=True)
class Draft:
    """A drafted spec and the lines a person must still fill in ("line N: why")."""

    text: str
    todos: tuple[str, ...] = ()
    probe: ProbeResult | None = field(default=None, compare=False)


@dataclass
class _Plan:
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
    counts: dict[str, str] = field(default_factory=dict)
    count_notes: dict[str, str] = field(default_factory=dict)
    role_notes: dict[str, str] = field(default_factory=dict)


def _numeric_macros(model: SourceModel) -> dict[str, str]:
    """Object-like macros whose value is an integer expression kxform can evaluate."""
    out: dict[str, str] = {}
    for macro in model.macros:
        if macro.is_function_like:
            continue
        text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", macro.body.strip())
        try:
            value = parse_expr(text.replace("<<", "*2**") if "<<" in text else text).evaluate({})
        except SpecError:
            continue
        if isinstance(value, int):
            out[macro.name] = str(value)
    return out


def _to_expr(text: str, macros: dict[str, str]) -> str:
    text = re.sub(r"\b(\d+)[uUlL]+\b", r"\1", text)
    text = re.sub(r"\(\s*(?:unsigned|int|size_t|long|unsigned int)\s*\)", "", text)
    for name, value in macros.items():
        text = re.sub(rf"\b{re.escape(name)}\b", value, text)
    return " ".join(text.split())


def _dims(text: str, host_body: str, resolve: dict[str, str]) -> list[str]:
    """`dim3(a, b)` / `a` / a variable declared `dim3 v(a, b)` or `dim3 v = dim3(a, b)`."""
    text = text.strip()
    match = re.fullmatch(r"dim3\s*\((.*)\)", text, re.S)
    if match is None and re.fullmatch(r"[A-Za-z_]\w*", text):
        decl = re.search(rf"\bdim3\s+{re.escape(text)}\s*(?:\((.*?)\)\s*;|=\s*dim3\s*\((.*?)\)\s*;|\{{(.*?)\}}\s*;)",
                         host_body, re.S)
        if decl:
            inner = next(g for g in decl.groups() if g is not None)
            match = re.fullmatch(r"(.*)", inner, re.S)
    parts = [p for p in (match.group(1) if match else text).split(",") if p.strip()] if match else [text]
    return [_substitute(p, resolve) for p in parts]


_HOST_VAR = re.compile(r"\b(?:const\s+)?(?:int|unsigned(?:\s+int)?|size_t|long(?:\s+long)?|auto|int64_t)\s+"
                       r"([A-Za-z_]\w*)\s*=\s*([^;,{}]+);")


def _substitute(text: str, resolve: dict[str, str]) -> str:
    """`text` with host variables replaced by their initialisers, launch arguments by the
    kernel parameters they bind (the size variables) and numeric macros by their values."""
    for _ in range(4):
        new = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: resolve.get(m.group(0), m.group(0)), text)
        if new == text:
            break
        text = new
    return _to_expr(text, {})


def _resolution(launch: LaunchSite, kernel: Function, host_body: str, macros: dict[str, str]) -> dict[str, str]:
    resolve = {name: value for name, value in macros.items()}
    for name, value in _HOST_VAR.findall(host_body):
        if re.search(r"[A-Za-z_]\w*\s*\(", value) is None:  # no calls: atoi(argv[1]) is not a size
            resolve.setdefault(name, f"({' '.join(value.split())})")
    for arg, param in zip(launch.args, kernel.params):
        if re.fullmatch(r"[A-Za-z_]\w*", arg.strip()) and "*" not in param.ctype:
            resolve[arg.strip()] = param.name
    for param in kernel.params:
        resolve.pop(param.name, None) if resolve.get(param.name) != param.name else None
    return resolve


def _unknown_names(exprs: list[str], size_vars: list[str]) -> list[str]:
    """Names in `exprs` that are not size variables (host variables kxform cannot evaluate)."""
    unknown: list[str] = []
    for text in exprs:
        try:
            names = parse_expr(text).variables
        except SpecError:
            names = frozenset(re.findall(r"[A-Za-z_]\w*", text)) or frozenset({text})
        unknown += sorted(n for n in names if n not in size_vars and n not in unknown)
    return unknown


def _launch_plan(model: SourceModel, source: SourceText, kernel: Function,
                 size_vars: list[str]) -> tuple[list[str], list[str], str, str, dict[str, str]]:
    """grid, block, shared bytes, a note for the grid line, and per field what to fill in."""
    name = kernel.name
    launches = [launch for launch in model.launches if launch.kernel == name]
    launch: LaunchSite | None = launches[0] if launches else None
    if launch is None:
        why = f"no launch of {name} in {source.path}: write it in terms of the size variables"
        return ["1"], ["256"], "0", "", {"grid": why, "block": why}
    host_body = ""
    host = next((f for f in model.functions if f.name == launch.function), None)
    if host is not None:
        host_body = source.data[host.body.start:host.body.end].decode("utf-8")
    resolve = _resolution(launch, kernel, host_body, _numeric_macros(model))
    grid = _dims(launch.config[0], host_body, resolve)
    block = _dims(launch.config[1], host_body, resolve)
    shared = _substitute(launch.config[2], resolve) if len(launch.config) > 2 else "0"
    line = source.line_col(launch.span.start)[0]
    todos = {}
    for field_name, exprs in (("grid", grid), ("block", block), ("shared_bytes", [shared])):
        unknown = _unknown_names(exprs, size_vars)
        if unknown:
            todos[field_name] = (f"'{unknown[0]}' in the launch at {source.path}:{line} is computed in host code "
                                 f"kxform cannot evaluate: write {field_name} in terms of the size variables "
                                 f"({', '.join(size_vars) or 'none'})")
    return grid, block, shared, f"from the launch at line {line}", todos


def _plan(source: SourceText, spelling: str, model: SourceModel | None = None) -> _Plan:
    model = model or parse_model(source)
    name, _ = split_spelling(spelling)
    kernel = find_kernel(model, name)
    scalars = [p for p in kernel.params if "*" not in p.ctype and "[" not in p.ctype]
    size_vars = [p.name for p in scalars if base_ctype(p.ctype) in INT_CTYPES]
    grid, block, shared, note, todos = _launch_plan(model, source, kernel, size_vars)
    return _Plan(spelling, source, kernel, size_vars, grid, block, shared, note, draft_roles(model, kernel), todos)


def _is_const(ctype: str) -> bool:
    return ctype.lstrip().startswith("const") or " const" in ctype.split("*")[0]


def _role(plan: _Plan, param_name: str, ctype: str) -> str:
    if param_name in plan.role_notes:
        return "inout"
    return plan.roles.get(param_name, Access(opaque=True)).role(_is_const(ctype))


def _fill(dtype: str) -> str:
    if dtype.startswith(("float", "bfloat")):
        return '{ dist = "uniform", low = -1.0, high = 1.0 }'
    return '{ dist = "int", low = 0, high = 100 }'


def _render(plan: _Plan, over_allocate: bool) -> tuple[str, list[str]]:
    """The draft's text and the list of lines to fill in ("line N: why")."""
    lines: list[str] = []
    todos: list[str] = []

    def add(text: str, todo: str = "") -> None:
        lines.append(text + (f"  # fill in: {todo}" if todo else ""))
        if todo:
            todos.append(f"line {len(lines)}: {todo}")

    spelling = plan.spelling
    add(f"# DRAFT written by `kxform harness infer` from {plan.source.path}: review every line marked 'review'"
        " and fill in every line marked 'fill in'.")
    add("version = 1")
    add(f'file = "{plan.source.path.rsplit("/", 1)[-1]}"')
    add("")
    add(f'[kernel."{spelling}"]')
    add(f'description = "{spelling} (drafted; describe it)"')
    add("seed = 0")
    todos_of = plan.launch_todos
    add(f"grid = {_toml_list(plan.grid)}" + (f"  # {plan.launch_note}" if plan.launch_note and "grid" not in todos_of
                                             else ""), todos_of.get("grid", ""))
    add(f"block = {_toml_list(plan.block)}", todos_of.get("block", ""))
    add(f'shared_bytes = "{plan.shared}"', todos_of.get("shared_bytes", ""))
    add('compare = { mode = "ulp", ulps = 2 }  # review: exact for integer outputs')
    add("")
    product = " * ".join(plan.size_vars) if plan.size_vars else "65536"
    for param in plan.kernel.params:
        dtype = CTYPE_DTYPES.get(base_ctype(param.ctype))
        add(f'[[kernel."{spelling}".args]]')
        add(f'name = "{param.name}"')
        if "*" in param.ctype or "[" in param.ctype:
            add('kind = "buffer"')
            add(f'dtype = "{dtype or "float32"}"', "" if dtype else f"element type {base_ctype(param.ctype)!r} "
                "has no spec dtype")
            if over_allocate:  # room for data-dependent indices too (an index buffer filled 0..100)
                add(f'count = "max({product}, {MIN_PROBE_ELEMENTS})"')
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
                add(f"fill = {_fill(dtype or 'float32')}")
        else:
            add('kind = "scalar"')
            add(f'dtype = "{dtype or "int32"}"')
            add(f'value = "{param.name}"' if param.name in plan.size_vars else 'value = "1"  # review')
        add("")
    for size, values in (("ragged", RAGGED), ("tiles", TILES)):
        add(f'[[kernel."{spelling}".sizes]]')
        add(f'name = "{size}"')
        for var, value in zip(plan.size_vars, _values(values, len(plan.size_vars))):
            add(f"{var} = {value}  # review")
        add("")
    return "\n".join(lines), todos


def _values(base: tuple[int, ...], n: int) -> list[int]:
    return [base[i] if i < len(base) else base[-1] + 2 * (i - len(base) + 1) for i in range(n)]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def _apply_probe(plan: _Plan, result: ProbeResult) -> None:
    for name, extents in result.extents.items():
        if name in result.counts and plan.size_vars and result.counts[name].isdigit():
            plan.count_notes[name] = (f"the same extent ({result.counts[name]}) at both sizes: a constant, or one "
                                      "the data sets (indices read from another buffer)")
        elif name in result.counts:
            plan.counts[name] = result.counts[name]
            plan.count_notes[name] = f"extent touched at sizes ragged, tiles: {', '.join(map(str, extents))}"
        elif not any(extents):
            plan.count_notes[name] = "the kernel did not touch this buffer at the drafted sizes"
        else:
            plan.count_notes[name] = (f"extents touched ({', '.join(map(str, extents))} elements) match no "
                                      "product of the size variables")
    for name, read in result.unwritten_reads.items():
        plan.role_notes[name] = f"measured: {read.describe().split(';')[0]}"


def infer_spec(source: SourceText, spelling: str, runtime: Runtime | None = None,
               model: SourceModel | None = None) -> Draft:
    """A draft spec for `spelling` (kernel name or instantiation). With a runtime that can
    watch launches (the CPU runtime), counts and roles are measured at the draft's sizes.
    `model`: the source's parse, when the caller has it (drafting every kernel of a file
    would otherwise parse the file once per kernel)."""
    model = model or parse_model(source)
    plan = _plan(source, spelling, model)
    result: ProbeResult | None = None
    if runtime is not None and not plan.launch_todos:
        if math.prod(_values(TILES, len(plan.size_vars))) > MAX_PROBE_ELEMENTS:
            result = ProbeResult(error="the over-allocated probe buffers would be too large")
        else:
            text, _ = _render(plan, over_allocate=True)
            result = probe(source.path, text, spelling, runtime, plan.size_vars)
        if result.error is None:
            _apply_probe(plan, result)
        else:
            for param in plan.kernel.params:
                plan.count_notes[param.name] = f"element count (the measuring run failed: {result.error})"
    if result is None:
        why = "the launch is not known" if plan.launch_todos else "no runtime to measure it with"
        for param in plan.kernel.params:
            plan.count_notes.setdefault(param.name, f"element count (not measured: {why})")
    text, todos = _render(plan, over_allocate=False)
    if not any(launch.kernel == plan.kernel.name for launch in model.launches):
        text = text.replace("\n", f"\n# note: {spelling} is not launched in {source.path}\n", 1)
        todos = [re.sub(r"^line (\d+)", lambda m: f"line {int(m.group(1)) + 1}", t) for t in todos]
    return Draft(text + "\n", tuple(todos), result)
