"""Typed exceptions raised inside a stage and turned into results in one place (the driver).

Every error that reaches a user carries a location (`file:line:col`) and a cause, and
prints as one line.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as one printable line: bytes that are not UTF-8 as `\\xNN`, control
    characters (a newline in a file name) as escapes, so every message stays one line."""
    raw = os.fsencode(path)
    text = raw.decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def printable(text: str, keep: str = "") -> str:
    """`text` safe to print on a terminal: control characters (an escape sequence in a
    file name or a log field, a newline in a recorded value) as escapes, the way
    `display_path` writes them; the characters of `keep` (a diff's newlines) stay."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else ch.encode("unicode_escape").decode("ascii") for ch in text)


@dataclass(frozen=True)
class Location:
    """A 1-based line and column in a file (column counts bytes, as compilers do)."""

    path: str
    line: int = 0
    col: int = 0

    def __str__(self) -> str:
        path = display_path(self.path)
        if self.line <= 0:
            return path
        return f"{path}:{self.line}:{max(self.col, 1)}"


class KxformError(Exception):
    """Base class. `str(err)` is one line: `location: cause`."""

    def __init__(self, cause: str, location: Location | None = None) -> None:
        self.cause = " ".join(cause.split())  # one line, whatever the cause text held
        self.location = location
        super().__init__(f"{location}: {self.cause}" if location else self.cause)


class InputError(KxformError):
    """Bad input: unreadable, binary, non-UTF-8, too large, missing, or unparsable."""


class UsageError(KxformError):
    """Bad command-line use: unknown pass, malformed option, conflicting flags."""


class SpecError(KxformError):
    """A harness spec or pass spec is invalid; the message names the offending field."""


class EditConflict(KxformError):
    """Two edits overlap; the message names both sources."""


class CheckFailed(KxformError):
    """A pass check (bijection, coverage, safety, re-parse, compile, idempotence) failed."""

    def __init__(self, check: str, cause: str, location: Location | None = None, key: str = "") -> None:
        self.check = check
        self.key = key or "CheckFailed"
        """A stable reason key (kxform.engine.status) for later stages; the message is for people."""
        super().__init__(f"{check}: {cause}", location)


class BuildFailed(KxformError):
    """nvcc or the host compiler failed; `log` holds the compiler's full text."""

    def __init__(self, cause: str, location: Location | None = None, log: str = "") -> None:
        self.log = log
        super().__init__(cause, location)


class VerifyMismatch(KxformError):
    """Original and rewritten kernels produced different outputs."""


class Deprecated(FutureWarning):
    """Something kxform still reads under an older name or form: a warning, never an
    error. The command line prints it once as `kxform: note: ...` (kxform.cli.main)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean 'x'?` naming the closest of `choices` (difflib), or '' when none is close."""
    close = difflib.get_close_matches(word, sorted(set(choices)), n=1)
    return f"; did you mean '{close[0]}'?" if close else ""
