"""Which files git ignores, so a walk of a tree skips what the user keeps out of it.

A kernel in an ignored `vendor/` or `build-debug/` is not the user's to rewrite, as
black and ruff assume. The rules are git's (pathspec's `GitIgnoreSpec`): every
`.gitignore` from the work tree's root down to a file's directory applies to the paths
below it, a deeper file's matching pattern wins over a shallower one (`!keep.cu`
re-includes), `.git/info/exclude` is the weakest, and nothing under an ignored
directory is seen at all. Outside a Git work tree nothing is ignored.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import pathspec


@dataclass(frozen=True)
class GitIgnore:
    """The ignore rules of one Git work tree (`root`: the directory holding `.git`)."""

    root: str

    @classmethod
    def find(cls, path: str | os.PathLike[str]) -> GitIgnore | None:
        """The rules of the work tree holding `path`, or None outside one."""
        start = os.path.abspath(path)
        if not os.path.isdir(start):
            start = os.path.dirname(start)
        current = start
        while True:
            if os.path.exists(os.path.join(current, ".git")):
                return cls(current)
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent

    def ignored(self, path: str | os.PathLike[str], is_dir: bool = False) -> bool:
        """Whether git ignores `path` (itself or a directory above it)."""
        relative = os.path.relpath(os.path.abspath(path), self.root)
        if relative == os.curdir or relative.startswith(os.pardir):
            return False
        parts = relative.split(os.sep)
        return any(self._decides(parts[:i], is_dir or i < len(parts)) for i in range(1, len(parts) + 1))

    def _decides(self, parts: list[str], is_dir: bool) -> bool:
        """Whether the deepest rule matching `parts` (relative to the root) ignores it."""
        for depth in range(len(parts) - 1, -1, -1):
            spec = _spec(os.path.join(self.root, *parts[:depth], ".gitignore"))
            if spec is not None:
                found = spec.check_file("/".join(parts[depth:]) + ("/" if is_dir else ""))
                if found.include is not None:
                    return bool(found.include)
        spec = _spec(os.path.join(self.root, ".git", "info", "exclude"))
        if spec is not None:
            found = spec.check_file("/".join(parts) + ("/" if is_dir else ""))
            return bool(found.include)
        return False


def _spec(path: str) -> pathspec.GitIgnoreSpec | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return _parsed(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=256)
def _parsed(path: str, mtime_ns: int, size: int) -> pathspec.GitIgnoreSpec | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return pathspec.GitIgnoreSpec.from_lines(handle.read().splitlines())
    except OSError:
        return None
