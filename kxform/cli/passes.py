"""`kxform passes`: list the registered passes and their options."""

from __future__ import annotations

import argparse
import dataclasses

from kxform.engine.registry import default_registry


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("passes", help="list available passes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    registry = default_registry()
    for name in registry.names():
        cls = registry.get(name)
        options = ", ".join(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        print(f"{name:<12} {cls.description}")
        if options:
            print(f"{'':<12} options: {options}")
        if name == "swizzle":
            from kxform.passes.swizzle.patterns import PATTERNS

            for pattern in PATTERNS.values():
                params = ", ".join(f"{p.name}={p.default}" for p in pattern.params)
                dims = "1-D/2-D" if 1 in pattern.dims else "2-D"
                print(f"{'':<14}{pattern.name:<12} {dims:<8} {pattern.summary}" + (f" [{params}]" if params else ""))
    return 0
