"""Content-addressed store of successful nvcc builds.

The key hashes the source text, every option of the job and nvcc's version, so a hit
is the same compilation and can skip nvcc entirely. Headers reached through `#include`
are *not* hashed: a changed header needs `Builder(use_cache=False)` or a cleared cache
(see docs/build.md). Failures are not stored, so fixing a header always takes effect
for a build that failed.

Layout: `<root>/<k[:2]>/<k>.json` (log, resources, timing) and `<k>.bin` (the output).
Each file is written to a temporary name and renamed, so concurrent builders and killed
processes never leave a half-written entry; the JSON file is written last and marks the
entry complete.
"""

from __future__ import annotations

import json
from pathlib import Path

from kxform.build.nvcc import BuildJob, BuildResult
from kxform.build.ptxas import KernelResources
from kxform.cache import cache_root, content_key
from kxform.workspace.files import write_atomic

FORMAT = 1
"""Bumped when the entry layout changes; part of every key, so old entries are ignored."""


def default_cache_dir() -> Path:
    """`$KXFORM_CACHE_DIR/nvcc`, else `~/.cache/kxform/nvcc` (see `kxform.cache`)."""
    return cache_root() / "nvcc"


def job_key(job: BuildJob, version: str) -> str:
    """sha256 over the format, nvcc's version, every option and the source text.

    The filename and line map change only the messages in the stored log, but they are
    hashed too so a hit never shows another file's name.
    """
    line_map = ",".join(map(str, job.line_map)) if job.line_map else ""
    return content_key(
        f"kxform-nvcc-cache/{FORMAT}", version, job.filename, line_map, *job.options(), job.source,
    )


class BuildCache:
    """Reads and writes entries under one directory (created on first write)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _paths(self, key: str) -> tuple[Path, Path]:
        folder = self.root / key[:2]
        return folder / f"{key}.json", folder / f"{key}.bin"

    def get(self, key: str) -> BuildResult | None:
        """The stored result, marked `cached=True`; None when absent or unreadable."""
        meta_path, out_path = self._paths(key)
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            output = out_path.read_bytes() if meta["has_output"] else None
            resources = tuple(KernelResources.from_json(r) for r in meta["resources"])
            return BuildResult(True, output, str(meta["log"]), resources, True, float(meta["seconds"]), 0)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, result: BuildResult) -> None:
        """Store a successful result; failures are ignored (see the module doc)."""
        if not result.ok:
            return
        meta_path, out_path = self._paths(key)
        meta_path.parent.mkdir(parents=True, exist_ok=True)
        if result.output is not None:
            write_atomic(out_path, result.output)
        meta = {
            "format": FORMAT, "has_output": result.output is not None, "log": result.log,
            "resources": [r.to_json() for r in result.resources], "seconds": result.seconds,
        }
        write_atomic(meta_path, json.dumps(meta, indent=1).encode("utf-8"))
