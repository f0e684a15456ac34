"""Kernel Tuner's strategies replayed in its own simulation mode (for bench_search.py).

Kernel Tuner is an optional extra (`pip install -e '.[bench]'`), imported only here.
Each run happens in a worker process (Kernel Tuner keeps global state and prints), on
an uncompressed copy of the recording (its cache reader takes plain JSON), with the
space definition's restrictions, `simulation_mode=True` and `max_fevals=budget`.
A run's result is the sequence of distinct configurations it evaluated, in order,
with their recorded times and costs, which `kxform.search.replay.Run` scores the same
way as kxform's own runs.

What keeps 30 seeds of every strategy affordable on a small machine without changing
what any strategy does:

* A run stops once it has evaluated a configuration within `target_ms` (1% of the
  optimum): nothing after that changes its evaluations or GPU time to 5% or 1%. The
  stop goes through Kernel Tuner's own budget (`TuningBudget.is_done` and
  `raise_exception_if_done` report the budget as spent), so each strategy ends the
  way it ends at `max_fevals`.
* The evaluations are taken from the simulation runner as it returns them, so a run
  cut short keeps what it evaluated, marked `truncated`: the benchmark counts it as
  not reaching the target within its evaluations and says whether the median is
  still exact (every truncated run stopped beyond the median). A run is cut by
  `timeout_s` (the model-based strategies spend seconds of their own per evaluation)
  or when it has made no new evaluation for `stall_s` seconds: some strategies
  (pyATF's pattern search and Torczon) keep proposing configurations they already
  evaluated, which the simulation, like a real run's cache, answers without spending
  budget, so they would never end.
* Each worker process parses a recording once, not once per run.
* Finished runs are cached on disk (keyed by the recording's content, the strategy,
  seed, budget, Kernel Tuner's version and the stop target), so the benchmark can be
  stopped, resumed and extended with more seeds; a full run (no target) stands in for
  a stopped one, since it starts with the same evaluations.

pyATF's search techniques: Kernel Tuner 1.5.0 builds `pyatf.TP(name, values,
constraint, constraint_source)`, a signature no released pyATF (0.0.13 and earlier)
has; `constraint_source` only names the constraint in pyATF's JSON output, so the
run passes the other three arguments through a subclass.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import random
import signal
import sqlite3
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

PYATF_TECHNIQUES = (
    "auc_bandit",
    "differential_evolution",
    "pattern_search",
    "round_robin",
    "simulated_annealing",
    "torczon",
)
REPLAY_PROTOCOL = "2"
"""Bumped when what a cached run means changes."""
STALL_S = 15.0
"""A run that makes no new evaluation for this long is cut (see the module docstring)."""


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


class _Cut(BaseException):
    """Raised by the timer: a BaseException, so strategies' own `except Exception` cannot eat it."""


class _Watch:
    """What the simulation runner returned during the current run, whether the stop
    target was reached, and when the last new evaluation came (per worker process,
    reset by each run)."""

    target: float | None = None
    reached = False
    returned: list[dict[str, Any]] = []
    seen: set[str] = set()
    started = 0.0
    last_new = 0.0
    timeout_s = 0.0
    stall_s = STALL_S
    why = ""
    installed = False


def _tick(signum: int, frame: object) -> None:
    now = time.monotonic()
    if _Watch.timeout_s and now - _Watch.started > _Watch.timeout_s:
        _Watch.why = f"timed out after {_Watch.timeout_s:.0f} s"
        raise _Cut
    if now - _Watch.last_new > _Watch.stall_s:
        _Watch.why = f"no new evaluation for {_Watch.stall_s:.0f} s"
        raise _Cut


def _install_hooks() -> None:
    """Wrap the simulation runner (to see each evaluation) and the budget (to stop
    at the target), once per process."""
    if _Watch.installed:
        return
    from kernel_tuner import util
    from kernel_tuner.runners.simulation import SimulationRunner

    run = SimulationRunner.run
    is_done = util.TuningBudget.is_done
    raise_if_done = util.TuningBudget.raise_exception_if_done

    def watched_run(self: Any, parameter_space: Any, tuning_options: Any) -> Any:
        results = run(self, parameter_space, tuning_options)
        for result in results:
            if result is None:
                continue
            _Watch.returned.append(result)
            key = ",".join(str(result.get(k)) for k in tuning_options.tune_params)
            if key not in _Watch.seen:
                _Watch.seen.add(key)
                _Watch.last_new = time.monotonic()
            value = result.get("time")
            if (
                _Watch.target is not None
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
                and value <= _Watch.target
            ):
                _Watch.reached = True
        return results

    def done(self: Any) -> bool:
        return _Watch.reached or is_done(self)

    def raise_done(self: Any) -> None:
        if _Watch.reached:
            raise util.StopCriterionReached("target reached")
        raise_if_done(self)

    SimulationRunner.run = watched_run
    util.TuningBudget.is_done = done
    util.TuningBudget.raise_exception_if_done = raise_done
    try:
        import pyatf

        class TP(pyatf.TP):  # type: ignore[misc,name-defined]
            def __init__(self, name: str, values: Any, constraint: Any = None, constraint_source: Any = None) -> None:
                super().__init__(name, values, constraint)

        pyatf.TP = TP
    except ImportError:
        pass
    _Watch.installed = True


_DATA: dict[str, dict[str, Any]] = {}


def _load(path: str) -> dict[str, Any]:
    if path not in _DATA:
        _DATA[path] = json.loads(Path(path).read_text())
    return _DATA[path]


