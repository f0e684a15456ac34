"""Writing files atomically, for every layer (build cache, lockfile, rewritten sources).

A crash or interrupt never leaves a half-written file: data goes to a temporary file in
the same directory, is fsynced, gets the original's mode and replaces it with
`os.replace`, and the directory is fsynced. Below every package of kxform (it needs only
kxform.errors), so the build cache and the workspace share it without a cycle.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from kxform.errors import InputError, Location

__all__ = ["write_atomic"]


def write_atomic(path: str | os.PathLike[str], data: bytes, *, expected: bytes | None = None) -> None:
    """Replace `path` with `data` atomically, keeping the file mode of an existing file.

    A symbolic link is kept: its target is what gets replaced. `expected` (the bytes the
    new data was computed from) makes this a rewrite of a user's source: a read-only
    file is refused, and so is a file whose content changed since it was read (someone
    edited it while kxform ran); the content is compared again just before the rename.
    Those refusals are InputErrors; OS errors (a full disk, a missing directory)
    propagate as OSError.
    """
    target = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    owner: tuple[int, int] | None = None
    try:
        info = target.stat()
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    else:
        if not stat.S_ISREG(info.st_mode):
            raise InputError("not a regular file; not written", Location(os.fspath(path)))
        mode, owner = stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid)
        if expected is not None and not mode & 0o222:
            raise InputError(
                "file is read-only; not rewritten (make it writable to let kxform rewrite it)",
                Location(os.fspath(path)),
            )
    if expected is not None:
        _check_unchanged(target, expected, os.fspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".kxform-tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if owner is not None and owner != (os.geteuid(), os.getegid()):
            try:  # keep the owner where we may (root rewriting another user's file)
                os.chown(tmp, *owner)
            except OSError:
                pass
        if expected is not None:
            _check_unchanged(target, expected, os.fspath(path))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _check_unchanged(target: Path, expected: bytes, shown: str) -> None:
    try:
        current = target.read_bytes()
    except FileNotFoundError:
        raise InputError("deleted while kxform ran; not written", Location(shown)) from None
    if current != expected:
        raise InputError(
            "changed on disk while kxform ran; not written (run kxform again on the new content)", Location(shown)
        )


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
