"""Kernel Tuner's strategies replayed in its own simulation mode (for bench_search.py).

Kernel Tuner is an optional extra (`pip install -e '.[bench]'`), imported only here.
Each run happens in a worker process (Kernel Tuner keeps global state and prints), on
an uncompressed copy of the recording (its cache reader takes plain JSON), with the
space definition's restrictions, `simulation_mode=True` and `max_fevals=budget`.
A run's result is the sequence of distinct configurations it evaluated, in order,
with their recorded times and costs, which `kxform.search.replay.Run` scores the same
way as kxform's own runs. Finished runs are cached on disk (keyed by the recording's
content, the strategy, seed, budget and Kernel Tuner's version), so re-running the
benchmark only computes what is new.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import signal
import sqlite3
import tempfile
import warnings
from pathlib import Path
from typing import Any

PYATF_TECHNIQUES = ("auc_bandit", "differential_evolution", "pattern_search", "round_robin",
                    "simulated_annealing", "torczon")
MULTI_OBJECTIVE = ("nsga2", "nsga3")


def kt_version() -> str | None:
    """Kernel Tuner's version, or None when it is not installed."""
    try:
        from importlib import metadata

        return metadata.version("kernel_tuner")
    except Exception:
        return None


def kt_strategies() -> list[tuple[str, dict[str, Any]]]:
    """Every strategy Kernel Tuner has, as (label, strategy options): its registry,
    with pyATF's search techniques each run on its own."""
    from kernel_tuner import interface

    names = list(getattr(interface, "_STRATEGY_IMPORTS", None) or interface.strategy_map)
    out: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        if name == "pyatf_strategies":
            out.extend((f"pyatf_strategies:{t}", {"searchtechnique": t}) for t in PYATF_TECHNIQUES)
        else:
            out.append((name, {}))
    return out


def _plain_copy(recording: Path, folder: Path) -> Path:
    """An uncompressed copy (Kernel Tuner reads plain JSON caches), made once."""
    data = recording.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    target = folder / f"{recording.name.removesuffix('.gz')}.{digest}.json"
    if not target.exists():
        raw = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        fd, tmp = tempfile.mkstemp(dir=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
        os.replace(tmp, target)
    return target


class _TimedOut(BaseException):
    """Raised by the alarm: a BaseException, so strategies' own `except Exception` cannot eat it."""


def _timed_out(signum: int, frame: object) -> None:
    raise _TimedOut


def run_kt(job: dict[str, Any]) -> dict[str, Any]:
    """One Kernel Tuner run (in a worker process). `job`: plain cache path,
    restrictions, strategy label and options, budget, seed. Returns the evaluated
    configurations in order with time (None: failed) and cost in seconds, or an error."""
    warnings.filterwarnings("ignore")
    import numpy as np
    from kernel_tuner import tune_kernel

    random.seed(job["seed"])
    np.random.seed(job["seed"])
    data = json.loads(Path(job["cache"]).read_text())
    strategy = job["label"].split(":")[0]
    options = dict(job["options"])
    if strategy != "brute_force":  # brute force takes no budget: it is cut at the budget below
        options["max_fevals"] = job["budget"]
    cwd = os.getcwd()
    os.chdir(job["scratch"])  # some strategies write helper files into the working directory
    signal.signal(signal.SIGALRM, _timed_out)
    signal.alarm(int(job.get("timeout_s", 0)))
    try:
        results, _ = tune_kernel(data["kernel_name"], f"__global__ void {data['kernel_name']}() {{}}",
                                 data["problem_size"], [], data["tune_params"], restrictions=job["restrictions"] or None,
                                 strategy=strategy, strategy_options=options, cache=job["cache"],
                                 simulation_mode=True, quiet=True, verbose=False, lang="CUDA")
    except Exception as exc:  # a strategy that cannot run here is reported, not fatal
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]}
    except _TimedOut:
        return {"error": f"timed out after {job['timeout_s']} s"}
    finally:
        signal.alarm(0)
        os.chdir(cwd)
    keys = data["tune_params_keys"]
    seen: set[str] = set()
    times: list[float | None] = []
    costs: list[float] = []
    for result in results:
        key = ",".join(str(result[k]) for k in keys)
        if key in seen or key not in data["cache"]:
            continue
        if len(seen) == job["budget"]:
            break
        seen.add(key)
        record = data["cache"][key]
        value = record.get("time")
        times.append(float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
        costs.append(sum(float(record.get(f, 0) or 0) for f in ("compile_time", "verification_time",
                                                                  "benchmark_time")) / 1000.0)
    return {"times": times, "costs": costs}


class RunCache:
    """Finished Kernel Tuner runs on disk (SQLite), keyed by everything that decides them."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=60)
        self.db.execute("CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, result TEXT NOT NULL)")

    @staticmethod
    def key(digest: str, label: str, seed: int, budget: int, version: str) -> str:
        return f"{digest}|{label}|{seed}|{budget}|{version}"

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT result FROM runs WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, result: dict[str, Any]) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?)", (key, json.dumps(result)))


def make_jobs(recording: Path, restrictions: list[str], budget: int, seeds: int, scratch: Path,
              labels: list[tuple[str, dict[str, Any]]], timeout_s: int = 600) -> tuple[str, list[dict[str, Any]]]:
    """The content digest of `recording` and one job per strategy and seed."""
    digest = hashlib.sha256(recording.read_bytes()).hexdigest()[:16]
    plain = _plain_copy(recording, scratch)
    jobs = [{"cache": str(plain), "restrictions": restrictions, "label": label, "options": options,
             "budget": budget, "seed": seed, "scratch": str(scratch), "timeout_s": timeout_s}
            for label, options in labels for seed in range(seeds)]
    return digest, jobs
