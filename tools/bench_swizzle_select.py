#!/usr/bin/env python3
"""Swizzle selection on a GPU: the exhaustive sweep of library patterns per 2-D corpus
kernel, and how the default proposer (rule + L2 model ranking) fares against it.

For every corpus kernel with a 2-D grid (corpora/index.toml), each distinct block order
of the library patterns (configurations that dispatch identically, such as xcd over one
XCD and row-major, are timed once) is verified bit-exact against the original at the
spec's check sizes, then timed at the bench size in the same process as the original
(kxform's timer: CUDA events, warm-up, median, the persisting-L2 carveout capped at zero,
the last timed launch's outputs re-checked; the original is timed before and after the
variants). Then the order in which the default proposer would try patterns (asked through
the pass and proposer APIs, as `kxform apply` asks), the evaluations it needs to reach
the sweep's best (within the spreads or 2%), and whether its first proposal is a
regression (slower beyond both spreads) or a correct "leave alone".

    python tools/bench_swizzle_select.py [--quick] [--out FILE] [--kernels a,b] [--patterns p,q]
    python tools/bench_swizzle_select.py --dry-run --kernels transpose   # no GPU: CPU runtime

Exit status: 0 ran; 1 some version did not verify or measure; 2 usage error or no GPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


from kxform.bench.output import EXIT_FINDINGS, EXIT_OK, OneLineParser, usage_exit, write_json
from kxform.bench.gpu import (
    Budget,
    CorpusKernel,
    corpus_2d,
    device_line,
    gpu_runtime,
    hardware,
    order_key,
    split_names,
    sweep_configs,
    variant,
)
from kxform.bench.swizzle_selection import Judgement, TOLERANCE, default_order, judge_default

from kxform.build.extract import extract_kernel
from kxform.errors import KxformError
from kxform.frontend.source import SourceText
from kxform.harness.inputs import make_inputs
from kxform.hw import HwProfile, load_profile
from kxform.passes.swizzle.patterns import RemapConfig
from kxform.runtime.base import Runtime, RuntimeError_
from kxform.verify.differential import EXACT, launch_request, uses_float_atomics, verify_pair
from kxform.verify.measure import REPEAT, Timing, timed_and_checked

TOOL = "bench_swizzle_select"
QUICK_REPEAT = 10


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog=TOOL, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", metavar="FILE", help="write the results as JSON (atomically, after every kernel)")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_REPEAT} timed launches per version instead of {REPEAT}"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: verify on the CPU runtime and compute the default order; time nothing",
    )
    parser.add_argument("--kernels", help="comma-separated manifest names (default: every 2-D corpus kernel)")
    parser.add_argument("--patterns", help="comma-separated library patterns (default: all)")
    parser.add_argument("--hw", help="hardware profile (default: the detected GPU's; h100-sxm with --dry-run)")
    parser.add_argument("--repeat", type=int, help="timed launches per version")
    parser.add_argument("--budget-s", type=float, help="start no new kernel after this many seconds")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel nvcc builds")
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.budget_s is not None and args.budget_s <= 0:
        parser.error("--budget-s must be positive")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.out and Path(args.out).is_dir():
        parser.error(f"--out {args.out} is a directory")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        kernels = corpus_2d(split_names(args.kernels))
        patterns = split_names(args.patterns)
        hw_given = load_profile(args.hw) if args.hw else None
        sweep_configs(hw_given or load_profile("h100-sxm"), patterns)  # validates the names
    except KxformError as exc:
        return usage_exit(TOOL, str(exc))
    runtime: Runtime
    if args.dry_run:
        from kxform.verify.differential import pick_runtime

        runtime = pick_runtime("cpu")
        hw = hw_given or load_profile("h100-sxm")
    else:
        runtime = gpu_runtime(TOOL)
        try:
            hw = hardware(runtime, args.hw)
        except KxformError as exc:
            return usage_exit(TOOL, f"{exc} (or pass --hw NAME)")
    repeat = args.repeat or (QUICK_REPEAT if args.quick else REPEAT)
    report: dict[str, Any] = {
        "tool": TOOL,
        "device": device_line(runtime),
        "hw": hw.name,
        "repeat": repeat,
        "quick": args.quick,
        "dry_run": args.dry_run,
        "tolerance": TOLERANCE,
        "kernels": [],
    }
    print(
        f"{TOOL}: device {report['device']}, profile {hw.name}, {repeat} timed launches per version"
        f"{' (dry run: nothing is timed)' if args.dry_run else ''}",
        flush=True,
    )
    budget = Budget(args.budget_s)
    failures = 0
    for kernel in kernels:
        if budget.exhausted():
            report["kernels"].append({"kernel": kernel.name, "status": "not run (time budget)"})
            print(f"\n== {kernel.name}: not run (time budget of {args.budget_s:g} s spent)")
            continue
        try:
            result = run_kernel(kernel, hw, runtime, patterns, repeat, timed=not args.dry_run, jobs=args.jobs)
        except Exception as exc:  # noqa: BLE001 - one kernel's failure must not lose the others' figures
            result = {"kernel": kernel.name, "status": f"failed: {type(exc).__name__}: {exc}", "versions": []}
            print(f"\n== {kernel.name}: {result['status']}", flush=True)
            failures += 1
        failures += sum(1 for v in result["versions"] if v["status"] != "ok")
        report["kernels"].append(result)
        report["summary"] = summary(report["kernels"])
        write_json(args.out, report)
    report["summary"] = summary(report["kernels"])
    report["seconds"] = round(budget.elapsed(), 1)
    write_json(args.out, report)
    print(f"\n{report['summary']['line']}  ({report['seconds']:.0f} s)")
    close = getattr(runtime, "close", None)
    if close is not None:
        close()
    return EXIT_FINDINGS if failures else EXIT_OK


# ----------------------------------------------------------------------- one kernel


def run_kernel(
    kernel: CorpusKernel,
    hw: HwProfile,
    runtime: Runtime,
    patterns: tuple[str, ...],
    repeat: int,
    timed: bool,
    jobs: int,
    size_name: str | None = None,
) -> dict[str, Any]:
    """Sweep, verify and time one kernel (at its first bench size, or the spec's size
    `size_name`); judge the default order. Never raises for a version that fails: its
    status says why."""
    size = kernel.spec.size(size_name) if size_name else (kernel.spec.bench_sizes or kernel.spec.check_sizes[-1:])[0]
    grid = kernel.spec.launch(size).grid
    default = default_order(kernel.source.path, kernel.function, hw)
    configs = _with_proposals(sweep_configs(hw, patterns), default.proposals + default.fallback, patterns)
    original = order_key(None, grid)
    keys = {c.label(): order_key(c, grid) for c in configs}
    versions: dict[str, dict[str, Any]] = {
        original: {"order": "row (original)", "key": original, "status": "ok", "aliases": []}
    }
    sources: dict[str, SourceText] = {}
    for config in configs:
        key = keys[config.label()]
        if key in versions:
            versions[key]["aliases"].append(config.label())
            continue
        entry: dict[str, Any] = {"order": config.label(), "key": key, "status": "ok", "aliases": []}
        versions[key] = entry
        try:
            sources[key] = variant(kernel, config, hw)
        except KxformError as exc:
            entry["status"] = f"not applied: {exc}"
    if timed:
        _prebuild(runtime, kernel, list(sources.values()), jobs)
    for key, source in sources.items():
        report = verify_pair(kernel.source, source, kernel.spec, runtime)
        if not report.ok:
            first = next((v.summary() for v in report.sizes if not v.ok), report.summary())
            versions[key]["status"] = f"not verified on the {runtime.name} runtime: {first}"
    timings: dict[str, Timing] = {}
    if timed:
        timings = _time_all(runtime, kernel, size.name, sources, versions, repeat)
    order = [keys.get(c.label()) or order_key(c, grid) for c in default.proposals]
    fallback = [keys.get(c.label()) or order_key(c, grid) for c in default.fallback]
    judgement = judge_default(order, fallback, timings, original) if original in timings else None
    result = _result(kernel, hw, size.name, grid, default, versions, timings, order, fallback, judgement)
    if judgement is None and timed:
        result["verdict"] = "original not measured"
    _print_kernel(result)
    return result


def _with_proposals(
    configs: list[RemapConfig], proposed: tuple[RemapConfig, ...], patterns: tuple[str, ...]
) -> list[RemapConfig]:
    """The sweep plus any configuration the proposer would try that it lacks."""
    labels = {c.label() for c in configs}
    extra = [c for c in proposed if c.label() not in labels and (not patterns or c.pattern.name in patterns)]
    return configs + list({c.label(): c for c in extra}.values())


def _prebuild(runtime: Runtime, kernel: CorpusKernel, sources: list[SourceText], jobs: int) -> None:
    """Compile the original and every variant for the device in parallel (nvcc runs in
    threads; the runtime's later launches find the cubins in the build cache)."""
    size = kernel.spec.check_sizes[0]
    resolved = kernel.spec.launch(size)
    inputs = make_inputs(kernel.spec, resolved)
    requests = [
        launch_request(extract_kernel(s, kernel.spec.name), resolved, inputs, f"{kernel.name} build", 60.0)
        for s in [kernel.source, *sources]
    ]

    def build(request: Any) -> None:
        try:
            runtime.compile(request)  # type: ignore[attr-defined]
        except RuntimeError_:
            pass  # reported by the verification that follows

    with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(requests)))) as pool:
        list(pool.map(build, requests))


