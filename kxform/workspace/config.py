"""Project configuration: `[tool.kxform]` in `pyproject.toml` or in a `kxform.toml`.

A project writes the options it always passes (passes, hardware, include paths and
defines, excludes, verification mode, harness spec locations) once, the way black and
ruff read `[tool.black]`/`[tool.ruff]`. Command-line options override it.

Where it is found: from the directory of the given paths (their common parent), walking
up to the file-system root, the first directory holding a `kxform.toml` with a
`[tool.kxform]` table or a `pyproject.toml` with one (`kxform.toml` wins when a
directory has both). A `kxform.toml` without `[tool.kxform]` is a harness spec (see
docs/harness-spec.md: top keys `version`, `file`, `kernel`) and is passed over, so
the two kinds of file never stand in for each other: a project configuration has
exactly one top table, `tool`, and a harness spec cannot have it.

Every key is checked when the file is read: an unknown key or a wrong type is an
error naming the file, line, key and problem (exit 2), before anything runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pathspec

from kxform.errors import Location, SpecError
from kxform.harness.fields import SpecSource, Table, type_name
from kxform.harness.locate import LineIndex

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

CONFIG_NAMES = ("kxform.toml", "pyproject.toml")
MAX_TOML_BYTES = 16 << 20
"""File names searched in each directory, in order of precedence."""

VERIFY_MODES = ("auto", "gpu", "cpu", "compile", "static")
KEYS = (
    "passes",
    "params",
    "hw",
    "include",
    "defines",
    "exclude",
    "verify",
    "measure",
    "specs",
    "build-dir",
    "jobs",
    "lock",
)
HARNESS_KEYS = ("version", "file", "kernel")


@dataclass(frozen=True)
class ProjectConfig:
    """The validated `[tool.kxform]` table; None (or empty) means "not set here".

    Paths (`include`, `specs`, `build_dir`, an `hw` profile file) are absolute,
    resolved against the directory of the file that set them.
    """

    path: Path
    passes: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    hw: str | None = None
    include: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    verify: str | None = None
    measure: bool | None = None
    specs: tuple[str, ...] = ()
    build_dir: str | None = None
    jobs: int | None = None
    lock: str | None = None
    """Lockfile path (`lock = true` means `kxform.lock` beside the configuration)."""

    @property
    def root(self) -> Path:
        """The project root: the directory of the configuration file."""
        return self.path.parent

    def to_json(self) -> dict[str, Any]:
        """The settings as logged in the pass log's `config` record."""
        return {
            "path": str(self.path),
            "passes": self.passes,
            "params": dict(self.params),
            "hw": self.hw,
            "include": list(self.include),
            "defines": list(self.defines),
            "exclude": list(self.exclude),
            "verify": self.verify,
            "measure": self.measure,
            "specs": list(self.specs),
            "build-dir": self.build_dir,
            "jobs": self.jobs,
            "lock": self.lock,
        }


def find_config(paths: Sequence[str | os.PathLike[str]]) -> Path | None:
    """The configuration file that governs `paths`, or None (see the module docstring)."""
    candidates = config_candidates(paths)
    return candidates[-1] if candidates and _has_tool_table(candidates[-1]) else None


