"""Kernel Tuner's replay for the benchmark (kxform/bench/kt_replay.py): a run stops at the
target through Kernel Tuner's own budget and reports the distinct configurations it
evaluated, with their recorded times, in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from kxform.search.recorded import load_recording
from search_helpers import RESTRICTIONS, write_recording

from kxform.bench import kt_replay

if kt_replay.kt_version() is None:
    pytest.skip("Kernel Tuner is not installed (the optional extra `bench`)", allow_module_level=True)


def _job(tmp_path: Path, target: float | None, label: str = "random_sample") -> tuple[dict, object]:  # type: ignore[type-arg]
    path = write_recording(tmp_path)
    recording = load_recording(path)
    options = dict(kt_replay.kt_strategies())[label]
    _, jobs = kt_replay.make_jobs(path, RESTRICTIONS, 1000, 1, tmp_path, [(label, options)], 60, target_ms=target)
    return jobs[0], recording


@pytest.mark.parametrize("label", ["random_sample", "simulated_annealing"])
def test_a_run_stops_once_within_the_target(tmp_path: Path, label: str) -> None:
    """The stopped run is the full run's beginning, up to its first evaluation within
    the target and at most the rest of the batch that held it (a strategy that asks
    for one configuration at a time stops right there)."""
    job, recording = _job(tmp_path, None, label)
    full = kt_replay.run_kt(job)
    assert "error" not in full
    times = recording.times()
    target = sorted(times.values())[len(times) // 10]
    first = next(i for i, t in enumerate(full["times"]) if t is not None and t <= target)
    stopped = kt_replay.run_kt({**job, "target_ms": target})
    assert "error" not in stopped
    assert stopped["times"] == full["times"][: len(stopped["times"])]
    assert len(stopped["times"]) >= first + 1
    if label == "simulated_annealing":
        assert len(stopped["times"]) == first + 1 < len(full["times"])


def test_the_evaluations_are_distinct_recorded_configurations(tmp_path: Path) -> None:
    job, recording = _job(tmp_path, None, "genetic_algorithm")
    run = kt_replay.run_kt(job)
    assert "error" not in run and run["times"]
    recorded = sorted((t for t in recording.times().values()), key=float)
    assert all(t is None or t in recorded for t in run["times"])
    assert len(run["times"]) <= len(recording.search)
    assert all(c > 0 for c in run["costs"])
