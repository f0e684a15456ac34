#!/usr/bin/env python3
"""kxform on the naive corpus, against the experts: the end-to-end benchmark.

    python tools/bench_pipeline.py [--dry-run] [--budget N] [--kernels a,b] [--out FILE]

For every naive kernel of corpora/naive/index.toml, on a GPU:
  * both versions verified against the NumPy reference at every check size (on the GPU);
  * the original (naive) kernel and its expert version timed at the bench size on the same
    random inputs by kxform's timer (`kxform.verify.measure.timed_and_checked`: CUDA events,
    warm-up, median, `out` buffers poisoned before each launch, inputs rotated, the
    persisting-L2 carveout capped at zero, the last timed launch re-checked);
  * kxform's best verified result within `--budget` evaluations: `kxform tune` on the naive
    file (its own process, its own database), with `--pass` the passes that offer more than
    the code as it is (`--passes all` leaves `--pass` out, for a tune that searches the
    pipeline itself); the original is kept where nothing verified is faster (speed-up 1);
  * the speed-ups over the original (kxform's measured inside its tune run, against the
    original timed there on the same inputs), and the fraction of the expert's speed-up
    kxform reached, as a log ratio: log(kxform) / log(expert);
  * yardsticks from tools/gpu_baselines.py (its own process): the device copy bandwidth
    (the kernel's least traffic over its time) and cuBLAS's SGEMM for the GEMM-shaped pairs;
  * with `--also P,Q` (repeatable), another `kxform tune` of the naive kernel with `--pass P,Q`
    at the same budget, and with `--also P=defaults`, pass P alone at the defaults of its
    tuning space (one configuration: what the pass's known-good shape does before any
    search), each against the same yardstick (`also` in the JSON, a line under the table).
The geometric means close the table; the results go to `--out` as JSON (written atomically
after every kernel, so a run cut short keeps what it measured).

`--study` runs, in place of the one tune per kernel, the search study of
kxform/bench/search_study.py: `kxform tune` without `--pass` at budget 40 without the cost
model, cut-off and transfer prior, at 40 with them, and at 200; it prints the best at 40
against the best at 200 and the share of evaluations slower than twice the original
(`--study-dir` keeps the shared tuning databases; `--study-timeout` bounds each tune).

`--dry-run` does everything but the GPU: both versions verified on the CPU runtime, the
spaces each pass offers, both versions built with nvcc for the profile's architecture,
and the first point of the offered space with one pass on confirmed by the tuner's own CPU
checker (kxform.search.checker: rewritten, built, verified against the original), and so
is the first point of each offered structural pass on its own (`structural = True`:
split-reduce) and of each offered pass `--check` names, which another pass's point would
otherwise hide.

Exit status: 0 every kernel verified (and, on a GPU, was measured); 1 something did not
verify, build or measure (see the table); 2 a usage error or no GPU (one line on stderr).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


from kxform.bench import yardsticks
from kxform.bench.output import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, OneLineParser, geomean, write_json
from kxform.bench.gpu import Budget, device_line, gpu_runtime, hardware, split_names
from kxform.bench.naive_pairs import Pair, Version, build, check, gemm_shape, load_pairs, spaces, structural, verify
from kxform.bench.pipeline_table import print_table
from kxform.bench.search_study import print_study, study_column, study_summary

from kxform.errors import KxformError
from kxform.runtime.base import RuntimeError_

TOOL = "bench_pipeline"
MIN_REPEAT, MAX_REPEAT = 5, 50


def parse(argv: list[str] | None) -> Any:
    p = OneLineParser(prog=TOOL, description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="no GPU: CPU verification, the spaces, the nvcc builds")
    p.add_argument("--budget", type=int, default=40, help="kxform tune evaluations per kernel (default 40)")
    p.add_argument("--kernels", metavar="A,B", help="pairs to run (default: all, in the manifest's order)")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON here")
    p.add_argument(
        "--passes",
        default="offered",
        metavar="offered|all|P,Q",
        help="kxform tune's --pass: the passes that offer a space (default), all (no --pass: "
        "tune picks the pipeline) or a list",
    )
    p.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="P,Q|P=defaults",
        help="another tune per kernel: with --pass P,Q, or pass P at its tuning defaults only (repeatable)",
    )
    p.add_argument(
        "--check",
        metavar="P,Q",
        default="",
        help="dry run: passes whose first offered point is also checked alone (always: the structural ones)",
    )
    p.add_argument("--quick", action="store_true", help="shorter timing per version (0.25 s of launches)")
    p.add_argument("--launch-budget", type=float, help="seconds of timed launches per version (default 0.5)")
    p.add_argument("--budget-s", type=float, help="start no new kernel after this many seconds")
    p.add_argument("--tune-timeout", type=float, default=240.0, help="seconds one kxform tune may take (default 240)")
    p.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1), help="kxform tune's build jobs")
    p.add_argument("--hw", help="hardware profile (default: from the device; dry run: h100)")
    p.add_argument("--no-baselines", action="store_true", help="skip the copy and cuBLAS yardsticks")
    p.add_argument("--study", action="store_true", help="the search study: budget 40 before and after, and 200")
    p.add_argument("--study-dir", metavar="DIR", help="where the study keeps its shared tuning databases")
    p.add_argument("--study-timeout", type=float, default=1800.0, help="seconds one study tune may take")
    p.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="no run: join the results of runs over parts of the corpus (one per GPU, say), print "
        "their table and write them to --out",
    )
    args = p.parse_args(argv)
    if args.budget < 1 or args.jobs < 1:
        p.error("--budget and -j must be at least 1")
    for name in ("launch_budget", "budget_s", "tune_timeout"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            p.error(f"--{name.replace('_', '-')} must be a positive number of seconds")
    if args.passes not in ("offered", "all"):
        from kxform.engine.registry import default_registry

        PASSES = default_registry().names()
        unknown = [n for n in split_names(args.passes) if n not in PASSES]
        if unknown or not split_names(args.passes):
            p.error(f"--passes {args.passes!r}: expected offered, all or passes among {', '.join(PASSES)}")
    for also in args.also:
        from kxform.engine.registry import default_registry

        names, _, at = also.partition("=")
        known = default_registry().names()
        if at not in ("", "defaults") or not split_names(names) or any(n not in known for n in split_names(names)):
            p.error(f"--also {also!r}: expected passes among {', '.join(known)}, or one pass and =defaults")
        if at and len(split_names(names)) != 1:
            p.error(f"--also {also!r}: =defaults takes one pass")
    if args.launch_budget is None:
        args.launch_budget = 0.25 if args.quick else 0.5
    return args


# ----------------------------------------------------------------------- one pair


def run_pair(pair: Pair, runtime: Any, args: Any, hw: str, yardsticks: dict[str, Any] | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": pair.name,
        "family": pair.family,
        "naive_kernel": pair.naive.kernel,
        "expert_kernel": pair.expert.kernel,
        "yardstick_kind": pair.yardstick,
    }
    started = time.perf_counter()
    row["verify"] = {"naive": verify(pair.naive, runtime), "expert": verify(pair.expert, runtime)}
    row["steps_s"] = {"verify": round(time.perf_counter() - started, 1)}
    row["spaces"] = spaces(pair.naive, hw)
    if args.dry_run:
        from kxform.hw import load_profile

        arch = load_profile(hw).arch
        row["builds"] = {"naive": build(pair.naive, arch), "expert": build(pair.expert, arch)}
        row["checker"] = check(pair.naive, hw, tuple(row["spaces"]["offered"]))
        alone = structural(row["spaces"]["offered"], tuple(split_names(args.check)) if args.check else ())
        row["structural"] = {name: check(pair.naive, hw, (name,)) for name in alone}
    else:
        measure(pair, runtime, args, hw, row)
        row["yardstick"] = yardstick(pair, row, yardsticks)
    row["wall_s"] = round(time.perf_counter() - started, 1)
    return row


def measure(pair: Pair, runtime: Any, args: Any, hw: str, row: dict[str, Any]) -> None:
    """The GPU columns: the original and the expert timed, kxform's tuned result."""
    from kxform.harness.inputs import make_inputs

    if row["verify"]["naive"]["status"] != "verified":
        row["failed"] = f"the naive kernel did not verify: {row['verify']['naive']['detail'][:300]}"
        return
    spec = pair.naive.spec
    size = spec.bench_sizes[0]
    row["size"] = {"name": size.name, **size.values}
    inputs = make_inputs(spec, spec.launch(size))  # the expert's spec has the same arguments and seed
    started = time.perf_counter()
    try:
        row["original_ms"] = time_version(pair.naive, runtime, size, inputs, args.launch_budget)
        if row["verify"]["expert"]["status"] == "verified":
            row["expert_ms"] = time_version(pair.expert, runtime, size, inputs, args.launch_budget)
    except (KxformError, RuntimeError_) as exc:  # a fault, a timeout, a launch the timer rejected
        row["failed"] = f"timing: {exc}"
        return
    finally:
        del inputs
    tuned = time.perf_counter()
    row["steps_s"]["time"] = round(tuned - started, 1)
    print(
        f"{pair.name}: verified and timed; kxform tune ({args.budget} evaluations, passes "
        f"{','.join(row['spaces']['offered']) or 'none'})",
        file=sys.stderr,
        flush=True,
    )
    if args.study:
        row["study"] = study_column(
            lambda scratch: tune_command(pair, args, hw, None, scratch),
            run_limited,
            Path(args.study_dir),
            args.study_timeout,
        )
        after = row["study"].get("after", {})
        if after.get("status") == "tuned":  # the default's result is the table's kxform column
            speedup = after.get("speedup") or 1.0
            row["kxform"] = {
                "status": "tuned",
                "passes": [],
                "evaluated": after["evaluated"],
                "failed": after["failed"],
                "best_config": after["best_config"],
                "best_ms": after["best_ms"],
                "speedup": max(speedup, 1.0),
                "kept": "tuned" if speedup > 1.0 else "original",
            }
        else:
            row["kxform"] = {"status": after.get("status", "failed"), "speedup": 1.0, "passes": []}
    else:
        row["kxform"] = tune_column(pair, args, hw, tune_passes(args, row["spaces"]["offered"]))
    row["steps_s"]["tune"] = round(time.perf_counter() - tuned, 1)
    speeds(row)
    for also in args.also:
        names, _, at = also.partition("=")
        extra = pinned_defaults(pair, names, hw) if at else []
        column = tune_column(pair, args, hw, list(split_names(names)), extra)
        raw = column.get("raw_speedup")  # its best, slower or not, scaled to this run's original
        column["ms"] = row["original_ms"] / raw if raw and row.get("original_ms") else None
        row.setdefault("also", {})[also] = column


