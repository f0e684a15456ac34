"""Check (c): refuse kernels whose correctness can depend on the order blocks run in.

CUDA guarantees no order between blocks, so a kernel whose blocks only share work
through the index is safe under any bijection. It is not safe when forward progress
depends on dispatch order: spin-waits on flags written by "earlier" blocks (chained
scans, decoupled look-back), cooperative `grid.sync()`, or inline PTX reading `%ctaid`
behind kxform's back. The checks are syntactic and deliberately conservative.
"""

from __future__ import annotations

import functools
import re

import tree_sitter

from kxform.frontend.cuda import _language
from kxform.frontend.model import Function, SourceModel
from kxform.engine.pass_api import Blocker

POLL_CALL_RE = re.compile(
    r"\b(atomicAdd|atomicOr|atomicCAS|atomicExch|atomicMax|atomicMin|atomicAnd|atomicXor|atomicInc|atomicDec|"
    r"__ldcg|__ldcv|__ldvolatile|__ldacquire|ld_acquire|load_acquire|atomic_load\w*|__atomic_load\w*)\s*\("
    r"|\.load\s*\(|\bld\.(acquire|volatile|relaxed)"
)
VOLATILE_DECL_RE = re.compile(r"\bvolatile\b[^;(){}]*?[\s*&]([A-Za-z_]\w*)\s*(?=[,;)=\[])")
GRID_SYNC_RE = re.compile(r"\b(this_grid|grid_group|sync_grids|__syncgrid)\b")
CTAID_RE = re.compile(r"%(n?ctaid|clusterid|nclusterid|cluster_ctaid)")

_LOOPS = "[(while_statement) (do_statement) (for_statement)] @loop"
_ASM = "(gnu_asm_expression) @asm"


@functools.cache
def _query(text: str) -> tree_sitter.Query:
    return tree_sitter.Query(_language(), text)


def _nodes(query: str, node: tree_sitter.Node) -> list[tree_sitter.Node]:
    return [n for nodes in tree_sitter.QueryCursor(_query(query)).captures(node).values() for n in nodes]


def _body_node(model: SourceModel, function: Function) -> tree_sitter.Node | None:
    return model.tree.root_node.descendant_for_byte_range(function.body.start, function.body.end)


def _spin_wait(loop: tree_sitter.Node, volatile_names: set[str]) -> bool:
    """A loop that polls memory: its condition (or, for an endless loop, its exit test)
    reads through a volatile name or an atomic/acquire load."""
    condition = loop.child_by_field_name("condition")
    text = condition.text.decode("utf-8") if condition is not None and condition.text else ""
    if not text.strip() or text.strip("() \t") in ("true", "1"):
        body = loop.child_by_field_name("body")
        text = body.text.decode("utf-8") if body is not None and body.text else ""
        if "break" not in text and "return" not in text:
            return False
    if POLL_CALL_RE.search(text):
        return True
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    return bool(words & volatile_names)


def order_blockers(model: SourceModel, functions: tuple[Function, ...]) -> list[Blocker]:
    """Reasons a block-order change could break these functions (the kernel's closure)."""
    blockers: list[Blocker] = []
    for function in functions:
        body = _body_node(model, function)
        if body is None:
            continue
        text = model.source.data[function.span.start:function.span.end].decode("utf-8")
        volatile_names = set(VOLATILE_DECL_RE.findall(text))
        for loop in _nodes(_LOOPS, body):
            if _spin_wait(loop, volatile_names):
                blockers.append(Blocker(
                    "SpinWait", f"'{function.name}' spin-waits on memory written by other blocks "
                    "(its progress can depend on block order)", loop.start_byte))
                break
        sync = GRID_SYNC_RE.search(text)
        if sync:
            blockers.append(Blocker("GridSync", f"'{function.name}' uses cooperative grid synchronisation "
                                    f"('{sync.group(1)}')", function.span.start + sync.start()))
        for asm in _nodes(_ASM, body):
            ptx = asm.text.decode("utf-8") if asm.text else ""
            found = CTAID_RE.search(ptx)
            if found:
                blockers.append(Blocker("InlinePtxCtaid", f"inline PTX in '{function.name}' reads "
                                        f"%{found.group(1)} directly", asm.start_byte))
    return blockers
