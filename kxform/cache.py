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


SOURCE_MARK = "\x00kxform-source\x00"
"""Stands for a source file's path in a stored message: an entry keyed by content is
then valid wherever the file is (another checkout, a temporary copy, CI)."""


def portable(text: str, source_path: str, mark: str = SOURCE_MARK) -> str:
    """`text` with `source_path` (as given, and absolute) replaced by `mark`."""
    for spelled in sorted({source_path, os.path.abspath(source_path)}, key=len, reverse=True):
        text = text.replace(spelled, mark)
    return text


def located(text: str, source_path: str) -> str:
    """A stored `text` naming `source_path` where it named the file it was made from."""
    return text.replace(SOURCE_MARK, source_path)
