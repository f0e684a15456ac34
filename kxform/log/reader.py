"""Reading pass logs back: runs from JSON Lines files, for `kxform log` and `kxform report`.

A log file holds one run or, with `--log FILE`, several appended runs; a directory
(`.kxform/logs`, a build tree's logs) holds many files. The reader is strict about
form and lenient about content: a line that is not a JSON object, or a record with
no `type`, makes the file corrupt (a `LogError` naming file, line and problem), but
record types and fields it does not know are kept as they are, so logs written by
newer kxform versions or other tools (`tune`, `l2`, ...) still read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.errors import InputError, Location, printable
from kxform.frontend.source import read_text_bounded

MAX_LOG_BYTES = 1 << 30

Record = dict[str, Any]
LOG_DIR = Path(".kxform") / "logs"


_LEGACY_UNDECIDED = re.compile(r"^inconclusive:|: (?:inconclusive|unverified) on the \w+ runtime")


def legacy_status(check: Record) -> str:
    """The status of a check written before checks carried one (pass-log schema 1: `ok`
    and a sentence). Only for reading those logs back; kxform itself never reads a
    check's sentence."""
    detail = str(check.get("detail", ""))
    if detail.startswith("skipped"):
        return "skipped"
    if detail.startswith("unconfirmed"):
        return "unconfirmed"
    if check.get("ok"):
        return "passed"
    return "inconclusive" if check.get("name") == "verify" and _LEGACY_UNDECIDED.search(detail) else "failed"


def legacy_key(kernel: Record) -> str:
    """The reason key of a kernel record written before kernels carried one (schema 1):
    the word before the first reason's colon, as those reasons were spelled."""
    reasons = kernel.get("reasons") or []
    return str(reasons[0]).split(":", 1)[0] if reasons else ""


class LogError(InputError):
    """A log file that cannot be read, or a run that cannot be found (exit 2)."""


@dataclass(frozen=True)
class Run:
    """The records of one run, in file order, and the file they came from."""

    run_id: str
    path: Path
    records: tuple[Record, ...]

    def of_type(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.get("type") == kind]

    def first(self, kind: str) -> Record:
        """The first record of `kind`, or an empty dict (a killed run has no summary)."""
        return next((r for r in self.records if r.get("type") == kind), {})

    def printable(self) -> Run:
        """The run with every string of its records made safe for a terminal (control
        characters escaped, a diff's newlines and tabs kept): what the text views show."""
        return Run(printable(self.run_id), self.path, tuple(_printable(r) for r in self.records))

    @property
    def header(self) -> Record:
        return self.first("run")

    @property
    def summary(self) -> Record:
        return self.first("summary")

    @property
    def complete(self) -> bool:
        return bool(self.summary)

    @property
    def started(self) -> dt.datetime | None:
        return _time(self.header.get("started"))

    @property
    def duration_s(self) -> float | None:
        start, end = self.started, _time(self.summary.get("finished"))
        return (end - start).total_seconds() if start and end else None

    @property
    def pipeline(self) -> str:
        return str(self.header.get("pipeline") or "")

    @property
    def hw(self) -> str:
        return str(self.header.get("hw") or "")

    def kernels(self) -> list[Record]:
        return self.of_type("kernel")

    def outcome_counts(self) -> Counter[str]:
        """Kernels per outcome: the summary's counters, else counted from the kernel records."""
        counted = self.summary.get("kernels")
        if isinstance(counted, dict):
            return Counter({str(k): int(v) for k, v in counted.items() if isinstance(v, int)})
        return Counter(str(k.get("outcome", "?")) for k in self.kernels())

    def file_of(self, record: Record) -> str:
        """The record's file, relative to the run's directory when it lies inside it."""
        return relative_to_run(str(record.get("file") or ""), str(self.header.get("cwd") or ""))


def relative_to_run(path: str, cwd: str) -> str:
    if cwd and os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        if not rel.startswith(os.pardir):
            return rel
    return path


