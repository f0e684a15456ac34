#!/usr/bin/env python3
"""The tuner's cost model against GPU measurements, and the search with and without it.

    python tools/bench_cost_model.py [--data FILE ...] [--seeds N] [--hw NAME] [--json OUT]

Every recorded sweep of `--data` (default: docs/data/coarsen-loads-h200.json, exhaustive
sweeps of naive corpus kernels measured on an H200 by tools/bench_tune_gpu.py; any file
whose `cases` hold `measurements` of configuration labels and milliseconds will do) is
read back on the CPU:

* each measured configuration is rewritten by the passes of today's kxform and its time
  predicted at the recorded size (kxform.search.predictor; no build, no GPU), and the
  predictions are compared with the measurements: Kendall's tau and Spearman's rho per
  kernel (a configuration the passes no longer produce, or whose launch cannot be told,
  is left out and counted);
* the search is replayed on the recorded configurations (a recorded space: each
  evaluation answers the measured time) for `--seeds` seeds, the model-guided strategy
  without the cost model and with it (its predictions ordering the structure stage,
  kxform.search.stages, and pruning, kxform.search.cost.Pruning), both starting at the
  original with `--budget` evaluations as `kxform tune` does: the median evaluations to
  reach within 1% of the recorded best, and the share of the evaluations (pruned ones
  are not) slower than twice the original;
* transfer, leave-one-family-out: the third search adds the prior `kxform tune` builds
  from a tuning database holding every other sweep (its measurements and its kernel's
  features, kxform.search.transfer), the sweeps of the kernel's own family left out.

`--write-times DIR` writes each sweep as a `tune --json` recording, so that the whole
tuning path replays it on the CPU: `kxform tune corpora/naive/gemm/naive.cu --kernel
gemm_naive --pass coarsen --size M=2048,N=2048,K=2048 --objective
cpu+replay:DIR/gemm_naive-M2048_N2048_K2048.json` rewrites, builds and verifies each
configuration for real and takes its time from the sweep.

The sweeps were measured with the passes of their day; configurations are matched by
name and value, so a sweep of an option kxform no longer has is reported as such.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.stats import kendalltau, spearmanr  # noqa: E402

from kxform.engine.params import ParamSpace  # noqa: E402
from kxform.frontend.source import read_source  # noqa: E402
from kxform.harness.spec import load_spec  # noqa: E402
from kxform.hw import load_profile  # noqa: E402
from kxform.search.kernel_objective import timing_size  # noqa: E402
from kxform.search.cost import Pruning  # noqa: E402
from kxform.search.db import TuneKey, TuningDB  # noqa: E402
from kxform.search.kernel_space import kernel_space  # noqa: E402
from kxform.search.objective import Evaluation  # noqa: E402
from kxform.search.predictor import Predictor  # noqa: E402
from kxform.search.prior import build_prior  # noqa: E402
from kxform.search.space import SearchSpace  # noqa: E402
from kxform.search.strategy import History, Prior, SearchHints, make_strategy  # noqa: E402
from kxform.search.transfer import similar_columns  # noqa: E402
from kxform.search.tuner import PRUNED_ALLOWANCE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT / "docs" / "data" / "coarsen-loads-h200.json"


@dataclass(frozen=True)
class Sweep:
    """One recorded case: a kernel, its passes and size, and (label, ms) per configuration."""

    name: str
    kernel: str
    passes: tuple[str, ...]
    size: str
    measurements: tuple[tuple[str, float], ...]


def sweeps(path: Path) -> list[Sweep]:
    """Every case with measurements in `path`, however deeply the file nests its runs."""
    found: list[Sweep] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if "measurements" in node and "kernel" in node:
                measured = tuple((m["config"], m["ms"]) for m in node["measurements"] if m.get("ms") is not None)
                name = f"{where}/{node.get('case', node['kernel'])}"
                found.append(Sweep(name, node["kernel"], tuple(node["passes"]), node["size"], measured))
                return
            for key, value in node.items():
                walk(value, f"{where}/{key}" if where else key)
        elif isinstance(node, list):
            for value in node:
                walk(value, where)

    walk(json.loads(path.read_text()), "")
    return found


def corpus_kernel(kernel: str) -> tuple[Path, Path, str]:
    """The source, harness spec and family of a naive corpus kernel."""
    index = tomllib.loads((ROOT / "corpora" / "naive" / "index.toml").read_text())
    for pair in index["pair"]:
        if pair["naive_kernel"] == kernel:
            folder = ROOT / "corpora" / "naive"
            return folder / pair["naive"], folder / pair["naive_spec"], pair["family"]
    raise SystemExit(f"bench_cost_model: kernel '{kernel}' is not a naive corpus kernel")


def parse_label(label: str, space: ParamSpace, defaults: dict[str, Any]) -> dict[str, Any] | None:
    """A configuration label (`coarsen=True, coarsen.factor=2`) typed into `space` (a name
    the space no longer has is left out: two labels that differ only there are one row)."""
    config = dict(defaults)
    for item in label.split(", "):
        name, _, text = item.partition("=")
        if name not in config:
            continue
        try:
            config[name] = space.param(name).parse(text)
        except Exception:  # a value today's space does not offer
            return None
    return config


@dataclass
class Case:
    sweep: Sweep
    search: SearchSpace
    times: np.ndarray
    predicted: np.ndarray
    original: int
    left_out: int
    family: str
    features: dict[str, float] | None


def load_case(sweep: Sweep, hw_name: str) -> Case | None:
    source_path, spec_path, family = corpus_kernel(sweep.kernel)
    source = read_source(str(source_path))
    spec = load_spec(spec_path).kernel(sweep.kernel)
    size = timing_size(spec, sweep.size)
    space = kernel_space(source.data, sweep.kernel, sweep.passes, path=str(source_path), hw=hw_name)
    hw = load_profile(hw_name)
    predictor = Predictor(source, sweep.kernel, spec, size, space, hw)
    defaults = space.defaults()
    rows, times, predicted = [], [], []
    left_out = 0
    for label, ms in sweep.measurements:
        config = parse_label(label, space.space, defaults)
        prediction = predictor.of_config(config) if config is not None else None
        if config is None or prediction is None or not math.isfinite(prediction.estimate_ms):
            left_out += 1
            continue
        code = tuple(p.values.index(config[p.name]) for p in space.space.params)
        if code in rows:
            left_out += 1
            continue
        rows.append(code)
        times.append(ms)
        predicted.append(prediction.estimate_ms)
    if len(rows) < 3:
        return None
    codes = np.array(rows, dtype=np.int32)
    codes.setflags(write=False)
    search = SearchSpace(space.space, codes, False, hw)
    default = search.default_row()
    original = default if default is not None else int(np.argmax(times))
    return Case(sweep, search, np.array(times), np.array(predicted), original, left_out, family, predictor.features())


def replay(case: Case, seed: int, model: bool, budget: int, prior: Prior | None = None) -> tuple[float, float]:
    """One search of `budget` evaluations from the original, as `kxform tune` runs it:
    (measured evaluations to reach within 1% of the recorded best, inf when it did not;
    share of the measured evaluations slower than twice the original). With the `model`,
    its predictions order the stages and prune (kxform.search.cost.Pruning): a pruned
    configuration is not measured and not counted; `prior`: the transfer prior."""
    hints = None
    pruning = Pruning() if model else None
    if model:
        structure = tuple(True for _ in case.search.names)  # the sweeps are of structure passes
        hints = SearchHints(structure, lambda row: float(case.predicted[row]), budget=budget)
    strategy = make_strategy("model", case.search, seed, prior, hints)
    history = History(len(case.search))
    target = case.times.min() * 1.01
    slow_bar = case.times[case.original] * 2.0
    row: int | None = case.original
    measured = steps = slow = 0
    reached = math.inf
    while measured < budget and steps < budget * PRUNED_ALLOWANCE:
        if row is None or history.visited[row]:
            row = strategy.propose(history)
        if row is None:
            break
        history.start(row)
        steps += 1
        if pruning is not None and pruning.why(float(case.predicted[row])):
            history.add(row, None)
            row = None
            continue
        time_ms = float(case.times[row])
        history.add(row, time_ms)
        measured += 1
        if pruning is not None:
            pruning.observe(float(case.predicted[row]), time_ms)
        slow += time_ms > slow_bar
        if math.isinf(reached) and time_ms <= target:
            reached = measured
        row = None
    return reached, slow / max(measured, 1)


VARIANTS = ("without", "model", "transfer")
"""The plain model-guided search; with the cost model; with it and the transfer prior."""


def transfer_prior(case: Case, cases: list[Case], db: TuningDB) -> Prior | None:
    """The prior `kxform tune` would build for `case` from a database holding every other
    sweep, the sweeps of its own family left out (leave-one-family-out)."""
    if case.features is None:
        return None
    key = TuneKey(case.sweep.name, case.sweep.kernel, "recorded", case.search.names)
    family = {c.sweep.kernel for c in cases if c.family == case.family}
    columns = similar_columns(db, key, case.features, case.search, leave_out=family)
    return build_prior(case.search, [], columns) if columns else None


def fill(db: TuningDB, cases: list[Case]) -> None:
    """Every sweep's measurements and features, as kxform tune stores them."""
    for case in cases:
        key = TuneKey(case.sweep.name, case.sweep.kernel, "recorded", case.search.names)
        for row, ms in enumerate(case.times):
            db.put(key, case.search.config(row), Evaluation(float(ms)))
        if case.features is not None:
            db.put_features(key, case.features)


