"""Tuning on Ray actors (`--ray`): a local Ray cluster on the CPU with four fake GPUs
(`ray.init(num_gpus=4)`), the synthetic recording replayed with each evaluation
sleeping its scaled recorded cost, the database on the driver (this process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pool_helpers import PACE, assert_complete, crashed_config, run_pool
from search_helpers import write_recording

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'kxform[distributed]')")

from kxform.search.ray_pool import RayBackend, RayOptions  # noqa: E402
from kxform.search.workers import ReplayRecipe  # noqa: E402


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(num_cpus=4, num_gpus=4, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture()
def recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path)


def _backend(recipe: ReplayRecipe, workers: int) -> RayBackend:
    return RayBackend(recipe, RayOptions(address=None, workers=workers))


@pytest.mark.slow
def test_four_actors_finish_the_budget_in_under_half_the_time(cluster: None, recording: Path, tmp_path: Path) -> None:
    budget = 30
    runs = [run_pool(_backend(ReplayRecipe(str(recording), pace=PACE), n), recording, budget, tmp_path / f"{n}.db",
                     strategy="random") for n in (1, 4)]
    one, four = runs
    for run in runs:
        assert_complete(run, budget)
    assert {tuple(sorted(s.config.items())) for s in one.result.steps} == \
        {tuple(sorted(s.config.items())) for s in four.result.steps}
    assert one.result.best is not None and four.result.best is not None
    assert four.result.best.evaluation.time_ms == one.result.best.evaluation.time_ms
    assert sorted(w.identity.devices for w in four.report.workers) == ["0", "1", "2", "3"]  # one GPU each
    assert all(w.evaluations > 0 for w in four.report.workers)
    assert four.report.wall_s < 0.5 * one.report.wall_s, (four.report.wall_s, one.report.wall_s)


@pytest.mark.slow
def test_an_actor_killed_mid_evaluation_is_restarted_and_its_call_retried(cluster: None, recording: Path,
                                                                         tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    recipe = ReplayRecipe(str(recording), pace=PACE / 2, crash_at=4, crash_marker=str(marker))
    run = run_pool(_backend(recipe, 4), recording, 24, tmp_path / "t.db")
    assert marker.exists()  # an actor's process did exit mid-evaluation
    assert_complete(run, 24)
    assert run.report.resubmitted == 0 and run.report.lost == 0  # Ray retried it, not the pool
    assert crashed_config(marker) in [s.config for s in run.result.steps]
