"""Options shared by subcommands: the project configuration (`--config`, `--no-config`)
and how a command-line value, a configured value and a default combine.

Not a subcommand (no `register`): the subcommands that read the configuration
(`apply`, `inspect`, `verify`) import it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TypeVar

from kxform.workspace.config import ProjectConfig, find_config, load_config

T = TypeVar("T")


def add_config_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--config", metavar="FILE",
                       help="project configuration (default: the nearest kxform.toml or pyproject.toml with a "
                       "[tool.kxform] table, walking up from PATH)")
    group.add_argument("--no-config", action="store_true", help="ignore any project configuration")


def add_walk_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-gitignore", dest="gitignore", action="store_false",
                        help="also walk into what .gitignore (and .git/info/exclude) ignore")


def project_config(args: argparse.Namespace, paths: Sequence[str]) -> ProjectConfig | None:
    """The configuration named by `--config`, else the one found from `paths`, else None."""
    if getattr(args, "no_config", False):
        return None
    explicit = getattr(args, "config", None)
    if explicit:
        return load_config(explicit)
    found = find_config(paths)
    return load_config(found) if found is not None else None


def pick(given: T | None, configured: T | None, default: T) -> T:
    """The command line wins over the configuration, which wins over the default."""
    if given is not None:
        return given
    if configured is not None:
        return configured
    return default
