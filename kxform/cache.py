"""Where kxform keeps content-addressed results between runs."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_root() -> Path:
    """`$KXFORM_CACHE_DIR`, else `$XDG_CACHE_HOME/kxform`, else `~/.cache/kxform`."""
    explicit = os.environ.get("KXFORM_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kxform"


def content_key(*parts: str | bytes) -> str:
    """sha256 over length-prefixed parts (so ("ab", "c") and ("a", "bc") differ)."""
    digest = hashlib.sha256()
    for part in parts:
        raw = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(raw).to_bytes(8, "little"))
        digest.update(raw)
    return digest.hexdigest()
