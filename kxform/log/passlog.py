"""The pass log: one JSON Lines file per run, documented in docs/pass-log.md.

Records (each a JSON object on one line with its `"schema"`):
  run     - once, first: run id, versions, hardware profile, pipeline, argv, start time
  kernel  - per kernel and pass: outcome, reasons, proposal, every check with its result
  file    - per file: changed or not, the unified diff, timings, input error if any
  remark  - every remark, LLVM style (Passed / Missed / Analysis)
  summary - once, last: counters and the exit code
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from kxform import __version__
from kxform.errors import InputError, Location
from kxform.engine.pass_api import KernelResult
from kxform.log.report import Report
from kxform.workspace.files import STATE_DIR, state_dir

SCHEMA = 2
"""2: checks carry `status` (kxform.engine.status), `key` and `figures`, kernels their `key`
(readers take 1 as well: kxform.log.reader.legacy_status)."""


def _versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"kxform": __version__, "python": platform.python_version()}
    for dist in ("tree-sitter", "tree-sitter-cuda", "libclang", "networkx", "numpy"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return versions


def kernel_record(run_id: str, result: KernelResult) -> dict[str, Any]:
    proposal = result.proposal
    return {
        "type": "kernel",
        "schema": SCHEMA,
        "run": run_id,
        "file": result.path,
        "kernel": result.kernel,
        "line": result.line,
        "pass": result.pass_name,
        "outcome": result.outcome.value,
        "stage": result.stage or None,
        "key": result.key or None,
        "reasons": list(result.reasons),
        "proposal": None if proposal is None else proposal.to_json(),
        "checks": [c.to_json() for c in result.checks],
        "verify_policy": result.policy.to_json() if proposal is not None else None,
        "alternates": [p.label() for p in result.alternates],
        "rejected": [r.to_json() for r in result.rejected],
    }


def encode_line_map(line_map: tuple[int, ...]) -> list[list[int]]:
    """A line map (line i+1 of a text -> `line_map[i]`, its line in the original) as runs
    `[first_line, delta]`: from `first_line` on, until the next run, line n was line n + delta.
    Kept lines share one run; an inserted line (mapped to where it went in) is a run of its own."""
    runs: list[list[int]] = []
    for index, original in enumerate(line_map):
        delta = original - (index + 1)
        if not runs or runs[-1][1] != delta:
            runs.append([index + 1, delta])
    return runs


def decode_line(runs: list[list[int]], line: int) -> int | None:
    """The original line of `line` by `encode_line_map`'s runs (None past their start)."""
    found = None
    for first, delta in runs:
        if first > line:
            break
        found = line + delta
    return found


class PassLog:
    """Appends records to a JSONL file; created on open, closed with the summary."""

    def __init__(self, path: Path, handle: TextIO, run_id: str) -> None:
        self.path = path
        self._handle = handle
        self.run_id = run_id

    @classmethod
    def open(cls, path: str | None, *, hw: str, pipeline: str, argv: list[str], home: str = ".") -> PassLog:
        """Create the log and write its first record now, so that a log that cannot be
        written (a directory, a full disk) is a one-line `InputError` before any work.
        Without `path` it is `home/.kxform/logs/RUN.jsonl` (`home`: the working
        directory, or the output directory of a run that must not write the tree)."""
        run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8]
        target = Path(path) if path else Path(home) / STATE_DIR / "logs" / f"{run_id}.jsonl"
        try:
            if not path:
                state_dir(home)
            if target.is_dir():
                raise IsADirectoryError(21, "is a directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            handle = open(target, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        except OSError as exc:
            raise InputError(f"cannot write the pass log: {exc.strerror or exc}", Location(str(target))) from None
        log = cls(target, handle, run_id)
        try:
            log.write(
                {
                    "type": "run",
                    "schema": SCHEMA,
                    "run": run_id,
                    "versions": _versions(),
                    "hw": hw,
                    "pipeline": pipeline,
                    "argv": argv,
                    "cwd": os.getcwd(),
                    "started": dt.datetime.now(dt.timezone.utc).isoformat(),
                }
            )
            handle.flush()
            os.fsync(handle.fileno())
        except OSError as exc:
            try:
                handle.close()
            except OSError:
                pass
            raise InputError(f"cannot write the pass log: {exc.strerror or exc}", Location(str(target))) from None
        return log

    def write(self, record: dict[str, Any]) -> None:
        self._handle.write(json.dumps(record, sort_keys=False, default=str) + "\n")

    def kernels(self, results: Iterable[KernelResult]) -> None:
        for result in results:
            self.write(kernel_record(self.run_id, result))

    def abandon(self) -> None:
        """Close a log whose run ended in an error (the CLI printed it); never raises."""
        try:
            self._handle.close()
        except OSError:
            pass

    def close(self, report: Report) -> None:
        self.write(
            {
                "type": "summary",
                "schema": SCHEMA,
                "run": self.run_id,
                "files_changed": report.files_changed,
                "files_unchanged": report.files_unchanged,
                "input_errors": report.input_errors,
                "internal_errors": report.internal_errors,
                "kernels": {o.value: n for o, n in report.kernel_outcomes.items()},
                "failures": report.failures,
                "exit_code": report.exit_code,
                "finished": dt.datetime.now(dt.timezone.utc).isoformat(),
            }
        )
        self._handle.close()
