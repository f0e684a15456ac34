"""The files of one run, as a pass's checks see them: every file named (or walked) on the
command line, read and parsed only when a check asks for a name it holds.

A rewrite of a kernel in one file can break a launch of it in another (a kernel defined
in `a.cu` and launched from `b.cu` as well), and whether two pointers a launch passes
alias is decided by the launcher's callers, wherever they are. kxform transforms the
files of a run one by one (in worker processes); each worker gets the run's paths and
reads another file only when it mentions the kernel or function asked about (a byte
search first, then one parse per file and process).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass

from kxform.frontend.cuda import parse_model
from kxform.frontend.model import SourceModel
from kxform.frontend.source import read_source


@dataclass(frozen=True)
class RunFiles:
    """The paths of a run's files (the one being transformed may be among them)."""

    paths: tuple[str, ...] = ()

    def mentioning(self, name: str, model: SourceModel | None = None) -> Iterator[SourceModel]:
        """`model` (the file being transformed, first), then each other file of the run whose
        text names `name`, parsed (files that cannot be read are left out: they are reported
        by their own transform)."""
        own = os.path.realpath(model.source.path) if model is not None else None
        if model is not None:
            yield model
        word = re.compile(rb"(?<![\w])" + re.escape(name.encode()) + rb"(?![\w])")
        for path in self.paths:
            if own is not None and os.path.realpath(path) == own:
                continue
            try:
                stat = os.stat(path)
            except OSError:
                continue
            key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
            data = _read(*key)
            if data is not None and word.search(data):
                parsed = _parse(*key)
                if parsed is not None:
                    yield parsed


@functools.lru_cache(maxsize=1024)
def _read(path: str, mtime_ns: int, size: int) -> bytes | None:
    """The file's bytes, once per file version and process (the key holds the modification time)."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


@functools.lru_cache(maxsize=256)
def _parse(path: str, mtime_ns: int, size: int) -> SourceModel | None:
    """One parse per file version and process."""
    try:
        return parse_model(read_source(path))
    except Exception:  # a file that cannot be read or parsed is its own transform's error
        return None
