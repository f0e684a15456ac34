"""The rules a model-written template must meet before anything runs: one function per
rule, each returning a `Refusal` (a stable key and one line) or None.

The template is hostile input. It may only replace the kernel's own definition: the
same name and parameter types (callers stay as they are), no preprocessor lines, no
other functions, globals or host code, no inline assembly, no printf, no atomics on a
buffer the original never updated atomically, no cast into another address space and
no call outside the device functions the original reaches and an allow-list of CUDA's
documented intrinsics. Its parameter space must be small and finite, its names new to
the file, its constraints and launch expressions kxform's own expression language over
names it knows. Rules run in the order of `RULES`; the first refusal is the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kxform.analysis.access import closure_functions
from kxform.engine.params import ParamSpace, hw_env
from kxform.errors import SpecError
from kxform.expr import parse_expr
from kxform.frontend.cuda import parse_model
from kxform.frontend.model import Function, FunctionKind, SourceModel
from kxform.frontend.source import validate_bytes
from kxform.propose.template import Refusal, Template, typed_space

MAX_CODE_CHARS = 12_000
MAX_PARAMS = 4
MAX_VALUES = 16
MAX_VALUE = 4096
MAX_CONFIGS = 4096
MAX_CONSTRAINTS = 16
MAX_EXPR_CHARS = 200

INTRINSICS = frozenset(
    """
__syncthreads __syncwarp __threadfence_block __shfl_sync __shfl_xor_sync __shfl_up_sync __shfl_down_sync
__ballot_sync __any_sync __all_sync __activemask __popc __popcll __clz __ffs __brev __ldg __fdividef __expf
__logf __sinf __cosf __powf __fmaf_rn __fmul_rn __fadd_rn __frcp_rn __fsqrt_rn __saturatef __float2int_rn
__int2float_rn __float2half __half2float __float2bfloat16 __bfloat162float __mul24 __umul24 __umulhi __mulhi
sqrtf rsqrtf cbrtf expf exp2f expm1f logf log2f log1pf log10f powf sinf cosf tanf tanhf sinhf coshf erff erfcf
fabsf fminf fmaxf fmaf floorf ceilf roundf truncf rintf copysignf
sqrt rsqrt exp exp2 log log2 pow sin cos tan tanh erf fabs fmin fmax fma floor ceil round trunc
static_cast reinterpret_cast min max abs make_float2 make_float3 make_float4 make_int2 make_int4 make_double2 make_uint2 make_uint4
""".split()
)
ATOMICS = re.compile(r"^atomic[A-Z]\w*$")
ADDRESS_SPACE_CALLS = re.compile(r"^__cvta_\w+$|^cvta\w*$|^__isShared$|^__isGlobal$|^__builtin_\w+$")
CAST_QUALIFIERS = re.compile(
    r"\(\s*(?:const\s+)?(?:__shared__|__constant__|__device__|__local__)\b"
    r"|_cast\s*<[^>]*\b(?:__shared__|__constant__|__local__)\b"
    r"|__attribute__\s*\(\(\s*address_space"
)
KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "int long register return short signed sizeof static struct switch typedef union unsigned "
    "void volatile while bool true false class template typename".split()
)


@dataclass(frozen=True)
class Original:
    """What the rules compare a template with: the file, the kernel, what it reaches."""

    model: SourceModel
    kernel: Function
    reachable: frozenset[str]
    """Device functions the original kernel calls, directly or not."""
    atomic_buffers: frozenset[str]
    """Buffers (kernel parameters) the original updates with atomics."""
    hw: object

    @classmethod
    def of(cls, model: SourceModel, kernel: str, hw: object) -> Original:
        function = next(f for f in model.functions if f.name == kernel and f.kind is FunctionKind.KERNEL)
        closure = closure_functions(model, function)
        names = frozenset(f.name for f in closure if f.name != kernel)
        atomic = frozenset(_atomic_targets(model, {f.name for f in closure}))
        return cls(model, function, names, atomic, hw)

    @property
    def scalars(self) -> frozenset[str]:
        return frozenset(p.name for p in self.kernel.params if "*" not in p.ctype and "[" not in p.ctype)


@dataclass(frozen=True)
class Parsed:
    """A template's code parsed on its own."""

    model: SourceModel
    function: Function | None


