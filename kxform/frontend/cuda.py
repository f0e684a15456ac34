"""Build a `SourceModel` from CUDA/HIP source with tree-sitter and the tree-sitter-cuda grammar.

tree-sitter-cpp mis-parses CUDA (`__global__` and `<<<...>>>` become error nodes), so the
CUDA grammar is used. Node collection runs as tree-sitter queries (in C); Python only
classifies the captures. Everything here is syntactic: names are resolved within the file.
`kxform.frontend.semantic` refines this with libclang where the syntax cannot tell.
"""

from __future__ import annotations

import bisect
import functools
import re

import networkx as nx
import tree_sitter
import tree_sitter_cuda

from kxform.frontend.model import (
    CallSite,
    Function,
    FunctionKind,
    IndexRead,
    Include,
    LaunchSite,
    MacroDef,
    MacroUse,
    Param,
    SourceModel,
    Span,
    SyntaxIssue,
)
from kxform.frontend.source import SourceText

INDEX_BUILTINS = ("blockIdx", "gridDim")
HIP_INDEX = {
    f"{prefix}_{axis}": (builtin, axis)
    for prefix, builtin in (("hipBlockIdx", "blockIdx"), ("hipGridDim", "gridDim"))
    for axis in "xyz"
}
LAUNCH_FUNCTIONS = {
    "hipLaunchKernelGGL": "hipLaunchKernelGGL",
    "cudaLaunchKernel": "cudaLaunchKernel",
    "cudaLaunchCooperativeKernel": "cudaLaunchKernel",
    "hipLaunchKernel": "cudaLaunchKernel",
}
MACRO_INDEX_RE = re.compile(
    r"\b(?P<b>blockIdx|gridDim)\b(?:\s*\.\s*(?P<a>[xyz])\b)?|\b(?P<hip>hip(?:BlockIdx|GridDim)_[xyz])\b"
)
WORD_RE = re.compile(r"[A-Za-z_]\w*")

_QUERIES = {
    "function": "(function_definition) @fn",
    "identifier": "(identifier) @id",
    "call": "(call_expression function: (_) @callee arguments: (argument_list) @args) @call",
    "macro": "[(preproc_def) (preproc_function_def)] @def",
    "include": "(preproc_include path: (_) @path) @inc",
}


@functools.cache
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_cuda.language())


@functools.cache
def _query(name: str) -> tree_sitter.Query:
    return tree_sitter.Query(_language(), _QUERIES[name])


def _captures(name: str, node: tree_sitter.Node) -> dict[str, list[tree_sitter.Node]]:
    return tree_sitter.QueryCursor(_query(name)).captures(node)


_PARSE_MASK_RE = re.compile(
    rb"^[ \t]*#[ \t]*pragma\b(?:[^\n]*\\\r?\n)*[^\n]*"  # a #pragma line (with continuations)
    rb"|\b__(?:builtin_)?align__\s*\(\s*\w+\s*\)"  # __align__(16): an attribute the grammar lacks
    rb"|\b__cluster_dims__\s*\([^()]*\)",  # __cluster_dims__(2, 1, 1): likewise
    re.M,
)


def mask_for_parse(data: bytes) -> bytes:
    """Blank what the grammar cannot place (same length, newlines kept), for parsing only.

    Real kernels put `#pragma unroll` between a `for` header and its body, where the
    grammar accepts no directive, and write `__shared__ __align__(16) T buf[]`. Blanking
    keeps every byte offset the same, and kxform never edits inside these.
    """
    if b"pragma" not in data and b"align__" not in data and b"__cluster_dims__" not in data:
        return data
    return _PARSE_MASK_RE.sub(lambda m: re.sub(rb"[^\r\n]", b" ", m.group(0)), data)


def parse_tree(data: bytes) -> tree_sitter.Tree:
    """Parse bytes with the CUDA grammar (a new parser per call: parsers are not thread-safe)."""
    return tree_sitter.Parser(_language()).parse(mask_for_parse(data))


def _text(node: tree_sitter.Node) -> str:
    return node.text.decode("utf-8") if node.text is not None else ""


def _span(node: tree_sitter.Node) -> Span:
    return Span(node.start_byte, node.end_byte)


def syntax_issues(tree: tree_sitter.Tree) -> tuple[SyntaxIssue, ...]:
    """ERROR and MISSING nodes, outermost only (a broken region is reported once)."""
    if not tree.root_node.has_error:
        return ()
    issues: list[SyntaxIssue] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            issues.append(SyntaxIssue(_span(node), node.is_missing))
            continue
        if node.has_error:
            stack.extend(reversed(node.children))
    return tuple(sorted(issues, key=lambda issue: issue.span))


