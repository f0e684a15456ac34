"""Pass registry: name -> lazy factory, discovered from `kxform.passes` and the
`kxform.passes` entry-point group; and pipeline ordering from declared dependencies."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from importlib import metadata

import networkx as nx

from kxform.errors import UsageError, did_you_mean
from kxform.engine.pass_api import Pass, parse_pass_spec, split_pipeline

PassFactory = Callable[[], type[Pass]]


class Registry:
    """Known passes. Duplicate names fail loudly; modules load only when a pass is used."""

    def __init__(self) -> None:
        self._factories: dict[str, PassFactory] = {}
        self._origins: dict[str, str] = {}

    def register(self, name: str, factory: PassFactory, origin: str) -> None:
        if name in self._factories:
            raise UsageError(f"pass {name!r} registered twice: by {self._origins[name]} and by {origin}")
        self._factories[name] = factory
        self._origins[name] = origin

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> type[Pass]:
        try:
            factory = self._factories[name]
        except KeyError:
            known = ", ".join(self.names()) or "none"
            raise UsageError(f"unknown pass {name!r} (passes: {known}){did_you_mean(name, self.names())}") from None
        cls = factory()
        if getattr(cls, "name", None) != name:
            raise UsageError(f"pass module {self._origins[name]} defines {getattr(cls, 'name', None)!r}, not {name!r}")
        return cls

    def parse(self, spec: str) -> Pass:
        name, options = parse_pass_spec(spec)
        return self.get(name).from_options(options)

    def pipeline(self, text: str, extra_options: dict[str, str] | None = None) -> list[Pass]:
        """Parse `a,b{k=v}` and order the passes so every pass runs after what it requires.

        `extra_options` (from --pattern/--param) go to every pass that has those options.
        """
        specs = split_pipeline(text)
        if not specs:
            raise UsageError("no pass given")
        passes: dict[str, Pass] = {}
        for spec in specs:
            name, options = parse_pass_spec(spec)
            if name in passes:
                raise UsageError(f"pass {name!r} given twice in {text!r}")
            cls = self.get(name)
            merged = dict(options)
            for key, value in (extra_options or {}).items():
                merged.setdefault(key, value)
            passes[name] = cls.from_options(merged)
        return order_passes(list(passes.values()))


def order_passes(passes: list[Pass]) -> list[Pass]:
    """Topological order by `requires` (stable: ties keep the user's order)."""
    graph: nx.DiGraph = nx.DiGraph()
    position = {p.name: i for i, p in enumerate(passes)}
    graph.add_nodes_from(position)
    for p in passes:
        for dep in p.requires:
            if dep in position:
                graph.add_edge(dep, p.name)
    try:
        order = list(nx.lexicographical_topological_sort(graph, key=lambda n: position[n]))
    except nx.NetworkXUnfeasible:
        cycle = " -> ".join(edge[0] for edge in nx.find_cycle(graph))
        raise UsageError(f"pass dependencies form a cycle: {cycle}") from None
    by_name = {p.name: p for p in passes}
    return [by_name[name] for name in order]


def _module_factory(module_name: str) -> PassFactory:
    def load() -> type[Pass]:
        module = importlib.import_module(module_name)
        cls = getattr(module, "PASS", None)
        if cls is None:
            raise UsageError(f"pass module {module_name} defines no PASS")
        return cls

    return load


def _entry_point_factory(entry: metadata.EntryPoint) -> PassFactory:
    return lambda: entry.load()


def default_registry() -> Registry:
    """Built-in passes (modules of `kxform.passes`, pass name = module name with '-' for '_')
    plus third-party ones from the `kxform.passes` entry-point group."""
    registry = Registry()
    # Found by name, as entry points are: the engine knows where built-in passes live, not
    # what they are (importing the package here would make the engine depend on its passes).
    builtin = importlib.util.find_spec("kxform.passes")
    locations = list(builtin.submodule_search_locations or []) if builtin is not None else []
    for info in pkgutil.iter_modules(locations):
        if not info.name.startswith("_"):
            registry.register(
                info.name.replace("_", "-"), _module_factory(f"kxform.passes.{info.name}"), f"kxform.passes.{info.name}"
            )
    for entry in metadata.entry_points(group="kxform.passes"):
        registry.register(entry.name, _entry_point_factory(entry), f"entry point {entry.value}")
    return registry