def _time_all(
    runtime: Runtime,
    kernel: CorpusKernel,
    size: str,
    sources: dict[str, SourceText],
    versions: dict[str, dict[str, Any]],
    repeat: int,
) -> dict[str, Timing]:
    """The original, every verified variant, then the original again, on one set of inputs."""
    resolved = kernel.spec.launch(size)
    inputs = make_inputs(kernel.spec, resolved)
    dtypes = {arg.name: arg.dtype for arg in resolved.args}

    def one(source: SourceText, label: str) -> Timing:
        request = launch_request(
            extract_kernel(source, kernel.spec.name), resolved, inputs, f"{kernel.spec.name}[{size}] {label}", 600.0
        )
        mode = kernel.spec.compare if uses_float_atomics(source) else EXACT
        return timed_and_checked(runtime, request, dtypes, mode, repeat)

    original = next(iter(versions))
    timings: dict[str, Timing] = {}
    try:
        before = one(kernel.source, "original")
    except RuntimeError_ as exc:
        versions[original]["status"] = f"not measured: {exc}"
        return timings
    for key, source in sources.items():
        if versions[key]["status"] != "ok":
            continue
        try:
            timings[key] = one(source, versions[key]["order"])
        except RuntimeError_ as exc:
            versions[key]["status"] = f"not measured: {exc}"
    try:
        after = one(kernel.source, "original again")
    except RuntimeError_:
        after = before
    timings[original] = _both(before, after)
    versions[original]["original_runs_ms"] = [round(before.median_ms, 5), round(after.median_ms, 5)]
    return timings


