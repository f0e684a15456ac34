"""The text `vectorize` writes: the kernel's body with a vector path and a scalar path,
the width as a named constant before the kernel, and the grids that follow it.

    (the declarations before the guard that do not read the index, once)
    const int kx_v = blockIdx.x * blockDim.x + threadIdx.x;   // this thread's vector
    const int kx_first = kx_v * W;                             // its first element
    if (kx_first + W <= (N) && aligned && disjoint) {          // whole, aligned, no overlap
        float kx_inp[W]; ...  one vector load per widened buffer read
        for each lane: `int i = kx_first + lane;` and the work, `inp[i]` -> `kx_inp[lane]`
        one vector store per widened buffer written
    } else {                                                   // the tail, or a check failed
        for each lane: `int i = kx_first + lane;` and the guarded work as written
    }

The lanes run in order and each does the original work of its element, so no
arithmetic is reordered; the vector path only moves the loads before the lanes and the
stores after them, which the disjointness check (or `__restrict__`) makes unobservable.
"""

from __future__ import annotations

import re

from kxform.engine import launch_site
from kxform.engine.edits import Edit
from kxform.frontend.launches import launch_configs
from kxform.frontend.model import Function, SourceModel
from kxform.passes.vectorize.facts import VECTOR_TYPES, KernelFacts

PREFIX = "kx_e_"


def width_name(kernel: str) -> str:
    return f"{kernel.upper()}_VEC"


def kernel_body(facts: KernelFacts, kernel: Function, width: int, newline: str = "\n") -> str:
    shape = facts.shape
    assert shape is not None
    ind = shape.body_indent
    name = width_name(kernel.name)
    ctype = re.sub(r"\bconst\s+", "", shape.ctype)
    wide = facts.widened
    checks = [f"kx_first + {name} <= ({shape.bound})"]
    for b in wide:
        checks.append(f"(unsigned long long)({b.name}) % {width * b.size} == 0")
    written = [b for b in wide if b.written]
    for i, a in enumerate(wide):
        for b in wide[i + 1 :]:
            if (a.written or b.written) and not (a.restrict and b.restrict):
                checks.append(
                    f"(({_end(a.name, shape.bound)} <= (unsigned long long)({b.name})) || "
                    f"({_end(b.name, shape.bound)} <= (unsigned long long)({a.name})))"
                )
    work = shape.work
    for b in wide:
        work = re.sub(
            rf"(?<![\w.]){re.escape(b.name)}\s*\[\s*{re.escape(shape.var)}\s*\]", f"{PREFIX}{b.name}[kx_j]", work
        )
    lines = [
        *(f"{ind}{statement}" for statement in shape.prelude),
        f"{ind}const {ctype} kx_v = blockIdx.x * blockDim.x + threadIdx.x;",
        f"{ind}const {ctype} kx_first = kx_v * {name};",
        f"{ind}if ({(' &&' + newline + ind + '    ').join(checks)}) {{",
    ]
    inner = ind * 2
    for element in dict.fromkeys(b.element for b in wide):
        vt = VECTOR_TYPES[width * next(b.size for b in wide if b.element == element)]
        lines.append(
            f'{inner}static_assert(sizeof({vt}) == {name} * sizeof({element}), "{name}: one {vt} of '
            f'{element} per thread");'
        )
    for b in wide:
        vt = VECTOR_TYPES[width * b.size]
        lines.append(f"{inner}{b.element} {PREFIX}{b.name}[{name}];")
        if b.read or b.conditional_write:
            lines.append(
                f"{inner}{{ const {vt} kx_t = reinterpret_cast<const {vt}*>({b.name})[kx_v]; "
                f"memcpy({PREFIX}{b.name}, &kx_t, sizeof(kx_t)); }}"
            )
    reads_var = re.search(rf"(?<![\w.]){re.escape(shape.var)}(?!\w)", work) is not None
    lines += [
        f"{inner}#pragma unroll",
        f"{inner}for (int kx_j = 0; kx_j < {name}; ++kx_j) {{",
        *([f"{inner}{ind}{shape.ctype} {shape.var} = kx_first + kx_j;"] if reads_var else []),
        *_indented(work, inner + ind),
        f"{inner}}}",
    ]
    for b in written:
        vt = VECTOR_TYPES[width * b.size]
        lines.append(
            f"{inner}{{ {vt} kx_t; memcpy(&kx_t, {PREFIX}{b.name}, sizeof(kx_t)); "
            f"reinterpret_cast<{vt}*>({b.name})[kx_v] = kx_t; }}"
        )
    lines += [
        f"{ind}}} else {{",
        f"{inner}for (int kx_j = 0; kx_j < {name}; ++kx_j) {{",
        f"{inner}{ind}{shape.ctype} {shape.var} = kx_first + kx_j;",
        *_indented(shape.guarded, inner + ind),
        f"{inner}}}",
        f"{ind}}}",
    ]
    return newline + newline.join(lines) + newline