def config_candidates(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The files `find_config` reads for `paths`, nearest first: every existing
    `kxform.toml`/`pyproject.toml` from their common directory up to the one that holds
    a `[tool.kxform]` table (the last), or up to the root. A build that depends on these
    notices a configuration added nearer the sources, or a table added to a file."""
    start = _common_dir(paths)
    read: list[Path] = []
    for directory in (start, *start.parents):
        for name in CONFIG_NAMES:
            candidate = directory / name
            if candidate.is_file():
                read.append(candidate)
                if _has_tool_table(candidate):
                    return read
    return read


def load_config(path: str | os.PathLike[str]) -> ProjectConfig:
    """Read and validate the `[tool.kxform]` table of `path`; SpecError (exit 2) on any problem."""
    file = Path(path)
    display = os.fspath(path)
    text = _read(file, display)
    data = _parse(text, display)
    source = SpecSource(display, LineIndex(text))
    tool = data.get("tool")
    kxform = tool.get("kxform") if isinstance(tool, dict) else None
    if not isinstance(kxform, dict):
        raise SpecError("no [tool.kxform] table (a project configuration needs one)", Location(display))
    if file.name != "pyproject.toml":
        clash = [key for key in HARNESS_KEYS if key in data]
        if clash:
            raise source.error(
                (clash[0],),
                f"'{clash[0]}' is a harness spec key: a file is either a project "
                "configuration ([tool.kxform]) or a harness spec, not both",
            )
        Table(data, (), "", source).check_keys(("tool",))
    table = Table(kxform, ("tool", "kxform"), "[tool.kxform]", source)
    table.check_keys(KEYS)
    return _settings(table, file.resolve())


def _settings(table: Table, file: Path) -> ProjectConfig:
    root = file.parent
    verify = table.choice("verify", VERIFY_MODES) if table.has("verify") else None
    hw = table.string("hw", None)
    if hw is not None and (hw.endswith(".toml") or "/" in hw):
        hw = str(root / hw)  # a profile file, relative to the configuration
    build_dir = table.string("build-dir", None)
    return ProjectConfig(
        path=file,
        passes=_passes(table),
        params=_params(table),
        hw=hw,
        include=tuple(str(root / p) for p in _strings(table, "include")),
        defines=tuple(_defines(table)),
        exclude=_exclude(table),
        verify=verify,
        measure=table.boolean("measure") if table.has("measure") else None,
        specs=tuple(str(root / p) for p in _strings(table, "specs")),
        build_dir=str(root / build_dir) if build_dir is not None else None,
        jobs=table.integer("jobs", minimum=0) if table.has("jobs") else None,
        lock=_lock(table, root),
    )


def _strings(table: Table, key: str) -> tuple[str, ...]:
    """An array of non-empty strings (a lone string counts as one)."""
    value = table.data.get(key, [])
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        table.fail(key, f"'{key}' must be an array of strings, got {type_name(value)}")
    for i, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            got = type_name(item) if not isinstance(item, str) else "an empty string"
            table.fail(key, f"'{key}[{i}]' must be a non-empty string, got {got}")
    return tuple(items)


def _exclude(table: Table) -> tuple[str, ...]:
    patterns = _strings(table, "exclude")
    for i, pattern in enumerate(patterns):
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except (ValueError, TypeError) as exc:
            table.fail("exclude", f"'exclude[{i}]' = {pattern!r} is not a valid pattern: {exc}")
    return patterns


def _passes(table: Table) -> str | None:
    if not table.has("passes"):
        return None
    specs = _strings(table, "passes")
    if not specs:
        table.fail("passes", "'passes' is empty (name at least one pass, e.g. passes = [\"swizzle\"])")
    return ",".join(specs)


def _params(table: Table) -> tuple[tuple[str, str], ...]:
    params = table.table("params", "[tool.kxform.params]")
    if params is None:
        return ()
    out = []
    for key, value in params.data.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            params.fail(key, f"'{key}' must be a string or a number, got {type_name(value)}")
        out.append((key, str(value)))
    return tuple(out)


def _defines(table: Table) -> list[str]:
    defines = list(_strings(table, "defines"))
    for i, item in enumerate(defines):
        name = item.split("=", 1)[0]
        if not name.replace("_", "a").isalnum() or name[0].isdigit():
            table.fail("defines", f"'defines[{i}]' = {item!r}: expected NAME or NAME=VALUE")
    return defines


def _lock(table: Table, root: Path) -> str | None:
    if not table.has("lock"):
        return None
    value = table.data["lock"]
    if isinstance(value, bool):
        return str(root / "kxform.lock") if value else None
    if isinstance(value, str) and value.strip():
        # a configuration comes with the tree it configures: its lockfile stays inside that tree
        if Path(value).is_absolute() or not (root / value).resolve().is_relative_to(root.resolve()):
            table.fail(
                "lock",
                f"'lock' = {value!r}: must be a path inside the project, relative to the "
                "configuration (a configuration names no file outside its own tree)",
            )
        return str(root / value)
    table.fail("lock", f"'lock' must be true, false or a path, got {type_name(value)}")


def _common_dir(paths: Sequence[str | os.PathLike[str]]) -> Path:
    absolute = [os.path.abspath(p) for p in paths] or [os.getcwd()]
    common = Path(os.path.commonpath(absolute))
    return common if common.is_dir() else common.parent


def _has_tool_table(path: Path) -> bool:
    """Whether `path` has a `[tool.kxform]` table; a file that is not valid TOML counts
    (so reading it reports the syntax error instead of silently skipping it) only when
    its text mentions the table."""
    from kxform.errors import InputError
    from kxform.frontend.source import read_text_bounded

    try:
        text = read_text_bounded(path, MAX_TOML_BYTES, "a configuration")
    except (OSError, UnicodeDecodeError, InputError):
        return False
    try:
        tool = tomllib.loads(text).get("tool")
    except (tomllib.TOMLDecodeError, RecursionError):  # nested too deeply: reading it reports that
        return "tool.kxform" in text
    return isinstance(tool, dict) and "kxform" in tool


def _read(path: Path, display: str) -> str:
    from kxform.frontend.source import read_text_bounded

    try:
        return read_text_bounded(path, MAX_TOML_BYTES, "a configuration")
    except UnicodeDecodeError:
        raise SpecError("configuration is not UTF-8 text", Location(display)) from None
    except OSError as err:
        raise SpecError(f"cannot read configuration: {err.strerror or err}", Location(display)) from None


def _parse(text: str, display: str) -> dict[str, Any]:
    from kxform.harness.spec import _parse_toml

    return _parse_toml(text, display)