def _both(first: Timing, second: Timing) -> Timing:
    """The original timed before and after the variants: the mean of the two medians, with
    a spread that covers the drift between them."""
    drift = abs(first.median_ms - second.median_ms) / 2
    return Timing(
        statistics.fmean((first.median_ms, second.median_ms)),
        max(first.spread_ms, second.spread_ms, drift),
        first.samples + second.samples,
        first.copies,
    )


# -------------------------------------------------------------------------- reporting


def _result(
    kernel: CorpusKernel,
    hw: HwProfile,
    size: str,
    grid: tuple[int, int, int],
    default: Any,
    versions: dict[str, dict[str, Any]],
    timings: dict[str, Timing],
    order: list[str],
    fallback: list[str],
    judgement: Judgement | None,
) -> dict[str, Any]:
    original = next(iter(versions))
    base = timings.get(original)
    rows = []
    for key, entry in versions.items():
        row = dict(entry)
        timing = timings.get(key)
        if timing is not None:
            row.update(
                median_ms=round(timing.median_ms, 5),
                spread_ms=round(timing.spread_ms, 5),
                samples=timing.samples,
                copies=timing.copies,
            )
            if base is not None:
                row["speedup"] = round(base.median_ms / timing.median_ms, 4)
        row["default_rank"] = order.index(key) + 1 if key in order else None
        row["model_rank"] = fallback.index(key) + 1 if key in fallback else None
        rows.append(row)
    label = {k: v["order"] for k, v in versions.items()}
    out: dict[str, Any] = {
        "kernel": kernel.name,
        "function": kernel.function,
        "size": size,
        "grid": list(grid),
        "hw": hw.name,
        "status": "ok",
        "modelled": default.modelled,
        "default_order": [c.label() for c in default.proposals],
        "default_rationale": default.first_rationale,
        "model_ranking": [c.label() for c in default.fallback],
        "versions": rows,
    }
    if judgement is not None:
        out.update(
            best=label[judgement.best],
            best_is_original=judgement.best_is_original,
            first=label[judgement.first] if judgement.first else None,
            verdict=judgement.verdict,
            regression=judgement.regression,
            evaluations_to_best=judgement.evaluations_to_best,
            model_ranking_to_best=judgement.fallback_to_best,
        )
    else:
        out.update(verdict="not timed")
    return out


