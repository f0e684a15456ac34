"""Which named constants of a file are a kernel's tile sizes, and which must stay as they are.

A candidate is an integer constant (object-like macro or file-scope `constexpr`, value
from libclang) that the kernel's code or its launch reads. It becomes a tunable
parameter when it plays a tile role: a `__shared__` extent, a loop bound or step, the
scale of a block or thread index (`blockIdx.y * TILE`), a block dimension or the dynamic
shared memory at the launch, or an unroll factor. It is refused, with the reason, when
it is also something else (used by another kernel or by host code outside the launch,
or divides in a test that decides control flow, a threshold such as `n > 100000 / TILE`),
when the body hard-codes its value, when it only pads other extents (a halo), or when
the kernel computes with hardware-fixed shapes (wmma fragments, mma instructions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kxform.engine.launch_site import launch_parameters
from kxform.frontend.model import Function, FunctionKind, SourceModel, Span
from kxform.frontend.launches import LaunchConfig, launch_configs
from kxform.frontend.queries import (
    ConstantDef,
    NameUse,
    constant_defs,
    int_literals,
    loops,
    name_uses,
    shared_decls,
    template_params,
    unroll_pragmas,
)

TILE_ROLES = ("shared extent", "loop bound", "loop step", "index scale", "block dimension", "shared bytes", "unroll")
HARDWARE_SHAPE_RE = re.compile(r"\bwmma::|\bmma_sync\b|\bmma\.sync\b|\bwgmma\b|\bnvcuda::wmma\b")
_LITERAL_RE = re.compile(r"^\(?\s*\d+[uUlL]*\s*\)?$")


@dataclass(frozen=True)
class Quantity:
    """A constant lifted into a parameter: where it is defined and what it does."""

    name: str
    kind: str  # "macro" | "constexpr"
    value: int
    definition: ConstantDef
    roles: tuple[str, ...]
    guarded: bool
    """A macro already inside `#ifndef NAME` (lifted before)."""
    line: int


@dataclass(frozen=True)
class Refusal:
    """A constant (or, with `name` None, the whole kernel) the pass does not lift, and why."""

    key: str
    message: str
    offset: int
    name: str | None = None


@dataclass(frozen=True)
class Tiling:
    """Everything the tile pass learned about one kernel."""

    kernel: Function
    quantities: tuple[Quantity, ...]
    refusals: tuple[Refusal, ...]
    launches: tuple[LaunchConfig, ...]
    closure: frozenset[str]
    """The kernel and the device functions it reaches (names)."""
    uses: tuple[NameUse, ...]
    """Uses of the lifted names in the closure and at the launches."""
    fixed: tuple[tuple[str, int], ...] = ()
    """Values of the file's other integer constants (not lifted): they stay what they are."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(q.name for q in self.quantities)

    def quantity(self, name: str) -> Quantity:
        return next(q for q in self.quantities if q.name == name)


def _is_literal(text: str) -> bool:
    return bool(_LITERAL_RE.match(text.strip()))


def _main(use: NameUse, whole: str) -> bool:
    """The name is the quantity of `whole`, not an offset in it: `TILE`, `TILE + 1`, `2 * TILE`,
    `n / TILE`, but not `W + 2 * HALO` (HALO) or `x - HALO`."""
    if whole.strip().strip("()").strip() == use.name:
        return True
    if use.operator == "*" and _is_literal(use.other):
        return not re.search(r"[+-]", whole)  # `2 * TILE` is a tile; `W + 2 * HALO` pads W
    if use.operator in ("*", "/", "%", "<<", ">>"):
        return not _is_literal(use.other)
    return use.operator in ("+", "-") and _is_literal(use.other)


def closure_functions(model: SourceModel, kernel: Function) -> tuple[frozenset[str], frozenset[str]]:
    reached = model.closure(kernel.name)
    functions = frozenset(
        n
        for n in reached
        if not n.startswith("<macro ") and any(f.name == n and f.kind is not FunctionKind.HOST for f in model.functions)
    ) | {kernel.name}
    macros = frozenset(n[len("<macro ") : -1] for n in reached if n.startswith("<macro "))
    return functions, macros


