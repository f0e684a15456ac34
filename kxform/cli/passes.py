"""`kxform passes`: list the registered passes, each describing its own options."""

from __future__ import annotations

import argparse

from kxform.engine.registry import default_registry


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("passes", help="list available passes and their options")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    registry = default_registry()
    for name in registry.names():
        cls = registry.get(name)
        print(f"{name:<12} {cls.description}")
        for line in cls.describe_options():
            print(f"{'':<12} {line}")
    return 0