def pinned_defaults(pair: Pair, name: str, hw: str) -> list[str]:
    """`kxform tune` arguments that leave one configuration: pass `name` on, every one of
    its parameters at its tuning space's default."""
    from kxform.search.kernel_space import kernel_space

    version = pair.naive
    space = kernel_space(version.source.data, version.kernel, (name,), path=version.source.path, hw=hw)
    switch = name.replace("-", "_")
    pins = [switch] + [
        f"{k} == {v!r}" if isinstance(v, str) else f"{k} == {v}"
        for k, v in space.defaults().items()
        if k.startswith(switch + ".")
    ]
    return ["--strategy", "exhaustive", *(a for pin in pins for a in ("--require", pin))]


def time_version(version: Version, runtime: Any, size: Any, inputs: dict[str, Any], budget_s: float) -> float:
    """Median milliseconds of `version` at `size` by kxform's timer (see the module doc);
    the number of timed launches fills about `budget_s` seconds (5 to 50)."""
    from kxform.build.extract import extract_kernel
    from kxform.verify.differential import EXACT, launch_request, uses_float_atomics
    from kxform.verify.measure import launches_to_fill, timed_and_checked

    resolved = version.spec.launch(size)
    request = launch_request(
        extract_kernel(version.source, version.kernel), resolved, inputs, f"{version.kernel}[{size.name}]", 600.0
    )

    def repeat(probe: float) -> int:
        return launches_to_fill(budget_s, probe, MIN_REPEAT, MAX_REPEAT)

    mode = version.spec.compare if uses_float_atomics(version.source) else EXACT
    dtypes = {arg.name: arg.dtype for arg in resolved.args}
    return timed_and_checked(runtime, request, dtypes, mode, repeat).median_ms


