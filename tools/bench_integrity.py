#!/usr/bin/env python3
"""Measurement integrity on a GPU: what kxform's timer guarantees, shown with figures.

(a) One corpus kernel (default: stencil5 at its bench size) timed by kxform's timer
    (kxform.verify.measure.timed_and_checked: the persisting-L2 carveout capped at zero, the
    last timed launch's outputs re-checked against a single launch) and timed again with
    the carveout left at the device's maximum; the input bytes against the L2, how many
    input sets the timer rotated, the share of non-zero input elements and whether a fresh
    seed gives other data.
(b) The kernels of tests/fixtures/measure/cheating_kernels.cu: one that skips its work on
    later launches (must be caught: MeasurementError) and one that asks the L2 to keep its
    input resident (evict_last policy: with the carveout capped it must gain nothing over
    the honest kernel), each next to the honest one.

    python tools/bench_integrity.py [--quick] [--out FILE] [--kernel stencil5] [--size bench]
    python tools/bench_integrity.py --dry-run     # no GPU: inputs, builds, CPU-runtime run

Exit status: 0 every check held; 1 a check failed or a cheat was not caught; 2 usage
error or no GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np


from kxform.bench.output import EXIT_FINDINGS, EXIT_OK, OneLineParser, usage_exit, write_json
from kxform.bench.paths import ROOT
from kxform.bench.gpu import corpus_2d, device_line, gpu_runtime

from kxform.build.extract import extract_kernel
from kxform.errors import KxformError
from kxform.harness.inputs import make_inputs
from kxform.runtime.base import BufferArg, KernelParam, LaunchRequest, Runtime, RuntimeError_, ScalarArg
from kxform.verify.differential import EXACT, launch_request, uses_float_atomics
from kxform.verify.measure import REPEAT, WARMUP, MeasurementError, Timing, timed_and_checked, timing_of

TOOL = "bench_integrity"
QUICK_REPEAT = 20
CHEATS = ROOT / "tests" / "fixtures" / "measure" / "cheating_kernels.cu"
DTYPES = {"out": "float32"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog=TOOL, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_REPEAT} timed launches instead of {REPEAT}")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: input checks, nvcc builds of the cheating "
        "kernels and a CPU-runtime run of the corpus kernel at a check size; nothing is timed",
    )
    parser.add_argument("--kernel", default="stencil5", help="2-D corpus kernel of part (a) (default: stencil5)")
    parser.add_argument("--size", help="its size (default: its first bench size; a check size with --dry-run)")
    parser.add_argument("--cheat-n", type=int, default=1 << 22, help="elements of the cheating kernels' buffers")
    parser.add_argument("--repeat", type=int, help="timed launches per measurement")
    args = parser.parse_args(argv)
    if args.repeat is not None and args.repeat < 4:
        parser.error("--repeat must be at least 4 (a spread needs quartiles)")
    if args.cheat_n < 1:
        parser.error("--cheat-n must be at least 1")
    if args.out and Path(args.out).is_dir():
        parser.error(f"--out {args.out} is a directory")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        kernel = corpus_2d((args.kernel,))[0]
        size = (
            kernel.spec.size(args.size)
            if args.size
            else (
                _largest_check(kernel.spec)
                if args.dry_run
                else (kernel.spec.bench_sizes or kernel.spec.check_sizes[-1:])[0]
            )
        )
    except KxformError as exc:
        return usage_exit(TOOL, str(exc))
    repeat = args.repeat or (QUICK_REPEAT if args.quick else REPEAT)
    runtime = None if args.dry_run else gpu_runtime(TOOL)
    report: dict[str, Any] = {"tool": TOOL, "device": device_line(runtime), "repeat": repeat, "dry_run": args.dry_run}
    print(f"{TOOL}: device {report['device']}, {repeat} timed launches per measurement", flush=True)
    try:
        report["corpus"] = corpus_part(kernel, size.name, runtime, repeat, args.dry_run)
        report["cheats"] = cheats_part(runtime, args.cheat_n, repeat, args.dry_run)
    finally:
        if runtime is not None:
            runtime.close()
    checks = [c for part in (report["corpus"], report["cheats"]) for c in part["checks"]]
    failed = [c["name"] for c in checks if c["ok"] is False]
    not_run = [c["name"] for c in checks if c["ok"] is None]
    held = len(checks) - len(failed) - len(not_run)
    report["summary"] = {"checks": len(checks), "held": held, "failed": failed, "not_run": not_run}
    line = (
        f"integrity: {held} / {len(checks)} checks held"
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
        + (f"; not run here: {len(not_run)}" if not_run else "")
    )
    report["summary"]["line"] = line
    write_json(args.out, report)
    print(f"\n{line}")
    return EXIT_FINDINGS if failed else EXIT_OK


def _largest_check(spec: Any) -> Any:
    """The check size with the most blocks (what a dry run emulates on the CPU)."""
    return max(spec.check_sizes, key=lambda s: np.prod(spec.launch(s).grid))


def _check(checks: list[dict[str, Any]], name: str, ok: bool | None, detail: str) -> None:
    """Record and print one check (`ok` None: not run here)."""
    checks.append({"name": name, "ok": ok, "detail": detail})
    mark = "not run" if ok is None else "ok" if ok else "FAILED"
    print(f"  [{mark}] {name}: {detail}", flush=True)


# ---------------------------------------------------------------------- (a) a corpus kernel


def corpus_part(kernel: Any, size: str, runtime: Any, repeat: int, dry_run: bool) -> dict[str, Any]:
    spec = kernel.spec
    resolved = spec.launch(size)
    inputs = make_inputs(spec, resolved)
    fresh = make_inputs(spec, resolved, spec.seed + 1)
    request = launch_request(
        extract_kernel(kernel.source, spec.name), resolved, inputs, f"{spec.name}[{size}] integrity", 600.0
    )
    dtypes = {arg.name: arg.dtype for arg in resolved.args}
    mode = spec.compare if uses_float_atomics(kernel.source) else EXACT
    l2 = runtime.device_info().l2_bytes if runtime is not None else None
    print(f"\n(a) {kernel.name} ({spec.name}) at size {size}, grid {resolved.grid}", flush=True)
    checks: list[dict[str, Any]] = []
    out: dict[str, Any] = {"kernel": kernel.name, "size": size, "checks": checks}
    buffers = [a for a in request.args if isinstance(a, BufferArg)]
    total = sum(a.data.nbytes for a in buffers)
    out["buffer_bytes"] = total
    for arg in buffers:
        if arg.role == "out":
            continue
        share = float(np.count_nonzero(arg.data)) / max(arg.data.size, 1)
        _check(checks, f"input '{arg.name}' non-zero", share > 0.5, f"{share:.1%} of {arg.data.size} elements")
        differs = not np.array_equal(np.asarray(fresh[arg.name]), arg.data)
        _check(
            checks,
            f"input '{arg.name}' re-randomised",
            differs,
            "another seed gives other data" if differs else "another seed gives the same data",
        )
    if dry_run:
        from kxform.verify.differential import pick_runtime

        result = pick_runtime("cpu").run(request)
        unwritten = sum(result.unwritten.values())
        _check(
            checks,
            "single launch writes every output (CPU runtime)",
            unwritten == 0,
            f"{unwritten} elements left unwritten",
        )
        _check(checks, "timing re-checks outputs, carveout capped", None, "needs a GPU")
        return out
    assert l2 is not None
    capped = _timed(runtime, request, dtypes, mode, repeat)
    out["l2_bytes"] = l2
    out["capped"] = capped
    _check(
        checks,
        "timed with the carveout capped at 0 and the last launch's outputs re-checked",
        "error" not in capped,
        capped.get("error")
        or f"median {capped['median_ms']:.4f} ms +- {capped['spread_ms']:.4f} over {capped['samples']} launches",
    )
    if "error" not in capped:
        fits = total < 2 * l2
        copies = capped["copies"]
        _check(
            checks,
            "a launch cannot read the previous launch's inputs from L2",
            copies > 1 if fits else True,
            f"{total / 2**20:.1f} MiB of buffers vs {l2 / 2**20:.0f} MiB L2: "
            + (f"rotated over {copies} input sets" if fits else f"{total / l2:.1f} times the L2"),
        )
    uncapped = _uncapped(runtime, request, l2, repeat)
    out["uncapped"] = uncapped
    if "error" in uncapped or "error" in capped:
        _check(checks, "carveout left at the device maximum", None, uncapped.get("error") or "capped run failed")
    else:
        ratio = capped["median_ms"] / uncapped["median_ms"]
        print(
            f"  capped {capped['median_ms']:.4f} ms, carveout at {uncapped['persisting_l2_bytes']} bytes "
            f"{uncapped['median_ms']:.4f} ms (capped / uncapped {ratio:.3f})"
        )
    return out


def _timed(runtime: Runtime, request: LaunchRequest, dtypes: dict[str, str], mode: Any, repeat: int) -> dict[str, Any]:
    """kxform's timer on `request`: median and spread, or the error it raised."""
    try:
        timing = timed_and_checked(runtime, request, dtypes, mode, repeat)
    except RuntimeError_ as exc:
        return {"error": str(exc), "caught": isinstance(exc, MeasurementError)}
    return _figures(timing)


