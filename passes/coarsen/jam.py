"""coarsen's `loads=once` for a body with one loop: the F outputs' loops run as one, and
what every output reads at an iteration (a GEMM's row of A along x) is loaded once.

The shape taken (after the thread indices):

    if (G) {              // or: if (C) return;  (G is then !(C))
        D                 // declarations only: per-output state (an accumulator)
        for (...) L       // one loop: no store to global memory, no break/continue/return
        E                 // the rest: per output
    }

becomes, with `kx_f` over the outputs and each name N declared in D kept in `kx_N[F]`
between the phases:

    ok[f] = G; if (ok[f]) D                     for every f
    if (any ok) for (...) {
        const T kx_s0 = A[i * K + k];           every load the same element for all f
        if (ok[f]) L                            for every f, kx_s0 in place of the load
    }
    if (ok[f]) E                                for every f

Each output's statements run in their order, with the same arithmetic: bit-exact. Outputs
interleave, which is how separate threads (what the outputs were) may run anyway. A load
is hoisted only if, in the original, every output that runs the iteration loads it there:
not under a condition inside the loop, its index reading only the loop's variable, the
other axis's index and launch parameters (`step == 0` in kxform.analysis.reuse). Nothing
stores to global memory inside the loop, so the register is never stale, whatever the
buffers alias: no run-time check.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

from kxform.analysis import AccessAnalysis
from kxform.analysis.affine import Affine
from kxform.analysis.reuse import Cacheable, cacheable
from kxform.analysis.thread_index import IndexDecl
from kxform.engine.edits import spliced
from kxform.frontend.model import Function, SourceModel

_TYPE_WORDS = re.compile(r"\b(?:const|constexpr|register)\b\s*")


@dataclass(frozen=True)
class Hoisted:
    """A load every output makes at an iteration: its register and where it is read."""

    register: str
    element: str
    text: str
    """The load as written (`A[(size_t)i * K + k]`), evaluated once per iteration."""
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Jam:
    guard: str
    """The condition under which an output runs (C text, parenthesised)."""
    declared: tuple[tuple[str, str, str], ...]
    """D's names: (type, name, initialiser or "")."""
    header: tuple[int, int]
    """The loop's `for (...)` (file bytes), kept as written."""
    body: tuple[int, int]
    epilogue: tuple[int, int] | None
    hoisted: tuple[Hoisted, ...]


