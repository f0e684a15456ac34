"""Files on disk: walking user paths (and `write_atomic`, from kxform.fileio, which every
layer writes through)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from kxform.errors import InputError, Location
from kxform.fileio import write_atomic

__all__ = ["walk_sources", "write_atomic"]
from kxform.frontend.source import CUDA_SUFFIXES

SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".kxform", "__pycache__", "node_modules", ".venv", "build"})


def walk_sources(paths: Sequence[str], suffixes: frozenset[str] = CUDA_SUFFIXES) -> Iterator[Path]:
    """Yield CUDA/HIP files named by `paths` (files as given, directories walked, sorted).

    A file given explicitly is yielded whatever its suffix (the caller asked for it);
    inside directories only `suffixes` count. Missing paths and symlink loops are
    InputErrors; a directory reached twice through links is walked once, and a file
    reached through several names (links) is yielded once, under the first name.
    """
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: set[str] = set()
    for path in _walk(paths, suffixes, seen_dirs):
        real = os.path.realpath(path)
        if real not in seen_files:
            seen_files.add(real)
            yield path


def _walk(paths: Sequence[str], suffixes: frozenset[str], seen_dirs: set[tuple[int, int]]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        try:
            info = path.stat()
        except FileNotFoundError:
            raise InputError("no such file or directory", Location(raw)) from None
        except OSError as exc:
            cause = "symlink loop" if exc.errno == 40 else (exc.strerror or str(exc))
            raise InputError(cause, Location(raw)) from None
        if stat.S_ISDIR(info.st_mode):
            yield from _walk_dir(path, suffixes, seen_dirs)
        else:
            yield path


def _walk_dir(root: Path, suffixes: frozenset[str], seen: set[tuple[int, int]]) -> Iterator[Path]:
    try:
        info = root.stat()
    except OSError as exc:
        cause = "symlink loop" if exc.errno == 40 else (exc.strerror or str(exc))
        raise InputError(cause, Location(str(root))) from None
    key = (info.st_dev, info.st_ino)
    if key in seen:
        return
    seen.add(key)
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except PermissionError:
        raise InputError("permission denied", Location(str(root))) from None
    for entry in entries:
        path = Path(entry.path)
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if is_dir:
            if entry.name not in SKIPPED_DIRS:
                yield from _walk_dir(path, suffixes, seen)
        elif path.suffix in suffixes:
            if entry.is_symlink() and not path.exists():
                continue  # dangling link inside a tree: nothing to read
            yield path
