"""Source text as bytes plus what every stage needs to talk about positions in it.

All edits and node ranges are byte offsets into `SourceText.data`; the text is
validated once on load (UTF-8, not binary, not too large) so later stages can rely on
it. Line endings and every other byte are kept as they are.
"""

from __future__ import annotations

import bisect
import errno
import os
import stat
from dataclasses import dataclass, field
from kxform.errors import InputError, Location

MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""Larger files are refused: real kernel sources are far smaller, and a 10 MB input is
almost always generated code or a mistaken path."""

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte order mark some editors put before a file's first line."""
CUDA_SUFFIXES = frozenset({".cu", ".cuh", ".hip"})
HEADER_SUFFIXES = frozenset({".h", ".hpp", ".hh", ".cuh", ".inl"})


@dataclass(frozen=True)
class SourceText:
    """A validated source file: its path (as given, for messages) and its exact bytes."""

    path: str
    data: bytes
    _line_starts: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        starts = [0]
        find = self.data.find
        pos = find(b"\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find(b"\n", pos + 1)
        object.__setattr__(self, "_line_starts", tuple(starts))

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")

    @property
    def newline(self) -> str:
        """The file's dominant line ending, used for inserted lines ("\\r\\n" or "\\n")."""
        crlf = self.data.count(b"\r\n")
        return "\r\n" if crlf and crlf * 2 >= self.data.count(b"\n") else "\n"

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a byte offset."""
        index = bisect.bisect_right(self._line_starts, offset) - 1
        return index + 1, offset - self._line_starts[index] + 1

    def location(self, offset: int) -> Location:
        line, col = self.line_col(offset)
        return Location(self.path, line, col)

    def line_start(self, offset: int) -> int:
        """Byte offset where the line containing `offset` begins."""
        return self._line_starts[bisect.bisect_right(self._line_starts, offset) - 1]

    def insertion_point(self, offset: int) -> int:
        """Where lines inserted before the line containing `offset` go: that line's start,
        but after a UTF-8 byte order mark (it must stay the file's first bytes)."""
        at = self.line_start(offset)
        return len(BOM) if at == 0 and self.data.startswith(BOM) else at

    def indent_at(self, offset: int) -> str:
        """The whitespace that starts the line containing `offset`."""
        start = self.line_start(offset)
        end = start
        while end < len(self.data) and self.data[end] in b" \t":
            end += 1
        return self.data[start:end].decode("ascii")


def validate_bytes(path: str, data: bytes, rewritten: bool = False) -> SourceText:
    """Check that `data` is a plausible source file and wrap it; raise InputError if not.

    `rewritten`: the bytes are kxform's own output, so a size over the limit is named as
    such (the input was within it)."""
    if not data.strip():
        raise InputError("file is empty", Location(path))
    if len(data) > MAX_SOURCE_BYTES:
        what = "the rewritten file would be" if rewritten else "file is"
        raise InputError(
            f"{what} {len(data) / 1e6:.1f} MB, over the {MAX_SOURCE_BYTES // (1024 * 1024)} MiB limit "
            "for a kernel source",
            Location(path),
        )
    nul = data.find(b"\x00")
    if nul != -1:
        line = data.count(b"\n", 0, nul) + 1
        raise InputError("binary file (NUL byte); not a source file", Location(path, line, 1))
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); convert the file to UTF-8",
            Location(path, line, col),
        ) from None
    return SourceText(path, data)


_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO")."""
    return next((what for test, what in _KINDS if test(mode)), "not a plain file")


def check_name(name: str) -> None:
    """File names must be UTF-8: they end up in messages, diffs and the JSON log."""
    try:
        os.fsencode(name).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("file name is not valid UTF-8; rename the file", Location(name)) from None


def read_bytes_bounded(name: str, limit: int = MAX_SOURCE_BYTES, what: str = "a kernel source") -> bytes:
    """The bytes of a regular file, at most `limit` (+1 to tell that it is larger).

    Opened without blocking and checked with fstat before reading: a FIFO or a device
    named `*.cu` is refused instead of blocking (a FIFO with no writer) or reading
    forever (`/dev/zero`). OSError propagates."""
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputError("is a directory", Location(name))
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"not a regular file ({file_kind(info.st_mode)}); refused", Location(name))
        if info.st_size > limit:
            raise InputError(
                f"file is {info.st_size / 1e6:.1f} MB, over the {limit // (1024 * 1024)} MiB limit for {what}",
                Location(name),
            )
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text_bounded(path: str | os.PathLike[str], limit: int, what: str) -> str:
    """The UTF-8 text of an input file (a profile, a spec, a log, a record) of at most
    `limit` bytes: a device, a FIFO or a larger file is an InputError instead of a read
    without bound. OSError and UnicodeDecodeError propagate (callers name the file)."""
    name = os.fspath(path)
    data = read_bytes_bounded(name, limit, what)
    if len(data) > limit:
        raise InputError(f"larger than the {limit // (1024 * 1024)} MiB limit for {what}", Location(name))
    return data.decode("utf-8")


def read_source(path: str | os.PathLike[str]) -> SourceText:
    """Read and validate one file, turning OS errors into one-line InputErrors."""
    name = os.fspath(path)
    check_name(name)
    try:
        data = read_bytes_bounded(name)
    except FileNotFoundError:
        raise InputError("no such file", Location(name)) from None
    except IsADirectoryError:
        raise InputError("is a directory", Location(name)) from None
    except PermissionError:
        raise InputError("permission denied", Location(name)) from None
    except OSError as exc:
        cause = "symlink loop" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise InputError(cause, Location(name)) from None
    return validate_bytes(name, data)