def _figures(timing: Timing) -> dict[str, Any]:
    return {
        "median_ms": round(timing.median_ms, 6),
        "spread_ms": round(timing.spread_ms, 6),
        "samples": timing.samples,
        "copies": timing.copies,
    }


def _uncapped(runtime: Any, request: LaunchRequest, l2: int, repeat: int) -> dict[str, Any]:
    """The same timing loop with the persisting-L2 limit at the device's maximum, in a
    runtime of its own (its worker never serves a capped measurement)."""
    from kxform.runtime.gpu import GpuRuntime

    with GpuRuntime(getattr(runtime, "builder", None)) as other:
        try:
            timed = other.time(request, warmup=WARMUP, repeat=repeat, persisting_l2_limit=l2)
        except RuntimeError_ as exc:
            return {"error": str(exc)}
    return {
        **_figures(timing_of(list(timed.samples_ms), timed.copies)),
        "persisting_l2_bytes": timed.persisting_l2_bytes,
    }


# ---------------------------------------------------------------------- (b) cheating kernels


def cheat_request(kernel: str, n: int) -> LaunchRequest:
    """One launch of `kernel` of the cheating-kernels file on `n` random floats."""
    data = np.random.default_rng(7).uniform(-1, 1, n).astype(np.float32)
    params = (KernelParam("float*", "out"), KernelParam("const float*", "in"), KernelParam("int", "n"))
    args = (BufferArg("out", np.zeros(n, np.float32), "out"), BufferArg("in", data, "in"), ScalarArg("n", np.int32(n)))
    return LaunchRequest(
        CHEATS.read_text(encoding="utf-8"),
        kernel,
        params,
        args,
        ((n + 255) // 256, 1, 1),
        (256, 1, 1),
        label=f"{kernel}[{n}]",
        filename=str(CHEATS),
    )


def cheats_part(runtime: Any, n: int, repeat: int, dry_run: bool) -> dict[str, Any]:
    print(f"\n(b) cheating kernels ({CHEATS.relative_to(ROOT)}), {n} elements", flush=True)
    checks: list[dict[str, Any]] = []
    out: dict[str, Any] = {"n": n, "checks": checks}
    names = ("twice", "twice_once", "twice_persisting")
    if dry_run:
        from kxform.build.builder import Builder
        from kxform.runtime.gpu import compile_kernel

        builder = Builder()
        for name in names:
            try:
                compiled = compile_kernel(builder, cheat_request(name, 256), "sm_90")
                _check(checks, f"{name} builds for sm_90", True, f"entry {compiled.entry}")
            except KxformError as exc:
                _check(checks, f"{name} builds for sm_90", False, str(exc))
        _check(checks, "cheats caught by the timer", None, "needs a GPU")
        return out
    results = {name: _timed(runtime, cheat_request(name, n), DTYPES, EXACT, repeat) for name in names}
    out["timings"] = results
    honest, once, persisting = (results[k] for k in names)
    _check(
        checks,
        "honest kernel times and re-checks",
        "error" not in honest,
        honest.get("error") or f"median {honest['median_ms']:.4f} ms +- {honest['spread_ms']:.4f}",
    )
    _check(
        checks,
        "kernel that skips work on later launches is caught",
        bool(once.get("caught")),
        once.get("error") or f"NOT caught: timed {once['median_ms']:.4f} ms as if it did the work",
    )
    if "error" in persisting or "error" in honest:
        _check(
            checks,
            "evict_last kernel gains nothing with the carveout capped",
            False,
            persisting.get("error") or "honest kernel failed",
        )
    else:
        gain = honest["median_ms"] - persisting["median_ms"]
        ok = gain <= honest["spread_ms"] + persisting["spread_ms"] + 0.02 * honest["median_ms"]
        _check(
            checks,
            "evict_last kernel gains nothing with the carveout capped",
            ok,
            f"{persisting['median_ms']:.4f} ms vs honest {honest['median_ms']:.4f} ms "
            f"({honest['median_ms'] / persisting['median_ms']:.3f}x)",
        )
        request = cheat_request("twice_persisting", n)
        uncapped = _uncapped(runtime, request, runtime.device_info().l2_bytes, repeat)
        out["persisting_uncapped"] = uncapped
        if "error" not in uncapped:
            print(
                f"  evict_last kernel with the carveout at {uncapped['persisting_l2_bytes']} bytes: "
                f"{uncapped['median_ms']:.4f} ms ({honest['median_ms'] / uncapped['median_ms']:.3f}x the honest "
                "kernel): what the cap takes away"
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
