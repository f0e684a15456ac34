"""Compiling a translation unit as it will be once several files are rewritten.

A rewritten header is only right if every unit that includes it still compiles, with
every other rewritten file of the run in place too (two rewritten headers included by
one file must not define the helper twice). kxform writes nothing before its checks
pass, so the compile check builds a *mirror* of the tree in a scratch directory: the
directories on the way to the unit and to each rewritten file are real directories
whose other entries are symbolic links to the originals, and the rewritten files are
written there. `#include "..."` resolves relative to the including file's path as
opened, so the unit and every header it reaches see the rewritten files; include
directories given on the command line are mapped into the mirror too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)
MAX_HEADERS = 512
UNIT_PREFIX = ".kxform-unit-"
"""Name prefix of the unit inside the mirror (always a `.cu`, whatever the original suffix)."""


@dataclass(frozen=True)
class OverlayFile:
    """A file replaced for one compile: its real absolute path, its name in messages,
    the new text, and the original line of each new line (for messages)."""

    path: str
    display: str
    text: str
    line_map: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Mirror:
    """A built mirror: where it lives, what it mirrors, and the unit's path in it."""

    root: Path
    source_root: Path
    unit: Path

    @classmethod
    def build(cls, where: Path, unit_path: str, unit_text: str, files: Sequence[OverlayFile]) -> Mirror:
        unit_dir = os.path.dirname(unit_path)
        dirs = [unit_dir, *(os.path.dirname(f.path) for f in files)]
        source_root = Path(os.path.commonpath(dirs))
        replaced = {os.path.relpath(f.path, source_root): f.text for f in files}
        needed = {"."}
        for rel in [os.path.relpath(unit_dir, source_root), *(os.path.dirname(r) for r in replaced)]:
            while rel not in ("", "."):
                needed.add(rel)
                rel = os.path.dirname(rel)
        for rel in sorted(needed, key=lambda r: (r.count(os.sep), r)):
            folder = where / rel
            folder.mkdir(parents=True, exist_ok=True)
            try:
                entries = list(os.scandir(source_root / rel))
            except OSError:
                entries = []
            for entry in entries:
                child = os.path.normpath(os.path.join(rel, entry.name))
                if child in needed or child in replaced:
                    continue
                os.symlink(entry.path, folder / entry.name)
        for rel, text in replaced.items():
            (where / rel).write_text(text, encoding="utf-8")
        unit = where / os.path.relpath(unit_dir, source_root) / f"{UNIT_PREFIX}{Path(unit_path).stem}.cu"
        unit.write_text(unit_text, encoding="utf-8")
        return cls(where, source_root, unit)

    def path_of(self, original: str) -> str:
        """Where `original` (an absolute path) is seen in the mirror; itself when outside."""
        rel = os.path.relpath(original, self.source_root)
        if rel == ".":
            return str(self.root)
        return original if rel.startswith("..") else str(self.root / rel)

    def remap_options(self, options: Sequence[str]) -> list[str]:
        """Command-line options with absolute paths into the mirrored tree mapped into it."""
        out = []
        for option in options:
            if option.startswith("-I") and len(option) > 2 and os.path.isabs(option[2:]):
                out.append("-I" + self.path_of(option[2:]))
            elif os.path.isabs(option):
                out.append(self.path_of(option))
            else:
                out.append(option)
        return out


def walk_includes(
    base: Path, text: str, include_dirs: Sequence[Path], replaced: Mapping[str, bytes] | None = None
) -> Iterator[tuple[str, str, bytes]]:
    """Project headers reached from `text` (a file in `base`) through `#include "..."`,
    resolved as the compiler does (the including file's directory, then `include_dirs`):
    `(spelling, real path, content)` each once, with `replaced` content where given.
    Headers that cannot be read are skipped (the compiler will say so)."""
    replaced = replaced or {}
    seen: set[str] = set()
    queue: list[tuple[Path, str]] = [(base, text)]
    while queue and len(seen) < MAX_HEADERS:
        folder, current = queue.pop(0)
        for name in _LOCAL_INCLUDE.findall(current):
            for candidate in (folder / name, *(d / name for d in include_dirs)):
                real = os.path.realpath(candidate)
                if real in seen:
                    break
                data = replaced.get(real)
                if data is None:
                    try:
                        data = candidate.read_bytes() if candidate.is_file() else None
                    except OSError:
                        data = None
                if data is None:
                    continue
                seen.add(real)
                yield name, real, data
                queue.append((Path(real).parent, data.decode("utf-8", "replace")))
                break