def find_tiling(model: SourceModel, kernel: Function, values: dict[str, int | None]) -> Tiling:
    """The kernel's tunable constants, refusals and launches (`values`: evaluated constants)."""
    functions, macros = closure_functions(model, kernel)
    launches = launch_configs(model, kernel.name)
    launch_spans = _launch_spans(launches)
    defs = {d.name: d for d in constant_defs(model) if d.function is None}
    uses = name_uses(model, set(defs))
    relevant = {u.name for u in uses if u.function in functions or _inside(u.span, launch_spans)}
    bodies = [macro.body for macro in model.macros if macro.name in macros]
    relevant |= {n for body in bodies for n in _words(body) if n in defs}
    relevant |= {p.factor for p in unroll_pragmas(model) if p.function in functions and p.factor in defs}
    refusals: list[Refusal] = _local_constants(model, functions)
    lifted: list[Quantity] = []
    hardware = _hardware_shape(model, functions)
    launch_owned = launch_parameters(kernel.name)
    for name in sorted(relevant, key=lambda n: defs[n].span):
        definition, value = defs[name], values.get(name)
        if value is None or value <= 0:
            continue
        if name in launch_owned:
            refusals.append(
                Refusal(
                    "LaunchParameter",
                    f"{name} is the block size or launch bound the launch pass "
                    f"lifted for '{kernel.name}' (kxform inspect --pass launch)",
                    definition.span.start,
                    name,
                )
            )
            continue
        mine = [u for u in uses if u.name == name]
        refusal = _refusal(model, kernel, definition, mine, functions, macros, launches, launch_spans, value)
        roles = _roles(model, definition, mine, functions, launches)
        if refusal is None:
            refusal = _unclassified(model, name, mine, functions)
        if refusal is None and hardware is not None:
            refusal = Refusal(
                "HardwareFixedShape",
                f"{name} sizes work that the kernel does with {hardware}; the "
                "fragment and instruction shapes are fixed by the hardware, and the tiles built on them "
                "are unrolled by hand around those shapes",
                definition.span.start,
                name,
            )
        if refusal is None and not set(roles) & set(TILE_ROLES):
            refusal = Refusal(
                "NotATileSize",
                f"{name} only offsets or pads other extents (a halo or padding "
                "width), it is not a tile size; the body's fixed-size stencil assumes its value",
                definition.span.start,
                name,
            )
        if refusal is not None:
            refusals.append(refusal)
            continue
        lifted.append(
            Quantity(
                name,
                definition.kind,
                value,
                definition,
                roles,
                _guarded(model, definition),
                model.source.line_col(definition.span.start)[0],
            )
        )
    refusals += _kernel_refusals(model, kernel, lifted, launches)
    if any(r.name is None for r in refusals):
        lifted = []
    lifted_names = {q.name for q in lifted}
    fixed = tuple((n, v) for n, v in values.items() if v is not None and n not in lifted_names)
    return Tiling(
        kernel,
        tuple(lifted),
        tuple(refusals),
        launches,
        functions,
        tuple(u for u in uses if u.name in lifted_names),
        fixed,
    )