class _FunctionIndex:
    """Finds the innermost function definition containing a byte offset."""

    def __init__(self, functions: list[tuple[Span, str]]) -> None:
        self._entries = sorted(functions)
        self._starts = [span.start for span, _ in self._entries]

    def enclosing(self, offset: int) -> str | None:
        index = bisect.bisect_right(self._starts, offset) - 1
        while index >= 0:
            span, name = self._entries[index]
            if span.start <= offset < span.end:
                return name
            index -= 1
        return None


def _declarator_name(node: tree_sitter.Node | None) -> tree_sitter.Node | None:
    """Follow `declarator` fields down to the identifier a declaration names."""
    while node is not None:
        if node.type in (
            "identifier",
            "field_identifier",
            "qualified_identifier",
            "operator_name",
            "destructor_name",
            "template_function",
        ):
            return node
        inner = node.child_by_field_name("declarator")
        if inner is None:
            for child in node.named_children:
                if child.type in ("identifier", "field_identifier"):
                    return child
            return None
        node = inner
    return None


def _function_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    current = node.child_by_field_name("declarator")
    while current is not None and current.type != "function_declarator":
        current = current.child_by_field_name("declarator")
    return current


def _short_name(node: tree_sitter.Node) -> str:
    if node.type == "qualified_identifier":
        name = node.child_by_field_name("name")
        return _short_name(name) if name is not None else _text(node)
    if node.type == "template_function":
        name = node.child_by_field_name("name")
        return _text(name) if name is not None else _text(node)
    if node.type == "field_expression":  # obj.method(): the method's name
        field = node.child_by_field_name("field")
        return _short_name(field) if field is not None else _text(node)
    return _text(node)


def _params(param_list: tree_sitter.Node) -> tuple[Param, ...]:
    params: list[Param] = []
    for child in param_list.named_children:
        if child.type not in (
            "parameter_declaration",
            "optional_parameter_declaration",
            "variadic_parameter_declaration",
        ):
            continue
        name_node = _declarator_name(child.child_by_field_name("declarator"))
        full = _text(child)
        if name_node is None:
            params.append(Param(full.strip(), "", _span(child)))
            continue
        before = full[: name_node.start_byte - child.start_byte]
        after = full[name_node.end_byte - child.start_byte :]
        if child.type == "optional_parameter_declaration":
            after = after.split("=", 1)[0]
        ctype = " ".join((before + after).split())
        params.append(Param(ctype, _text(name_node), _span(child)))
    return tuple(params)


def _function(node: tree_sitter.Node, attribute_macros: dict[str, str]) -> Function | None:
    declarator = _function_declarator(node)
    body = node.child_by_field_name("body")
    if declarator is None or body is None:
        return None
    name_node = declarator.child_by_field_name("declarator")
    param_list = declarator.child_by_field_name("parameters")
    if name_node is None or param_list is None:
        return None
    markers = {child.type for child in node.children if not child.is_named}
    attribute_macro = None
    for child in node.named_children:
        if child.type == "type_identifier" and _text(child) in attribute_macros:
            attribute_macro = _text(child)
            markers.update(attribute_macros[attribute_macro].split())
    launch_bounds = next((_text(c) for c in node.named_children if c.type == "launch_bounds"), None)
    if "__global__" in markers:
        kind = FunctionKind.KERNEL
    elif "__device__" in markers:
        kind = FunctionKind.DEVICE
    else:
        kind = FunctionKind.HOST
    outer = node.parent if node.parent is not None and node.parent.type == "template_declaration" else None
    template_params = None
    if outer is not None:
        plist = outer.child_by_field_name("parameters")
        template_params = _text(plist) if plist is not None else None
    return Function(
        name=_short_name(name_node),
        kind=kind,
        span=_span(outer if outer is not None else node),
        body=_span(body),
        params_span=_span(param_list),
        params=_params(param_list),
        template_params=template_params,
        launch_bounds=launch_bounds,
        host_too=kind is FunctionKind.DEVICE and "__host__" in markers,
        attribute_macro=attribute_macro,
    )


def _macro_defs(root: tree_sitter.Node) -> tuple[list[MacroDef], list[IndexRead]]:
    macros: list[MacroDef] = []
    reads: list[IndexRead] = []
    for node in _captures("macro", root).get("def", []):
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name_node is None:
            continue
        name = _text(name_node)
        body = _text(value) if value is not None else ""
        macros.append(
            MacroDef(
                name,
                _span(node),
                body,
                _span(value) if value is not None else None,
                node.type == "preproc_function_def",
            )
        )
        if value is None:
            continue
        base = value.start_byte
        raw = value.text or b""
        for match in MACRO_INDEX_RE.finditer(raw.decode("utf-8")):
            # Regex offsets are character offsets; convert via the encoded prefix.
            start = base + len(raw.decode("utf-8")[: match.start()].encode("utf-8"))
            end = start + len(match.group(0).encode("utf-8"))
            if match.group("hip"):
                builtin, axis = HIP_INDEX[match.group("hip")]
            else:
                builtin, axis = match.group("b"), match.group("a") or ""
            reads.append(IndexRead(builtin, axis, Span(start, end), None, match.group(0), macro=name))
    return macros, reads


