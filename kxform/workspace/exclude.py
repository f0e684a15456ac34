"""Exclude globs of a project configuration, with `.gitignore` semantics.

`exclude = ["third_party/", "*_test.cu", "/generated/**"]` means what it would mean
in a `.gitignore` at the project root (pathspec's implementation of git's rules, the
one black uses): a pattern with a slash is anchored at the root, one without matches
at any depth, a trailing slash matches a directory and everything under it. Files
outside the root are never excluded.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import pathspec


@dataclass(frozen=True)
class Exclude:
    """Patterns and the directory they are relative to (frozen: crosses to worker processes)."""

    root: str
    patterns: tuple[str, ...]

    def matches(self, path: str | os.PathLike[str]) -> bool:
        """Whether `path` (absolute or relative to the current directory) is excluded."""
        if not self.patterns:
            return False
        relative = os.path.relpath(os.path.abspath(path), self.root)
        if relative == os.curdir or relative.startswith(os.pardir + os.sep) or relative == os.pardir:
            return False
        return _spec(self.patterns).match_file(relative.replace(os.sep, "/"))


@functools.lru_cache(maxsize=16)
def _spec(patterns: tuple[str, ...]) -> pathspec.PathSpec:
    return pathspec.GitIgnoreSpec.from_lines(patterns)