def find_jam(
    model: SourceModel,
    kernel: Function,
    analysis: AccessAnalysis,
    axis: str,
    indices: tuple[IndexDecl, ...],
    able: Cacheable | None = None,
) -> Jam | str:
    """The jam of `kernel`'s body along `axis`, or why its shape is not one (one line).
    `indices`: the leading index declarations; `able`: the
    kernel's `cacheable` facts, when the caller has them."""
    data = model.source.data
    root = model.body_node(kernel)
    if root is None:
        return "the body is not a block"
    var = next(d.var for d in indices if d.axis == axis)
    rest = [n for n in root.named_children if n.type != "comment"][len(indices) :]
    guard, inner = _guarded(rest)
    if guard is None:
        return "the body after the indices is not one `if (...) { ... }` or an early `return` and the rest"
    declarations = list(itertools.takewhile(lambda n: n.type == "declaration", inner))
    after = inner[len(declarations) :]
    if not after or after[0].type != "for_statement":
        return "the guarded statements are not declarations and then one `for` loop"
    loop_node, epilogue = after[0], after[1:]
    loop = next((lp for lp in analysis.loops if lp.span.start == loop_node.start_byte), None)
    if loop is None or loop.exits or loop.barrier or not loop.var:
        return "the loop is not a counted loop without exits"
    body = loop_node.child_by_field_name("body")
    header = (loop_node.start_byte, body.start_byte)
    if re.search(rb"\bcontinue\b", data[body.start_byte : body.end_byte]):
        return "the loop's body has a `continue`"
    declared = []
    for node in declarations:
        names = _declared(node)
        if names is None:
            return f"the declaration `{_text(node)}` is not of plain names"
        declared += names
    names = {name for _, name, _ in declared}
    header_names = set(re.findall(r"[A-Za-z_]\w*", data[header[0] : header[1]].decode("utf-8")))
    if var in header_names or names & header_names:
        return "the loop's bounds read an output's own values"
    stores = [
        a
        for a in analysis.accesses
        if a.write
        and a.space != "local"
        and any(n.start_byte <= a.span.start < n.end_byte for n in [*declarations, loop_node])
    ]
    if stores:
        return f"the store `{stores[0].text}` (line {stores[0].line}) is before the loop's end"
    locals_ = (_locals(root) - {loop.var} - {d.var for d in indices}) | {var}
    able = able or cacheable(model, kernel, analysis)
    if able.writers:
        return f"the kernel calls `{able.writers[0]}`, which stores to memory: a hoisted load could pass its store"
    groups: dict[tuple[str, Affine], list[Any]] = {}
    for access in analysis.accesses:
        if access.loops != (loop.id,) or not body.start_byte <= access.span.start < body.end_byte:
            continue
        if any(g.span.start >= loop.span.start for g in access.guards):
            continue  # loaded only where a condition inside the loop holds
        split = able.load(access, axis, loop.var)
        text = data[access.span.start : access.span.end].decode("utf-8")
        if split is None or split.step != Affine() or set(re.findall(r"[A-Za-z_]\w*", text)) & locals_:
            continue
        groups.setdefault((access.buffer, split.rest), []).append(access)
    if not groups:
        return "no load in the loop reads the same element for every output"
    hoisted = tuple(
        Hoisted(
            f"kx_s{n}",
            able.pointers[buffer].element,
            data[found[0].span.start : found[0].span.end].decode("utf-8"),
            tuple((a.span.start, a.span.end) for a in found),
        )
        for n, ((buffer, _), found) in enumerate(groups.items())
    )
    end = (epilogue[0].start_byte, epilogue[-1].end_byte) if epilogue else None
    return Jam(guard, tuple(declared), header, (body.start_byte, body.end_byte), end, hoisted)


def jam_lines(
    jam: Jam, data: bytes, indices: tuple[IndexDecl, ...], axis: str, index: str, name: str, ind: str
) -> list[str]:
    """The jammed body: `index` is the coarsened axis's index declaration for output kx_f.

    Each phase of an output declares D's names as the original does and takes their
    values from (and gives them back to) arrays `kx_<name>[F]`, so the statements are the
    original's text, unchanged: the compiler sees the same expressions (its choice of
    where to fuse a multiply and an add into an FMA follows their shape; renaming `acc`
    to `acc[kx_f]` changed it for `beta * C + alpha * acc`)."""

    def text_of(span: tuple[int, int], replace: tuple[tuple[int, int, str], ...] = ()) -> str:
        return re.sub(r"\breturn\s*;", "continue;", spliced(data, span[0], span[1], replace))

    def block(text: str, depth: int) -> list[str]:
        rows = text.strip().split("\n")
        first = len(re.match(r"[ \t]*", rows[1]).group(0)) if len(rows) > 1 and rows[1].strip() else 0
        out = [ind * depth + rows[0].strip()]
        for row in rows[1:]:
            out.append(ind * depth + row[min(first, len(row) - len(row.lstrip())) :] if row.strip() else "")
        return out

    def each(statements: list[str]) -> list[str]:
        return [
            f"{ind}#pragma unroll",
            f"{ind}for (int kx_f = 0; kx_f < {name}; ++kx_f) {{",
            ind * 2 + index,
            *statements,
            f"{ind}}}",
        ]

    take = [f"{ind * 3}{ctype} {n} = kx_{n}[kx_f];" for ctype, n, _ in jam.declared]
    give = [f"{ind * 3}kx_{n}[kx_f] = {n};" for _, n, _ in jam.declared]
    other = [ind + d.text for d in indices if d.axis != axis]
    lines = [*other, f"{ind}bool kx_ok[{name}];"]
    lines += [f"{ind}{ctype} kx_{n}[{name}];" for ctype, n, _ in jam.declared]
    declare = [f"{ind * 3}{ctype} {n}{' = ' + init if init else ''};" for ctype, n, init in jam.declared]
    lines += each(
        [
            f"{ind * 2}kx_ok[kx_f] = {jam.guard};",
            *([f"{ind * 2}if (kx_ok[kx_f]) {{", *declare, *give, f"{ind * 2}}}"] if jam.declared else []),
        ]
    )
    lines += [
        f"{ind}bool kx_any = false;",
        f"{ind}#pragma unroll",
        f"{ind}for (int kx_f = 0; kx_f < {name}; ++kx_f)",
        f"{ind * 2}kx_any = kx_any || kx_ok[kx_f];",
    ]
    hoisted = tuple((s, e, h.register) for h in jam.hoisted for s, e in h.spans)
    header = data[jam.header[0] : jam.header[1]].decode("utf-8").strip()
    lines += [f"{ind}if (kx_any) {{", f"{ind * 2}{header} {{"]
    lines += [f"{ind * 3}const {h.element} {h.register} = {h.text};" for h in jam.hoisted]
    lines += [
        ind * 2 + row if row else ""
        for row in each(
            [f"{ind * 2}if (kx_ok[kx_f]) {{", *take, *block(text_of(jam.body, hoisted), 3), *give, f"{ind * 2}}}"]
        )
    ]
    lines += [f"{ind * 2}}}", f"{ind}}}"]
    if jam.epilogue is not None:
        lines += each([f"{ind * 2}if (kx_ok[kx_f]) {{", *take, *block(text_of(jam.epilogue), 3), f"{ind * 2}}}"])
    return lines


