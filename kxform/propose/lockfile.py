"""`kxform.lock`: where it lives, what identifies a kernel in it, and how it is written.

The lockfile is the TOML form of a decision record (kxform.propose.lock reads it):
`version = 1` and one `[[decision]]` table per file, kernel and pass, sorted by those
three, keys in a fixed order, no timestamps, so two runs that decide the same write the
same bytes, a diff shows one entry per changed decision and branches that lock
different kernels merge. docs/lockfile.md describes every key.

A kernel is identified by the digest of its own text (`kernel_digests`): an edit
elsewhere in the file does not touch it, and line endings do not count.

Writers take a file lock (`filelock`) on a companion file in `.kxform/`
beside the lockfile, read the lockfile again under it, merge their changes into what
another run may have written meanwhile, and replace the file atomically (write_atomic:
temporary file, fsync, rename). A killed run leaves the old lockfile or the new one,
never a mix; a file whose bytes would not change is not rewritten.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kxform.errors import Location, SpecError
from kxform.frontend.source import SourceText
from kxform.propose.lock import FORMAT_VERSION, Decision, load_decisions
from kxform.workspace.files import state_dir, write_atomic

LOCK_NAME = "kxform.lock"
LOCK_TIMEOUT_S = 300.0
"""How long a writer waits for another run's file lock before giving up (exit 2)."""
HEADER = (
    "# kxform.lock: decisions replayed by `kxform apply --lock` (docs/lockfile.md).\n"
    "# Written by kxform; commit it. To re-decide a kernel: kxform apply --lock --relock --kernel K FILE\n"
    "# (or delete its [[decision]] table).\n"
)
_SCALARS = (
    "file",
    "kernel",
    "pass",
    "outcome",
    "source",
    "result",
    "proposer",
    "model",
    "evidence",
    "cost_usd",
    "tokens",
    "hw",
    "kxform",
    "rationale",
    "reason",
    "payload",
)
"""Entry keys in the order they are written (the tables `params` and `figures` follow)."""

Key = tuple[str, str, str]
"""(file relative to the lockfile's directory, kernel, pass)."""


def default_lock_path(project_root: Path | None, paths: Sequence[str]) -> Path:
    """`kxform.lock` at the project root (the directory of the project configuration),
    else in the common directory of `paths`."""
    if project_root is not None:
        return project_root / LOCK_NAME
    absolute = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    common = Path(os.path.commonpath(absolute))
    return (common if common.is_dir() else common.parent) / LOCK_NAME


def lock_key(path: str, lock_dir: Path) -> str:
    """How the lockfile names `path`: relative to its directory, with `/` separators."""
    return Path(os.path.relpath(os.path.abspath(path), os.path.abspath(lock_dir))).as_posix()


def digest(text: bytes) -> str:
    """`sha256:<hex>` of a kernel's text, CRLF line endings read as LF."""
    return "sha256:" + hashlib.sha256(text.replace(b"\r\n", b"\n")).hexdigest()


def kernel_digests(source: SourceText) -> dict[str, str]:
    """Per kernel of `source`, the digest of its definition's own text (overloads and
    specialisations of one name are digested together, in file order)."""
    from kxform.frontend.cuda import parse_model

    parts: dict[str, list[bytes]] = {}
    for kernel in parse_model(source).kernels:
        parts.setdefault(kernel.name, []).append(source.data[kernel.span.start : kernel.span.end])
    return {name: digest(b"\0".join(texts)) for name, texts in parts.items()}


def read_lock(path: Path) -> tuple[Decision, ...]:
    """The decisions of the lockfile at `path`; none when it does not exist yet. Any
    problem (not TOML, a newer format or kxform, a wrong type) is a SpecError naming
    the file and, where TOML gives one, the line."""
    if not path.exists():
        return ()
    decisions = load_decisions(str(path))
    seen: set[Key] = set()
    for i, decision in enumerate(decisions):
        if decision.key in seen:
            raise SpecError(
                f"decision #{i + 1}: a second entry for {decision.file or '<any file>'}: "
                f"{decision.kernel} ({decision.pass_name})",
                Location(str(path)),
            )
        seen.add(decision.key)
    return decisions


def render(decisions: Sequence[Decision]) -> bytes:
    """The lockfile's bytes: header, `version`, entries sorted by file, kernel, pass."""
    import tomli_w

    entries = [_entry(d) for d in sorted(decisions, key=lambda d: d.key)]
    body = tomli_w.dumps({"version": FORMAT_VERSION, "decision": entries}, multiline_strings=True)
    return (HEADER + body).encode("utf-8")


def _entry(decision: Decision) -> dict[str, Any]:
    values: dict[str, Any] = {
        "file": decision.file,
        "kernel": decision.kernel,
        "pass": decision.pass_name,
        "outcome": decision.outcome,
        "source": decision.source,
        "result": decision.result,
        "proposer": decision.proposer,
        "model": decision.model,
        "evidence": decision.evidence,
        "cost_usd": decision.cost_usd,
        "tokens": decision.tokens,
        "hw": decision.hw,
        "kxform": decision.kxform,
        "rationale": decision.rationale,
        "reason": decision.reason,
        "payload": decision.payload,
    }
    out: dict[str, Any] = {key: values[key] for key in _SCALARS if values[key] not in (None, "")}
    if decision.params:
        out["params"] = dict(decision.params)
    if decision.figures:
        out["figures"] = dict(decision.figures)
    return out


def update_lock(path: Path, changes: Mapping[Key, Decision | None]) -> bool:
    """Merge `changes` (an entry, or None to drop it) into the lockfile under the file
    lock and write it atomically; returns whether its bytes changed. The lockfile is read
    again under the lock, so entries another run wrote since this one read it are kept."""
    from filelock import FileLock, Timeout

    guard = state_dir(path.parent) / f"{path.name}.lck"
    try:
        with FileLock(str(guard), timeout=LOCK_TIMEOUT_S):
            current = {d.key: d for d in read_lock(path)}
            for key, decision in changes.items():
                if decision is None:
                    current.pop(key, None)
                else:
                    current[key] = decision
            data = render(list(current.values()))
            try:
                if path.read_bytes() == data:
                    return False
            except FileNotFoundError:
                pass
            write_atomic(path, data)
            return True
    except Timeout:
        raise SpecError(
            f"another kxform run has held the lock ({guard}) for {LOCK_TIMEOUT_S:.0f} s; nothing written",
            Location(str(path)),
        ) from None
