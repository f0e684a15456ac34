"""Make-style dependency files (`apply -o OUT --depfile FILE`), for build systems.

CMake's `add_custom_command(DEPFILE ...)`, Ninja's `depfile =` and Make's `-include`
read `target: dep dep ...`: with it a build re-runs kxform on a source only when the
source, a header it pulled in, or a decision input (kxform.workspace.inputs) changed.

A depfile names existing files only (one that is missing makes a build re-run every
time, or fail), so a configuration or spec added later needs a stamp (`kxform deps`):
a file that a step run on every build rewrites only when the decision inputs, or their
content, changed. The copies depend on it, and its unchanged time stamp leaves them be.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

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
    # gcc -MP: an empty rule per dependency, so that Make re-runs instead of stopping
    # ("no rule to make target") when a dependency (a header, a configuration) is removed
    phony = "".join(f"\n{escape(d)}:\n" for d in unique)
    return " \\\n".join(lines) + "\n" + phony


def write_depfile(path: str, targets: Iterable[str], deps: Iterable[str]) -> None:
    """Write the rule atomically (a build never reads half a depfile)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, render(targets, deps).encode("utf-8"))


def stamp_text(inputs: Iterable[str | os.PathLike[str]]) -> bytes:
    """One line per input, `SHA256  PATH` (`-` for a file that cannot be read)."""
    lines = []
    for path in inputs:
        try:
            digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            digest = "-"
        lines.append(f"{digest}  {os.path.abspath(path)}\n")
    return "".join(lines).encode("utf-8")


def write_stamp(path: str | os.PathLike[str], inputs: Iterable[str | os.PathLike[str]]) -> bool:
    """Rewrite the stamp at `path` (atomically) only when its text changes (copy-if-different:
    an unchanged stamp keeps its time stamp, so nothing that depends on it re-runs).
    True when it was written."""
    text = stamp_text(inputs)
    try:
        if Path(path).read_bytes() == text:
            return False
    except OSError:
        pass
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    write_atomic(path, text)
    return True
