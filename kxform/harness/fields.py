"""Typed access to the tables of a parsed spec, with errors that name field and line.

Validation code asks a `Table` for `table.choice("dtype", DTYPE_NAMES)` and gets either
a checked value or a `SpecError` such as
`k.kxspec.toml:14:1: kernel 'sgemm' arg 'A': unknown dtype 'flaot32' (expected one of ...)`.
Centralising this keeps every message in the same shape and every location right.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn

from kxform.errors import Location, SpecError
from kxform.expr import Expr, parse_expr
from kxform.harness.locate import KeyPath, LineIndex


class _Missing:
    """Marker for "no default: the key is required"."""


MISSING = _Missing()


@dataclass(frozen=True)
class SpecSource:
    """The file being validated: its display path and where its keys are."""

    path: str
    index: LineIndex

    def location(self, key_path: KeyPath) -> Location:
        """Location of `key_path` (or its nearest known parent) in the file."""
        pos = self.index.find(key_path)
        return Location(self.path, pos.line, pos.col) if pos else Location(self.path)

    def error(self, key_path: KeyPath, message: str) -> SpecError:
        """A `SpecError` for `message`, located at `key_path`."""
        return SpecError(message, self.location(key_path))


def type_name(value: object) -> str:
    """TOML-flavoured name of a parsed value's type, for error messages."""
    names = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}
    return names.get(type(value), type(value).__name__)


def quoted_list(options: Iterable[str]) -> str:
    """`a, b, c` for an error's "expected one of" part."""
    return ", ".join(options)


class Table:
    """One TOML table under validation: a mapping plus its key path and a human label."""

    def __init__(self, data: Mapping[str, object], key_path: KeyPath, label: str, source: SpecSource) -> None:
        self.data = data
        self.key_path = key_path
        self.label = label
        self.source = source

    def location(self, key: str | None = None) -> Location:
        """Where this table (or one of its keys) is."""
        return self.source.location(self.key_path if key is None else (*self.key_path, key))

    def fail(self, key: str | None, message: str) -> NoReturn:
        """Raise a SpecError for `key` of this table, prefixed with the table's label."""
        text = f"{self.label}: {message}" if self.label else message
        raise SpecError(text, self.location(key))

    def has(self, key: str) -> bool:
        """Whether `key` is present."""
        return key in self.data

    def check_keys(self, allowed: Sequence[str], extra: Iterable[str] = ()) -> None:
        """Refuse keys outside `allowed` (plus `extra`), suggesting the closest one."""
        known = set(allowed) | set(extra)
        for key in self.data:
            if key not in known:
                hint = difflib.get_close_matches(key, allowed, n=1)
                guess = f"; did you mean '{hint[0]}'?" if hint else ""
                self.fail(key, f"unknown key '{key}' (expected one of {quoted_list(allowed)}){guess}")

    def _get(self, key: str, default: object) -> object:
        if key in self.data:
            return self.data[key]
        if isinstance(default, _Missing):  # read before the keys are checked: a typo of it shows here
            typo = difflib.get_close_matches(key, [k for k in self.data if isinstance(k, str)], n=1)
            if typo:
                self.fail(typo[0], f"missing '{key}'; '{typo[0]}' is not a key: did you mean '{key}'?")
            self.fail(None, f"missing '{key}'")
        return default

    def string(self, key: str, default: str | _Missing | None = MISSING) -> str | None:
        """A string value (or `default` when absent)."""
        value = self._get(key, default)
        if value is not None and not isinstance(value, str):
            self.fail(key, f"'{key}' must be a string, got {type_name(value)}")
        return value

    def required_string(self, key: str) -> str:
        """A string value that must be present."""
        value = self.string(key)
        assert value is not None  # string() raised when missing
        return value

    def choice(self, key: str, options: Sequence[str], default: str | _Missing = MISSING) -> str:
        """A string that must be one of `options`."""
        value = self._get(key, default)
        if not isinstance(value, str):
            self.fail(key, f"'{key}' must be a string, got {type_name(value)}")
        if value not in options:
            self.fail(key, f"unknown {key} '{value}' (expected one of {quoted_list(options)})")
        return value

    def integer(self, key: str, default: int | _Missing = MISSING, minimum: int | None = None) -> int:
        """An integer value (booleans refused), optionally bounded below."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"'{key}' must be an integer, got {type_name(value)}")
        if minimum is not None and value < minimum:
            self.fail(key, f"'{key}' must be >= {minimum}, got {value}")
        return value

    def number(self, key: str, default: float | _Missing = MISSING) -> float:
        """A finite number (integer or float) as float: TOML's `inf` and `nan` are refused
        (an infinite tolerance would make every comparison pass)."""
        value = self._get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"'{key}' must be a number, got {type_name(value)}")
        result = float(value)
        if not math.isfinite(result):
            self.fail(key, f"'{key}' must be a finite number, got {value}")
        return result

    def boolean(self, key: str, default: bool | _Missing = MISSING) -> bool:
        """A boolean value."""
        value = self._get(key, default)
        if not isinstance(value, bool):
            self.fail(key, f"'{key}' must be true or false, got {type_name(value)}")
        return value

    def expr(self, key: str, default: str | int | _Missing = MISSING, what: str = "") -> Expr:
        """An expression (string or number), syntax-checked now."""
        return self._parse(key, self._get(key, default), what or f"'{key}'")

    def expr_list(self, key: str, low: int, high: int, default: object = MISSING) -> tuple[Expr, ...]:
        """An array of `low` to `high` expressions (a lone expression counts as one)."""
        value = self._get(key, default)
        items = value if isinstance(value, list) else [value]
        if not low <= len(items) <= high:
            self.fail(key, f"'{key}' needs {low} to {high} expressions, got {len(items)}")
        return tuple(self._parse(key, item, f"{key}[{i}]") for i, item in enumerate(items))

    def _parse(self, key: str, value: object, what: str) -> Expr:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            self.fail(key, f"{what} must be an expression string or a number, got {type_name(value)}")
        try:
            return parse_expr(value)
        except SpecError as err:
            self.fail(key, f"{what}: {err.cause}")

    def table(self, key: str, label: str) -> Table | None:
        """The sub-table at `key` (inline or not), or None when absent."""
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict):
            self.fail(key, f"'{key}' must be a table, got {type_name(value)}")
        return Table(value, (*self.key_path, key), label, self.source)

    def table_array(self, key: str) -> list[tuple[KeyPath, Mapping[str, object]]]:
        """Entries of the array of tables at `key`, each with its key path."""
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail(key, f"'{key}' must be an array of tables ([[...{key}]])")
        return [((*self.key_path, key, i), entry) for i, entry in enumerate(value)]