def _launch(
    call: tree_sitter.Node, callee: tree_sitter.Node, args: tree_sitter.Node, function: str | None
) -> LaunchSite | None:
    config_node = next((c for c in call.named_children if c.type == "kernel_call_syntax"), None)
    style = None if config_node is not None else LAUNCH_FUNCTIONS.get(_text(callee))
    if config_node is None and style is None:
        return None  # a plain call: the common case, decided without reading its arguments
    arg_texts = tuple(_text(a) for a in args.named_children if a.type != "comment")
    if config_node is not None:
        template_args = None
        if callee.type == "template_function":
            targs = callee.child_by_field_name("arguments")
            template_args = _text(targs) if targs is not None else None
        nodes = [c for c in config_node.named_children if c.type != "comment"]
        return LaunchSite(
            _short_name(callee),
            template_args,
            tuple(_text(c) for c in nodes),
            arg_texts,
            _span(call),
            "chevron",
            function,
            tuple(_span(c) for c in nodes),
        )
    if style is None or not arg_texts:
        return None
    kernel_text = arg_texts[0]
    kernel_text = re.sub(r"^\(\s*(?:const\s+)?void\s*\*\s*\)\s*|^HIP_KERNEL_NAME\((.*)\)$", r"\1", kernel_text)
    kernel_text = kernel_text.lstrip("&").strip()
    template_args = None
    if "<" in kernel_text:
        kernel_text, _, rest = kernel_text.partition("<")
        template_args = "<" + rest
    arg_nodes = [a for a in args.named_children if a.type != "comment"]
    if style == "hipLaunchKernelGGL":  # (kernel, grid, block, shared, stream, args...)
        config_nodes, kernel_args = arg_nodes[1:5], arg_texts[5:]
    else:  # cudaLaunchKernel(kernel, grid, block, void** args, shared, stream)
        config_nodes = arg_nodes[1:3] + arg_nodes[4:6]
        kernel_args = _argument_array(call, arg_nodes[3]) if len(arg_nodes) > 3 else ()
    return LaunchSite(
        kernel_text.split("::")[-1].strip(),
        template_args,
        tuple(_text(a) for a in config_nodes),
        kernel_args,
        _span(call),
        style,
        function,
        tuple(_span(a) for a in config_nodes),
    )


def _argument_array(call: tree_sitter.Node, array: tree_sitter.Node) -> tuple[str, ...]:
    """The kernel arguments of a `cudaLaunchKernel` call: the elements of the `void*
    args[] = {&a, &n};` it names (declared before the call in an enclosing block), or of
    an array written in place, without their `&` and `(void*)` casts; () when not found."""
    name = re.sub(r"^\(\s*void\s*\*\s*\*\s*\)\s*", "", _text(array)).strip()
    elements = None
    if array.type == "initializer_list":
        elements = array
    scope = call.parent
    while elements is None and scope is not None:
        if scope.type == "compound_statement":
            for declaration in scope.named_children:
                if declaration.type != "declaration" or declaration.start_byte > call.start_byte:
                    continue
                for init in declaration.named_children:
                    target = init.child_by_field_name("declarator") if init.type == "init_declarator" else None
                    value = init.child_by_field_name("value") if init.type == "init_declarator" else None
                    while target is not None and target.type == "pointer_declarator":
                        target = target.child_by_field_name("declarator")
                    if (
                        target is not None
                        and target.type == "array_declarator"
                        and value is not None
                        and value.type == "initializer_list"
                        and _text(target.child_by_field_name("declarator") or target) == name
                    ):
                        elements = value
        scope = scope.parent
    if elements is None:
        return ()
    out = []
    for item in elements.named_children:
        if item.type == "comment":
            continue
        text = re.sub(r"^\(\s*(?:const\s+)?void\s*\*\s*\)\s*", "", _text(item)).strip()
        out.append(text[1:].strip() if text.startswith("&") else text)
    return tuple(out)


