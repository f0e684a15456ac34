"""`kxform tune FILE --kernel K --sizes A,B [--dispatch OUT.h]`: tune one kernel at
several sizes of its harness spec and, with `--dispatch`, write the per-size winners as
a C++ decision table (kxform.search.dispatch).

Each size is tuned as `kxform tune FILE --kernel K --size NAME` would tune it (its own
database key, the original timed at the same size), one pass log for the run. Every
argument is checked before the first evaluation: an unknown size name, a `--dispatch`
file that exists and was not generated here, an option that makes no sense over several
sizes. A size where no configuration was verified and timed has no entry to offer, so
`--dispatch` then stops with one line, exit 2, and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kxform.errors import InputError, UsageError, printable
from kxform.harness.model import KernelSpec, SizeSpec
from kxform.log.passlog import PassLog
from kxform.log.report import Report
from kxform.search.dispatch import (
    SizeClass,
    build_table,
    check_writable,
    render,
    write_header,
)

HEADER = ("SIZE", "VARIABLES", "PASSES", "VALUES", "ORIGINAL ms", "BEST ms", "SPEED-UP")


def run_sizes(args: argparse.Namespace) -> int:
    from kxform.cli import tune_workers
    from kxform.cli.tune import _check_kernel, _spec, build_flags, say_left_out, tune_merged
    from kxform.frontend.source import read_source
    from kxform.search.kernel_space import kernel_space, parse_passes

    _refuse_options(args, tune_workers.wanted(args))
    if args.dispatch is not None:
        check_writable(args.dispatch)
    source = read_source(args.file)
    _check_kernel(source, args.kernel)
    sizes = chosen_sizes(_spec(args, source), args.sizes)
    if args.objective in (None, "gpu"):
        from kxform.search.kernel_objective import gpu_runtime

        gpu_runtime().close()  # without a GPU: one line, before any work
    log = PassLog.open(args.log, hw=args.hw, pipeline=args.passes or "", argv=sys.argv[1:])
    summaries: list[dict[str, Any]] = []
    with _closing(log), build_flags(args) as merged:
        passes = parse_passes(args.passes) if args.passes is not None else None
        space = kernel_space(
            source.data,
            args.kernel,
            passes,
            path=source.path,
            hw=args.hw,
            build_dir=merged.build_dir,
            require=tuple(args.require),
        )
        say_left_out(space, passes)
        if args.dispatch is not None:  # names that clash in C++, sizes with equal values: before any evaluation
            render(
                build_table(
                    args.kernel,
                    space.passes,
                    space.space.params,
                    space.defaults(),
                    [SizeClass(s.name, dict(s.values), None) for s in sizes],
                )
            )
        for size in sizes:
            one = argparse.Namespace(**{**vars(merged), "size": size.name, "log": None, "export": None})
            summary = tune_merged(one, log)[0]
            summaries.append({**summary, "size_values": dict(size.values)})
    classes = [size_class(size, summary) for size, summary in zip(sizes, summaries)]
    out: dict[str, Any] = {"file": args.file, "kernel": args.kernel, "sizes": summaries, "dispatch": None}
    if args.dispatch is not None:
        missing = next((c.name for c, s in zip(classes, summaries) if s["best"] is None), None)
        if missing is not None:
            raise InputError(
                f"--dispatch {args.dispatch}: size '{missing}': no configuration was verified and "
                "timed, so it has no entry; nothing written"
            )
        table = build_table(args.kernel, space.passes, space.space.params, space.defaults(), classes)
        write_header(args.dispatch, table)
        out["dispatch"] = {
            "path": args.dispatch,
            "classes": [
                {
                    "size": c.name,
                    "values": dict(c.values),
                    "original": c.config is None,
                    "config": None if c.config is None else dict(c.config),
                }
                for c in table.classes
            ],
        }
    _show(args, out, log.path)
    return 0


@contextmanager
def _closing(log: PassLog) -> Iterator[None]:
    """The run's pass log closed however the sizes' runs end."""
    try:
        yield
    finally:
        log.close(Report())


def _refuse_options(args: argparse.Namespace, workers: bool) -> None:
    if Path(args.file).is_dir() or args.kernel is None:
        raise UsageError("--sizes/--dispatch tune one kernel: FILE --kernel K")
    clash = (
        "--size"
        if args.size
        else "--write"
        if args.write
        else "--export"
        if args.export
        else "--gpus/--ray"
        if workers
        else None
    )
    if clash:
        raise UsageError(f"--sizes/--dispatch: {clash} is one size's option")
    if args.objective is not None and args.objective.startswith("replay:"):
        raise UsageError(
            f"--objective {args.objective}: a recorded space has no sizes; --sizes/--dispatch take "
            "gpu or cpu+replay:FILE"
        )


def chosen_sizes(spec: KernelSpec, text: str | None) -> tuple[SizeSpec, ...]:
    """`--sizes A,B`: those sizes of the spec, in that order; None: every bench size."""
    if text is None:
        return spec.bench_sizes or spec.check_sizes[-1:]
    names = [n.strip() for n in text.split(",")]
    known = {s.name: s for s in spec.sizes}
    for name in names:
        if name not in known:
            raise UsageError(f"--sizes {text}: kernel '{spec.name}' has no size '{name}' (sizes: {', '.join(known)})")
    if len(set(names)) != len(names):
        raise UsageError(f"--sizes {text}: a size is named twice")
    return tuple(known[n] for n in names)


def size_class(size: SizeSpec, summary: dict[str, Any]) -> SizeClass:
    """What won at `size`: the best configuration, or None where the original was kept."""
    result = summary.get("result") or {}
    best = summary.get("best")
    kept = result.get("kept_original", True) or best is None
    return SizeClass(size.name, dict(size.values), None if kept else best["config"], result.get("time_ms"))


def _show(args: argparse.Namespace, out: dict[str, Any], log_path: Path) -> None:
    from kxform.cli.tune_result import format_table

    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return
    rows = [HEADER]
    for summary in out["sizes"]:
        result = summary.get("result") or {}
        values = ", ".join(f"{k}={v}" for k, v in result.get("values", {}).items()) or "(original kept)"
        size = ",".join(f"{k}={v}" for k, v in summary.get("size_values", {}).items())
        rows.append(
            (
                summary.get("size") or "-",
                size,
                ",".join(result.get("passes", [])) or "-",
                printable(values),
                _ms(result.get("original_ms")),
                _ms(result.get("time_ms")),
                f"{result['speedup']:.3f}x" if result.get("speedup") else "-",
            )
        )
    print(format_table(rows))
    if out["dispatch"]:
        print(
            f"kxform: wrote {out['dispatch']['path']} ({len(out['dispatch']['classes'])} size classes)", file=sys.stderr
        )
    print(f"kxform: {len(out['sizes'])} sizes tuned. Log: {log_path}", file=sys.stderr)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
