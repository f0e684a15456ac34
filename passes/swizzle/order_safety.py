"""Check (c): refuse kernels whose correctness can depend on the order blocks run in.

CUDA guarantees no order between blocks, so a kernel whose blocks only share work
through the index is safe under any bijection. It is not safe when forward progress
depends on dispatch order: spin-waits on flags written by "earlier" blocks (chained
scans, decoupled look-back: through volatile names, volatile casts, atomics, acquire loads,
namespace-scope volatile flags, or a device helper that polls), cooperative
`grid.sync()`, thread-block clusters (a block's cluster rank follows its physical index),
or inline PTX reading `%ctaid` behind kxform's back. The checks are syntactic and
deliberately conservative.
"""

from __future__ import annotations

import functools
import re

import tree_sitter

from kxform.frontend.cuda import _language
from kxform.frontend.model import Function, FunctionKind, SourceModel
from kxform.engine.pass_api import Blocker

POLL_CALL_RE = re.compile(
    r"\b(atomicAdd|atomicOr|atomicCAS|atomicExch|atomicMax|atomicMin|atomicAnd|atomicXor|atomicInc|atomicDec|"
    r"__ldcg|__ldcv|__ldvolatile|__ldacquire|ld_acquire|load_acquire|atomic_load\w*|__atomic_load\w*)\s*\("
    r"|\.load\s*\(|\bld\.(acquire|volatile|relaxed)"
)
VOLATILE_DECL_RE = re.compile(r"\bvolatile\b[^;(){}]*?[\s*&]([A-Za-z_]\w*)\s*(?=[,;)=\[])")
GRID_SYNC_RE = re.compile(r"\b(this_grid|grid_group|sync_grids|__syncgrid)\b")
CTAID_RE = re.compile(r"%(n?ctaid|clusterid|nclusterid|cluster_ctaid|cluster_ctarank)")
VOLATILE_CAST_RE = re.compile(r"\(\s*(?:const\s+)?volatile\b[^()]*\*\s*\)|\bvolatile\s*[A-Za-z_][\w:]*\s*\*\s*\)")
ASSIGN_RE = re.compile(r"\b([A-Za-z_]\w*)\s*(?<![=!<>])=(?!=)([^;]*);")
CLUSTER_ATTR_RE = re.compile(r"__cluster_dims__\s*\(|__cluster_dims__")
CLUSTER_USE_RE = re.compile(
    r"\b(this_cluster|cluster_group|cluster_sync|cluster\.sync|%cluster_\w+|"
    r"block_rank_in_cluster|map_shared_rank|barrier\.cluster)\b"
)
CLUSTER_LAUNCH_RE = re.compile(
    r"\bcudaLaunchAttributeClusterDimension\b|\bclusterDim\b|"
    r"\bcudaFuncAttributeRequiredClusterWidth\b|\bcudaFuncAttributeNonPortableClusterSizeAllowed\b"
)

_LOOPS = "[(while_statement) (do_statement) (for_statement)] @loop"
_ASM = "(gnu_asm_expression) @asm"


@functools.cache
def _query(text: str) -> tree_sitter.Query:
    return tree_sitter.Query(_language(), text)


def _nodes(query: str, node: tree_sitter.Node) -> list[tree_sitter.Node]:
    return [n for nodes in tree_sitter.QueryCursor(_query(query)).captures(node).values() for n in nodes]


def _body_node(model: SourceModel, function: Function) -> tree_sitter.Node | None:
    return model.tree.root_node.descendant_for_byte_range(function.body.start, function.body.end)


def _spin_wait(loop: tree_sitter.Node, volatile_names: set[str], pollers: set[str]) -> bool:
    """A loop that polls memory: its condition (or, for an endless loop, its exit test)
    reads through a volatile name, a volatile cast, an atomic or acquire load, or a
    device function that does; or its body assigns a variable the condition tests from
    such a read (`do { v = atomicAdd(f, 0); } while (v == 0);`)."""
    condition = loop.child_by_field_name("condition")
    body = loop.child_by_field_name("body")
    cond_text = condition.text.decode("utf-8") if condition is not None and condition.text else ""
    body_text = body.text.decode("utf-8") if body is not None and body.text else ""
    text = cond_text
    if not cond_text.strip() or cond_text.strip("() \t") in ("true", "1"):
        if "break" not in body_text and "return" not in body_text:
            return False
        text = body_text
    if _polls(text, volatile_names, pollers):
        return True
    tested = set(re.findall(r"[A-Za-z_]\w*", cond_text))
    for assigned, value in ASSIGN_RE.findall(body_text):
        if assigned in tested and "atomicCAS" not in value and _polls(value, volatile_names, pollers):
            return True  # (a compare-and-swap retry loop progresses on its own: not a poll)
    return False


def _polls(text: str, volatile_names: set[str], pollers: set[str]) -> bool:
    if POLL_CALL_RE.search(text) or VOLATILE_CAST_RE.search(text):
        return True
    words = set(re.findall(r"[A-Za-z_]\w*", text))
    return bool(words & volatile_names) or any(re.search(rf"\b{re.escape(p)}\s*\(", text) for p in pollers)