def _print_kernel(r: dict[str, Any]) -> None:
    grid = "x".join(map(str, r["grid"]))
    first = r["default_order"][0] if r["default_order"] else "leave alone"
    how = "model" if r["modelled"] else "rule (not modelled)"
    print(f"\n== {r['kernel']} ({r['function']}, size {r['size']}, grid {grid}) on {r['hw']}: default {first} [{how}]")
    print(f"  {'order':<40}{'median ms':>12}{'+-':>9}{'speedup':>9}{'default':>9}{'model':>7}  status")
    for v in r["versions"]:
        median = f"{v['median_ms']:.4f}" if "median_ms" in v else "-"
        spread = f"{v['spread_ms']:.4f}" if "spread_ms" in v else "-"
        speedup = f"{v['speedup']:.3f}" if "speedup" in v else "-"
        ranks = [str(v[k]) if v[k] else "-" for k in ("default_rank", "model_rank")]
        same = f" (= {', '.join(v['aliases'])})" if v["aliases"] else ""
        print(f"  {v['order']:<40}{median:>12}{spread:>9}{speedup:>9}{ranks[0]:>9}{ranks[1]:>7}  {v['status']}{same}")
    if "evaluations_to_best" in r:
        evals = r["evaluations_to_best"]
        print(
            f"  default: {r['first'] or 'leave alone'} -> {r['verdict']}; best: {r['best']}; evaluations to reach "
            f"it: {'never' if evals is None else evals}; along the model's ranking: "
            f"{r['model_ranking_to_best'] if r['model_ranking_to_best'] is not None else 'never'}"
        )
    else:
        print(f"  default: {first} ({r['verdict']})")


def summary(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over the judged kernels, and the one-line summary."""
    judged = [k for k in kernels if "evaluations_to_best" in k]
    regressions = [k["kernel"] for k in judged if k["regression"]]
    alone_ok = sum(1 for k in judged if k["verdict"] == "leave alone (correct)")
    alone_miss = [k["kernel"] for k in judged if k["verdict"] == "leave alone (misses a gain)"]
    evals = [k["evaluations_to_best"] for k in judged if k["evaluations_to_best"] is not None]
    never = [k["kernel"] for k in judged if k["evaluations_to_best"] is None]
    line = (
        f"regressions of the default: {len(regressions)} / {len(judged)} kernels"
        + (f" ({', '.join(regressions)})" if regressions else "")
        + f"; correct leave-alone: {alone_ok}; leave-alone missing a gain: {len(alone_miss)}"
        + (f" ({', '.join(alone_miss)})" if alone_miss else "")
        + (f"; evaluations to the best: median {statistics.median(evals):g}, max {max(evals)}" if evals else "")
        + (f"; never reached: {', '.join(never)}" if never else "")
    )
    if not judged:
        line = f"nothing timed ({len(kernels)} kernels listed)"
    return {
        "kernels": len(kernels),
        "judged": len(judged),
        "regressions": regressions,
        "correct_leave_alone": alone_ok,
        "leave_alone_missing_gain": alone_miss,
        "evaluations_to_best": evals,
        "never_reached": never,
        "line": line,
    }


if __name__ == "__main__":
    sys.exit(main())
