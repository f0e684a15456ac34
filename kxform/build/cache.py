"""Content-addressed store of successful nvcc builds.

The key hashes the source text, every option of the job, nvcc's version and the
content of the project headers the source reaches through `#include "..."` (found
beside the file and in the job's include directories), so a hit is the same
compilation and can skip nvcc entirely. Paths in the key are relative to the source's
directory where they share more than the root with it, so a tree that moves (a new
checkout, another build machine) keeps its cache. Headers reached only through
`#include <...>` (toolkit and system headers) are not hashed: after changing such a
header use `Builder(use_cache=False)` or clear the cache (see docs/build.md). Failures
are not stored, so fixing a header always takes effect for a build that failed.

Layout: `<root>/<k[:2]>/<k>.json` (log, resources, timing) and `<k>.bin` (the output).
Each file is written to a temporary name and renamed, so concurrent builders and killed
processes never leave a half-written entry; the JSON file is written last and marks the
entry complete.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from kxform.build.nvcc import BuildJob, BuildResult
from kxform.build.overlay import walk_includes
from kxform.build.ptxas import KernelResources
from kxform.cache import cache_root, content_key
from kxform.fileio import write_atomic

FORMAT = 2
"""Bumped when the entry layout changes; part of every key, so old entries are ignored."""
FILE_MARK = "\x00kxform-file\x00"
"""Stands for the job's filename in stored logs (a hit then names the file it serves)."""


def default_cache_dir() -> Path:
    """`$KXFORM_CACHE_DIR/nvcc`, else `~/.cache/kxform/nvcc` (see `kxform.cache`)."""
    return cache_root() / "nvcc"


def job_key(job: BuildJob, version: str) -> str:
    """sha256 over the format, nvcc's version, every option (paths made relative, see the
    module doc), the source text, the rewritten files of the job and the project
    headers the source reaches. The line map changes the messages in the stored log, so
    it is hashed too."""
    base = Path(job.source_dir).resolve() if job.source_dir else Path.cwd()
    line_map = ",".join(map(str, job.line_map)) if job.line_map else ""
    options = [_portable(option, base) for option in job.options()]
    overlay = [part for f in job.overlay for part in (_portable(f.path, base), f.text, str(f.line_map))]
    return content_key(
        f"kxform-nvcc-cache/{FORMAT}",
        version,
        Path(job.filename).suffix,
        line_map,
        *options,
        job.source,
        str(len(overlay)),
        *overlay,
        *header_digests(job, base),
    )


def _portable(option: str, base: Path) -> str:
    """`option` with an absolute path in it made relative to `base` when they share more
    than the root (a moved tree keeps its keys; /usr/local/cuda stays absolute)."""
    prefix, path = ("-I", option[2:]) if option.startswith("-I") and len(option) > 2 else ("", option)
    if not os.path.isabs(path):
        return option
    try:
        shared = os.path.commonpath([path, str(base)])
    except ValueError:
        return option
    if shared == os.path.dirname(shared):  # only the root (or a drive) in common
        return option
    return prefix + "<src>/" + os.path.relpath(path, base)


def header_digests(job: BuildJob, base: Path) -> list[str]:
    """`name:sha256` of every project header the source reaches through quoted includes
    (kxform.build.overlay.walk_includes), with the job's rewritten files in place."""
    replaced = {f.path: f.text.encode("utf-8") for f in job.overlay}
    dirs = [(base / d).resolve() for d in job.include_dirs]
    return [
        f"{name}:{hashlib.sha256(data).hexdigest()}"
        for name, _, data in walk_includes(base, job.source, dirs, replaced)
    ]


class BuildCache:
    """Reads and writes entries under one directory (created on first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _paths(self, key: str) -> tuple[Path, Path]:
        folder = self.root / key[:2]
        return folder / f"{key}.json", folder / f"{key}.bin"

    def get(self, key: str, filename: str = "") -> BuildResult | None:
        """The stored result, marked `cached=True`, its log naming `filename`; None when
        absent or unreadable."""
        meta_path, out_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            output = out_path.read_bytes() if meta["has_output"] else None
            resources = tuple(KernelResources.from_json(r) for r in meta["resources"])
            log = str(meta["log"]).replace(FILE_MARK, filename)
            return BuildResult(True, output, log, resources, True, float(meta["seconds"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, result: BuildResult, filename: str = "") -> None:
        """Store a successful result; failures are ignored (see the module doc). A cache
        that cannot be written is skipped: the build itself succeeded."""
        if not result.ok:
            return
        try:
            self._put(key, result, filename)
        except OSError:
            pass

    def _put(self, key: str, result: BuildResult, filename: str) -> None:
        meta_path, out_path = self._paths(key)
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        if result.output is not None:
            write_atomic(out_path, result.output)
        meta = {
            "format": FORMAT,
            "has_output": result.output is not None,
            "log": result.log.replace(filename, FILE_MARK) if filename else result.log,
            "resources": [r.to_json() for r in result.resources],
            "seconds": result.seconds,
        }
        write_atomic(meta_path, json.dumps(meta, indent=1).encode("utf-8"))
