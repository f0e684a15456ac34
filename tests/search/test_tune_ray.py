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

from kxform.cache import content_key  # noqa: E402
from kxform.errors import UsageError  # noqa: E402
from kxform.search.db import TuneKey, TuningDB  # noqa: E402
from kxform.search.ray_pool import RayBackend, RayOptions  # noqa: E402
from kxform.search.spread import Job, spread  # noqa: E402
from kxform.search.tuner import Step, TuneOptions  # noqa: E402
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
    runs = [
        run_pool(
            _backend(ReplayRecipe(str(recording), pace=PACE), n),
            recording,
            budget,
            tmp_path / f"{n}.db",
            strategy="random",
        )
        for n in (1, 4)
    ]
    one, four = runs
    for run in runs:
        assert_complete(run, budget)
    assert {tuple(sorted(s.config.items())) for s in one.result.steps} == {
        tuple(sorted(s.config.items())) for s in four.result.steps
    }
    assert one.result.best is not None and four.result.best is not None
    assert four.result.best.evaluation.time_ms == one.result.best.evaluation.time_ms
    assert sorted(w.identity.devices for w in four.report.workers) == ["0", "1", "2", "3"]  # one GPU each
    assert all(w.evaluations > 0 for w in four.report.workers)
    assert four.report.wall_s < 0.5 * one.report.wall_s, (four.report.wall_s, one.report.wall_s)


@pytest.mark.slow
def test_an_actor_killed_mid_evaluation_is_restarted_and_its_call_retried(
    cluster: None, recording: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "crashed"
    recipe = ReplayRecipe(str(recording), pace=PACE / 2, crash_at=4, crash_marker=str(marker))
    run = run_pool(_backend(recipe, 4), recording, 24, tmp_path / "t.db")
    assert marker.exists()  # an actor's process did exit mid-evaluation
    assert_complete(run, 24)
    assert run.report.resubmitted == 0 and run.report.lost == 0  # Ray retried it, not the pool
    assert crashed_config(marker) in [s.config for s in run.result.steps]


def _replay_job(path: Path, recipe: ReplayRecipe) -> Job:
    from kxform.search.recorded import load_recording

    rec = load_recording(path)
    return Job(path.name, recipe, rec.search, "synth_kernel", (str(path),))


@pytest.mark.slow
def test_jobs_spread_over_the_cluster_and_are_stored_by_the_driver(cluster: None, tmp_path: Path) -> None:
    """Two recordings (two GPUs' spaces) as two jobs; the first job's worker dies once
    mid-run: Ray runs the job again and both finish, every evaluation stored once."""
    first, second = write_recording(tmp_path), write_recording(tmp_path, "synth_B.json.gz", device="Test GPU B")
    marker = tmp_path / "crashed"
    jobs = [
        _replay_job(first, ReplayRecipe(str(first), pace=0.02, crash_at=5, crash_marker=str(marker))),
        _replay_job(second, ReplayRecipe(str(second), pace=0.02)),
    ]
    with TuningDB(tmp_path / "t.db") as db:
        results = spread(jobs, TuneOptions(budget=12), ray, db)
        for job, hardware in zip(jobs, ("Test GPU A", "Test GPU B")):
            key = TuneKey(content_key(*job.key_parts), "synth_kernel", hardware, job.search.names)
            assert len(db.all(key)) == 12
    assert marker.exists()  # the first job's worker did die
    assert sorted(r.label for r in results) == ["synth_A.json.gz", "synth_B.json.gz"]
    for result in results:
        assert not result.error and len(result.steps) == 12 and result.stopped == "budget"
        assert len({tuple(sorted(c.items())) for c, _ in result.steps}) == 12
        assert result.devices in ("0", "1", "2", "3")  # one GPU per job


@pytest.mark.slow
def test_a_job_that_fails_of_itself_is_reported_and_the_others_finish(cluster: None, tmp_path: Path) -> None:
    good = write_recording(tmp_path)
    jobs = [
        _replay_job(good, ReplayRecipe(str(good))),
        Job(
            "missing",
            ReplayRecipe(str(tmp_path / "missing.json")),
            _replay_job(good, ReplayRecipe("")).search,
            "synth_kernel",
            ("missing",),
        ),
    ]
    with TuningDB(tmp_path / "t.db") as db:
        results = {r.label: r for r in spread(jobs, TuneOptions(budget=5), ray, db)}
    assert results["missing"].error.endswith("missing.json: no such file") and not results["missing"].steps
    assert len(results["synth_A.json.gz"].steps) == 5


def test_more_workers_than_the_cluster_has_gpus_is_refused(cluster: None, recording: Path) -> None:
    with pytest.raises(UsageError, match="--gpus 5 with --ray: the cluster has 4 GPUs"):
        _backend(ReplayRecipe(str(recording)), 5).start()


@pytest.mark.slow
def test_an_actor_killed_from_outside_is_restarted_and_the_run_finishes(
    cluster: None, recording: Path, tmp_path: Path
) -> None:
    """`ray.kill` of a worker while it holds configurations (a lost node, as far as the
    driver can tell): Ray restarts it and retries them; nothing is lost or doubled."""
    backend = _backend(ReplayRecipe(str(recording), pace=PACE / 2), 4)
    killed: list[int] = []

    def kill_once(step: Step) -> None:
        if step.index == 4 and not killed:
            backend.kill(1)
            killed.append(step.index)

    run = run_pool(backend, recording, 24, tmp_path / "t.db", on_step=kill_once)
    assert killed == [4]
    assert_complete(run, 24)
    assert run.report.lost == 0