def _words(text: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", text))


def _inside(span: Span, spans: list[Span]) -> bool:
    return any(s.contains(span) for s in spans)


def _launch_spans(launches: tuple[LaunchConfig, ...]) -> list[Span]:
    spans = [lc.site.span for lc in launches]
    spans += [v.span for lc in launches for v in (lc.grid_var, lc.block_var) if v is not None]
    spans += [v.span for lc in launches for v in lc.variables]
    return spans


def _guarded(model: SourceModel, definition: ConstantDef) -> bool:
    if definition.kind != "macro":
        return False
    before = model.source.data[: definition.span.start].rstrip()
    last = before.rsplit(b"\n", 1)[-1].strip()
    return bool(
        re.fullmatch(
            rb"#\s*ifndef\s+"
            + definition.name.encode()
            + rb"|#\s*if\s+!\s*defined\s*\(?\s*"
            + definition.name.encode()
            + rb"\s*\)?",
            last,
        )
    )


def _refusal(
    model: SourceModel,
    kernel: Function,
    definition: ConstantDef,
    mine: list[NameUse],
    functions: frozenset[str],
    macros: frozenset[str],
    launches: tuple[LaunchConfig, ...],
    launch_spans: list[Span],
    value: int,
) -> Refusal | None:
    name = definition.name
    if not _is_literal(definition.text):
        return Refusal(
            "DerivedConstant",
            f"{name} = {definition.text} is computed from other values; kxform lifts the values it is computed from",
            definition.span.start,
            name,
        )
    for use in mine:
        if use.function in functions or _inside(use.span, launch_spans):
            continue
        owner = next((f for f in model.functions if f.name == use.function), None)
        line = model.source.line_col(use.span.start)[0]
        if owner is not None and owner.kind is not FunctionKind.HOST:
            return Refusal(
                "SharedWithOtherKernels",
                f"{name} is also used by '{owner.name}' (line {line}), which "
                f"this rewrite of '{kernel.name}' would change too",
                use.span.start,
                name,
            )
        if owner is not None:
            return Refusal(
                "HostUse",
                f"{name} is also used by host code outside the launch of '{kernel.name}' "
                f"(line {line}: a host array size or another kernel's launch would change with it)",
                use.span.start,
                name,
            )
        macro = next((m for m in model.macros if m.span.contains(use.span)), None)
        if (
            macro is not None
            and macro.name not in macros
            and any(u.name == macro.name for u in model.macro_uses if u.function not in functions)
        ):
            return Refusal(
                "SharedWithOtherKernels",
                f"{name} is used by macro {macro.name}, which code outside '{kernel.name}' uses (line {line})",
                use.span.start,
                name,
            )
    for lc in launches:
        for var in (lc.grid_var, lc.block_var):
            if var is not None and any(var.name in other.site.config for other in model_launch_configs(model, kernel)):
                return Refusal(
                    "SharedWithOtherKernels",
                    f"the launch configuration '{var.name}' that holds {name} is also used to launch another kernel",
                    var.span.start,
                    name,
                )
    leak = _leaking_launch_variable(model, launches, launch_spans, name)
    if leak is not None:
        return Refusal(
            "HostUse",
            f"{name} sets the launch variable '{leak[0]}', which host code also uses (line "
            f"{leak[1]}: an allocation or a loop sized by it would change with it)",
            definition.span.start,
            name,
        )
    return _hand_unrolled(model, functions, name, value)


def _unclassified(model: SourceModel, name: str, mine: list[NameUse], functions: frozenset[str]) -> Refusal | None:
    """A use in the kernel that is no tile role and that a new value would change the
    meaning of: outside a loop header, the constant is a threshold in a test that decides
    control flow (it divides there, `n > 100000 / TILE`, `i % TILE == 0`, or it is compared
    with the kernel's parameters alone, `n > TILE`)."""
    for use in mine:
        if use.function in functions and use.decides:
            line = model.source.line_col(use.span.start)[0]
            return Refusal(
                "ControlFlowUse",
                f"line {line}: {name} is a threshold in `{use.decides}`, which decides "
                f"control flow: a new value changes which branch runs, not a tile role",
                use.span.start,
                name,
            )
    return None


def _leaking_launch_variable(
    model: SourceModel, launches: tuple[LaunchConfig, ...], launch_spans: list[Span], name: str
) -> tuple[str, int] | None:
    """A launch variable computed from `name` (`const int blocks = (n + BLOCK - 1) / BLOCK;`)
    that host code reads outside the launch: the first such variable and the line of the read."""
    holders = {v.name for lc in launches for v in lc.variables if name in _words(v.text)}
    holders |= {
        v.name
        for lc in launches
        for v in (lc.grid_var, lc.block_var)
        if v is not None and any(name in _words(a) for a in v.args)
    }
    hosts = {lc.site.function for lc in launches}
    for use in name_uses(model, holders):
        if use.function in hosts and not _inside(use.span, launch_spans):
            return model.source.data[use.span.start : use.span.end].decode(), model.source.line_col(use.span.start)[0]
    return None


def model_launch_configs(model: SourceModel, kernel: Function) -> list[LaunchConfig]:
    return [
        lc for k in {s.kernel for s in model.launches if s.kernel != kernel.name} for lc in launch_configs(model, k)
    ]


def _hand_unrolled(model: SourceModel, functions: frozenset[str], name: str, value: int) -> Refusal | None:
    """The body spells the value itself where a tile size belongs (a loop bound, an extent)."""
    if value < 4:
        return None
    for function in model.functions:
        if function.name not in functions:
            continue
        roles = [loop.bound for loop in loops(model, function.body)] + [
            e for d in shared_decls(model) if d.function == function.name for e in d.extents
        ]
        for literal in int_literals(model, function.body):
            text = model.source.data[literal.span.start : literal.span.end].decode()
            if literal.value == value and text in roles:
                line = model.source.line_col(literal.span.start)[0]
                return Refusal(
                    "HandUnrolled",
                    f"line {line} spells {value}, the value of {name}, as a loop bound or "
                    f"extent: the body assumes {name} = {value}",
                    literal.span.start,
                    name,
                )
    return None


def _roles(
    model: SourceModel,
    definition: ConstantDef,
    mine: list[NameUse],
    functions: frozenset[str],
    launches: tuple[LaunchConfig, ...],
) -> tuple[str, ...]:
    name = definition.name
    roles: set[str] = set()
    extents = {s: e for d in shared_decls(model) if d.function in functions for s, e in zip(d.extent_spans, d.extents)}
    kernel_loops = [loop for f in model.functions if f.name in functions for loop in loops(model, f.body)]
    for use in mine:
        if use.function not in functions:
            continue
        extent = next((e for s, e in extents.items() if s.contains(use.span)), None)
        if extent is not None and _main(use, extent):
            roles.add("shared extent")
        loop = next((lp for lp in kernel_loops if lp.header.contains(use.span)), None)
        if loop is not None and loop.step.strip() == name:
            roles.add("loop step")
        elif loop is not None and (loop.bound.strip() == name or _main(use, loop.bound)) and name in loop.bound:
            roles.add("loop bound")
        if use.operator == "*" and re.search(r"\b(blockIdx|threadIdx|hipBlockIdx_\w|hipThreadIdx_\w)\b", use.other):
            roles.add("index scale")
        elif use.operator == "*" and not _is_literal(use.other) and extent is None and loop is None:
            roles.add("index scale")
    for lc in launches:
        if any(name in _words(b) for b in lc.block):
            roles.add("block dimension")
        if any(name in _words(g) for g in lc.grid):
            roles.add("grid")
        if lc.shared and name in _words(lc.shared):
            roles.add("shared bytes")
    if any(p.factor == name and p.function in functions for p in unroll_pragmas(model)):
        roles.add("unroll")
    return tuple(r for r in (*TILE_ROLES, "grid") if r in roles)


def _hardware_shape(model: SourceModel, functions: frozenset[str]) -> str | None:
    for function in model.functions:
        if function.name in functions:
            body = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
            match = HARDWARE_SHAPE_RE.search(body)
            if match:
                line = model.source.line_col(function.body.start + match.start())[0]
                what = (
                    "mma instructions"
                    if "mma" in match.group(0) and "wmma" not in match.group(0)
                    else "wmma fragments (16x16x16 tiles)"
                )
                return f"{what} (line {line})"
    return None


def _local_constants(model: SourceModel, functions: frozenset[str]) -> list[Refusal]:
    out = []
    for definition in constant_defs(model):
        if definition.function in functions:
            line = model.source.line_col(definition.span.start)[0]
            if "sizeof" in definition.text:
                out.append(
                    Refusal(
                        "VectorWidth",
                        f"{definition.name} = {definition.text} (line {line}) is a vector "
                        "width fixed by the load size the hardware offers, not a tile size",
                        definition.span.start,
                        definition.name,
                    )
                )
            else:
                out.append(
                    Refusal(
                        "LocalConstant",
                        f"{definition.name} is defined inside '{definition.function}' "
                        f"(line {line}); only file-scope constants are lifted",
                        definition.span.start,
                        definition.name,
                    )
                )
    return out


def _kernel_refusals(
    model: SourceModel, kernel: Function, lifted: list[Quantity], launches: tuple[LaunchConfig, ...]
) -> list[Refusal]:
    out = []
    values = [p for p in template_params(kernel) if p.kind == "value"]
    if values and not lifted:
        sites = (
            ", ".join(
                f"{s.kernel}{s.template_args or ''} (line {model.source.line_col(s.span.start)[0]})"
                for s in model.launches
                if s.kernel == kernel.name
            )
            or "no launch in this file"
        )
        names = ", ".join(p.name for p in values)
        what = "is already a template parameter" if len(values) == 1 else "are already template parameters"
        out.append(
            Refusal(
                "TemplateParameter",
                f"{names} {what} of '{kernel.name}', instantiated at {sites}; tune it where it is instantiated",
                kernel.span.start,
            )
        )
    if not lifted:
        return out
    if not launches:
        out.append(
            Refusal(
                "NoLaunchSite",
                f"'{kernel.name}' is not launched in this file, so its launch cannot be "
                "kept consistent with new tile sizes",
                kernel.span.start,
            )
        )
    elif len({lc.block for lc in launches}) > 1 or len({lc.grid for lc in launches}) > 1:
        out.append(
            Refusal(
                "LaunchesDisagree",
                f"the launches of '{kernel.name}' use different configurations; "
                "kxform cannot rewrite them consistently",
                launches[0].site.span.start,
            )
        )
    elif any(
        len(lc.site.config) > 2
        and lc.site.config[2].strip() not in ("0", "")
        and not _words(lc.site.config[2]) & {q.name for q in lifted}
        and _uses_dynamic_shared(model, kernel)
        for lc in launches
    ):
        out.append(
            Refusal(
                "DynamicSharedFixed",
                "the launch passes a fixed amount of dynamic shared memory that the tile sizes do not scale",
                launches[0].site.span.start,
            )
        )
    return out


def _uses_dynamic_shared(model: SourceModel, kernel: Function) -> bool:
    return any(d.dynamic and kernel.span.contains(d.span) for d in shared_decls(model))
