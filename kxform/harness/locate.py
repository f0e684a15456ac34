"""Line numbers for keys of a TOML file, found by a light scan of its text.

`tomllib` returns plain dicts without positions, yet a spec error is only useful when
it says `file:line`. The scan below understands the TOML that specs use: `[table]`
and `[[array.of.tables]]` headers with bare or quoted keys, and `key = value` lines.
Anything it cannot place falls back to the nearest enclosing table it did see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KeyPath = tuple[str | int, ...]
"""Path to a value: table keys, with an int for the n-th entry of an array of tables."""

_KEY_PART = re.compile(r"""\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*""")
_ASSIGN = re.compile(r"""^\s*((?:"(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.-]+|\s)+?)\s*=""")


@dataclass(frozen=True)
class Position:
    """1-based line and column of a key in the file."""

    line: int
    col: int


def split_dotted(text: str) -> tuple[str, ...] | None:
    """Keys of a dotted TOML key such as `kernel."gemm<float, 64>".args`; None if malformed."""
    keys: list[str] = []
    pos = 0
    while True:
        match = _KEY_PART.match(text, pos)
        if not match or match.end() == pos:
            return None
        basic, literal, bare = match.groups()
        keys.append(_unescape(basic) if basic is not None else literal or bare or "")
        pos = match.end()
        if pos == len(text):
            return tuple(keys)
        if text[pos] != ".":
            return None
        pos += 1


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


class LineIndex:
    """Where each table header and key of a TOML text is, by key path."""

    def __init__(self, text: str) -> None:
        self._where: dict[KeyPath, Position] = {}
        self._scan(text)

    def _scan(self, text: str) -> None:
        table: KeyPath = ()
        array_counts: dict[KeyPath, int] = {}
        multiline = False
        for number, raw in enumerate(text.splitlines(), start=1):
            if multiline:
                multiline = raw.count('"""') % 2 == 0 and raw.count("'''") % 2 == 0
                continue
            line = _strip_comment(raw)
            stripped = line.strip()
            col = len(line) - len(line.lstrip()) + 1
            if stripped.startswith("[["):
                keys = split_dotted(stripped[2:].rstrip().removesuffix("]]"))
                if keys is not None:
                    index = array_counts.get(keys, 0)
                    array_counts[keys] = index + 1
                    table = (*keys, index)
                    self._remember(table, number, col)
                    self._remember(keys, number, col)
            elif stripped.startswith("["):
                keys = split_dotted(stripped[1:].rstrip().removesuffix("]"))
                if keys is not None:
                    table = _with_array_indices(keys, array_counts)
                    self._remember(table, number, col)
            else:
                match = _ASSIGN.match(line)
                keys = split_dotted(match.group(1)) if match else None
                if keys is not None:
                    self._remember((*table, *keys), number, col)
                multiline = (line.count('"""') % 2 == 1) or (line.count("'''") % 2 == 1)

    def _remember(self, path: KeyPath, line: int, col: int) -> None:
        self._where.setdefault(path, Position(line, col))

    def find(self, path: KeyPath) -> Position | None:
        """Position of `path`, else of its longest known prefix, else None.

        The empty path (the top-level table) is the start of the file.
        """
        if not path:
            return Position(1, 1)
        for end in range(len(path), 0, -1):
            found = self._where.get(path[:end])
            if found is not None:
                return found
        return None


def _with_array_indices(keys: tuple[str, ...], counts: dict[KeyPath, int]) -> KeyPath:
    """Insert the current entry index after any prefix that is an array of tables.

    `[kernel.k.args.fill]` after two `[[kernel.k.args]]` headers lives in entry 1.
    """
    out: list[str | int] = []
    plain: tuple[str, ...] = ()
    for key in keys:
        out.append(key)
        plain = (*plain, key)
        if plain in counts:
            out.append(counts[plain] - 1)
    return tuple(out)


def _strip_comment(line: str) -> str:
    """`line` without a trailing `# comment` (a `#` inside a string is kept)."""
    quote = ""
    i = 0
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 1  # skip the escaped character
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:i]
        i += 1
    return line
