"""The set of files one `apply` run may read and write, and who includes which header.

`apply DIR` processes the CUDA/HIP files under DIR and the headers they include with
quotes, but only headers that are themselves under one of the paths given: kxform
never writes outside what the user named. A file reached through a symbolic link is
processed once (under its first name) and its target is what gets rewritten, so a
link under DIR that points outside every given path is refused rather than followed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kxform.errors import InputError, Location
from kxform.frontend.source import HEADER_SUFFIXES, read_bytes_bounded
from kxform.workspace.files import walk_sources
from kxform.workspace.gitignore import GitIgnore

UNIT_SUFFIXES = frozenset({".cu", ".hip"})
"""Files compiled on their own (translation units); every other file is a header."""
_LOCAL_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


@dataclass(frozen=True)
class Scope:
    """What the user named: directories (everything below them) and single files."""

    roots: tuple[str, ...]
    files: frozenset[str]

    @classmethod
    def of(cls, paths: Sequence[str], headers_beside_files: bool = False) -> Scope:
        roots, files = [], set()
        for raw in paths:
            real = os.path.realpath(raw)
            if os.path.isdir(real):
                roots.append(real)
            else:
                files.add(real)
                if headers_beside_files:
                    roots.append(os.path.dirname(real))
        return cls(tuple(roots), frozenset(files))

    def contains(self, path: str) -> bool:
        """Whether writing `path` (its link target, for a link) stays inside the given paths."""
        real = os.path.realpath(path)
        return real in self.files or any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in self.roots)


@dataclass
class SourceSet:
    """The files of one run, in processing order, and the refusals found while collecting."""

    files: list[str] = field(default_factory=list)
    includers: dict[str, list[str]] = field(default_factory=dict)
    """Real path of a header -> the translation units of the run that include it
    (directly or through other headers), in run order: a header without its own compile
    database entry inherits the first one's flags, and is compile-checked through all."""
    refused: list[InputError] = field(default_factory=list)


def collect_files(paths: Sequence[str], copies: bool = False, gitignore: bool = True) -> SourceSet:
    """CUDA/HIP files under `paths`, plus the `.h`/`.hpp` headers they include with quotes
    (headers hold kernels and device functions too; other headers are not CUDA) when
    those headers are inside the given paths. With `copies` (a run that writes copies
    to `-o OUT_DIR`, never the sources) a header beside or below a named file also
    counts: its copy must sit beside the includer's copy for `#include "..."` to find
    it there. With `gitignore`, what git ignores is left out, included headers too."""
    scope = Scope.of(paths, headers_beside_files=copies)
    given = {os.path.realpath(p) for p in paths}
    out = SourceSet()
    seen: set[str] = set()
    for path in (str(p) for p in walk_sources(paths, gitignore=gitignore)):
        if os.path.realpath(path) not in given and not scope.contains(path):
            out.refused.append(
                InputError(
                    f"symbolic link to {os.path.realpath(path)}, outside the paths given; not followed", Location(path)
                )
            )
            continue
        out.files.append(path)
        seen.add(os.path.realpath(path))
    headers: list[str] = []
    units = [f for f in out.files if Path(f).suffix in UNIT_SUFFIXES]
    roots = units + [f for f in out.files if f not in units]
    memo: dict[str, list[str]] = {}
    for root in roots:
        reached = {os.path.realpath(root)}
        queue = [root]
        while queue:
            current = queue.pop(0)
            if current not in memo:
                memo[current] = _local_includes(current)
            for header in memo[current]:
                real = os.path.realpath(header)
                if real in reached:
                    continue
                reached.add(real)
                queue.append(header)
                if root in units:
                    out.includers.setdefault(real, []).append(root)
                if real not in seen and scope.contains(header) and not (gitignore and _ignored(header)):
                    seen.add(real)
                    headers.append(header)
    out.files += sorted(headers)
    return out


def _ignored(path: str) -> bool:
    rules = GitIgnore.find(path)
    return rules is not None and rules.ignored(path)


def _local_includes(path: str) -> list[str]:
    """Headers named by `#include "..."` in `path` that exist beside it (regular files only)."""
    try:
        data = read_bytes_bounded(path)
    except (OSError, InputError):
        return []  # reported when the file itself is read
    found = []
    for match in _LOCAL_INCLUDE.finditer(data):
        name = match.group(1).decode("utf-8", "replace")
        header = Path(path).parent / name
        if header.suffix in HEADER_SUFFIXES and header.is_file():
            found.append(os.path.normpath(header))
    return found