def _atomic_targets(model: SourceModel, callers: set[str]) -> list[str]:
    data = model.source.data
    found = []
    for call in model.calls:
        if call.caller in callers and ATOMICS.match(call.callee):
            found += _buffer_of(data[call.args_span.start : call.args_span.end].decode("utf-8", "replace"))
    return found


def _buffer_of(args: str) -> list[str]:
    """The buffer a call's first argument points into (`&out[i]`, `out + i`)."""
    first = args.strip().lstrip("(").split(",")[0]
    match = re.search(r"[A-Za-z_]\w*", first)
    return [match.group(0)] if match else []


def parse_template(template: Template) -> Parsed:
    source = validate_bytes(f"<template of {template.kernel}>", template.code.encode("utf-8"))
    model = parse_model(source)
    kernels = [f for f in model.functions if f.name == template.kernel]
    return Parsed(model, kernels[0] if kernels else None)


Rule = Callable[[Template, Original, Parsed], Refusal | None]


def size(t: Template, o: Original, p: Parsed) -> Refusal | None:
    if len(t.code) > MAX_CODE_CHARS:
        return Refusal("too-large", f"the code is {len(t.code)} characters (at most {MAX_CODE_CHARS})")
    if len(t.params) > MAX_PARAMS:
        return Refusal("too-large", f"{len(t.params)} parameters (at most {MAX_PARAMS})")
    if len(t.constraints) > MAX_CONSTRAINTS or any(
        len(c) > MAX_EXPR_CHARS for c in (*t.constraints, *t.grid, *t.block)
    ):
        return Refusal(
            "too-large", f"at most {MAX_CONSTRAINTS} constraints, each expression at most {MAX_EXPR_CHARS} characters"
        )
    return None


def space(t: Template, o: Original, p: Parsed) -> Refusal | None:
    for name, values in t.params:
        if len(values) > MAX_VALUES:
            return Refusal(
                "space-unbounded",
                f"`{name}` has {len(values)} values (at most {MAX_VALUES}: the space "
                "must be small enough to verify a covering sample)",
            )
        if values[0] < 1 or values[-1] > MAX_VALUE:
            return Refusal("space-unbounded", f"`{name}` takes values outside 1..{MAX_VALUE}")
    typed = typed_space(t)
    if isinstance(typed, Refusal):
        return typed
    if typed.cardinality() > MAX_CONFIGS:
        return Refusal("space-unbounded", f"{typed.cardinality()} configurations (at most {MAX_CONFIGS})")
    return None


def names(t: Template, o: Original, p: Parsed) -> Refusal | None:
    taken = set(re.findall(rb"[A-Za-z_]\w*", o.model.source.data))
    for name, _ in t.params:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or name in KEYWORDS:
            return Refusal("param-name", f"`{name}` is not an upper-case identifier")
        if name.encode() in taken:
            return Refusal("param-name", f"`{name}` is already a name in the file (a parameter must be new to it)")
    return None


def constraints(t: Template, o: Original, p: Parsed) -> Refusal | None:
    typed = typed_space(t)
    if isinstance(typed, Refusal):
        return typed
    known = {n for n, _ in t.params} | set(hw_env(o.hw))
    for constraint in typed.constraints:
        unknown = sorted(constraint.params - known)
        if unknown:
            return Refusal(
                "constraint-name",
                f"constraint `{constraint.text}` names {unknown[0]}, which is neither a parameter nor a hw.* field",
            )
    if not _any_valid(typed, o.hw):
        return Refusal("space-empty", "no configuration meets the constraints")
    return None


def _any_valid(space: ParamSpace, hw: object) -> bool:
    import itertools

    names = space.names
    for values in itertools.product(*(p.values for p in space.params)):
        if space.is_valid(dict(zip(names, values)), hw):
            return True
    return not names


def launch(t: Template, o: Original, p: Parsed) -> Refusal | None:
    known = {n for n, _ in t.params} | o.scalars
    for what, dims in (("grid", t.grid), ("block", t.block)):
        if not 1 <= len(dims) <= 3:
            return Refusal("launch", f"`{what}` has {len(dims)} dimensions (1 to 3)")
        for text in dims:
            try:
                expr = parse_expr(text)
            except SpecError as exc:
                return Refusal("launch-syntax", f"{what} `{text}`: {exc.cause}")
            unknown = sorted(
                set(re.findall(r"[A-Za-z_]\w*", str(expr))) - known - {"ceil_div", "min", "max", "round_up"}
            )
            if unknown:
                return Refusal(
                    "launch-name",
                    f"{what} `{text}` names `{unknown[0]}`: only the kernel's scalar "
                    f"parameters ({', '.join(sorted(o.scalars)) or 'none'}) and the template's parameters",
                )
    return None


