"""Files on disk: walking user paths (and `write_atomic`, from kxform.fileio, which every
layer writes through)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from kxform.errors import InputError, Location
from kxform.fileio import write_atomic

__all__ = ["output_path", "rewrite_locked", "walk_sources", "write_atomic"]
from kxform.frontend.source import CUDA_SUFFIXES
from kxform.workspace.gitignore import GitIgnore

STATE_DIR = ".kxform"
STATE_IGNORE = b"# Created by kxform: its logs and locks stay out of version control.\n*\n"


def state_dir(parent: str | os.PathLike[str] = ".") -> Path:
    """`parent/.kxform`, created with a `.gitignore` of `*` (as ruff's cache does), so
    that `git status` never lists kxform's logs and locks. The caller creates what it
    needs below it; an OSError here is the caller's to report."""
    folder = Path(parent) / STATE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        try:
            write_atomic(ignore, STATE_IGNORE)
        except FileExistsError:  # pragma: no cover - another run wrote it
            pass
    return folder


SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", ".kxform", "__pycache__", "node_modules", ".venv", "build"})


def walk_sources(
    paths: Sequence[str], suffixes: frozenset[str] = CUDA_SUFFIXES, gitignore: bool = True
) -> Iterator[Path]:
    """Yield CUDA/HIP files named by `paths` (files as given, directories walked, sorted).

    A file given explicitly is yielded whatever its suffix (the caller asked for it);
    inside directories only `suffixes` count, and (`gitignore`) what git ignores is
    left out (kxform.workspace.gitignore). Missing paths and symlink loops are
    InputErrors; a directory reached twice through links is walked once, and a file
    reached through several names (links) is yielded once, under the first name.
    """
    seen_dirs: set[tuple[int, int]] = set()
    seen_files: set[str] = set()
    for path in _walk(paths, suffixes, seen_dirs, gitignore):
        real = os.path.realpath(path)
        if real not in seen_files:
            seen_files.add(real)
            yield path


def _walk(
    paths: Sequence[str], suffixes: frozenset[str], seen_dirs: set[tuple[int, int]], gitignore: bool
) -> Iterator[Path]:
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
            yield from _walk_dir(path, suffixes, seen_dirs, GitIgnore.find(path) if gitignore else None)
        else:
            yield path


def _walk_dir(
    root: Path, suffixes: frozenset[str], seen: set[tuple[int, int]], ignore: GitIgnore | None
) -> Iterator[Path]:
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
        if ignore is not None and ignore.ignored(path, is_dir):
            continue
        if is_dir:
            if entry.name not in SKIPPED_DIRS:
                yield from _walk_dir(path, suffixes, seen, ignore)
        elif path.suffix in suffixes:
            if entry.is_symlink() and not path.exists():
                continue  # dangling link inside a tree: nothing to read
            yield path


def rewrite_locked(path: str | os.PathLike[str], data: bytes, expected: bytes, timeout_s: float = 60.0) -> None:
    """`write_atomic(path, data, expected=expected)` under a lock per file (`filelock`, in
    the user cache), so of two runs that read the same content and rewrite it, one
    writes and the other is refused as "changed on disk" instead of both reporting a
    write and the first one's being lost."""
    import hashlib

    from filelock import FileLock, Timeout

    from kxform.cache import cache_root

    real = os.path.realpath(path)
    guard = cache_root() / "locks" / (hashlib.sha256(os.fsencode(real)).hexdigest()[:32] + ".lck")
    try:
        guard.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(guard), timeout=timeout_s):
            write_atomic(path, data, expected=expected)
    except Timeout:
        raise InputError(
            f"another kxform run has held the write lock ({guard}) for {timeout_s:.0f} s; not written",
            Location(os.fspath(path)),
        ) from None


def output_path(path: str, out_dir: str) -> Path:
    """Where `-o OUT_DIR` writes the copy of `path` (and where `kxform deps -o` puts its
    stamp, beside it): its path relative to the working directory, under OUT_DIR."""
    return Path(out_dir) / _relative(path)


def _relative(path: str) -> Path:
    p = Path(path)
    if p.is_absolute():
        try:
            return p.relative_to(Path.cwd())
        except ValueError:
            return Path(*p.parts[1:])
    return Path(*[part for part in p.parts if part not in ("..",)])