def parse_model(source: SourceText, tree: tree_sitter.Tree | None = None) -> SourceModel:
    """Parse `source` and collect functions, index reads, calls, launches, macros and includes."""
    tree = tree or parse_tree(source.data)
    root = tree.root_node
    macros, macro_reads = _macro_defs(root)
    attribute_macros = {
        m.name: m.body for m in macros if not m.is_function_like and re.search(r"__(global|device|host)__", m.body)
    }

    functions: list[Function] = []
    for node in _captures("function", root).get("fn", []):
        function = _function(node, attribute_macros)
        if function is not None:
            functions.append(function)
    functions.sort(key=lambda f: f.span)
    index = _FunctionIndex([(f.body, f.name) for f in functions])

    macro_names = {m.name for m in macros}
    interesting = {n.encode() for n in (*INDEX_BUILTINS, *HIP_INDEX, *macro_names)}
    reads: list[IndexRead] = list(macro_reads)
    macro_uses: list[MacroUse] = []
    for ident in _captures("identifier", root).get("id", []):
        if ident.text not in interesting:
            continue  # most identifiers: skip without decoding
        name = _text(ident)
        parent = ident.parent
        if name in INDEX_BUILTINS:
            if (
                parent is not None
                and parent.type == "field_expression"
                and parent.child_by_field_name("argument") == ident
            ):
                field = parent.child_by_field_name("field")
                axis = _text(field) if field is not None else ""
                node = parent
            else:
                axis, node = "", ident
            reads.append(
                IndexRead(
                    name,
                    axis if axis in ("x", "y", "z") else "",
                    _span(node),
                    index.enclosing(node.start_byte),
                    _text(node),
                )
            )
        elif name in HIP_INDEX:
            builtin, axis = HIP_INDEX[name]
            reads.append(IndexRead(builtin, axis, _span(ident), index.enclosing(ident.start_byte), name))
        elif name in macro_names and (
            parent is None
            or parent.type not in ("preproc_def", "preproc_function_def", "preproc_ifdef", "preproc_defined")
        ):
            user = index.enclosing(ident.start_byte)
            if user is not None:
                macro_uses.append(MacroUse(name, _span(ident), user))
    reads.sort(key=lambda r: r.span)

    calls: list[CallSite] = []
    launches: list[LaunchSite] = []
    captures = _captures("call", root)
    for call in captures.get("call", []):
        callee = call.child_by_field_name("function")
        args = call.child_by_field_name("arguments")
        if callee is None or args is None:
            continue
        caller = index.enclosing(call.start_byte)
        launch = _launch(call, callee, args, caller)
        if launch is not None:
            launches.append(launch)
        elif caller is not None:
            calls.append(
                CallSite(
                    caller,
                    _short_name(callee),
                    _span(call),
                    _span(args),
                    sum(1 for a in args.named_children if a.type != "comment"),
                )
            )
    calls.sort(key=lambda c: c.span)
    launches.sort(key=lambda launch: launch.span)

    includes = []
    inc_caps = _captures("include", root)
    for inc in inc_caps.get("inc", []):
        path = inc.child_by_field_name("path")
        if path is not None:
            raw = _text(path)
            includes.append(Include(raw.strip('<>"'), path.type == "system_lib_string", _span(inc)))

    graph = _call_graph(functions, calls, launches, macros, macro_uses)
    return SourceModel(
        source=source,
        tree=tree,
        functions=tuple(functions),
        index_reads=tuple(reads),
        launches=tuple(launches),
        calls=tuple(calls),
        macros=tuple(macros),
        macro_uses=tuple(macro_uses),
        includes=tuple(sorted(includes, key=lambda i: i.span)),
        syntax_issues=syntax_issues(tree),
        call_graph=graph,
    )


def macro_node(name: str) -> str:
    """Call-graph node name of a macro."""
    return f"<macro {name}>"


def _call_graph(
    functions: list[Function],
    calls: list[CallSite],
    launches: list[LaunchSite],
    macros: list[MacroDef],
    macro_uses: list[MacroUse],
) -> nx.DiGraph:
    graph: nx.DiGraph = nx.DiGraph()
    for function in functions:
        graph.add_node(function.name, kind=function.kind.value, defined=True)
    for call in calls:
        if call.callee not in graph:
            graph.add_node(call.callee, kind="external", defined=False)
        graph.add_edge(call.caller, call.callee, via="call")
    for launch in launches:
        if launch.function is not None and launch.kernel in graph:
            graph.add_edge(launch.function, launch.kernel, via="launch")
    names = {m.name for m in macros}
    for macro in macros:
        graph.add_node(macro_node(macro.name), kind="macro", defined=True)
        for word in set(WORD_RE.findall(macro.body)):
            if word in names and word != macro.name:
                graph.add_edge(macro_node(macro.name), macro_node(word), via="macro")
            elif word in graph and not word.startswith("<"):
                graph.add_edge(macro_node(macro.name), word, via="macro")
    for use in macro_uses:
        graph.add_edge(use.function, macro_node(use.name), via="macro")
    return graph
