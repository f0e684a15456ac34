"""The report's source view: each file of a run with its remarks inline under their
lines, coloured by kind (Passed / Missed / Analysis), like LLVM's opt-viewer.

The text comes from the pass log when the run recorded it (a `file` record's `source`,
the file as the run read it), else from the file on disk, read when the report is made
(bounded, a regular file only, undecodable bytes replaced) and labelled so: a file the
run rewrote, or edited since, may no longer match the remarks' line numbers. Remarks
keep their logged line; in a pipeline, a later pass's remarks point into the file as
the earlier passes left it (the view says so when the run had several passes).

Everything is HTML-escaped here; the page stays a single self-contained file.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.errors import InputError
from kxform.frontend.source import read_bytes_bounded
from kxform.log.passlog import decode_line
from kxform.log.reader import Record, Run

MAX_SOURCE_BYTES = 4 << 20
"""Larger files are not shown (a report is something to open, not an archive)."""
FULL_LINES = 2000
"""Up to this many lines a file is shown whole; a longer one shows the lines around
its remarks and kernels (CONTEXT lines each side)."""
CONTEXT = 6

KIND_CLASS = {"Passed": "r-passed", "Missed": "r-missed", "Analysis": "r-analysis"}

CSS = """
.src{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;border:1px solid #ddd;margin:.5rem 0;
overflow-x:auto}.src .l{display:flex;white-space:pre}.src .n{color:#999;min-width:4.5em;text-align:right;
padding-right:.8em;user-select:none;flex:none}.src .n a{color:inherit;text-decoration:none}
.src .l:target,.src .l.hit{background:#fff8c5}.src .gap{color:#999;padding-left:5.3em}
.src .rm{font:12px/1.4 system-ui,sans-serif;margin:.1rem 0 .2rem 5.3em;padding:.15rem .5rem;
border-left:4px solid;white-space:pre-wrap;overflow-wrap:anywhere}
.r-passed{background:#e6f4e6;border-color:#2e7d32}.r-missed{background:#fdf1d6;border-color:#c77c00}
.r-analysis{background:#eaf0f8;border-color:#4a6fa5}.rm b{font-weight:600}
"""


@dataclass(frozen=True)
class FileSource:
    """One file's text, where it came from (`log` or `disk`), or why there is none."""

    file: str
    text: str | None
    origin: str
    note: str


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class FileView:
    """A file's source and its anchor prefix (`f1`, `f2`, ... in log order: file names can
    hold any character and two names may sanitise alike)."""

    source: FileSource
    prefix: str
    lines: int
    """How many lines the text has (0 without text)."""
    line_maps: Mapping[str, Any] | None = None
    """The `file` record's `line_maps` (None in logs written before it)."""

    def line_of(self, record: Record) -> int | None:
        """The line of a remark or kernel record in this text: a pass that ran on a file an
        earlier pass had changed logged lines of that version, mapped back here."""
        line = record.get("line")
        if not isinstance(line, int) or isinstance(line, bool):
            return None
        runs = (self.line_maps or {}).get(str(record.get("pass", "")))
        if isinstance(runs, list) and all(isinstance(r, list) and len(r) == 2 for r in runs):
            return decode_line(runs, line)
        return line


def views(run: Run) -> dict[str, FileView]:
    """Every file of the run with a kernel or a remark (as opt-viewer, files with nothing
    to say are left out), its source loaded once (the kernel table links into it)."""
    said = {run.file_of(r) for r in run.records if r.get("type") in ("kernel", "remark")}
    out: dict[str, FileView] = {}
    for record in run.records:
        if record.get("type") == "file" and record.get("file") and run.file_of(record) in said:
            source = load_source(run, record)
            count = len(source.text.splitlines()) if source.text is not None else 0
            maps = record.get("line_maps")
            out.setdefault(
                source.file, FileView(source, f"f{len(out) + 1}", count, maps if isinstance(maps, dict) else None)
            )
    return out


def line_anchor(files: Mapping[str, FileView], file: str, record: Record) -> str:
    """The id of a kernel record's line in the source view of `file`, or "" when the view
    has no such line."""
    view = files.get(file)
    line = view.line_of(record) if view is not None else None
    if view is None or line is None or not 1 <= line <= view.lines:
        return ""
    return f"src-{view.prefix}-L{line}"


def load_source(run: Run, record: Mapping[str, object]) -> FileSource:
    """The text of a `file` record's file: recorded in the log, else read from disk."""
    file = run.file_of(dict(record))
    recorded = record.get("source")
    if isinstance(recorded, str):
        return FileSource(file, recorded, "log", "as the run read it (recorded in the pass log)")
    raw = str(record.get("file") or "")
    cwd = str(run.header.get("cwd") or "")
    path = Path(raw) if os.path.isabs(raw) or not cwd else Path(cwd) / raw
    text, why = _read_disk(path)
    if text is None:
        return FileSource(file, None, "none", f"not shown: the log does not carry the source and {why}")
    return FileSource(
        file,
        text,
        "disk",
        f"read from {path} when this report was made (the log does not carry "
        "the source): it may differ from what the run read",
    )


def _read_disk(path: Path) -> tuple[str | None, str]:
    """The file's text, or None and why: a regular file only (opened without blocking: a
    FIFO or a device is refused, never read), at most MAX_SOURCE_BYTES."""
    try:
        data = read_bytes_bounded(str(path), MAX_SOURCE_BYTES, "the source view")
    except InputError as exc:
        return None, f"{path}: {exc.cause}"
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc})"
    if len(data) > MAX_SOURCE_BYTES:
        return None, f"{path} is larger than {MAX_SOURCE_BYTES >> 20} MiB"
    return data.decode("utf-8", errors="replace"), ""


def render(run: Run, files: Mapping[str, FileView]) -> str:
    """The "Source" section: the files of `views`, remarks under their lines."""
    if not files:
        return ""
    remarks: dict[str, list[Record]] = {}
    for remark in run.of_type("remark"):
        remarks.setdefault(run.file_of(remark), []).append(remark)
    kernels: dict[str, list[Record]] = {}
    for kernel in run.kernels():
        kernels.setdefault(run.file_of(kernel), []).append(kernel)
    out = [
        '<h2>Source</h2><p class="meta">Each file with its remarks under the line they name '
        '(<span class="r-passed">Passed</span>, <span class="r-missed">Missed</span>, '
        '<span class="r-analysis">Analysis</span>).</p>'
    ]
    for file, view in files.items():
        kernel_lines = [line for k in kernels.get(file, []) if (line := view.line_of(k)) is not None]
        out.append(_file_view(view, remarks.get(file, []), kernel_lines, "," in run.pipeline))
    return "".join(out)


def _file_view(view: FileView, remarks: Sequence[Record], kernel_lines: Sequence[int], pipeline: bool) -> str:
    source, prefix = view.source, view.prefix
    unmapped = (
        " In this log a later pass's remarks name lines of the file as the earlier passes left it."
        if pipeline and view.line_maps is None
        else ""
    )
    head = (
        f'<h3 id="src-{prefix}">{_esc(source.file)}</h3><p class="meta source-origin" '
        f'data-origin="{_esc(source.origin)}">source {_esc(source.note)}.{_esc(unmapped)}</p>'
    )
    if source.text is None:
        return head + _unplaced(remarks)
    lines = source.text.splitlines()
    by_line: dict[int, list[Record]] = {}
    unplaced = []
    for remark in remarks:
        line = view.line_of(remark)
        if line is not None and 1 <= line <= len(lines):
            by_line.setdefault(line, []).append(remark)
        else:
            unplaced.append(remark)
    shown = _shown_lines(len(lines), [*by_line, *kernel_lines])
    rows, last = [], 0
    for number in shown:
        if number != last + 1:
            rows.append(f'<div class="gap">... lines {last + 1}-{number - 1} not shown</div>')
        anchor = f"src-{prefix}-L{number}"
        hit = " hit" if number in by_line else ""
        rows.append(
            f'<div class="l{hit}" id="{anchor}"><span class="n"><a href="#{anchor}">{number}</a></span>'
            f"<code>{_esc(lines[number - 1])}</code></div>"
        )
        rows += [_remark(r) for r in by_line.get(number, [])]
        last = number
    if shown and last < len(lines):
        rows.append(f'<div class="gap">... lines {last + 1}-{len(lines)} not shown</div>')
    return head + _unplaced(unplaced) + f'<div class="src">{"".join(rows)}</div>'


def _shown_lines(count: int, marked: Sequence[int]) -> list[int]:
    if count <= FULL_LINES:
        return list(range(1, count + 1))
    keep: set[int] = set()
    for line in marked:
        keep.update(range(max(1, line - CONTEXT), min(count, line + CONTEXT) + 1))
    return sorted(keep)


def _remark(remark: Record) -> str:
    kind = str(remark.get("kind", ""))
    function = f" in {_esc(remark['function'])}" if remark.get("function") else ""
    column = f", column {_esc(remark['column'])}" if isinstance(remark.get("column"), int) and remark["column"] else ""
    return (
        f'<div class="rm {KIND_CLASS.get(kind, "r-analysis")}"><b>{_esc(kind or "?")}</b> '
        f"{_esc(remark.get('pass', ''))}/{_esc(remark.get('name', ''))}{function}{column}: "
        f"{_esc(remark.get('message', ''))}</div>"
    )


def _unplaced(remarks: Sequence[Record]) -> str:
    if not remarks:
        return ""
    return (
        '<div class="src"><div class="gap">remarks without a line in this text:</div>'
        + "".join(_remark(r) for r in remarks)
        + "</div>"
    )
