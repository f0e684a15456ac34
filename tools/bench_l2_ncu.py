#!/usr/bin/env python3
"""The L2/DRAM locality model against Nsight Compute: predicted versus measured L2 hit
rate and DRAM bytes for every 2-D corpus kernel x library order the model ranks.

For each kernel the model ranks its candidate orders (kxform.locality.predict.rank_orders
with the pass's candidates, on the hardware profile of the detected GPU or `--hw`, at the
model's default size: the first bench size; a ranking computed before, by
tools/bench_swizzle_select.py or `kxform apply`, is read from the model's cache). Each
distinct order is rewritten by the swizzle pass and launched once, all of one kernel in
one child process (the GPU runtime) under

    ncu --clock-control none --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,
        dram__bytes_write.sum --csv --kernel-name-base mangled --kernel-name regex:^ENTRY$

Prints predicted and measured figures per order, and the Spearman rank correlation of
predicted and measured values over all pairs and per kernel.

    python tools/bench_l2_ncu.py [--quick] [--out FILE] [--kernels a,b] [--hw h100-sxm] [--ncu PATH]
    python tools/bench_l2_ncu.py --dry-run --kernels transpose   # no GPU: rankings, builds, the commands

Exit status: 0 ran; 1 some kernel could not be modelled or profiled; 2 usage error, or no
GPU or ncu.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any


from kxform.bench.output import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, OneLineParser, usage_exit, write_json
from kxform.bench.gpu import (
    Budget,
    CorpusKernel,
    FIRST_KERNELS,
    corpus_2d,
    device_line,
    gpu_runtime,
    hardware,
    split_names,
    variant,
)
from kxform.bench.l2_ncu_report import correlations, print_correlations, print_kernel
from kxform.profile.ncu_csv import NcuOutput
from kxform.profile.nsight import find_ncu, run_ncu

from kxform.build.extract import extract_kernel
from kxform.errors import KxformError
from kxform.harness.inputs import make_inputs
from kxform.hw import HwProfile, load_profile
from kxform.locality.predict import OrderPrediction, candidate_configs, rank_orders
from kxform.runtime.base import Runtime, RuntimeError_
from kxform.verify.differential import launch_request

TOOL = "bench_l2_ncu"
METRICS = ("lts__t_sector_hit_rate.pct", "dram__bytes_read.sum", "dram__bytes_write.sum")
QUICK_KERNELS = FIRST_KERNELS
PROFILER_BROKEN = ("ERR_NVGPUCTRPERM", "Failed to initialize the profiler", "LibraryNotLoaded")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog=TOOL, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", metavar="FILE", help="write the results as JSON (atomically, after every kernel)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"only {', '.join(QUICK_KERNELS)} (the model's default sizes, so the first script's rankings are reused)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: rank, rewrite and build (sm_90), print the ncu command of each kernel; profile nothing",
    )
    parser.add_argument("--kernels", help="comma-separated manifest names (default: every 2-D corpus kernel)")
    parser.add_argument("--hw", help="hardware profile (default: the detected GPU's; h100-sxm with --dry-run)")
    parser.add_argument("--ncu", help="the ncu executable (default: $NCU, PATH, /usr/local/cuda/bin/ncu)")
    parser.add_argument("--budget-s", type=float, help="start no new kernel after this many seconds")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="limit of one kernel's ncu run")
    parser.add_argument("--raw", metavar="DIR", help="keep ncu's own output, one KERNEL.csv per kernel, in DIR")
    parser.add_argument("--child", metavar="JOB", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.budget_s is not None and args.budget_s <= 0:
        parser.error("--budget-s must be positive")
    if args.timeout_s <= 0:
        parser.error("--timeout-s must be positive")
    if args.out and Path(args.out).is_dir():
        parser.error(f"--out {args.out} is a directory")
    if args.raw and Path(args.raw).exists() and not Path(args.raw).is_dir():
        parser.error(f"--raw {args.raw} is not a directory")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args.child)
    try:
        names = split_names(args.kernels) or (QUICK_KERNELS if args.quick else ())
        kernels = corpus_2d(names)
        hw_given = load_profile(args.hw) if args.hw else None
    except KxformError as exc:
        return usage_exit(TOOL, str(exc))
    runtime: Any = None
    ncu = find_ncu(args.ncu)
    if not args.dry_run:
        if ncu is None:
            print(
                f"{TOOL}: no ncu: not given (--ncu), not $NCU, not on PATH, not in /usr/local/cuda/bin", file=sys.stderr
            )
            return EXIT_USAGE
        runtime = gpu_runtime(TOOL)
    try:
        hw = hw_given or (hardware(runtime, None) if runtime is not None else load_profile("h100-sxm"))
    except KxformError as exc:
        return usage_exit(TOOL, f"{exc} (or pass --hw NAME)")
    report: dict[str, Any] = {
        "tool": TOOL,
        "device": device_line(runtime),
        "hw": hw.name,
        "ncu": ncu,
        "metrics": list(METRICS),
        "dry_run": args.dry_run,
        "kernels": [],
    }
    print(f"{TOOL}: device {report['device']}, profile {hw.name}, ncu {ncu or 'not found'}", flush=True)
    budget = Budget(args.budget_s)
    failures = 0
    profiler_broken = ""
    with tempfile.TemporaryDirectory(prefix="kxform-ncu-") as scratch:
        for kernel in kernels:
            if budget.exhausted() or profiler_broken:
                why = "time budget" if not profiler_broken else f"ncu cannot profile here: {profiler_broken}"
                report["kernels"].append({"kernel": kernel.name, "status": f"not run ({why})"})
                print(f"\n== {kernel.name}: not run ({why})")
                continue
            try:
                result = run_kernel(
                    kernel,
                    hw,
                    runtime,
                    ncu,
                    Path(scratch),
                    args.timeout_s,
                    args.dry_run,
                    logs=Path(args.raw) if args.raw else None,
                )
            except Exception as exc:  # noqa: BLE001 - one kernel's failure must not lose the others' figures
                result = {"kernel": kernel.name, "status": f"failed: {type(exc).__name__}: {exc}", "orders": []}
            failures += result["status"] != "ok"
            if any(marker in result["status"] for marker in PROFILER_BROKEN):
                profiler_broken = result["status"]
            report["kernels"].append(result)
            print_kernel(result)
            report["correlation"] = correlations(report["kernels"])
            write_json(args.out, report)
    report["correlation"] = correlations(report["kernels"])
    report["seconds"] = round(budget.elapsed(), 1)
    write_json(args.out, report)
    print_correlations(report["correlation"])
    if runtime is not None:
        runtime.close()
    return EXIT_FINDINGS if failures else EXIT_OK


# ----------------------------------------------------------------------- one kernel


def run_kernel(
    kernel: CorpusKernel,
    hw: HwProfile,
    runtime: Runtime | None,
    ncu: str | None,
    scratch: Path,
    timeout_s: float,
    dry_run: bool,
    size_name: str | None = None,
    logs: Path | None = None,
) -> dict[str, Any]:
    """Rank, rewrite, build and profile the distinct orders of one kernel (at the model's
    default size, or the spec's size `size_name`); ncu's output goes to `logs` (default:
    `scratch`)."""
    from kxform.locality.trace import ModelRefused, default_size

    size = kernel.spec.size(size_name) if size_name else default_size(kernel.spec)
    out: dict[str, Any] = {
        "kernel": kernel.name,
        "function": kernel.function,
        "size": size.name,
        "status": "ok",
        "orders": [],
    }
    try:
        ranking = rank_orders(kernel.source, kernel.spec, hw, size, candidate_configs(hw, 2))
    except ModelRefused as exc:
        out["status"] = f"not modelled: {exc.cause}"
        return out
    out.update(
        grid=list(ranking.grid),
        occupancy=ranking.occupancy,
        chosen=ranking.chosen.label if ranking.chosen else None,
        model_seconds=round(ranking.seconds["total"], 2),
    )
    distinct = [p for p in ranking.predictions if p.same_as is None]
    variants = []
    for prediction in distinct:
        source = kernel.source if prediction.config is None else variant(kernel, prediction.config, hw)
        variants.append((prediction.label, extract_kernel(source, kernel.spec.name)))
    entries = _entries(kernel, variants, runtime, hw)
    out["orders"] = [_predicted(p) for p in ranking.predictions]
    job = scratch / f"{kernel.name}.job"
    job.write_bytes(pickle.dumps({"kernel": kernel.name, "size": size, "variants": variants}))
    log = (logs or scratch) / f"{kernel.name}.csv"
    command = ncu_command(ncu or "ncu", sorted(set(entries)), len(variants), log, job)
    out["command"] = " ".join(command)
    if dry_run:
        return out
    log.parent.mkdir(parents=True, exist_ok=True)
    measured = run_ncu(command, log, timeout_s)
    if isinstance(measured, str) and "No kernels were profiled" in measured:
        # the name filter matched nothing: the child launches only these orders, so filter by count alone
        command = ncu_command(ncu or "ncu", [], len(variants), log, job)
        out["command"] = " ".join(command)
        out["note"] = f"no launch matched the kernel-name filter ({measured}); profiled without it"
        measured = run_ncu(command, log, timeout_s)
    if isinstance(measured, str):
        out["status"] = measured
        return out
    if len(measured.launches) != len(variants):
        out["status"] = f"ncu profiled {len(measured.launches)} launches for {len(variants)} orders" + (
            f": {measured.errors[0]}" if measured.errors else ""
        )
        return out
    attach(out["orders"], [label for label, _ in variants], measured)
    return out


def attach(orders: list[dict[str, Any]], labels: list[str], measured: NcuOutput) -> None:
    """Give each order the figures of its launch (launches come in the order of `labels`;
    an order the model found identical to another takes that one's figures)."""
    if len(measured.launches) != len(labels):
        raise ValueError(f"{len(measured.launches)} launches for {len(labels)} orders")
    by_label = {label: launch.metrics for label, launch in zip(labels, measured.launches, strict=True)}
    for order in orders:
        metrics = by_label.get(order["same_as"] or order["order"])
        if metrics is not None:
            pct = metrics.get(METRICS[0])
            order.update(
                measured_l2_hit_rate=None if pct is None else round(pct / 100, 4),
                measured_dram_read_bytes=metrics.get(METRICS[1]),
                measured_dram_write_bytes=metrics.get(METRICS[2]),
            )


def _entries(
    kernel: CorpusKernel, variants: list[tuple[str, Any]], runtime: Runtime | None, hw: HwProfile
) -> list[str]:
    """The cubin entry of every variant, built in parallel for the device (or for `hw`'s
    arch in a dry run): the names ncu filters on. The child's launches find the cubins in
    the build cache."""
    from concurrent.futures import ThreadPoolExecutor

    from kxform.build.builder import Builder
    from kxform.runtime.gpu import compile_kernel

    resolved = kernel.spec.launch(kernel.spec.check_sizes[0])
    inputs = make_inputs(kernel.spec, resolved)
    requests = [
        launch_request(extracted, resolved, inputs, f"{kernel.name} {label}", 60.0) for label, extracted in variants
    ]
    builder = Builder() if runtime is None else None

    def build(request: Any) -> str:
        if runtime is not None:
            return str(runtime.compile(request).entry)  # type: ignore[attr-defined]
        assert builder is not None
        return compile_kernel(builder, request, hw.arch).entry

    with ThreadPoolExecutor(max_workers=max(1, min(len(requests), os.cpu_count() or 1))) as pool:
        return list(pool.map(build, requests))


def ncu_command(ncu: str, entries: list[str], launches: int, log: Path, job: Path) -> list[str]:
    """ncu on this script's child mode: one launch per order, only the kernel's entries
    (no `entries`: no name filter)."""
    names = "|".join(entries)
    where = ["--kernel-name-base", "mangled", "--kernel-name", f"regex:^({names})$"] if entries else []
    return [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--metrics",
        ",".join(METRICS),
        "--csv",
        "--print-units",
        "base",
        *where,
        "--launch-count",
        str(launches),
        "--log-file",
        str(log),
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        str(job),
    ]


def _predicted(p: OrderPrediction) -> dict[str, Any]:
    s = p.stats
    return {
        "order": p.label,
        "rank": p.rank,
        "same_as": p.same_as,
        "predicted_l2_hit_rate": round(s.hit_rate.value, 4),
        "predicted_dram_read_bytes": round(s.dram_read_bytes.value),
        "predicted_dram_write_bytes": round(s.dram_write_bytes.value),
        "predicted_gain": round(p.gain, 4),
    }


# ---------------------------------------------------------------------- the child


def child_main(job_path: str) -> int:
    """Run each order of the job once on the GPU runtime (what ncu profiles)."""
    from kxform.runtime.gpu import GpuRuntime

    with GpuRuntime() as runtime:
        return launch_all(pickle.loads(Path(job_path).read_bytes()), runtime)


def launch_all(job: dict[str, Any], runtime: Runtime) -> int:
    """One launch per variant of `job`, in order, on one set of the spec's inputs."""
    kernel = corpus_2d((job["kernel"],))[0]
    resolved = kernel.spec.launch(job["size"])
    inputs = make_inputs(kernel.spec, resolved)
    for label, extracted in job["variants"]:
        request = launch_request(extracted, resolved, inputs, f"{kernel.name}[{job['size'].name}] {label}", 600.0)
        try:
            runtime.run(request)
        except RuntimeError_ as exc:
            print(f"{TOOL} child: {exc}", file=sys.stderr)
            return 1
        print(f"{TOOL} child: launched {label}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