def _time(value: object) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def _printable(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value, keep="\n\t")
    if isinstance(value, list):
        return [_printable(v) for v in value]
    if isinstance(value, dict):
        return {printable(str(k)): _printable(v) for k, v in value.items()}
    return value


def read_log(path: str | os.PathLike[str]) -> list[Run]:
    """Every run in one JSON Lines file, in file order."""
    file = Path(path)
    display = os.fspath(path)
    try:
        text = read_text_bounded(file, MAX_LOG_BYTES, "a pass log")
    except FileNotFoundError:
        raise LogError("no such log file", Location(display)) from None
    except UnicodeDecodeError:
        raise LogError("log file is not UTF-8 text", Location(display)) from None
    except OSError as exc:
        raise LogError(f"cannot read log file: {exc.strerror or exc}", Location(display)) from None
    order: list[str] = []
    runs: dict[str, list[Record]] = {}
    current = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        record = _parse_line(line, display, number)
        run_id = record.get("run")
        if isinstance(run_id, str) and run_id:
            current = run_id
        elif not current:
            raise LogError("record has no 'run' id and follows no run record", Location(display, number))
        if current not in runs:
            order.append(current)
            runs[current] = []
        runs[current].append(record)
    if not order:
        raise LogError("log file holds no records", Location(display))
    return [Run(run_id, file, tuple(runs[run_id])) for run_id in order]


def _parse_line(line: str, display: str, number: int) -> Record:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LogError(
            f"corrupt log: not JSON ({exc.msg} at column {exc.colno})", Location(display, number, exc.colno)
        ) from None
    if not isinstance(record, dict):
        raise LogError("corrupt log: a record must be a JSON object", Location(display, number))
    if not isinstance(record.get("type"), str):
        raise LogError("corrupt log: record has no 'type'", Location(display, number))
    _check_fields(record, Location(display, number))
    return record


_STR, _INT, _BOOL, _LIST, _DICT = "a string", "an integer", "true or false", "an array", "an object"
_OPTIONAL = " or null"
_FIELDS: dict[str, dict[str, str]] = {
    "run": {
        "run": _STR,
        "argv": _LIST + " of strings",
        "hw": _STR + _OPTIONAL,
        "pipeline": _STR + _OPTIONAL,
        "cwd": _STR,
        "started": _STR,
        "versions": _DICT,
    },
    "kernel": {
        "file": _STR,
        "kernel": _STR,
        "line": _INT,
        "pass": _STR,
        "outcome": _STR,
        "stage": _STR + _OPTIONAL,
        "reasons": _LIST + " of strings",
        "proposal": _DICT + _OPTIONAL,
        "checks": _LIST + " of objects",
        "verify_policy": _DICT + _OPTIONAL,
        "alternates": _LIST,
        "rejected": _LIST,
    },
    "remark": {
        "kind": _STR,
        "pass": _STR,
        "name": _STR,
        "file": _STR,
        "line": _INT,
        "column": _INT,
        "function": _STR + _OPTIONAL,
        "message": _STR,
        "args": _DICT,
    },
    "file": {
        "file": _STR,
        "changed": _BOOL,
        "error": _STR + _OPTIONAL,
        "diff": _STR + _OPTIONAL,
        "compile": _DICT + _OPTIONAL,
        "timings_s": _DICT,
    },
    "summary": {
        "files_changed": _INT,
        "files_unchanged": _INT,
        "input_errors": _LIST,
        "internal_errors": _LIST,
        "kernels": _DICT,
        "failures": _LIST,
        "exit_code": _INT,
        "finished": _STR,
    },
}
"""The fields kxform writes in its own record types and what each must hold; fields and
record types it does not know are kept as they are."""


