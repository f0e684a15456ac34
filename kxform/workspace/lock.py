"""One writing run per tree: an advisory lock under the tree's `.kxform/`.

Two `apply` runs on one tree with different options would each read the same files,
and the last writer would silently win while both report success. A run that writes
(in place or to `-o`) therefore takes an exclusive lock (`filelock`) on
`<tree>/.kxform/apply.lock`, where `<tree>` is the nearest enclosing Git work tree of
the paths it writes (the given paths, or the `-o` directory), else their common
directory (the current directory when that is the filesystem root). A second run
refuses at once, naming the lock. The kernel drops the lock when the process ends,
however it ends.

A run that writes copies (`-o OUT_DIR`) locks only the copies it writes, one lock file
per copy under the cache directory's `locks/` (never in OUT_DIR: it holds the copies
and nothing else): a build system runs one kxform per source
file, in parallel, into one output directory. Runs that write other copies proceed;
a run that would write a copy another run is writing (a header both include) waits
for it, up to `COPY_WAIT_S`, and then refuses: the sources are never written, so
waiting cannot lose anything, and the later run writes the copy from what it read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kxform.cache import cache_root
from kxform.errors import UsageError, display_path
from kxform.workspace.files import STATE_DIR, state_dir

LOCK_NAME = "apply.lock"
COPY_WAIT_S = 600.0
"""How long a `-o` run waits for another run writing one of the same copies
(`KXFORM_LOCK_WAIT`, in seconds, overrides it)."""


def tree_root(paths: Sequence[str]) -> Path:
    """The directory whose `.kxform/` holds the lock for a run over `paths`."""
    dirs = [os.path.realpath(p) if os.path.isdir(p) else os.path.dirname(os.path.realpath(p)) for p in paths]
    common = Path(os.path.commonpath(dirs)) if dirs else Path.cwd()
    for candidate in (common, *common.parents):
        if (candidate / ".git").exists():
            return candidate
    return common if common != Path(common.anchor) else Path.cwd()


class TreeLock:
    """Holds the lock of one tree, or of the copies one run writes (see the module doc)."""

    @staticmethod
    @contextmanager
    def acquire(paths: Sequence[str]) -> Iterator[Path]:
        """The lock of the tree holding `paths` (a run that writes in place)."""
        root = tree_root(paths)
        try:
            lock_path = state_dir(root) / LOCK_NAME
        except OSError as exc:
            raise UsageError(f"cannot create {display_path(root / STATE_DIR)}: {exc.strerror or exc}") from None
        with _locked([lock_path], "this tree"):
            yield lock_path

    @staticmethod
    @contextmanager
    def acquire_copies(out_dir: str, copies: Sequence[Path]) -> Iterator[Path]:
        """The locks of the `copies` a `-o out_dir` run writes (one per copy, taken in a
        fixed order so that two runs never wait on each other crosswise)."""
        folder = cache_root() / "locks"
        names = sorted({hashlib.sha256(os.path.realpath(c).encode()).hexdigest()[:24] for c in copies})
        with _locked(
            [folder / f"{name}.lock" for name in names],
            f"copies in {display_path(out_dir)}",
            wait_s=float(os.environ.get("KXFORM_LOCK_WAIT", COPY_WAIT_S)),
        ):
            yield folder


@contextmanager
def _locked(lock_paths: Sequence[Path], what: str, wait_s: float = 0.0) -> Iterator[None]:
    """Exclusive locks (`filelock`, the one lock library kxform uses) on every path,
    waiting up to `wait_s` for each, or a UsageError naming the lock."""
    from filelock import FileLock, Timeout

    with ExitStack() as stack:
        for lock_path in lock_paths:
            try:
                lock_path.parent.mkdir(parents=True, exist_ok=True)
                stack.enter_context(FileLock(str(lock_path), timeout=wait_s))
            except Timeout:
                raise UsageError(
                    f"another kxform run is writing {what} (lock {display_path(lock_path)}); run again "
                    "when it has finished"
                ) from None
            except OSError as exc:
                raise UsageError(f"cannot create the lock {display_path(lock_path)}: {exc.strerror or exc}") from None
        yield