def _global_volatiles(model: SourceModel) -> set[str]:
    """Names declared volatile outside every function (`__device__ volatile int flag;`)."""
    return set(_global_volatiles_of(model.tree))


@functools.lru_cache(maxsize=8)
def _global_volatiles_of(tree: object) -> frozenset[str]:
    """Once per parse tree: asked per kernel, the walk over the file's top level made the
    pass quadratic in the number of kernels."""
    names: set[str] = set()
    for node in tree.root_node.named_children:  # type: ignore[attr-defined]
        if node.type == "declaration" and node.text and b"volatile" in node.text:
            names |= set(VOLATILE_DECL_RE.findall(node.text.decode("utf-8", "replace")))
            names |= set(
                re.findall(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\])?\s*(?:=[^,;]*)?;", node.text.decode("utf-8", "replace"))
            )
    return frozenset(names)


def _pollers(model: SourceModel, functions: tuple[Function, ...], volatile_names: set[str]) -> set[str]:
    """Device functions of the closure whose body reads memory the way a poll does."""
    out: set[str] = set()
    for function in functions:
        text = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
        params = model.source.data[function.params_span.start : function.params_span.end].decode("utf-8", "replace")
        local = volatile_names | set(VOLATILE_DECL_RE.findall(params))
        if POLL_CALL_RE.search(text) or VOLATILE_CAST_RE.search(text) or set(re.findall(r"[A-Za-z_]\w*", text)) & local:
            out.add(function.name)
    return out


@functools.lru_cache(maxsize=8)
def _cluster_launch(text: str) -> re.Match[str] | None:
    """The first cluster launch of the file: searched once per file, not once per kernel
    (which made the pass quadratic in the number of kernels)."""
    return CLUSTER_LAUNCH_RE.search(text)


def _cluster(model: SourceModel, function: Function) -> str | None:
    header = model.source.data[function.span.start : function.body.start].decode("utf-8", "replace")
    body = model.source.data[function.body.start : function.body.end].decode("utf-8", "replace")
    found = CLUSTER_ATTR_RE.search(header) or CLUSTER_USE_RE.search(body)
    if found:
        return found.group(0).strip("( ")
    if function.kind is FunctionKind.KERNEL:
        launch = _cluster_launch(model.source.text)
        if (
            launch
            and any(s.kernel == function.name for s in model.launches)
            or launch
            and re.search(rf"\b{re.escape(function.name)}\b", model.source.text[launch.start() :])
        ):
            return launch.group(0)
    return None


def order_blockers(model: SourceModel, functions: tuple[Function, ...]) -> list[Blocker]:
    """Reasons a block-order change could break these functions (the kernel's closure)."""
    blockers: list[Blocker] = []
    globals_ = _global_volatiles(model)
    pollers = _pollers(model, functions, globals_)
    for function in functions:
        body = _body_node(model, function)
        if body is None:
            continue
        text = model.source.data[function.span.start : function.span.end].decode("utf-8")
        volatile_names = set(VOLATILE_DECL_RE.findall(text)) | globals_
        for loop in _nodes(_LOOPS, body):
            if _spin_wait(loop, volatile_names, pollers - {function.name}):
                blockers.append(
                    Blocker(
                        "SpinWait",
                        f"'{function.name}' spin-waits on memory written by other blocks "
                        "(its progress can depend on block order)",
                        loop.start_byte,
                    )
                )
                break
        sync = GRID_SYNC_RE.search(text)
        if sync:
            blockers.append(
                Blocker(
                    "GridSync",
                    f"'{function.name}' uses cooperative grid synchronisation ('{sync.group(1)}')",
                    function.span.start + sync.start(),
                )
            )
        cluster = _cluster(model, function)
        if cluster:
            blockers.append(
                Blocker(
                    "ThreadBlockCluster",
                    f"'{function.name}' uses thread-block clusters "
                    f"('{cluster}'): a block's cluster rank is tied to its physical index",
                    function.span.start,
                )
            )
        for asm in _nodes(_ASM, body):
            ptx = asm.text.decode("utf-8") if asm.text else ""
            found = CTAID_RE.search(ptx)
            if found:
                blockers.append(
                    Blocker(
                        "InlinePtxCtaid",
                        f"inline PTX in '{function.name}' reads %{found.group(1)} directly",
                        asm.start_byte,
                    )
                )
    reached = {n[len("<macro ") : -1] for f in functions for n in model.closure(f.name) if n.startswith("<macro ")}
    for name in sorted(reached):
        macro = model.macro(name)
        found = CTAID_RE.search(macro.body) if macro is not None else None
        if macro is not None and found:
            blockers.append(
                Blocker(
                    "InlinePtxCtaid", f"macro '{name}' holds inline PTX reading %{found.group(1)}", macro.span.start
                )
            )
    return blockers