def _guarded(rest: list[Any]) -> tuple[str | None, list[Any]]:
    """(G, the statements it guards) for `if (G) {...}` alone or `if (C) return; ...`."""
    if not rest or rest[0].type != "if_statement" or rest[0].child_by_field_name("alternative") is not None:
        return None, []
    node = rest[0]
    condition = _text(node.child_by_field_name("condition")).strip()
    then = node.child_by_field_name("consequence")
    if len(rest) == 1 and then.type == "compound_statement":
        return condition, [n for n in then.named_children if n.type != "comment"]
    exits = then.type == "return_statement" or (
        then.type == "compound_statement"
        and [n.type for n in then.named_children if n.type != "comment"] == ["return_statement"]
    )
    if exits and not re.search(r"\breturn\s+[^;\s]", _text(then)):
        return f"(!{condition})", rest[1:]
    return None, []


def _declared(node: Any) -> list[tuple[str, str, str]] | None:
    """[(type, name, initialiser)] of `T a = x, b;` (None: arrays, pointers, references)."""
    declarators = node.children_by_field_name("declarator")
    if not declarators:
        return None
    ctype = _TYPE_WORDS.sub("", _text(node)[: declarators[0].start_byte - node.start_byte]).strip().rstrip(",")
    if not ctype or "static" in ctype or "__shared__" in ctype or "extern" in ctype:
        return None
    out = []
    for declarator in declarators:
        if declarator.type == "identifier":
            out.append((ctype, _text(declarator), ""))
        elif declarator.type == "init_declarator" and declarator.child_by_field_name("declarator").type == "identifier":
            value = declarator.child_by_field_name("value")
            if value is None or value.type == "initializer_list":
                return None
            out.append((ctype, _text(declarator.child_by_field_name("declarator")), _text(value)))
        else:
            return None
    return out


def _locals(root: Any) -> set[str]:
    """Every name declared inside the body (what a hoisted load may not read)."""
    out: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type in ("declaration", "parameter_declaration"):
            for declarator in node.children_by_field_name("declarator"):
                while declarator is not None and declarator.type != "identifier":
                    declarator = declarator.child_by_field_name("declarator")
                if declarator is not None:
                    out.add(_text(declarator))
        stack.extend(node.named_children)
    return out


def _text(node: Any) -> str:
    return node.text.decode("utf-8")
