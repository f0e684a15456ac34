"""Harness specs kept in their own directories (`specs = ["harness/"]` in the project
configuration) rather than beside the sources.

Every `*.toml` under such a directory (recursively) whose top-level `file` names a
source (relative to the spec, as always) is that source's spec. Files with a
`[tool.kxform]` table are project configurations and are passed over; a TOML file that
does not parse is an error naming it, so a typo never silently disables verification.
The index of a directory is built once per process.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

from kxform.errors import Location, SpecError
from kxform.harness.spec import _parse_toml, _read


def spec_in_dirs(source: str | os.PathLike[str], directories: Sequence[str]) -> Path | None:
    """The spec for `source` found in `directories` (first directory first), or None."""
    wanted = os.path.realpath(source)
    for directory in directories:
        found = _index(os.path.realpath(directory)).get(wanted)
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=32)
def _index(directory: str) -> dict[str, Path]:
    """Map of real source path to spec path for one directory (first spec wins, sorted)."""
    root = Path(directory)
    if not root.is_dir():
        raise SpecError(
            "harness spec directory not found (set in the project configuration's 'specs')", Location(directory)
        )
    index: dict[str, Path] = {}
    for spec in dir_specs(root):
        display = os.fspath(spec)
        data = _parse_toml(_read(spec, display), display)
        named = data.get("file")
        if "tool" in data or not isinstance(named, str):
            continue
        index.setdefault(os.path.realpath(spec.parent / named), spec)
    return index


def dir_specs(directory: str | os.PathLike[str]) -> list[Path]:
    """Every `*.toml` under `directory` (sorted; none if it is missing): the files the
    index of a spec directory reads."""
    return sorted(Path(directory).rglob("*.toml"))
