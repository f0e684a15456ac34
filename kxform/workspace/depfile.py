"""Make-style dependency files (`apply -o OUT --depfile FILE`), for build systems.

CMake's `add_custom_command(DEPFILE ...)`, Ninja's `depfile =` and Make's `-include`
read `target: dep dep ...`: with it a build re-runs kxform on a source only when the
source, a header it pulled in, or the project configuration changed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kxform.workspace.files import write_atomic


def escape(path: str) -> str:
    """A path as Make (and Ninja's depfile parser) reads it: spaces, `#` and `$` escaped."""
    return path.replace("\\", "\\\\").replace(" ", "\\ ").replace("#", "\\#").replace("$", "$$")


def render(targets: Iterable[str], deps: Iterable[str]) -> str:
    """One rule, each dependency on its own continued line, no duplicates. Targets are
    spelled as kxform wrote them (relative with a relative `-o`, so they match the
    Makefile's own target names; absolute with an absolute one, as CMake passes it);
    dependencies are absolute (a build may run kxform from another directory)."""
    names = " ".join(escape(str(t)) for t in targets)
    unique = list(dict.fromkeys(os.path.abspath(d) for d in deps))
    lines = [f"{names}:"] + [f" {escape(d)}" for d in unique]
    return " \\\n".join(lines) + "\n"


def write_depfile(path: str, targets: Iterable[str], deps: Iterable[str]) -> None:
    """Write the rule atomically (a build never reads half a depfile)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, render(targets, deps).encode("utf-8"))
