"""`kxform harness infer`: draft a harness spec from a file's own kernel and launch site.

What the file says is used where it can be read: the kernel's parameters (pointers become
buffers, integer scalars size variables), the launch configuration (`dim3 grid(...)`
declarations and `<<<...>>>` arguments, numeric `#define`s substituted, or the kernel's
own guards where the file never launches it: kxform.harness.guarded), and each
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
import os
import re
from dataclasses import dataclass, field

from kxform.build.extract import find_kernel, split_spelling
from kxform.errors import SpecError
from kxform.expr import parse_expr
from kxform.frontend.c_expr import c_to_expr
from kxform.frontend.cuda import parse_model
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.frontend.queries import int_value
from kxform.frontend.source import SourceText
from kxform.harness.draft import MAX_PROBE_ELEMENTS, DraftPlan, apply_probe, render
from kxform.harness.dtypes import CTYPE_DTYPES, base_ctype
from kxform.harness.guarded import GuardedLaunch, launch_from_guards
from kxform.harness.launcher import caller_constants, host_bindings, launching_function, required_multiples, zeroed
from kxform.harness.probe import FACTORS, ProbeResult, probe
from kxform.harness.request import NO_FLAGS, UnitFlags
from kxform.harness.roles import draft_roles
from kxform.runtime.base import Runtime

INT_CTYPES = (
    "int",
    "unsigned",
    "unsigned int",
    "int64_t",
    "size_t",
    "long long",
    "int32_t",
    "uint32_t",
    "long",
    "unsigned long",
    "unsigned long long",
    "uint64_t",
    "uint",
)
RAGGED = (70, 45, 33, 37, 29, 23, 19, 17)
TILES = (64, 48, 32, 80, 96, 112, 16, 128)
"""Values the size variables (in parameter order) start from at the two drafted sizes:
one that divides no tile and one of tile multiples; all distinct, so counts can be told
apart. Each grows until the launch has MIN_BLOCKS blocks along every dimension it sets."""
CALLER_BLOCK = {True: 96, False: 256}
"""A block size the launching function takes from its caller (`k<<<g, block_size>>>`), at
the ragged and the tiled drafted size: whole warps, one of them not a power of two (three
warps: a rewrite that divides the block into rows or lanes must handle it), the other the
common default."""
MIN_BLOCKS = 3
"""Blocks along every grid dimension a size variable sets, at every drafted size: with
one block, a bug in how blocks share the work (x and y swapped, a wrong tile) cannot
show; with three, a first, a middle and a last block differ."""


@dataclass(frozen=True)
class Draft:
    """A drafted spec and the lines a person must still fill in ("line N: why")."""

    text: str
    todos: tuple[str, ...] = ()
    probe: ProbeResult | None = field(default=None, compare=False)
    guessed: str = ""
    """Non-empty when the measuring run failed: why, and that the sizes are guesses."""


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


_TYPEDEF_RE = re.compile(
    r"^\s*(?:typedef\s+([\w\s]+?)\s+([A-Za-z_]\w*)\s*;|using\s+([A-Za-z_]\w*)\s*=\s*([\w\s]+?)\s*;"
    r"|#\s*define\s+([A-Za-z_]\w*)[ \t]+([A-Za-z_][\w \t]*?)[ \t]*(?://.*)?$)",
    re.M,
)


def _type_aliases(source: SourceText, model: SourceModel, flags: UnitFlags) -> dict[str, str]:
    """Scalar and element types named through `#define DATA_TYPE float`, `typedef float
    real;` or `using real = double;`, in the file and the headers it includes with quotes
    (found beside it or in the unit's include directories): name -> the C type, when that
    is a type a spec can hold."""
    texts = [source.data.decode("utf-8", "replace")]
    for include in model.includes:
        found = (os.path.join(folder, include.target) for folder in flags.for_unit(source.path))
        path = next((p for p in found if os.path.isfile(p)), None)
        if not include.system and path is not None:
            with open(path, encoding="utf-8", errors="replace") as handle:
                texts.append(handle.read())
    out: dict[str, str] = {}
    for text in texts:
        for match in _TYPEDEF_RE.finditer(text):
            ctype, name = (
                (match.group(1), match.group(2))
                if match.group(2)
                else (match.group(4), match.group(3))
                if match.group(3)
                else (match.group(6), match.group(5))
            )
            ctype = " ".join(ctype.split())
            if ctype in CTYPE_DTYPES:
                out.setdefault(name, ctype)
    return out


def _header_values(source: SourceText, names: set[str], flags: UnitFlags) -> dict[str, str]:
    """Integer values of `names` as the compiler sees them (macros of included headers,
    `-D` values), from libclang with the unit's flags; names it cannot evaluate are left
    out."""
    if not names:
        return {}
    from kxform.build.toolchain import Toolchain
    from kxform.frontend.constants import evaluate_constants

    args = [*flags.compiler_args(), *Toolchain().libclang_args(source.path)]
    values = evaluate_constants(source.path, source.data, sorted(names), args)
    return {name: str(value) for name, value in values.items() if value is not None}


def _launcher_sizes(model: SourceModel, kernel: Function, size_vars: list[str], types: dict[str, str]) -> list[str]:
    """Integer parameters of the launching function that the launch reads but does not pass
    to the kernel (`k<<<rows, 256>>>(out, cols)`): sizes the spec needs as variables of
    their own."""
    configs = launch_configs(model, kernel.name)
    found = launching_function(model, kernel)
    if found is None:
        return []
    site, host = found
    passed = {arg.strip() for arg in site.args}
    texts = " ".join((*configs[0].grid, *configs[0].block, configs[0].shared or ""))
    words = set(re.findall(r"(?<![.\w])[A-Za-z_]\w*", texts))
    return [
        p.name
        for p in host.params
        if p.name in words
        and p.name not in passed
        and p.name not in size_vars
        and "*" not in p.ctype
        and types.get(base_ctype(p.ctype), base_ctype(p.ctype)) in INT_CTYPES
    ]


def _launch_plan(
    model: SourceModel,
    source: SourceText,
    kernel: Function,
    size_vars: list[str],
    flags: UnitFlags,
    passed: dict[str, int],
    bound: frozenset[str],
) -> tuple[list[str], list[str], str, str, dict[str, str]]:
    """grid, block, shared bytes, a note for the grid line, and per field what to fill in.

    The launch is read through its `dim3` variables and their fields (`block.x`), the
    launcher's constant locals and the macros the file and its headers define
    (kxform.frontend.launches); host variables passed to the kernel become the size
    variables they bind (`rows` passed as `N`), and parameters of the launcher that every
    call in the file passes one constant (`passed`; template arguments of the first call
    of a launcher named in `bound`) are that constant; C casts and `ceil()` over a float
    division are read as integer expressions (kxform.frontend.c_expr)."""
    name = kernel.name
    configs = launch_configs(model, name)
    if not configs:
        guessed = launch_from_guards(model, kernel, size_vars)
        if isinstance(guessed, GuardedLaunch):
            return list(guessed.grid), list(guessed.block), "0", guessed.note, {}
        why = f"no launch of {name} in {source.path}, and {guessed}: write it in terms of the size variables"
        return ["1"], ["256"], "0", "", {"grid": why, "block": why}
    config = configs[0]
    launch = config.site
    rename = {
        arg.strip(): param.name
        for arg, param in zip(launch.args, kernel.params)
        if re.fullmatch(r"[A-Za-z_]\w*", arg.strip()) and "*" not in param.ctype
    }
    macros = {
        **{k: int(v) for k, v in _numeric_macros(model).items()},
        **{k: v for k, v in passed.items() if k not in rename and k not in size_vars},
    }  # sizes stay sizes
    texts = [*config.grid, *config.block, *([config.shared] if config.shared else [])]
    words = {w for t in texts for w in re.findall(r"(?<![.\w])[A-Za-z_]\w*", t)}
    unknown = words - set(rename) - set(size_vars) - set(macros) - {"dim3", "ceil", "ceilf", "min", "max", "std"}
    macros.update({k: int(v) for k, v in _header_values(source, unknown, flags).items()})

    def read(text: str) -> str:
        renamed = re.sub(r"(?<![.\w])[A-Za-z_]\w*", lambda m: rename.get(m.group(0), m.group(0)), text)
        found = c_to_expr(renamed, size_vars, macros)
        return found if found is not None else _to_expr(renamed, {k: str(v) for k, v in macros.items()})

    grid = [read(t) for t in config.grid]
    block = [read(t) for t in config.block]
    shared = read(config.shared) if config.shared else "0"
    line = source.line_col(launch.span.start)[0]
    todos = {}
    macro_names = {m.name for m in model.macros}
    dim3_names = {v.name for v in (config.grid_var, config.block_var) if v is not None}  # name what they read
    for index, (field_name, exprs) in enumerate((("grid", grid), ("block", block), ("shared_bytes", [shared]))):
        unknown_names = _unknown_names(exprs, size_vars)
        if unknown_names:
            written = launch.config[index] if index < len(launch.config) else ""
            written_names = [
                w
                for w in re.findall(r"(?<![.\w])[A-Za-z_]\w*", written)
                if w not in size_vars and w not in rename and w != "dim3" and w not in dim3_names
            ]
            first = next((w for w in unknown_names if w in written_names), (written_names or unknown_names)[0])
            what = (
                "is a macro kxform cannot evaluate (give the project's -I/-D or -p BUILD_DIR)"
                if first in macro_names
                else "is computed in host code kxform cannot evaluate"
            )
            todos[field_name] = (
                f"'{first}' in the launch at {source.path}:{line} {what}: write {field_name} in "
                f"terms of the size variables ({', '.join(size_vars) or 'none'})"
            )
    given = [f"{k} = {v}" for k, v in passed.items() if k in words and k not in rename]
    where = "the first call of" if launch.function in bound else "every call of"
    note = f"from the launch at line {line}" + (f" ({', '.join(given)} at {where} {launch.function})" if given else "")
    return grid, block, shared, note, todos


def instantiation(model: SourceModel, kernel: Function, spelling: str) -> str:
    """A template kernel named without arguments: the instantiation its first launch in the
    file spells (`axpy` -> `axpy<float, 128>`); otherwise `spelling` as given."""
    name, args = split_spelling(spelling)
    if args or not kernel.template_params:
        return spelling
    site = next((s for s in model.launches if s.kernel == name and s.template_args), None)
    if site is None or not site.template_args:
        return spelling
    bound = host_bindings(model, site)
    return f"{name}<{', '.join(bound.get(a.strip(), a) for a in split_spelling('k' + site.template_args)[1])}>"


def _template_types(kernel: Function, spelling: str) -> dict[str, str]:
    """Type template parameters bound by the instantiation (`T` -> `float`)."""
    from kxform.frontend.queries import template_params

    _, args = split_spelling(spelling)
    return {p.name: arg for p, arg in zip(template_params(kernel), args) if p.kind == "type"}


def _plan(
    source: SourceText, spelling: str, model: SourceModel | None = None, flags: UnitFlags = NO_FLAGS
) -> DraftPlan:
    model = model or parse_model(source)
    name, _ = split_spelling(spelling)
    kernel = find_kernel(model, name)
    spelling = instantiation(model, kernel, spelling)
    types = {**_type_aliases(source, model, flags), **_template_types(kernel, spelling)}
    scalars = [p for p in kernel.params if "*" not in p.ctype and "[" not in p.ctype]
    size_vars = [p.name for p in scalars if types.get(base_ctype(p.ctype), base_ctype(p.ctype)) in INT_CTYPES]
    passed = caller_constants(model, kernel, _numeric_macros(model))
    configs = launch_configs(model, kernel.name)
    bindings = host_bindings(model, configs[0].site) if configs else {}
    passed.update({k: value for k, v in bindings.items() if (value := int_value(v)) is not None})
    bound = frozenset({configs[0].site.function or ""} if bindings else ())
    size_vars += [v for v in _launcher_sizes(model, kernel, size_vars, types) if v not in passed]
    grid, block, shared, note, todos = _launch_plan(model, source, kernel, size_vars, flags, passed, bound)
    plan = DraftPlan(
        spelling,
        source,
        kernel,
        size_vars,
        grid,
        block,
        shared,
        note,
        draft_roles(model, kernel),
        todos,
        types=types,
        affine_buffers=_affine_buffers(model, kernel),
        multiples=required_multiples(model, kernel),
        zeroed=zeroed(model, kernel),
    )
    plan.sizes = {"ragged": _grown(plan, RAGGED, ragged=True), "tiles": _grown(plan, TILES, ragged=False)}
    return plan


def _affine_buffers(model: SourceModel, kernel: Function) -> frozenset[str]:
    """Pointer parameters the kernel itself indexes, every time by an affine form inside
    loops whose bounds are affine too (no index or bound read from memory)."""
    from kxform.analysis.access import analyse_function
    from kxform.analysis.affine import Affine

    analysis = analyse_function(model, kernel)
    accesses = [a for a in analysis.accesses if a.space == "global"]
    data_bounds = {
        loop.id for loop in analysis.loops if not isinstance(loop.init, Affine) or not isinstance(loop.bound, Affine)
    }  # `for (j = row_ptr[r]; j < row_ptr[r + 1]; ...)`
    names = {a.buffer for a in accesses}
    return frozenset(
        n for n in names if all(a.affine and not data_bounds & set(a.loops) for a in accesses if a.buffer == n)
    )


def _grown(plan: DraftPlan, base: tuple[int, ...], ragged: bool) -> list[int]:
    """The base values of the size variables, doubled (plus one at the ragged size, so a
    value stays odd: a partial last block along every dimension) until every grid
    dimension that a size variable sets launches MIN_BLOCKS blocks or more."""

    def rounded(name: str, value: int) -> int:
        step = plan.multiples.get(name, 1)
        return -(-value // step) * step

    values = {n: rounded(n, v) for n, v in zip(plan.size_vars, _values(base, len(plan.size_vars)))}
    fixed = set(re.findall(r"[A-Za-z_]\w*", " ".join(plan.block)))  # a block size stays a block size
    values.update({n: CALLER_BLOCK[ragged] for n in values if n in fixed})
    exprs = []
    for text in [] if plan.launch_todos else plan.grid:
        try:
            expr = parse_expr(text)
        except SpecError:
            continue
        if expr.variables & set(values) and expr.variables <= set(values):
            exprs.append(expr)
    for _ in range(32):
        try:
            short = [e for e in exprs if int(e.evaluate(values)) < MIN_BLOCKS]
        except (SpecError, TypeError, ValueError, ZeroDivisionError):
            break
        grown = {
            n: rounded(n, values[n] * 2 + (1 if ragged else 0)) for e in short for n in e.variables if n not in fixed
        }
        if not short or math.prod({**values, **grown}.values()) > MAX_PROBE_ELEMENTS:
            break
        values.update(grown)
    return [values[n] for n in plan.size_vars]


def _values(base: tuple[int, ...], n: int) -> list[int]:
    return [base[i] if i < len(base) else base[-1] + 2 * (i - len(base) + 1) for i in range(n)]


def _measure(plan: DraftPlan, runtime: Runtime, flags: UnitFlags | None) -> ProbeResult:
    if any(
        parse_expr(plan.probe_product).evaluate(dict(zip(plan.size_vars, values))) > MAX_PROBE_ELEMENTS
        for values in plan.sizes.values()
    ):
        return ProbeResult(error="the over-allocated probe buffers would be too large")
    text, _ = render(plan, over_allocate=True)
    result = probe(plan.source.path, text, plan.spelling, runtime, plan.size_vars, flags, (*FACTORS, plan.int_high + 1))
    if result.error is not None and "out-of-bounds" in result.error and not plan.cube:
        plan.cube = True  # a count of a higher degree than the product (n * n * batch)
        retried = _measure(plan, runtime, flags)
        plan.cube = retried.error is None
        return retried if plan.cube else result
    return result


def infer_spec(
    source: SourceText,
    spelling: str,
    runtime: Runtime | None = None,
    spec_dir: str | None = None,
    model: SourceModel | None = None,
    flags: UnitFlags | None = None,
) -> Draft:
    """A draft spec for `spelling` (kernel name or instantiation). With a runtime that can
    watch launches (the CPU runtime), counts and roles are measured at the draft's sizes.
    `spec_dir`: the directory the spec will be written to (its `file` is relative to it;
    default: beside the source). `model`: the source's parse, when the caller has it
    (drafting every kernel of a file would otherwise parse the file once per kernel).
    `flags`: the unit's include directories and defines (the project's build flags): the
    macros the launch reads are evaluated with them, and the measuring run is built with
    them."""
    model = model or parse_model(source)
    plan = _plan(source, spelling, model, flags or NO_FLAGS)
    result: ProbeResult | None = None
    if runtime is not None and not plan.launch_todos:
        result = _measure(plan, runtime, flags)
        if result.error is None and result.non_finite:  # outside the kernel's domain: try positive inputs
            plan.positive_fill = True
            retried = _measure(plan, runtime, flags)
            plan.positive_fill = retried.error is None and not retried.non_finite
            result = retried if plan.positive_fill else result
        if result.error is None:
            apply_probe(plan, result)
        else:
            for param in plan.kernel.params:
                plan.count_notes[param.name] = f"element count (the measuring run failed: {result.error})"
            shown = "; ".join(
                f"{name}: {', '.join(f'{v}={x}' for v, x in zip(plan.size_vars, values))}"
                for name, values in plan.sizes.items()
            )
            plan.guessed = (
                f"the measuring run failed ({result.error}), so the sizes ({shown or 'none'}) are kxform's "
                "starting guesses, not confirmed by a run, and no element count was measured"
            )
    if result is None:
        why = "the launch is not known" if plan.launch_todos else "no runtime to measure it with"
        for param in plan.kernel.params:
            plan.count_notes.setdefault(param.name, f"element count (not measured: {why})")
    spelling = plan.spelling
    text, todos = render(plan, over_allocate=False, spec_dir=spec_dir)
    if not any(launch.kernel == plan.kernel.name for launch in model.launches):
        text = text.replace("\n", f"\n# note: {spelling} is not launched in {source.path}\n", 1)
        todos = [re.sub(r"^line (\d+)", lambda m: f"line {int(m.group(1)) + 1}", t) for t in todos]
    return Draft(text + "\n", tuple(todos), result, plan.guessed)
