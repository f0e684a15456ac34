#!/usr/bin/env python3
"""Tune the same corpus kernels with kxform and with Kernel Tuner, live on a GPU, same budget.

    python tools/bench_tune_kt_live.py [--quick] [--out results.json] [--budget N] [--case NAME ...]
                                       [--kt-strategy NAME ...]

Per kernel (the `tile` spaces of sgemm_tiled, the jacobi5 stencil and sgemm_128): kxform's
default strategy runs through the GPU objective (rewrite, compile, verify, time), and each
Kernel Tuner strategy runs through `kernel_tuner.tune_kernel` on the same space:

* the same parameters and values, and the same constraints, given to Kernel Tuner as a
  restriction function (its string restrictions miscount this kind of space: 1.5.0
  built 3 configurations of sgemm_128's 260);
* the same code: the kernel's unit extracted from the tile pass's lift at the original
  values (`#ifndef NAME` guards, so Kernel Tuner's `#define`s set the parameters), the
  launch the tile pass derived (grid and block per configuration), the same inputs;
* the same verification: Kernel Tuner's `verify` compares with kxform's comparison of
  the pass's policy (the spec's tolerance x2) against the original kernel's outputs;
* the same budget (`max_fevals`).

Each tool's best configuration is then re-timed with kxform's timer (median of
repetitions, outputs re-checked), and each trajectory is scored against the best
either found: evaluations and GPU seconds (compile + verify + benchmark) until a
configuration within 2% of it. Kernel Tuner's own times are the mean of 7 launches, so
its improvements are re-timed with kxform's timer before they are compared.

A full run is about 4 x 30 evaluations per kernel (each a compile, a verification and
a timing, 1-3 s): split it with --case where a command's time is limited.

Needs a CUDA GPU, pycuda, and Kernel Tuner importable (`pip install kernel_tuner`, or
on PYTHONPATH); exit 2 with the reason otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


from kxform.bench.tune_cases import Loaded, load, pick, profile_for, require_gpu
from kxform.bench.output import fail, write_json

QUICK_CASES = ("sgemm_tiled/tile", "jacobi5/tile")
FULL_CASES = ("sgemm_tiled/tile", "jacobi5/tile", "sgemm_128/tile")
KT_STRATEGIES = ("genetic_algorithm", "adaptive_tabu_greywolf", "dual_annealing")
"""Kernel Tuner's best strategies on the recorded spaces (docs/search.md)."""
QUICK_KT_STRATEGIES = ("genetic_algorithm", "adaptive_tabu_greywolf")
NEAR = 0.02


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a short run (under about 3 minutes)")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--budget", type=int, help="evaluations per tool and strategy (default 30; quick 10)")
    p.add_argument(
        "--case",
        action="append",
        dest="cases",
        metavar="NAME",
        help=f"a case, repeatable (default: {', '.join(FULL_CASES)}; quick: {', '.join(QUICK_CASES)})",
    )
    p.add_argument(
        "--kt-strategy",
        action="append",
        dest="kt_strategies",
        metavar="NAME",
        help=f"Kernel Tuner strategies (default: {', '.join(KT_STRATEGIES)}; quick: {', '.join(QUICK_KT_STRATEGIES)})",
    )
    p.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1), help="kxform build jobs")
    p.add_argument("--hw", help="hardware profile for the constraints (default: from the device)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.budget is not None and args.budget < 1:
        p.error("--budget must be at least 1")
    return args


def kernel_tuner_version() -> str:
    try:
        import kernel_tuner
    except ImportError as exc:
        fail(f"Kernel Tuner is not importable ({exc}): pip install kernel_tuner, or put it on PYTHONPATH")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kernel_tuner")
    except PackageNotFoundError:
        return str(getattr(kernel_tuner, "__version__", "unknown"))


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    kt_version = kernel_tuner_version()
    runtime = require_gpu("bench_tune_kt_live")
    from kxform.search.strategy import DEFAULT

    budget = args.budget or (10 if args.quick else 30)
    hw = profile_for(runtime, args.hw)
    cases = pick(args.cases, QUICK_CASES if args.quick else FULL_CASES, only_tile=True)
    strategies = args.kt_strategies or list(QUICK_KT_STRATEGIES if args.quick else KT_STRATEGIES)
    device = runtime.device_info().name
    print(
        f"device: {device}; profile {hw}; Kernel Tuner {kt_version} ({', '.join(strategies)}); kxform {DEFAULT}; "
        f"budget {budget}{'; quick' if args.quick else ''}",
        flush=True,
    )
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kxform-bench-kt-") as scratch:
        for case in cases:
            loaded = load(case, args.quick, hw)
            result = compare_case(loaded, runtime, budget, strategies, args, Path(scratch))
            results.append(result)
            report(result)
    runtime.close()
    total = time.perf_counter() - started
    print(f"total {total:.0f} s")
    write_json(
        args.out,
        {
            "tool": "bench_tune_kt_live",
            "device": device,
            "profile": hw,
            "kernel_tuner": kt_version,
            "kxform_strategy": DEFAULT,
            "budget": budget,
            "quick": args.quick,
            "total_s": total,
            "cases": results,
        },
    )
    return 0


# -- one case -----------------------------------------------------------------------------


def compare_case(
    loaded: Loaded, runtime: Any, budget: int, strategies: list[str], args: argparse.Namespace, scratch: Path
) -> dict[str, Any]:
    from kxform.search.kernel_objective import KernelObjective, MeasureOptions

    objective = KernelObjective(
        loaded.target,
        loaded.space,
        runtime,
        MeasureOptions(size=loaded.size, launch_budget_s=0.3 if args.quick else 0.5),
    )
    runs = [run_kxform(loaded, objective, budget, args, scratch)]
    setup = kt_setup(loaded, objective)
    for strategy in strategies:
        runs.append(run_kernel_tuner(loaded, setup, strategy, budget, args.seed))
    retimed: dict[str, float | None] = {}
    for run in runs:  # every improvement of every trajectory, on kxform's timer
        for config in run["improvements"]:
            name = _label(config)
            if name not in retimed:
                retimed[name] = _retime(objective, config)
    best = min((t for t in retimed.values() if t is not None), default=None)
    for run in runs:
        run["best_retimed_ms"] = retimed.get(_label(run["best_config"])) if run["best_config"] else None
        run["evals_to_near"], run["gpu_s_to_near"] = _to_near(run, retimed, best)
    return {
        "case": loaded.case.name,
        "size": loaded.size.name,
        "space_size": len(loaded.search),
        "best_either_ms": best,
        "runs": runs,
    }


def _retime(objective: Any, config: dict[str, Any]) -> float | None:
    """Time `config` with kxform's timer; Kernel Tuner's configurations name the tile
    pass's own parameters (`TILE`), kxform's the composed ones (`tile`, `tile.TILE`)."""
    composed = objective.space.defaults()
    if config.keys() <= composed.keys():
        composed.update(config)
    else:
        composed.update({"tile": True, **{f"tile.{k}": v for k, v in config.items()}})
    prepared = objective.prepare(composed)
    evaluation = prepared.failure or objective.evaluate(prepared)
    return evaluation.time_ms


def _to_near(
    run: dict[str, Any], retimed: dict[str, float | None], best: float | None
) -> tuple[int | None, float | None]:
    """The first evaluation whose best-so-far configuration is within NEAR of `best` on kxform's timer."""
    if best is None:
        return None, None
    for index, config in run["best_so_far"]:
        t = retimed.get(_label(config))
        if t is not None and t <= best * (1 + NEAR):
            return index, run["gpu_s_cumulative"][index - 1]
    return None, None


def run_kxform(loaded: Loaded, objective: Any, budget: int, args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    from kxform.search.db import TuneKey, TuningDB
    from kxform.search.pipeline import PipelineOptions
    from kxform.search.strategy import DEFAULT
    from kxform.search.tuner import TuneOptions, tune

    search = loaded.search
    started = time.perf_counter()
    with TuningDB(scratch / f"kx-{loaded.case.name.replace('/', '_')}.sqlite") as db:
        key = TuneKey(loaded.case.name, loaded.case.kernel, objective.hardware, search.names)
        result = tune(
            search,
            objective,
            TuneOptions(
                DEFAULT,
                budget=min(budget, len(search)),
                seed=args.seed,
                pipeline=PipelineOptions(jobs=args.jobs, ahead=2),
                start_at_defaults=True,
            ),  # as `kxform tune` on a kernel
            db=db,
            key=key,
        )
    wall = time.perf_counter() - started
    best_so_far, improvements, cumulative, spent = [], [], [], 0.0
    best_ms = None
    current = None
    for step in result.steps:
        spent += step.evaluation.cost_s
        cumulative.append(spent)
        if step.evaluation.ok and (best_ms is None or step.evaluation.time_ms < best_ms):
            best_ms, current = step.evaluation.time_ms, step.config
            improvements.append(step.config)
        if current is not None:
            best_so_far.append((step.index + 1, current))
    best = result.best
    return {
        "tool": "kxform",
        "strategy": DEFAULT,
        "evaluations": len(result.steps),
        "valid": sum(1 for s in result.steps if s.evaluation.ok),
        "best_config": best.config if best else None,
        "best_own_ms": best.evaluation.time_ms if best else None,
        "evals_to_best": best.index + 1 if best else None,
        "wall_s": wall,
        "best_so_far": best_so_far,
        "improvements": improvements,
        "gpu_s_cumulative": cumulative,
    }


# -- Kernel Tuner --------------------------------------------------------------------------


def kt_setup(loaded: Loaded, objective: Any) -> dict[str, Any]:
    """Everything tune_kernel needs, built from what kxform verified for this kernel."""
    import numpy as np

    from kxform.api import rewrite, rewrite_with
    from kxform.build.extract import extract_kernel
    from kxform.frontend.source import validate_bytes
    from kxform.harness.compare import compare
    from kxform.harness.inputs import make_inputs
    from kxform.hw import load_profile
    from kxform.verify.differential import launch_request
    from kxform.verify.versions import comparison, rewritten_launch, scalars

    from kxform.search.space import SearchSpace

    target = loaded.target
    tile = next(part for part in loaded.space.composed.parts if part.pass_.name == "tile")
    own = SearchSpace.build(tile.space, load_profile(target.hw))  # Kernel Tuner takes the tile pass's own names
    lifted = rewrite(target.data, "tile", path=target.path, hw=target.hw, kernels=(target.kernel,))
    unit = extract_kernel(validate_bytes(target.path, lifted.new_data, rewritten=True), target.spec.name)
    other = next((own.config(r) for r in range(len(own)) if own.config(r) != tile.space.defaults()), None)
    if other is None:
        fail(f"{loaded.case.name}: a single configuration: nothing to compare")
    policy = rewrite_with(target.data, target.kernel, other, path=target.path, hw=target.hw).results[0].policy
    binding = policy.launch
    resolved = target.spec.launch(loaded.size)
    params = objective._original_unit.params
    block_names = []
    for expr in binding.block or ():
        if expr is not None and expr.strip() not in tile.space.names:
            fail(f"{loaded.case.name}: block dimension '{expr}' is not a parameter: Kernel Tuner needs parameter names")
        block_names.append(expr.strip() if expr else f"kx_unit_{len(block_names)}")
    block_names += [f"kx_unit_{i}" for i in range(len(block_names), 3)]

    def grid(config: dict[str, Any]) -> tuple[int, int, int]:
        values = tuple((k, int(config[k])) for k in tile.space.names)
        return rewritten_launch(resolved, params, replace(binding, values=values)).grid

    inputs = make_inputs(target.spec, resolved)
    arguments = [inputs[arg.name] for arg in resolved.args]
    original = objective.runtime.run(launch_request(unit, resolved, inputs, f"{target.kernel} original", 600.0))
    answer = [original.outputs.get(arg.name) if arg.role in ("out", "inout") else None for arg in resolved.args]
    env = scalars(resolved, params)
    modes = [
        comparison(target.spec.compare_for(arg.name), policy.compare, env) if a is not None else None
        for arg, a in zip(resolved.args, answer)
    ]
    dtypes = [arg.dtype for arg in resolved.args]

    def verify(expected: list[Any], got: list[Any], atol: float | None = None) -> bool:
        return all(
            e is None or compare(np.asarray(e), np.asarray(g).reshape(np.asarray(e).shape), m, dtype=d).ok
            for e, g, m, d in zip(expected, got, modes, dtypes)
        )

    hw = load_profile(target.hw)

    names = tile.space.names

    def restriction(*values: Any) -> bool:
        """Called with the configuration as one dict, or with its values in parameter order
        (Kernel Tuner does either, by the number of parameters)."""
        config = values[0] if len(values) == 1 and isinstance(values[0], dict) else dict(zip(names, values))
        return tile.space.is_valid(config, hw)

    valid = [own.config(r) for r in range(len(own))]
    tune_params = {
        name: [v for v in tile.space.param(name).values if any(c[name] == v for c in valid)]
        for name in tile.space.names
    }
    return {
        "source": unit.source,
        "name": unit.entry,
        "grid": grid,
        "arguments": arguments,
        "answer": answer,
        "verify": verify,
        "restriction": restriction,
        "tune_params": tune_params,
        "block_names": block_names,
    }


def run_kernel_tuner(loaded: Loaded, setup: dict[str, Any], strategy: str, budget: int, seed: int) -> dict[str, Any]:
    from kernel_tuner import tune_kernel

    started = time.perf_counter()
    try:
        results, _ = tune_kernel(
            setup["name"],
            setup["source"],
            problem_size=setup["grid"],
            arguments=setup["arguments"],
            tune_params=setup["tune_params"],
            grid_div_x=[1],
            grid_div_y=[1],
            grid_div_z=[1],
            restrictions=setup["restriction"],
            answer=setup["answer"],
            verify=setup["verify"],
            lang="pycuda",  # nvcc, as kxform compiles; "CUDA" may pick NVRTC, which lacks the host headers
            block_size_names=setup["block_names"],
            strategy=strategy,
            strategy_options={"max_fevals": budget},
            quiet=True,
            seed=seed,
        )
        error = None
    except Exception as exc:  # a strategy that cannot run is reported, the others go on
        results, error = [], f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - started
    names = list(setup["tune_params"])
    best_so_far, improvements, cumulative, spent = [], [], [], 0.0
    best_ms, current, best_index = None, None, None
    for index, row in enumerate(results, start=1):
        spent += (
            sum(
                float(row.get(k) or 0.0)
                for k in ("compile_time", "verification_time", "benchmark_time")
                if isinstance(row.get(k), (int, float))
            )
            / 1000.0
        )
        cumulative.append(spent)
        t = row.get("time")
        config = {n: row[n] for n in names if n in row}
        if isinstance(t, (int, float)) and (best_ms is None or t < best_ms):
            best_ms, current, best_index = float(t), config, index
            improvements.append(config)
        if current is not None:
            best_so_far.append((index, current))
    return {
        "tool": "kernel_tuner",
        "strategy": strategy,
        "evaluations": len(results),
        "valid": sum(1 for r in results if isinstance(r.get("time"), (int, float))),
        "best_config": current if best_index else None,
        "best_own_ms": best_ms,
        "evals_to_best": best_index,
        "wall_s": wall,
        "error": error,
        "best_so_far": best_so_far,
        "improvements": improvements,
        "gpu_s_cumulative": cumulative,
    }


def _label(config: dict[str, Any]) -> str:
    from kxform.search.kernel_space import label

    return label(config)


def report(r: dict[str, Any]) -> None:
    best = r["best_either_ms"]
    print(
        f"\n{r['case']} (size {r['size']}, {r['space_size']} valid configurations); best either found "
        f"{'-' if best is None else f'{best:.4f} ms'} (kxform timer)"
    )
    print(
        "| tool | strategy | evaluations | valid | best (own timer) | best (kxform timer) | at eval | "
        f"evals to {NEAR:.0%} | GPU s to {NEAR:.0%} | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in r["runs"]:
        own = "-" if run["best_own_ms"] is None else f"{run['best_own_ms']:.4f}"
        kx = "-" if run["best_retimed_ms"] is None else f"{run['best_retimed_ms']:.4f}"
        near_s = "-" if run["gpu_s_to_near"] is None else f"{run['gpu_s_to_near']:.1f}"
        print(
            f"| {run['tool']} | {run['strategy']} | {run['evaluations']} | {run['valid']} | {own} {run['best_config']} | "
            f"{kx} | {run['evals_to_best'] or '-'} | {run['evals_to_near'] or '-'} | {near_s} | {run['wall_s']:.0f} |"
        )
        if run.get("error"):
            print(f"  {run['strategy']} failed: {run['error'][:300]}")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
