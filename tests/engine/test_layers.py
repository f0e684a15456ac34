"""The packages of kxform form layers without cycles.

The import graph is read from the source (every `import` and `from ... import` of every
module, those inside functions included: an import moved into a function still ties two
packages together) and reduced to packages: a subpackage of kxform (`kxform.engine`,
`kxform.runtime` with `runtime.cpu`), a pass package of `passes/` (`passes.swizzle`), or
a top-level module (`kxform.errors`). Any cycle between them fails, with its path.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"kxform": ROOT / "kxform", "kxform.passes": ROOT / "passes", "kxform.hwdata": ROOT / "hw"}


def _module_name(path: Path) -> tuple[str, bool]:
    for prefix, base in SOURCES.items():
        if base in path.parents:
            parts = [*prefix.split("."), *path.relative_to(base).with_suffix("").parts]
            package = parts[-1] == "__init__"
            return ".".join(parts[:-1] if package else parts), package
    raise AssertionError(f"{path} lies outside the package sources")


def layer_of(module: str) -> str | None:
    """The node a module belongs to (None: not kxform's)."""
    parts = module.split(".")
    if parts[0] != "kxform":
        return None
    if len(parts) == 1:
        return "kxform"
    if parts[1] == "passes":
        return ".".join(parts[:3]) if len(parts) > 2 and (ROOT / "passes" / parts[2]).is_dir() else "kxform.passes"
    return ".".join(parts[:2])


def _is_module(name: str) -> bool:
    return (ROOT / "kxform" / name).is_dir() or (ROOT / "kxform" / f"{name}.py").is_file()


def _imports(tree: ast.Module, module: str, package: bool) -> list[tuple[str, int]]:
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: None if package else -1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            # `from kxform import api` imports the module kxform.api (`__version__` is a name)
            found.extend(
                (f"{target}.{alias.name}", node.lineno)
                for alias in node.names
                if target == "kxform" and _is_module(alias.name)
            )
    return found


@functools.cache
def import_graph() -> nx.DiGraph:
    """Package -> package edges, each with the imports (module:line -> target) behind it
    (read once per session; the tests only read it)."""
    graph = nx.DiGraph()
    for base in SOURCES.values():
        for path in sorted(base.rglob("*.py")):
            module, package = _module_name(path)
            source = layer_of(module)
            for target, line in _imports(ast.parse(path.read_text(encoding="utf-8")), module, package):
                if target.startswith("passes."):
                    target = f"kxform.{target}"
                dest = layer_of(target)
                if dest is None or dest == source or dest == "kxform":
                    continue
                graph.add_edge(source, dest)
                graph.edges[source, dest].setdefault("why", []).append(f"{module}:{line} -> {target}")
    return graph


def describe_cycle(graph: nx.DiGraph, cycle: list[str]) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        steps.append(f"  {a} -> {b} ({'; '.join(graph.edges[a, b]['why'][:3])})")
    return "\n".join(steps)


def test_the_graph_sees_function_level_and_relative_imports():
    """The graph is what the test stands on: it must see an import inside a function and a
    relative import (a planted cycle through both is found)."""
    tree = ast.parse(
        "def f():\n    from kxform.verify.stage import x\nfrom .model import y\nfrom kxform import api, __version__\n"
    )
    found = sorted(t for t, _ in _imports(tree, "kxform.engine.driver", False))
    assert found == ["kxform", "kxform.api", "kxform.engine.model", "kxform.verify.stage"]
    graph = nx.DiGraph([("kxform.engine", "kxform.verify"), ("kxform.verify", "kxform.engine")])
    for a, b in graph.edges:
        graph.edges[a, b]["why"] = ["planted"]
    cycle = nx.find_cycle(graph)
    assert describe_cycle(graph, [a for a, _ in cycle]).count("planted") == 2


def test_layer_of_groups_subpackages_and_passes():
    assert layer_of("kxform.runtime.cpu.source") == "kxform.runtime"
    assert layer_of("kxform.passes.swizzle.patterns") == "kxform.passes.swizzle"
    assert layer_of("kxform.passes") == "kxform.passes"
    assert layer_of("kxform.errors") == "kxform.errors"
    assert layer_of("numpy.linalg") is None


def test_no_import_cycle_between_packages():
    graph = import_graph()
    assert graph.number_of_nodes() > 15, "the import graph lost the packages"
    cycles = sorted(nx.simple_cycles(graph), key=len)
    if cycles:
        shown = "\n\n".join(describe_cycle(graph, c) for c in cycles[:5])
        pytest.fail(f"{len(cycles)} import cycle(s) between kxform's packages; the shortest:\n{shown}")


@pytest.mark.parametrize(
    "lower, upper",
    [
        ("kxform.engine", "kxform.passes.swizzle"),
        ("kxform.engine", "kxform.passes.tile"),
        ("kxform.engine", "kxform.verify"),
        ("kxform.engine", "kxform.build"),
        ("kxform.engine", "kxform.log"),
        ("kxform.locality", "kxform.passes.swizzle"),
        ("kxform.frontend", "kxform.build"),
        ("kxform.propose", "kxform.passes.swizzle"),
    ],
)
def test_lower_layers_do_not_import_upper_ones(lower, upper):
    """Beyond cycles, the direction: the engine below build, verify, log and the passes;
    the locality model and the front end import no pass and no build code; the proposers
    rank by what a pass states (`Pass.block_order`), never by naming swizzle."""
    graph = import_graph()
    assert not graph.has_edge(lower, upper), f"{lower} imports {upper}: {graph.edges[lower, upper]['why']}"


def pass_imports(graph: nx.DiGraph) -> list[str]:
    """Imports from one pass package into another, each as `module:line -> target`."""
    passes = [n for n in graph if n.startswith("kxform.passes.")]
    return [
        why
        for a in passes
        for b in graph.successors(a)
        if b.startswith("kxform.passes.")
        for why in graph.edges[a, b]["why"]
    ]


def internals_imported(graph: nx.DiGraph, packages: tuple[str, ...]) -> list[str]:
    """Imports of a pass's modules from `packages` (the proposers, the search)."""
    return [
        why
        for a in packages
        if a in graph
        for b in graph.successors(a)
        if b.startswith("kxform.passes")
        for why in graph.edges[a, b]["why"]
    ]


def test_no_pass_imports_another_pass():
    """What two passes need is in kxform.analysis or kxform.engine (the pass kit): a pass
    that imports another's module ties the two together, so neither can change alone."""
    found = pass_imports(import_graph())
    assert not found, "passes import other passes:\n" + "\n".join(found)


def test_no_proposer_or_search_module_imports_a_pass():
    """The proposers and the search reach passes through the registry and the pass
    interface only (space, tuning_space, configured, tool_shape), never a pass's internals."""
    found = internals_imported(import_graph(), ("kxform.propose", "kxform.search"))
    assert not found, "proposers or the search import passes' modules:\n" + "\n".join(found)


def test_the_pass_rules_see_a_planted_import():
    """The two rules above must fail on an import they forbid (a planted graph)."""
    graph = nx.DiGraph()
    graph.add_edge("kxform.passes.coarsen", "kxform.passes.launch", why=["kxform.passes.coarsen.coarsen:43 -> x"])
    graph.add_edge("kxform.passes.coarsen", "kxform.analysis", why=["fine"])
    graph.add_edge("kxform.propose", "kxform.passes.rows", why=["kxform.propose.template_verify:107 -> y"])
    graph.add_edge("kxform.propose", "kxform.engine", why=["fine"])
    assert pass_imports(graph) == ["kxform.passes.coarsen.coarsen:43 -> x"]
    assert internals_imported(graph, ("kxform.propose", "kxform.search")) == ["kxform.propose.template_verify:107 -> y"]
