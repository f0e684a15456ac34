"""`kxform tune DIR`: tune every kernel a harness spec under DIR describes.

Each harness spec under DIR (`NAME.kxspec.toml`, `kxform-spec.toml`; the older names
too: kxform.harness.spec.specs_under) names a source file and its
kernels; each kernel is tuned as `kxform tune FILE --kernel K` would tune it, with the
same options, one pass log for the run. A kernel no pass has anything to tune in keeps
its original (a row, with the reason below the table); one that cannot be tuned (its
spec or file is broken) is a row with its error, and the others go on; the exit
status is 1 when any kernel failed that way or a `--write` was refused, 0 otherwise. The result is a table (or, with `--json`, one object with a
summary per kernel).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.errors import KxformError, UsageError
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.search.kernel_space import NothingToTune


@dataclass(frozen=True)
class Target:
    file: str
    kernel: str
    spec: str


def targets(folder: Path, kernel: str | None) -> list[Target]:
    """Every (source, kernel) of the specs under `folder`, in path order; `kernel` filters."""
    from kxform.harness.spec import load_spec, specs_under

    found: list[Target] = []
    for path in specs_under(folder):
        spec = load_spec(path)  # a broken spec is an error naming its line: never a silently skipped kernel
        for name in spec.kernels:
            if kernel is None or name == kernel:
                found.append(Target(str(spec.source), name, str(path)))
    if not found:
        what = f"kernel '{kernel}'" if kernel else "kernel"
        raise UsageError(f"{folder}: no harness spec under it describes a {what} (docs/harness-spec.md)")
    return found


def run_dir(args: argparse.Namespace) -> int:
    from kxform.cli.tune import tune_one
    from kxform.cli.tune_result import TABLE_HEADER, format_table, table_note, table_row

    if args.objective is not None and args.objective.startswith("replay:"):
        raise UsageError(
            f"--objective {args.objective}: a recorded space is one kernel's; a directory takes gpu or cpu+replay:FILE"
        )
    found = targets(Path(args.file), args.kernel)
    if args.objective in (None, "gpu"):
        from kxform.search.kernel_objective import gpu_runtime

        gpu_runtime().close()  # without a GPU: one line for the whole run, before any work
    log = PassLog.open(args.log, hw=args.hw, pipeline=args.passes or "", argv=sys.argv[1:])
    summaries: list[dict[str, Any]] = []
    for target in found:
        one = argparse.Namespace(
            **{**vars(args), "file": target.file, "kernel": target.kernel, "spec": target.spec, "log": None}
        )
        try:
            summary, _ = tune_one(one, log)
        except NothingToTune as exc:  # the original is kept: not a failure
            summary = {
                "file": target.file,
                "kernel": target.kernel,
                "result": {"kept_original": True, "reason": exc.cause, "passes": [], "values": {}, "pipeline": ""},
            }
        except KxformError as exc:
            summary = {"file": target.file, "kernel": target.kernel, "error": exc.cause}
        if "evaluations" not in summary:  # tune_one logged the others: every kernel is a row of the report's table
            log.write({"type": "tune", "schema": 1, "run": log.run_id, **summary})
        summaries.append(summary)
    log.close(Report())
    failed = sum(1 for s in summaries if "error" in s or (s.get("written") or {}).get("refused"))
    if args.json:
        print(json.dumps({"kernels": summaries, "failed": failed}, indent=2, default=str))
    else:
        print(format_table([TABLE_HEADER, *(table_row(s) for s in summaries)]))
        for note in (n for n in map(table_note, summaries) if n):
            print(note)
        print(f"kxform: {len(summaries)} kernels tuned, {failed} failed. Log: {log.path}", file=sys.stderr)
    return 1 if failed else 0
