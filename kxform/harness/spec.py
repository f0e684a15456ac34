"""Loading harness specs (`NAME.kxspec.toml`) and finding the spec of a source file.

`load_spec` reads and validates a whole file (format: docs/harness-spec.md) and
returns frozen dataclasses; any problem is a `SpecError` located at `file:line` and
naming the offending field, because a spec is written by hand and its author needs
to know exactly what to fix. Nothing in a spec is executed: expressions go through
`expr`, and reference modules are only checked to exist (they run in `reference`).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from kxform.errors import Deprecated, Location, SpecError
from kxform.harness.fields import SpecSource, Table
from kxform.harness.launch import CsrDims, ResolvedArg, ResolvedLaunch
from kxform.harness.locate import LineIndex
from kxform.harness.model import (
    ArgSpec,
    CompareSpec,
    CsrGroup,
    HarnessSpec,
    KernelSpec,
    SizeSpec,
)
from kxform.harness.parse import parse_kernel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

SPEC_VERSION = 1
MAX_TOML_BYTES = 16 << 20
SPEC_NAME = "kxform-spec.toml"
"""A directory's shared spec (its `file` names the source): not `kxform.toml`, the
project configuration's name, so a spec dropped into a directory never changes how a
project is configured."""
SPEC_SUFFIX = ".kxspec.toml"
"""`<stem>.kxspec.toml`: the spec of one source, beside it."""
LEGACY_NAMES = ("kxform.toml", ".kxform.toml")
"""The names specs had before (shared, per-source suffix): still read where they hold
a spec (a `kxform.toml` with `[tool.kxform]` is a configuration, never a spec)."""
TOP_KEYS = ("version", "file", "kernel")

__all__ = [
    "ArgSpec",
    "CompareSpec",
    "CsrDims",
    "CsrGroup",
    "HarnessSpec",
    "KernelSpec",
    "ResolvedArg",
    "ResolvedLaunch",
    "SizeSpec",
    "find_spec_for",
    "load_spec",
    "missing_spec",
    "spec_candidates",
    "specs_under",
]


def load_spec(path: str | os.PathLike[str], source: Path | None = None) -> HarnessSpec:
    """Read and validate the spec at `path`; SpecError with file:line on any problem.

    `source`: the file the spec describes, where that is not its `file` beside it (a
    drafted spec kept in the cache by the kernel's content describes every file with
    that content, wherever it is: kxform.locality.sizing)."""
    spec_path = Path(path)
    display = os.fspath(path)
    text = _read(spec_path, display)
    data = _parse_toml(text, display)
    root = Table(data, (), "", SpecSource(display, LineIndex(text)))
    if "tool" in data:  # docs/configuration.md: the two kinds of kxform.toml never stand in for each other
        raise root.source.error(
            ("tool", "kxform"), "this is a project configuration ([tool.kxform]), not a harness spec"
        )
    root.check_keys(TOP_KEYS)
    version = root.integer("version")
    if version != SPEC_VERSION:
        root.fail("version", f"unsupported version {version} (this kxform reads version {SPEC_VERSION})")
    source_rel = root.required_string("file")
    source = source or spec_path.parent / source_rel
    if not source.is_file():
        root.fail("file", f"source file '{source_rel}' not found (looked for {source})")
    kernels_table = root.table("kernel", "")
    if kernels_table is None or not kernels_table.data:
        root.fail(None, "no [kernel.<name>] tables")
    kernels: dict[str, KernelSpec] = {}
    for name, body in kernels_table.data.items():
        if not isinstance(body, dict):
            kernels_table.fail(name, f"kernel.{name} must be a table")
        table = Table(body, ("kernel", name), f"kernel '{name}'", root.source)
        kernels[name] = parse_kernel(name, table, spec_path.parent)
    _note_legacy_name(spec_path, display, source_rel)
    return HarnessSpec(path=spec_path, source=source, kernels=kernels)


def _note_legacy_name(spec_path: Path, display: str, source_rel: str) -> None:
    """A spec read under an older name (`kxform.toml`, `NAME.kxform.toml`): still read,
    with a note naming the file it should be renamed to (`kxform.toml` is the project
    configuration's name)."""
    name = spec_path.name
    if name != LEGACY_NAMES[0] and not name.endswith(LEGACY_NAMES[1]):
        return
    new = spec_path.with_name(
        f"{Path(source_rel).stem if name == LEGACY_NAMES[0] else name[: -len(LEGACY_NAMES[1])]}{SPEC_SUFFIX}"
    )
    warnings.warn(
        Deprecated(
            f"{display}: a harness spec under an older name, still read; rename it {new.name} "
            f"(git mv {display} {os.path.join(os.path.dirname(display), new.name)}): kxform.toml is the "
            "project configuration's name"
        ),
        stacklevel=3,
    )


def missing_spec(source_path: str, kernel: str) -> str:
    """What a command that needs a spec says when `source_path` has none: where it looked
    and the two ways to get one."""
    stem = Path(source_path).stem
    return (
        f"{source_path}: no harness spec describes '{kernel}' (looked for {stem}{SPEC_SUFFIX} and {SPEC_NAME} "
        f"beside it); give one with --spec, draft one with 'kxform harness infer {source_path} --kernel {kernel} "
        f"-o {os.path.dirname(source_path) or '.'}', or run 'kxform optimize {source_path} --kernel {kernel}', "
        "which drafts and checks it (docs/harness-spec.md)"
    )


def find_spec_for(source_path: str | os.PathLike[str]) -> Path | None:
    """The spec describing `source_path`, or None.

    Looks for a sibling `kxform-spec.toml` whose `file` names this source, then for
    `<stem>.kxspec.toml` beside it, then the same under the older names (`kxform.toml`,
    `<stem>.kxform.toml`). A shared spec that cannot be parsed is an error rather than
    "no spec", so a typo never silently disables verification.
    """
    source = Path(source_path)
    for shared, own in _candidate_pairs(source):
        if shared.is_file():
            display = os.fspath(shared)
            named = _parse_toml(_read(shared, display), display).get("file")
            if isinstance(named, str) and _same_file(shared.parent / named, source):
                return shared
        if own.is_file():
            return own
    return None


def spec_candidates(source_path: str | os.PathLike[str]) -> list[Path]:
    """Every existing file `find_spec_for` reads for `source_path`, in its order (a
    shared spec is read whichever source its `file` names): a build that depends on
    them re-runs when a spec is edited, added or removed."""
    return [path for pair in _candidate_pairs(Path(source_path)) for path in pair if path.is_file()]


def specs_under(folder: Path) -> list[Path]:
    """Every harness spec under `folder`, in path order: `kxform-spec.toml` and
    `NAME.kxspec.toml`, and the older `kxform.toml` and `NAME.kxform.toml` where they hold
    no `[tool.kxform]` table (such a `kxform.toml` is the project's configuration)."""
    found = {
        *folder.rglob(SPEC_NAME),
        *folder.rglob(f"*{SPEC_SUFFIX}"),
        *(p for p in folder.rglob(LEGACY_NAMES[0]) if not _is_configuration(p)),
        *folder.rglob(f"*{LEGACY_NAMES[1]}"),
    }
    return sorted(p for p in found if p.is_file())


def _is_configuration(path: Path) -> bool:
    """Whether `path` holds a `[tool]` table (a project configuration), read loosely: a
    file that does not parse is left to `load_spec` to report."""
    try:
        return "tool" in tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, tomllib.TOMLDecodeError, RecursionError):
        return False