def write_times(folder: Path, case: Case) -> Path:
    """The sweep as a `tune --json` summary (its configurations typed into today's space,
    the original's time), named after the kernel and size: what `cpu+replay:FILE` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    evaluations = [
        {"params": case.search.config(row), "time_ms": float(ms), "spread_ms": 0.0, "status": "ok"}
        for row, ms in enumerate(case.times)
    ]
    summary = {"kernel": case.sweep.kernel, "original_ms": float(case.times[case.original]), "evaluations": evaluations}
    name = f"{case.sweep.kernel}-{case.sweep.size.replace(',', '_').replace('=', '')}.json"
    path = folder / name
    path.write_text(json.dumps(summary, indent=1) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", type=Path, default=[DEFAULT_DATA], metavar="FILE")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--budget", type=int, default=40, help="evaluations per search (default 40, kxform tune's)")
    parser.add_argument("--hw", default="h200", help="the profile the sweeps were measured on (default h200)")
    parser.add_argument("--json", type=Path, metavar="OUT")
    parser.add_argument(
        "--write-times",
        type=Path,
        metavar="DIR",
        help="also write each sweep as a `tune --json` recording, for `kxform tune --objective cpu+replay:FILE`",
    )
    args = parser.parse_args(argv)
    cases: list[Case] = []
    seen: set[tuple[str, str, str, tuple[tuple[str, float], ...]]] = set()
    for path in args.data:
        for sweep in sweeps(path):
            identity = (sweep.kernel, sweep.size, ",".join(sweep.passes), sweep.measurements)
            if identity in seen:
                continue
            seen.add(identity)
            case = load_case(sweep, args.hw)
            if case is None:
                print(f"{sweep.name}: fewer than 3 recorded configurations are in today's space")
                continue
            cases.append(case)
            if args.write_times is not None:
                write_times(args.write_times, case)
    report: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="kxform-bench-cost-") as scratch,
        TuningDB(Path(scratch) / "t.sqlite") as db,
    ):
        fill(db, cases)
        for case in cases:
            report.append(study(case, transfer_prior(case, cases, db), args))
    if report:
        taus = [r["kendall_tau"] for r in report]
        medians = {v: _median(r[f"evals_1pct_{v}"] for r in report) for v in VARIANTS}
        slow = {v: np.mean([r[f"slow_share_{v}"] for r in report]) for v in VARIANTS}
        print(
            f"\n{len(report)} sweeps: median Kendall tau {np.median(taus):+.2f} (min {min(taus):+.2f}); median "
            f"evaluations to 1%: {medians['without']} without the model, {medians['model']} with it, "
            f"{medians['transfer']} with it and the transfer prior; evaluations slower than 2x the original "
            f"(mean over the sweeps): {slow['without']:.0%}, {slow['model']:.0%}, {slow['transfer']:.0%}"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


def study(case: Case, prior: Prior | None, args: Any) -> dict[str, Any]:
    """One sweep: the model's rank correlation, and the three searches over `--seeds` seeds."""
    sweep = case.sweep
    tau = float(kendalltau(case.predicted, case.times).statistic)
    rho = float(spearmanr(case.predicted, case.times).statistic)
    modes = {"without": (False, None), "model": (True, None), "transfer": (True, prior)}
    row: dict[str, Any] = {
        "case": sweep.name,
        "kernel": sweep.kernel,
        "family": case.family,
        "configurations": len(case.search),
        "left_out": case.left_out,
        "kendall_tau": round(tau, 3),
        "spearman_rho": round(rho, 3),
        "prior_sources": list(prior.sources) if prior is not None else [],
    }
    for label, (model, given) in modes.items():
        runs = [replay(case, seed, model, args.budget, given) for seed in range(args.seeds)]
        evals = [r[0] for r in runs]
        median = float(np.median(evals))
        row[f"evals_1pct_{label}"] = median if math.isfinite(median) else None
        row[f"reached_1pct_{label}"] = round(sum(map(math.isfinite, evals)) / len(evals), 3)
        row[f"slow_share_{label}"] = round(float(np.mean([r[1] for r in runs])), 3)
    print(
        f"{sweep.kernel:<14} {sweep.size:<20} {len(case.search):>3} configs ({case.left_out} left out): "
        f"tau {tau:+.2f} rho {rho:+.2f}; evaluations to 1% (median of {args.seeds}): "
        + " -> ".join(_count(row[f"evals_1pct_{v}"]) for v in VARIANTS)
        + " (reached in "
        + "/".join(f"{row[f'reached_1pct_{v}']:.0%}" for v in VARIANTS)
        + "); slower than 2x the original: "
        + " -> ".join(f"{row[f'slow_share_{v}']:.0%}" for v in VARIANTS)
        + f"; prior from {len(row['prior_sources'])} kernels",
        flush=True,
    )
    return row


def _count(value: float | None) -> str:
    return f"{value:.0f}" if value is not None else "never"


def _median(values: Any) -> str:
    finite = [math.inf if v is None else v for v in values]
    middle = float(np.median(finite))
    return f"{middle:.1f}" if math.isfinite(middle) else "never"


if __name__ == "__main__":
    sys.exit(main())
