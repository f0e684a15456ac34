"""One writing run per tree: an advisory lock under the tree's `.kxform/`.

Two `apply` runs on one tree with different options would each read the same files,
and the last writer would silently win while both report success. A run that writes
(in place or to `-o`) therefore takes an exclusive `flock` on
`<tree>/.kxform/apply.lock`, where `<tree>` is the nearest enclosing Git work tree of
the paths it writes (the given paths, or the `-o` directory), else their common
directory (the current directory when that is the filesystem root). A second run
refuses at once, naming the holder. The kernel drops the lock when the process ends,
however it ends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from kxform.errors import UsageError, display_path

LOCK_NAME = "apply.lock"


def tree_root(paths: Sequence[str]) -> Path:
    """The directory whose `.kxform/` holds the lock for a run over `paths`."""
    dirs = [os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p)) for p in paths]
    common = Path(os.path.commonpath(dirs)) if dirs else Path.cwd()
    for candidate in (common, *common.parents):
        if (candidate / ".git").exists():
            return candidate
    return common if common != Path(common.anchor) else Path.cwd()


class TreeLock:
    """Holds the lock of one tree (see the module doc)."""

    @staticmethod
    @contextmanager
    def acquire(paths: Sequence[str]) -> Iterator[Path]:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no locking
            yield tree_root(paths)
            return
        lock_path = tree_root(paths) / ".kxform" / LOCK_NAME
        try:
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as exc:
            raise UsageError(f"cannot create the lock {display_path(lock_path)}: {exc.strerror or exc}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
                raise UsageError(f"another kxform run (pid {holder}) is writing this tree (lock "
                                 f"{display_path(lock_path)}); run again when it has finished") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
            yield lock_path
        finally:
            os.close(fd)
