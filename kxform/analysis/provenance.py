"""Where the pointers a launch passes come from, and whether two of them may alias.

A rewrite that reorders one thread's accesses (a row shared over lanes, wide loads) is
right only when the buffers it reorders do not overlap. The access analysis assumes
distinct pointer parameters do not alias; the launch decides. Each pointer argument of a
launch is followed, in host code, to the allocation it points into:

* `y`, `(float*)y`, `y + n`, `y - 1`, `&y[k]`: the allocation of `y`, at an offset;
* a local of the launcher assigned once by `cudaMalloc(&y, ...)` (`hipMalloc`,
  `cudaMallocManaged`, `cudaMallocAsync`, `malloc`, `new T[...]`), or a host array:
  an allocation of its own, named by the declaration;
* a local initialised from another pointer (`float* p = y + 1;`): followed;
* a parameter of the launcher: followed to every call of the launcher in the files of
  the run (each call a context of its own, the arguments read together), four levels up.

Anything else (a member, a call, a pointer assigned twice, a launcher nobody in the run
calls) has unknown provenance. Two arguments alias when, in some calling context, they
come from one allocation (the same pointer, or offsets of it); they are distinct when
they come from two allocations in every context; otherwise it is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from kxform.frontend.lexical import blank_comments_and_strings
from kxform.frontend.model import Function, FunctionKind, SourceModel, once
from kxform.frontend.queries import split_args

MAX_DEPTH = 4
"""Launcher parameters are followed through at most this many levels of callers."""

_CAST_RE = re.compile(
    r"^\(\s*(?:const\s+)?[A-Za-z_][\w:<>\s]*\*+\s*(?:const\s*)?\)\s*|"
    r"^(?:static|reinterpret|const)_cast\s*<[^>]*>\s*"
)
_NAME = r"[A-Za-z_]\w*"
_ALLOCATORS = (
    r"(?:cudaMalloc|cudaMallocManaged|cudaMallocAsync|cudaMallocHost|cudaHostAlloc|hipMalloc|hipMallocManaged)"
)


@dataclass(frozen=True)
class Origin:
    """Where one pointer argument points: into allocation `key` (at some offset), or
    unknown (`key` empty) with the reason."""

    key: str
    where: str
    """`file:line` of the allocation or of what stopped the search, for messages."""
    why: str = ""

    @property
    def known(self) -> bool:
        return bool(self.key)


Relation = Literal["alias", "distinct", "unknown"]


@dataclass(frozen=True)
class Pair:
    """Whether two arguments of a launch may alias, with the context that says so."""

    relation: Relation
    detail: str


ModelsCalling = Callable[[str], Iterable[SourceModel]]
"""The models of the run that may call a function of this name (the launcher's callers)."""


def relation(
    model: SourceModel, function: str | None, offset: int, exprs: tuple[str, str], calling: ModelsCalling
) -> Pair:
    """How the two argument expressions `exprs` of a launch at `offset` of `model` (in
    host function `function`) relate, over every calling context the run shows."""
    contexts = _contexts(model, function, offset, exprs, calling, 0)
    worst: Pair | None = None
    for a, b in contexts:
        if a.known and b.known and a.key == b.key:
            return Pair("alias", f"point into one allocation ({a.where})")
        if not (a.known and b.known):
            unknown = a if not a.known else b
            worst = Pair(
                "unknown", f"where '{exprs[0] if not a.known else exprs[1]}' points is unknown ({unknown.why})"
            )
    return worst or Pair("distinct", "distinct allocations in every calling context the run shows")


def _contexts(
    model: SourceModel,
    function: str | None,
    offset: int,
    exprs: tuple[str, ...],
    calling: ModelsCalling,
    depth: int,
) -> list[tuple[Origin, ...]]:
    host = _function_at(model, function, offset)
    if host is None:
        return [tuple(Origin("", _where(model, offset), "outside a host function") for _ in exprs)]
    origins: list[Origin | int] = []  # an int: the launcher's parameter of that index
    bases = [_base(text) if text else None for text in exprs]
    for text, base in zip(exprs, bases):
        if base is not None and bases.count(base) > 1:  # one name read twice at one place: one pointer
            origins.append(Origin(f"{model.source.path}@{offset}:{base}", _where(model, offset)))
        else:
            origins.append(_origin(model, host, offset, text))
    params = [o for o in origins if isinstance(o, int)]
    if not params:
        return [tuple(o for o in origins if isinstance(o, Origin))]
    if depth >= MAX_DEPTH:
        return [tuple(_stop(model, host, o, "callers followed too deep") for o in origins)]
    calls = [(m, c) for m in calling(host.name) for c in m.calls if c.callee == host.name]
    calls = [(m, c) for m, c in calls if c.arg_count == len(host.params)]
    if not calls:
        return [tuple(_stop(model, host, o, f"no call of '{host.name}' in the files of the run") for o in origins)]
    out: list[tuple[Origin, ...]] = []
    for caller_model, call in calls:
        data = caller_model.source.data
        args = split_args(data[call.args_span.start + 1 : call.args_span.end - 1].decode("utf-8", "replace"))
        wanted = tuple(args[o] if isinstance(o, int) else "" for o in origins)
        found = _contexts(caller_model, call.caller, call.span.start, wanted, calling, depth + 1)
        for context in found:
            out.append(tuple(o if isinstance(o, Origin) else context[i] for i, o in enumerate(origins)))
    return out


def _stop(model: SourceModel, host: Function, origin: Origin | int, why: str) -> Origin:
    if isinstance(origin, Origin):
        return origin
    return Origin(
        "", _where(model, host.span.start), f"'{host.params[origin].name}' is a parameter of '{host.name}': {why}"
    )


def _function_at(model: SourceModel, name: str | None, offset: int) -> Function | None:
    return next(
        (f for f in model.functions if f.kind is FunctionKind.HOST and f.body.start <= offset < f.body.end),
        None,
    )


def _where(model: SourceModel, offset: int) -> str:
    return f"{model.source.path}:{model.source.line_col(offset)[0]}"


def _base(text: str) -> str | None:
    """The pointer an argument expression offsets: `y` of `(float*)y - 1`, `&y[k]`, `y + n`."""
    text = text.strip()
    for _ in range(4):
        stripped = _CAST_RE.sub("", text).strip()
        if stripped.startswith("(") and stripped.endswith(")") and _balanced(stripped[1:-1]):
            stripped = stripped[1:-1].strip()
        if stripped == text:
            break
        text = stripped
    address = re.fullmatch(rf"&\s*({_NAME})\s*\[.*\]", text, re.S)
    if address:
        return address.group(1)
    moved = re.fullmatch(rf"({_NAME})(?:\s*[-+]\s*[^,]+)?", text, re.S)
    return moved.group(1) if moved else None


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += char == "("
        depth -= char == ")"
        if depth < 0:
            return False
    return depth == 0


def _origin(model: SourceModel, host: Function, before: int, text: str) -> Origin | int:
    """The origin of pointer expression `text` read in `host` before `before`, or the index
    of the launcher's parameter it offsets (its callers decide)."""
    name = _base(text)
    if name is None:
        return Origin("", _where(model, before), f"'{text.strip()}' is not a pointer kxform can follow")
    body = _body_text(model, host)
    start, limit = host.body.start, before - host.body.start
    pointers = list(re.finditer(rf"\*\s*(?:const\s+|__restrict__\s+)*{name}\s*(=|;|,|\))", body[:limit]))
    array = re.search(rf"\b[A-Za-z_][\w:<>]*\s+{name}\s*\[[^\]]+\]\s*;", body[:limit])
    if array and not pointers:
        return Origin(f"{model.source.path}:{start + array.start()}", _where(model, start + array.start()))
    if not pointers:
        index = next((i for i, p in enumerate(host.params) if p.name == name), None)
        if index is not None:
            return index
        return Origin(f"{model.source.path}:global:{name}", _where(model, before))
    decl = pointers[-1]
    at = start + decl.start()
    sources: list[str] = []
    if decl.group(1) == "=":
        value = _initializer(body, decl.end())
        if value.strip() not in ("nullptr", "NULL", "0"):
            sources.append(value)
    rest = body[decl.end() : limit]
    sources += [m.group(1) for m in re.finditer(rf"(?<![\w.>]){name}\s*=(?!=)\s*([^;]+);", rest)]
    allocated = list(re.finditer(rf"{_ALLOCATORS}\s*\(\s*(?:\(\s*void\s*\*\*\s*\)\s*)?&\s*{name}\b", rest))
    taken = re.findall(rf"&\s*{name}\b", rest)
    if len(taken) > len(allocated):
        return Origin("", _where(model, at), f"the address of '{name}' is passed to code kxform does not follow")
    if len(sources) + len(allocated) != 1:
        what = "set more than once" if sources or allocated else "set by nothing kxform follows"
        return Origin(
            "", _where(model, at), f"'{name}' (line {model.source.line_col(at)[0]}) is {what} before the launch"
        )
    if allocated or re.match(r"\(?\s*(?:\([^)]*\)\s*)?(?:malloc|calloc|aligned_alloc)\s*\(|new\b", sources[0].strip()):
        return Origin(f"{model.source.path}:{at}", _where(model, at))
    return _origin(model, host, at, sources[0])


def _body_text(model: SourceModel, host: Function) -> str:
    return once(
        model,
        f"provenance_body@{host.span.start}",
        lambda: blank_comments_and_strings(model.source.data[host.body.start : host.body.end].decode("latin-1")),
    )


def _initializer(body: str, start: int) -> str:
    depth = 0
    for i in range(start, len(body)):
        char = body[i]
        depth += char in "([{"
        depth -= char in ")]}"
        if depth == 0 and char in ";,":
            return body[start:i]
        if depth < 0:
            return body[start:i]
    return body[start:]
