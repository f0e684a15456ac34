"""Tuning runs on a worker pool over the synthetic recording, for the local and Ray tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kxform.search.db import TuneKey, TuningDB
from kxform.search.pool import Backend, PoolReport, WorkerPool
from kxform.search.recorded import load_recording
from kxform.search.tuner import Step, TuneOptions, TuneResult, tune

OPTIMUM_MS = 0.905
"""The fastest configuration of the synthetic recording (bx=4, by=4, unroll=1, tile=2)."""
PACE = 0.2
"""Each evaluation sleeps 0.2 s (its recorded 1 s of compile and benchmark, scaled)."""


@dataclass(frozen=True)
class PoolRun:
    result: TuneResult
    report: PoolReport
    stored: int
    """Rows the database holds for the run's key afterwards."""


def run_pool(
    backend: Backend,
    recording: Path,
    budget: int,
    db_path: Path,
    strategy: str = "model",
    on_step: Callable[[Step], None] | None = None,
) -> PoolRun:
    """Tune the recording's space on `backend`'s workers; the database on this process."""
    rec = load_recording(recording)
    pool = WorkerPool(backend)
    try:
        identity = pool.start(rec.search.config(0))
        key = TuneKey("synth", "synth_kernel", identity.hardware, rec.search.names)
        with TuningDB(db_path) as db:
            result = tune(
                rec.search,
                None,
                TuneOptions(strategy=strategy, budget=budget),
                db=db,
                key=key,
                runner=pool.run,
                on_step=on_step,
            )
            stored = len(db.all(key))
    finally:
        pool.close()
    return PoolRun(result, pool.report(), stored)


def assert_complete(run: PoolRun, budget: int) -> None:
    """Every proposed configuration recorded exactly once, in the results and the database."""
    configs = [tuple(sorted(s.config.items())) for s in run.result.steps]
    assert len(configs) == budget and len(set(configs)) == budget
    assert all(s.source == "measured" for s in run.result.steps)
    assert run.stored == budget
    assert sum(w.evaluations for w in run.report.workers) == budget


def crashed_config(marker: Path) -> dict[str, int]:
    """The configuration the fault drill's worker died on (written into the marker)."""
    return dict(zip(("bx", "by", "unroll", "tile"), map(int, marker.read_text().split(","))))