def run_kt(job: dict[str, Any]) -> dict[str, Any]:
    """One Kernel Tuner run (in a worker process). `job`: plain cache path,
    restrictions, strategy label and options, budget, seed, stop target (ms or None),
    timeout. Returns the evaluated configurations in order with time (None: failed)
    and cost in seconds, the run's wall and CPU seconds, or an error."""
    warnings.filterwarnings("ignore")
    import numpy as np
    from kernel_tuner import tune_kernel

    _install_hooks()
    random.seed(job["seed"])
    np.random.seed(job["seed"])
    data = _load(job["cache"])
    strategy = job["label"].split(":")[0]
    options = dict(job["options"])
    if strategy != "brute_force":  # brute force takes no budget: it is cut at the budget below
        options["max_fevals"] = job["budget"]
    cwd = os.getcwd()
    os.chdir(job["scratch"])  # some strategies write helper files into the working directory
    _Watch.target, _Watch.reached, _Watch.returned, _Watch.seen = job.get("target_ms"), False, [], set()
    _Watch.started = _Watch.last_new = time.monotonic()
    _Watch.timeout_s, _Watch.why = float(job.get("timeout_s") or 0), ""
    _Watch.stall_s = float(job.get("stall_s") or STALL_S)
    signal.signal(signal.SIGALRM, _tick)
    signal.setitimer(signal.ITIMER_REAL, 1.0, 1.0)
    wall, cpu = time.perf_counter(), time.process_time()
    cut = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # Kernel Tuner prints despite quiet=True
            tune_kernel(
                data["kernel_name"],
                f"__global__ void {data['kernel_name']}() {{}}",
                data["problem_size"],
                [],
                data["tune_params"],
                restrictions=job["restrictions"] or None,
                strategy=strategy,
                strategy_options=options,
                cache=job["cache"],
                simulation_mode=True,
                quiet=True,
                verbose=False,
                lang="CUDA",
            )
    except Exception as exc:  # a strategy that cannot run here is reported, not fatal
        if not _Watch.reached:  # some strategies let the stop at the target escape: the run is complete
            return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]}
    except _Cut:
        cut = True
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0, 0.0)
        os.chdir(cwd)
    out = _evaluations(data, _Watch.returned, job["budget"])
    out.update(wall_s=round(time.perf_counter() - wall, 3), cpu_s=round(time.process_time() - cpu, 3))
    if cut:
        if not out["times"]:
            return {"error": _Watch.why}
        out.update(truncated=True, error_note=_Watch.why)
    return out


def _evaluations(data: dict[str, Any], returned: list[dict[str, Any]], budget: int) -> dict[str, Any]:
    """The distinct recorded configurations among `returned`, in order, up to `budget`."""
    keys = data["tune_params_keys"]
    seen: set[str] = set()
    times: list[float | None] = []
    costs: list[float] = []
    for result in returned:
        key = ",".join(str(result[k]) for k in keys)
        if key in seen or key not in data["cache"]:
            continue
        if len(seen) == budget:
            break
        seen.add(key)
        record = data["cache"][key]
        value = record.get("time")
        times.append(float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None)
        costs.append(
            sum(float(record.get(f, 0) or 0) for f in ("compile_time", "verification_time", "benchmark_time")) / 1000.0
        )
    return {"times": times, "costs": costs}


class RunCache:
    """Finished Kernel Tuner runs on disk (SQLite), keyed by everything that decides them."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=60)
        self.db.execute("CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, result TEXT NOT NULL)")

    @staticmethod
    def key(digest: str, label: str, seed: int, budget: int, version: str, target: float | None = None) -> str:
        base = f"{digest}|{label}|{seed}|{budget}|{version}"
        return base if target is None else f"{base}|stop={target!r}|p{REPLAY_PROTOCOL}"

    def get(self, key: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT result FROM runs WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def lookup(
        self, digest: str, label: str, seed: int, budget: int, version: str, target: float | None
    ) -> dict[str, Any] | None:
        """The cached run stopped at `target`, else a cached full run that ran (it
        begins with the same evaluations; an error there may come from another
        environment, e.g. before the pyATF shim)."""
        found = self.get(self.key(digest, label, seed, budget, version, target)) if target is not None else None
        if found is not None or target is None:
            return found
        full = self.get(self.key(digest, label, seed, budget, version))
        return None if full is None or "error" in full else full

    def put(self, key: str, result: dict[str, Any]) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO runs VALUES (?, ?)", (key, json.dumps(result)))


def make_jobs(
    recording: Path,
    restrictions: list[str],
    budget: int,
    seeds: int,
    scratch: Path,
    labels: list[tuple[str, dict[str, Any]]],
    timeout_s: int = 600,
    target_ms: float | None = None,
    stall_s: float = STALL_S,
) -> tuple[str, list[dict[str, Any]]]:
    """The content digest of `recording` and one job per strategy and seed."""
    digest = hashlib.sha256(recording.read_bytes()).hexdigest()[:16]
    plain = _plain_copy(recording, scratch)
    jobs = [
        {
            "cache": str(plain),
            "restrictions": restrictions,
            "label": label,
            "options": options,
            "budget": budget,
            "seed": seed,
            "scratch": str(scratch),
            "timeout_s": timeout_s,
            "target_ms": target_ms,
            "stall_s": stall_s,
        }
        for label, options in labels
        for seed in range(seeds)
    ]
    return digest, jobs