def _end(name: str, bound: str) -> str:
    return f"(unsigned long long)({name} + ({bound}))"


def _indented(text: str, indent: str) -> list[str]:
    """`text`'s lines re-indented under `indent`, keeping their relative indentation."""
    rows = [r.rstrip() for r in text.strip("\n").split("\n")]
    rows = [r for r in rows if r.strip()] or [""]
    if len(rows) == 1:
        return [indent + rows[0].strip()]
    common = min(len(r) - len(r.lstrip()) for r in rows[1:]) if len(rows) > 1 else 0
    first = rows[0].strip()
    out = [indent + first] if first else []
    return out + [indent + r[common:] for r in rows[1:]]


def grid_edits(model: SourceModel, kernel: Function, bound: str, name: str, origin: str) -> list[Edit] | str:
    """Edits that make every launch's grid count vectors, not elements: the guard's bound,
    as the launch passes it, becomes `((bound + W - 1) / W)`; or why not."""
    data = model.source.data
    edits: list[Edit] = []
    for config in launch_configs(model, kernel.name):
        renamed = _host_text(bound, kernel, config.site.args)
        if renamed is None:
            return (
                f"the guard's bound `{bound}` is not passed plainly at the launch (line "
                f"{model.source.line_col(config.site.span.start)[0]})"
            )
        pattern = re.compile(
            r"(?<![\w.])" + r"\s*".join(re.escape(t) for t in re.findall(r"\w+|\S", renamed)) + r"(?![\w])"
        )
        found = 0
        for span in launch_site.grid_spans(model, config, 0):
            text = data[span.start : span.end].decode("utf-8")
            for match in pattern.finditer(text):
                at = span.start + len(text[: match.start()].encode("utf-8"))
                end = span.start + len(text[: match.end()].encode("utf-8"))
                edits.append(Edit(at, end, f"(({match.group(0)} + {name} - 1) / {name})", origin))
                found += 1
        if not found:
            return (
                f"the grid of the launch at line {model.source.line_col(config.site.span.start)[0]} does not "
                f"read the guard's bound `{renamed}`, so it cannot count vectors"
            )
    return edits


def _host_text(bound: str, kernel: Function, args: tuple[str, ...]) -> str | None:
    mapping = {p.name: a.strip() for p, a in zip(kernel.params, args)}
    bad = False

    def swap(match: re.Match[str]) -> str:
        nonlocal bad
        arg = mapping.get(match.group(0))
        if arg is None or not re.fullmatch(r"[A-Za-z_]\w*|\d+", arg):
            bad = bad or arg is None and match.group(0) in mapping
            return match.group(0) if arg is None else f"({arg})"
        return arg

    out = re.sub(r"[A-Za-z_]\w*", swap, bound)
    return None if bad or "(" in out and "(" not in bound else out