def tune_passes(args: Any, offered: list[str]) -> list[str] | None:
    """The `--pass` list for kxform tune (None: no `--pass` at all)."""
    if args.passes == "offered":
        return offered
    if args.passes == "all":
        return None
    return list(split_names(args.passes))


def tune_command(
    pair: Pair, args: Any, hw: str, passes: list[str] | None, scratch: Path, extra: list[str] | None = None
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "kxform.cli.main",
        "tune",
        pair.naive.source.path,
        "--kernel",
        pair.naive.kernel,
        "--spec",
        str(pair.naive.spec_path),
        "--budget",
        str(args.budget),
        "--json",
        "--db",
        str(scratch / "tune.sqlite"),
        "--log",
        str(scratch / f"{pair.name}.jsonl"),
        "--hw",
        hw,
        "-j",
        str(args.jobs),
        "--launch-budget",
        str(args.launch_budget),
    ]
    return command + (["--pass", ",".join(passes)] if passes is not None else []) + list(extra or ())


def tune_column(
    pair: Pair, args: Any, hw: str, passes: list[str] | None, extra: list[str] | None = None
) -> dict[str, Any]:
    """kxform's result for the naive kernel: `kxform tune`'s best verified configuration
    with `--pass passes` (None: no `--pass`) and `extra` arguments, or the original kept
    (speed-up 1) when no pass offers anything or nothing is faster."""
    if passes == []:
        return {"status": "nothing offered", "speedup": 1.0, "passes": []}
    with tempfile.TemporaryDirectory(prefix="kxform-bench-pipeline-") as scratch:
        command = tune_command(pair, args, hw, passes, Path(scratch), extra)
        code, stdout, stderr = run_limited(command, args.tune_timeout, scratch)
    if code is None:
        return {
            "status": "timed out",
            "speedup": 1.0,
            "passes": passes,
            "detail": f"kxform tune ran past {args.tune_timeout:g} s; the original is kept",
        }
    said = (stderr or stdout).strip().splitlines()
    if code != 0:
        return {"status": "failed", "speedup": 1.0, "passes": passes, "detail": said[-1] if said else f"exit {code}"}
    try:
        summary = json.loads(stdout)
    except json.JSONDecodeError:
        return {
            "status": "failed",
            "speedup": 1.0,
            "passes": passes,
            "detail": f"kxform tune --json printed no JSON: {stdout.strip()[:200]!r}",
        }
    best, original = summary.get("best"), summary.get("original_ms")
    raw = original / best["time_ms"] if best and original and best.get("time_ms") else None
    evaluations = summary.get("evaluations") or []
    if best and evaluations and best["config"] == evaluations[0]["params"]:
        raw = 1.0  # the first evaluation is the code as it is: its time against the original is noise
    return {
        "status": "tuned",
        "passes": passes,
        "evaluated": summary["evaluated"],
        "failed": summary["failed"],
        "space_size": summary["space_size"],
        "best_config": best["config"] if best else None,
        "best_ms": best["time_ms"] if best else None,
        "tune_original_ms": original,
        "raw_speedup": raw,
        "speedup": max(raw or 1.0, 1.0),
        "kept": "tuned" if raw and raw > 1.0 else "original",
        "phases_s": summary.get("phases_s"),
        "failures": _failure_counts(evaluations),
    }