def _check_fields(record: Record, where: Location) -> None:
    """A known field of a known record type that holds the wrong kind of value makes the
    log corrupt (`LogError` naming the line and the field): the viewers never meet it."""
    for name, wanted in _FIELDS.get(record["type"], {}).items():
        if name in record and not _holds(record[name], wanted):
            shown = json.dumps(record[name])
            raise LogError(f"corrupt log: {record['type']} record: '{name}' is {shown[:40]}, expected {wanted}", where)


def _holds(value: Any, wanted: str) -> bool:
    if value is None:
        return wanted.endswith(_OPTIONAL)
    kind = wanted.removesuffix(_OPTIONAL)
    if kind.startswith(_LIST):
        if not isinstance(value, list):
            return False
        item = {" of strings": str, " of objects": dict}.get(kind[len(_LIST) :])
        return item is None or all(isinstance(v, item) for v in value)
    checks = {
        _STR: isinstance(value, str),
        _BOOL: isinstance(value, bool),
        _DICT: isinstance(value, dict),
        _INT: isinstance(value, int) and not isinstance(value, bool),
    }
    return checks[kind]


def log_files(locations: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The `.jsonl` files named or found (recursively) under the given files and directories."""
    files: list[Path] = []
    for location in locations:
        path = Path(location)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        elif path.exists():
            files.append(path)
        else:
            raise LogError("no such log file or directory", Location(os.fspath(location)))
    return files


def default_log_dir(start: str | os.PathLike[str] = ".") -> Path | None:
    """The nearest `.kxform/logs` from `start` upwards (as git finds `.git`)."""
    here = Path(start).resolve()
    for directory in (here, *here.parents):
        if (directory / LOG_DIR).is_dir():
            return directory / LOG_DIR
    return None


def find_log_dir(explicit: str | None) -> str | None:
    """`explicit` (it must exist), else the nearest `.kxform/logs`, else None."""
    if explicit:
        if not os.path.isdir(explicit):
            raise LogError("log directory not found", Location(explicit))
        return explicit
    found = default_log_dir()
    return str(found) if found else None


def load_runs(locations: Iterable[str | os.PathLike[str]]) -> Iterator[Run | LogError]:
    """Runs from every file, oldest first within a file; a corrupt file yields its error
    in its place, so a listing can show the rest and still fail."""
    for file in log_files(locations):
        if file.stat().st_size == 0:
            continue  # a run killed before its first write: nothing to show
        try:
            yield from read_log(file)
        except LogError as exc:
            yield exc


def sort_runs(runs: Iterable[Run]) -> list[Run]:
    """Oldest first (runs without a start time first, by id)."""
    floor = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return sorted(runs, key=lambda r: (r.started or floor, r.run_id))


def resolve_run(spec: str, log_dir: str | os.PathLike[str] | None) -> Run:
    """A run named by a file (its last run), `last`, `last~N`, or a run id or unique prefix
    searched in `log_dir`."""
    if os.sep in spec or spec.endswith(".jsonl") or Path(spec).is_file():
        return read_log(spec)[-1]
    if log_dir is None:
        raise LogError(f"no run '{spec}': no .kxform/logs here or above (give a log file, or --dir)")
    loaded = list(load_runs([log_dir]))
    runs = sort_runs(r for r in loaded if isinstance(r, Run))
    errors = [r for r in loaded if isinstance(r, LogError)]
    if spec == "last" or spec.startswith("last~"):
        back = spec.partition("~")[2] or "0"
        if not back.isdigit() or int(back) >= len(runs):
            raise LogError(f"no run '{spec}' ({len(runs)} runs)", Location(os.fspath(log_dir)))
        return runs[-1 - int(back)]
    matches = [r for r in runs if r.run_id.startswith(spec)]
    if len(matches) == 1:
        return matches[0]
    if not matches and errors:
        raise errors[0]  # the run may be in the file that cannot be read: say why
    cause = f"no run '{spec}'" if not matches else f"run '{spec}' is ambiguous ({len(matches)} runs match)"
    raise LogError(f"{cause} (kxform log list shows them)", Location(os.fspath(log_dir)))