def syntax(t: Template, o: Original, p: Parsed) -> Refusal | None:
    issues = p.model.syntax_issues
    if issues:
        line = t.code.encode()[: issues[0].span.start].count(b"\n") + 1
        return Refusal("parse", f"the code does not parse (line {line} of the template)")
    return None


def preprocessor(t: Template, o: Original, p: Parsed) -> Refusal | None:
    if p.model.includes:
        return Refusal("include", "the template adds an #include")
    if p.model.macros or re.search(r"^\s*#", t.code, re.M):
        return Refusal("preprocessor", "the template holds a preprocessor line (#define, #pragma, #if ...)")
    return None


def one_definition(t: Template, o: Original, p: Parsed) -> Refusal | None:
    if p.function is None:
        return Refusal("not-the-kernel", f"the code holds no definition of `{t.kernel}`")
    others = [f.name for f in p.model.functions if f.name != t.kernel]
    if others:
        return Refusal(
            "host-code",
            f"the template defines `{others[0]}` besides the kernel (only the kernel's own definition may change)",
        )
    if p.function is None or len(p.model.functions) != 1:
        return Refusal("not-the-kernel", f"the code is not one definition of `{t.kernel}`")
    if p.model.launches:
        return Refusal("host-code", "the template launches a kernel")
    outside = p.model.source.data[: p.function.span.start] + p.model.source.data[p.function.span.end :]
    if outside.strip(b" \t\r\n;"):
        return Refusal("global", "the template declares something outside the kernel's definition")
    return None


def signature(t: Template, o: Original, p: Parsed) -> Refusal | None:
    assert p.function is not None
    if p.function.kind is not FunctionKind.KERNEL:
        return Refusal("signature", f"`{t.kernel}` is no longer a __global__ kernel")
    old = [" ".join(q.ctype.split()) for q in o.kernel.params]
    new = [" ".join(q.ctype.split()) for q in p.function.params]
    if [q.name for q in o.kernel.params] != [q.name for q in p.function.params] or old != new:
        return Refusal("signature", f"the parameters changed: ({', '.join(new)}) instead of ({', '.join(old)})")
    if p.function.template_params:
        return Refusal("signature", "the kernel became a C++ template: callers would change")
    return None


def forbidden(t: Template, o: Original, p: Parsed) -> Refusal | None:
    if re.search(r"\b(?:asm|__asm__|__asm)\b", t.code):
        return Refusal("asm", "inline assembly is not allowed")
    if re.search(r"\b(?:printf|fprintf|puts|malloc|free|new|delete)\b", t.code):
        return Refusal("printf", "printf and allocation are not allowed in a template")
    if CAST_QUALIFIERS.search(t.code):
        return Refusal("address-space", "a cast into another address space")
    return None


def calls(t: Template, o: Original, p: Parsed) -> Refusal | None:
    for call in p.model.calls:
        if ADDRESS_SPACE_CALLS.match(call.callee):
            return Refusal("address-space", f"`{call.callee}` converts between address spaces")
        if ATOMICS.match(call.callee):
            continue
        if call.callee not in INTRINSICS and call.callee not in o.reachable:
            return Refusal(
                "call",
                f"`{call.callee}` is neither a device function the original reaches nor an allowed CUDA intrinsic",
            )
    return None


def atomics(t: Template, o: Original, p: Parsed) -> Refusal | None:
    new = set(_atomic_targets(p.model, {t.kernel})) - o.atomic_buffers
    if new:
        return Refusal("atomic", f"atomics on `{sorted(new)[0]}`, which the original never updates atomically")
    return None


RULES: tuple[Rule, ...] = (
    size,
    space,
    names,
    constraints,
    launch,
    syntax,
    preprocessor,
    one_definition,
    signature,
    forbidden,
    calls,
    atomics,
)


def validate(template: Template, original: Original) -> Refusal | None:
    """The first rule `template` breaks, or None: it may be compiled and run."""
    parsed = parse_template(template)
    for rule in RULES:
        refusal = rule(template, original, parsed)
        if refusal is not None:
            return refusal
    return None