def _failure_counts(evaluations: list[dict[str, Any]]) -> dict[str, Any]:
    """How many evaluations failed in each class, with the first reason of each class."""
    counts: dict[str, Any] = {}
    for e in evaluations:
        if e.get("status", "ok") != "ok":
            entry = counts.setdefault(e["status"], {"count": 0, "first": str(e.get("detail", ""))[:300]})
            entry["count"] += 1
    return counts


def run_limited(command: list[str], timeout_s: float, cwd: str) -> tuple[int | None, str, str]:
    """Run `command` in a session of its own; past `timeout_s` the whole session (the tune
    and its GPU worker) is killed and the exit code is None."""
    proc = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None, "", ""
    return proc.returncode, stdout, stderr


def speeds(row: dict[str, Any]) -> None:
    """kxform's and the expert's speed-ups over the original, and the log fraction."""
    original, expert = row.get("original_ms"), row.get("expert_ms")
    kx = row["kxform"]["speedup"]
    row["kxform_ms"] = original / kx if original else None
    row["expert_speedup"] = original / expert if original and expert else None
    row["fraction"] = log_fraction(kx, row["expert_speedup"])


def log_fraction(reached: float | None, expert: float | None) -> float | None:
    """log(reached) / log(expert): the share of the expert's speed-up (None where the
    expert is not faster than the original, so there is nothing to reach)."""
    if not reached or not expert or expert <= 1.0:
        return None
    return math.log(reached) / math.log(expert)