def _candidate_pairs(source: Path) -> tuple[tuple[Path, Path], ...]:
    """(shared spec, own spec) beside `source`, under the current names, then the older ones."""
    return tuple(
        (source.parent / shared, source.parent / f"{source.stem}{suffix}")
        for shared, suffix in ((SPEC_NAME, SPEC_SUFFIX), LEGACY_NAMES)
    )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def _read(path: Path, display: str) -> str:
    from kxform.frontend.source import read_text_bounded

    try:
        return read_text_bounded(path, MAX_TOML_BYTES, "a harness spec")
    except UnicodeDecodeError:
        raise SpecError("spec is not UTF-8 text", Location(display)) from None
    except OSError as err:
        raise SpecError(f"cannot read spec: {err.strerror or err}", Location(display)) from None


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _parse_toml(text: str, display: str) -> dict[str, Any]:
    try:
        data: dict[str, Any] = tomllib.loads(text)
        return data
    except RecursionError:
        raise SpecError("invalid TOML: arrays or tables nested too deeply", Location(display)) from None
    except tomllib.TOMLDecodeError as err:
        message = str(err)
        where = _TOML_POSITION.search(message)
        line, col = (int(where[1]), int(where[2])) if where else (0, 0)
        cause = _TOML_POSITION.sub("", message).strip()
        raise SpecError(f"invalid TOML: {cause}", Location(display, line, col)) from None
