#!/usr/bin/env python3
"""The shared access analysis (kxform.analysis) on every corpus kernel, as Markdown tables.

One row per kernel of corpora/index.toml: its loops (variable, trip count or bound,
reductions with their operator, whether the loop may be distributed over threads, and
the first reason why not), then its global and shared accesses (affine ones, contiguous
in threadIdx.x with loop starts substituted, and the causes of those that are not
affine). With `--accesses`, one row per access as well.

    python tools/access_table.py [--accesses] [--kernel NAME ...]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

import tomllib


from kxform.analysis import AccessAnalysis, Affine, Loop, analyse_function
from kxform.errors import KxformError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source
from kxform.bench.paths import ROOT


def cell(text: object) -> str:
    """A Markdown table cell (a `|` in a condition would end it)."""
    return str(text).replace("|", "\\|")


def loop_cell(loop: Loop) -> str:
    extent = f"{loop.trip} trips" if loop.trip is not None else f"{loop.op} {loop.bound}" if loop.op else loop.kind
    reductions = "".join(f", {r.var} {r.op}= (id {r.identity})" for r in loop.reductions)
    why = loop.distribute_blockers
    verdict = "distributable" if not why else f"not distributable: {why[0][:60]}"
    return cell(f"{'  ' * loop.depth}{loop.var or loop.kind} ({extent}{reductions}; {verdict})")


def kernel_row(name: str, a: AccessAnalysis) -> str:
    loops = "<br>".join(loop_cell(loop) for loop in a.loops) or "none"
    affine = [x for x in a.accesses if x.affine]
    contiguous = sum(a.contiguous(x) for x in a.accesses)
    causes = Counter(str(x.index).removeprefix("not affine, because ")[:50] for x in a.accesses if not x.affine)
    why = cell("; ".join(f"{n}x {c}" for c, n in causes.most_common(2)) or "-")
    spaces = Counter(x.space for x in a.accesses)
    return (
        f"| {name} | {loops} | {len(a.accesses)} ({spaces['global']} global, {spaces['shared']} shared, "
        f"{spaces['local']} local) | "
        f"{len(affine)} | {contiguous} | {why} | {'yes' if a.barriers else 'no'} |"
    )


def access_rows(name: str, a: AccessAnalysis) -> list[str]:
    rows = []
    for x in a.accesses:
        loops = ",".join(a.loop(i).var or a.loop(i).kind for i in x.loops) or "-"
        stride = a.thread_stride(x)
        rows.append(
            f"| {name} | {x.line} | {cell(x.text)} | {x.space} {x.element} | {x.mode} | {cell(x.index)} | "
            f"{stride if isinstance(stride, Affine) else '-'} | {loops} | "
            f"{cell(' && '.join(str(g) for g in x.guards) or '-')} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accesses", action="store_true", help="also one row per access")
    parser.add_argument("--kernel", action="append", default=[], help="only these corpus entries (repeatable)")
    args = parser.parse_args(argv)
    entries = tomllib.loads((ROOT / "corpora" / "index.toml").read_text())["kernel"]
    kernels: list[tuple[str, AccessAnalysis]] = []
    for entry in entries:
        if args.kernel and entry["name"] not in args.kernel:
            continue
        try:
            model = parse_model(read_source(ROOT / "corpora" / entry["path"]))
        except KxformError as exc:
            print(f"{entry['name']}: {exc}", file=sys.stderr)
            continue
        name = entry["kernel"].split("<")[0]
        for function in model.kernels:
            if function.name == name:
                kernels.append((entry["name"], analyse_function(model, function)))
    print(
        "| kernel | loops (depth-indented) | accesses | affine | contiguous in threadIdx.x | not affine, because "
        "| barrier |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, a in kernels:
        print(kernel_row(name, a))
    if args.accesses:
        print("\n| kernel | line | access | buffer | mode | index | threadIdx.x stride | loops | guards |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, a in kernels:
            print("\n".join(access_rows(name, a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