# ----------------------------------------------------------------------- yardsticks


def baselines(pairs: list[Pair]) -> dict[str, Any] | None:
    """Copy bandwidth and cuBLAS times for the GEMM-shaped pairs' bench shapes (kxform.bench.yardsticks)."""
    return yardsticks.baselines(s for s in (gemm_shape(p, p.naive.spec.bench_sizes[0]) for p in pairs) if s)


def yardstick(pair: Pair, row: dict[str, Any], data: dict[str, Any] | None) -> dict[str, Any] | None:
    """Each version's time against the pair's yardstick: the fraction of the copy
    bandwidth its least traffic reaches, or cuBLAS's time over its time."""
    if "original_ms" not in row:
        return None
    size = pair.naive.spec.bench_sizes[0]
    times = {"original": row.get("original_ms"), "kxform": row.get("kxform_ms"), "expert": row.get("expert_ms")}
    times |= {f"also {also}": column.get("ms") for also, column in row.get("also", {}).items()}
    return yardsticks.yardstick(data, times, gemm_shape(pair, size), yardsticks.least_bytes(pair.naive.spec, size))


# ----------------------------------------------------------------------- summary


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Geometric means over the kernels measured on both sides: kxform's speed-up (the
    original kept where nothing faster verified), the expert's, and the log fraction."""
    measured = [r for r in rows if r.get("original_ms") and r.get("expert_ms") and "kxform" in r]
    kx = geomean([r["kxform"]["speedup"] for r in measured])
    ex = geomean([r["expert_speedup"] for r in measured])
    return {
        "kernels": len(measured),
        "kxform_speedup": kx,
        "expert_speedup": ex,
        "fraction": log_fraction(kx, ex),
        "slower_than_original": sum(1 for r in measured if r["kxform"]["speedup"] < 1.0),
    }


def ok(row: dict[str, Any], dry_run: bool) -> bool:
    if row.get("skipped") or row.get("failed"):
        return False
    verified = all(v["status"] == "verified" for v in row.get("verify", {}).values())
    if dry_run:  # a configuration the passes refuse is its own fate; a checker that cannot run or refutes is not
        refuted = row.get("checker", {}).get("status") in ("error", "verification_failed")
        return verified and all(b["ok"] for b in row.get("builds", {}).values()) and not refuted
    return (
        verified
        and not row.get("failed")
        and row.get("expert_ms") is not None
        and row.get("kxform", {}).get("status") in ("tuned", "nothing offered")
    )


