"""Where the tools find what they run on: the repository (its corpora, test fixtures and
tools) and the recorded tuning spaces of the search benchmarks."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository: the corpora, the test fixtures and the tools live there."""
CORPORA = ROOT / "corpora"
TOOLS = ROOT / "tools"


def spaces_dir() -> Path | None:
    """../shared/bench-spaces from the repository root, or from any parent of it
    (`KXFORM_BENCH_SPACES` names another folder)."""
    explicit = os.environ.get("KXFORM_BENCH_SPACES")
    if explicit:
        return Path(explicit)
    for base in (ROOT, *ROOT.parents):
        for candidate in (base / "shared" / "bench-spaces", base.parent / "shared" / "bench-spaces"):
            if candidate.is_dir():
                return candidate
    return None