def merge(paths: list[str], out: str | None) -> int:
    """One table and one JSON from runs over parts of the corpus, in the manifest's order;
    the runs must agree on device, profile, budget and passes (else they do not compare)."""
    try:
        docs = [json.loads(Path(p).read_text(encoding="utf-8")) for p in paths]
    except (OSError, json.JSONDecodeError) as exc:
        print(f"{TOOL}: error: --merge: {exc}", file=sys.stderr)
        return EXIT_USAGE
    keys = ("device", "profile", "budget", "passes", "dry_run")
    for path, doc in zip(paths[1:], docs[1:]):
        differ = [k for k in keys if doc.get(k) != docs[0].get(k)]
        if differ:
            print(f"{TOOL}: error: --merge: {path} differs from {paths[0]} in {', '.join(differ)}", file=sys.stderr)
            return EXIT_USAGE
    order = {pair.name: i for i, pair in enumerate(load_pairs(()))}
    rows = sorted((r for d in docs for r in d["kernels"]), key=lambda r: order.get(r["name"], len(order)))
    merged = {
        **docs[0],
        "kernels": rows,
        "geomean": summary(rows),
        "merged_from": [str(p) for p in paths],
        "total_s": max(d.get("total_s") or 0.0 for d in docs),
        "baselines": next((d["baselines"] for d in docs if d.get("baselines")), None),
    }
    print(
        f"device: {merged['device']}; profile {merged['profile']}; budget {merged['budget']} evaluations; "
        f"passes {merged['passes']}; {len(docs)} runs merged",
        flush=True,
    )
    print_table(rows, merged["geomean"], bool(merged.get("dry_run")))
    write_json(out, merged)
    return EXIT_OK if all(ok(r, bool(merged.get("dry_run"))) for r in rows) else EXIT_FINDINGS


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.merge:
        return merge(args.merge, args.out)
    try:
        pairs = load_pairs(split_names(args.kernels))
    except KxformError as exc:
        print(f"{TOOL}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.dry_run:
        from kxform.runtime.cpu import CpuRuntime

        runtime: Any = CpuRuntime()
        hw, yardsticks = args.hw or "h100", None
    else:
        runtime = gpu_runtime(TOOL)
        hw = hardware(runtime, args.hw).name
        yardsticks = None if args.no_baselines else baselines(pairs)
    budget = Budget(args.budget_s)
    device = device_line(runtime)
    if args.study and args.study_dir is None:
        args.study_dir = tempfile.mkdtemp(prefix="kxform-study-")
    if args.study:
        Path(args.study_dir).mkdir(parents=True, exist_ok=True)
    print(
        f"device: {device}; profile {hw}; budget {args.budget} evaluations; passes {args.passes}"
        f"{'; dry run' if args.dry_run else ''}",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    for pair in pairs:
        if budget.exhausted():
            rows.append({"name": pair.name, "family": pair.family, "skipped": "the --budget-s time was spent"})
            continue
        try:
            row = run_pair(pair, runtime, args, hw, yardsticks)
        except Exception as exc:  # noqa: BLE001 - one kernel's failure must not lose the others' figures
            row = {
                "name": pair.name,
                "family": pair.family,
                "failed": f"{type(exc).__name__}: {exc}"[:400],
                "wall_s": None,
            }
        rows.append(row)
        print(f"{pair.name}: done in {row['wall_s']} s", file=sys.stderr, flush=True)
        write_json(args.out, document(args, device, hw, yardsticks, rows, budget))
    if hasattr(runtime, "close"):
        runtime.close()
    print_table(rows, summary(rows), args.dry_run)
    if args.study:
        print_study(rows, study_summary(rows))
    write_json(args.out, document(args, device, hw, yardsticks, rows, budget))
    return EXIT_OK if all(ok(r, args.dry_run) for r in rows) else EXIT_FINDINGS


def document(
    args: Any, device: str, hw: str, yardsticks: dict[str, Any] | None, rows: list[dict[str, Any]], budget: Budget
) -> dict[str, Any]:
    return {
        "tool": TOOL,
        "device": device,
        "profile": hw,
        "dry_run": args.dry_run,
        "budget": args.budget,
        "passes": args.passes,
        "launch_budget_s": args.launch_budget,
        "total_s": round(budget.elapsed(), 1),
        "baselines": yardsticks,
        "geomean": summary(rows),
        "study": study_summary(rows) if args.study else None,
        "kernels": rows,
    }


if __name__ == "__main__":
    sys.exit(main())
