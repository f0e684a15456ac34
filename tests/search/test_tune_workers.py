"""Tuning on several timing workers of this host (`--gpus`): one process per device,
pinned with CUDA_VISIBLE_DEVICES; here the devices are fake and the objective is the
synthetic recording replayed with each evaluation sleeping its scaled recorded cost."""

from __future__ import annotations

import json
import math
import pickle
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc, run_cli
from kxform.errors import InputError, UsageError
from kxform.harness.spec import load_spec
from kxform.search.kernel_objective import MeasureOptions, TuneTarget
from kxform.search.kernel_space import kernel_space
from kxform.search.local_pool import LocalBackend, parse_gpus
from kxform.search.objective import Evaluation, Failure
from kxform.search.pool import MAX_TRIES, Backend, Done, WorkerPool
from kxform.search.recorded import load_recording
from kxform.search.spread import find_jobs
from kxform.search.strategy import History, make_strategy
from kxform.search.workers import Identity, KernelRecipe, ReplayRecipe
from pool_helpers import OPTIMUM_MS, PACE, assert_complete, crashed_config, run_pool
from search_helpers import KERNEL_SOURCE, write_recording


@pytest.fixture()
def recording(tmp_path: Path) -> Path:
    return write_recording(tmp_path)


@pytest.mark.parametrize("text, devices", [("2", ("0", "1")), ("0,2,3", ("0", "2", "3")), (" 1 ", ("0",))])
def test_gpus_option_names_the_devices(text: str, devices: tuple[str, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert parse_gpus(text) == devices


def test_gpus_option_indexes_the_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,7")
    assert parse_gpus("2") == ("4", "5") and parse_gpus("2,0") == ("7", "4")
    with pytest.raises(UsageError, match="sees 3 devices"):
        parse_gpus("4")
    monkeypatch.setenv("PATH", "")  # `all` is the visible devices: no nvidia-smi asked (it would list the host's)
    assert parse_gpus("all") == ("4", "5", "7")


@pytest.mark.parametrize(
    "text, message",
    [("0", "at least 1"), ("x", "expected all, a count"), ("1,1", "distinct"), ("1,-2", "not negative")],
)
def test_bad_gpus_option_is_a_usage_error(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_gpus(text)


def test_gpus_all_without_nvidia_smi_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match="cannot count the GPUs"):
        parse_gpus("all")


@pytest.mark.slow
def test_four_workers_finish_the_budget_in_under_half_the_time(recording: Path, tmp_path: Path) -> None:
    """The random strategy proposes the same sequence however results arrive, so both
    runs evaluate the same configurations: the same best, and only the wall time differs."""
    budget = 30
    runs = [
        run_pool(
            LocalBackend(ReplayRecipe(str(recording), pace=PACE), devices),
            recording,
            budget,
            tmp_path / f"{len(devices)}.db",
            strategy="random",
        )
        for devices in (("0",), ("0", "1", "2", "3"))
    ]
    one, four = runs
    for run in runs:
        assert_complete(run, budget)
    assert {tuple(sorted(s.config.items())) for s in one.result.steps} == {
        tuple(sorted(s.config.items())) for s in four.result.steps
    }
    assert one.result.best is not None and four.result.best is not None
    assert four.result.best.evaluation.time_ms == one.result.best.evaluation.time_ms
    assert [w.identity.devices for w in four.report.workers] == ["0", "1", "2", "3"]  # each pinned to its own
    assert len({w.identity.pid for w in four.report.workers}) == 4
    assert all(w.evaluations > 0 for w in four.report.workers)
    assert four.report.wall_s < 0.5 * one.report.wall_s, (four.report.wall_s, one.report.wall_s)


@pytest.mark.slow
def test_the_model_strategy_proposes_batches_that_reach_the_optimum(recording: Path) -> None:
    """Four configurations always pending (as on four workers), results absorbed oldest
    first: every proposal is new and the search still reaches the optimum."""
    rec = load_recording(recording)
    strategy = make_strategy("model", rec.search, 0)
    history = History(len(rec.search))
    order: list[int] = []
    best = math.inf
    for _ in range(40):
        while len(history.pending) < 4:
            row = strategy.propose(history)
            assert row is not None and not history.visited[row]
            history.start(row)
            order.append(row)
        row = order.pop(0)
        time_ms = rec.objective.evaluate(rec.objective.prepare(rec.search.config(row))).time_ms
        history.add(row, time_ms)
        best = min(best, time_ms or math.inf)
    assert best == pytest.approx(OPTIMUM_MS)


def test_pending_configurations_enter_the_model_as_the_best_time(recording: Path) -> None:
    """Constant liar: the posterior is told each pending configuration ran as fast as
    the best so far, so its uncertainty there collapses and the next proposal differs."""
    rec = load_recording(recording)
    strategy = make_strategy("model", rec.search, 1)
    history = History(len(rec.search))
    for row in range(0, 60, 6):
        history.start(row)
        history.add(row, rec.objective.evaluate(rec.objective.prepare(rec.search.config(row))).time_ms)
    pending = [3, 31, 47]
    for row in pending:
        history.start(row)
    proposed = strategy.propose(history)
    assert proposed is not None and proposed not in pending
    assert set(pending) <= set(strategy._gp_rows.tolist())
    _, sigma = strategy._gp.predict(strategy.features[pending])
    assert (sigma < 0.05).all()


@pytest.mark.slow
def test_a_killed_worker_is_restarted_and_nothing_is_lost_or_repeated(recording: Path, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    recipe = ReplayRecipe(str(recording), pace=PACE / 4, crash_at=4, crash_marker=str(marker))
    run = run_pool(LocalBackend(recipe, ("0", "1")), recording, 20, tmp_path / "t.db")
    assert marker.exists()  # a worker did die mid-evaluation
    assert_complete(run, 20)
    assert run.report.resubmitted >= 1
    assert crashed_config(marker) in [s.config for s in run.result.steps]


@pytest.mark.slow
def test_times_are_normalised_by_each_workers_reference(recording: Path, tmp_path: Path) -> None:
    """Device 1 runs everything twice as slow: its reference says so, and every time
    recorded (the whole space, exhaustively) is the recording's own."""
    recipe = ReplayRecipe(str(recording), slow_devices=(("1", 2.0),))
    run = run_pool(LocalBackend(recipe, ("0", "1")), recording, 85, tmp_path / "n.db", strategy="exhaustive")
    assert [w.factor for w in run.report.workers] == [1.0, 0.5]
    assert all(w.evaluations > 0 for w in run.report.workers)
    records = load_recording(recording).objective
    for step in run.result.steps:
        expected = records.evaluate(records.prepare(step.config)).time_ms
        assert step.evaluation.time_ms == pytest.approx(expected) if expected else step.evaluation.time_ms is None


class _Mixed(Backend):
    """Workers reporting two GPU models (the pool must refuse them before timing anything)."""

    def start(self) -> list[Identity]:
        return [Identity(name, "", "replay", "h", 1, str(i)) for i, name in enumerate(("GPU A", "GPU B"))]

    def submit(self, worker: int, ticket: int, config: object) -> None:
        raise AssertionError("nothing may be submitted to a mix of models")

    def wait(self) -> list[Done]:
        raise AssertionError("unreachable")

    def close(self) -> None:
        pass


def test_a_mix_of_gpu_models_is_refused() -> None:
    with pytest.raises(InputError, match=r"not one GPU model \(GPU A, GPU B\)"):
        WorkerPool(_Mixed()).start({"bx": 1})


def test_a_worker_that_cannot_build_its_objective_is_one_line(tmp_path: Path) -> None:
    backend = LocalBackend(ReplayRecipe(str(tmp_path / "missing.json")), ("0",))
    with pytest.raises(InputError, match=r"worker 0 \(device 0\): .*missing.json: no such file"):
        WorkerPool(backend).start({"bx": 1})
    backend.close()


@pytest.mark.slow
def test_cli_gpus_runs_the_workers_and_one_writer(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    write_recording(tmp_path)
    env = {**_without_ray(tmp_path), "OPENBLAS_NUM_THREADS": "1"}  # the local workers need no Ray
    result = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "synth_kernel",
        "--objective",
        "replay:synth_A.json.gz",
        "--gpus",
        "2",
        "--budget",
        "12",
        "--db",
        "t.db",
        "--json",
        cwd=tmp_path,
        env=env,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["measured"] == 12 and summary["stopped"] == "budget"
    assert [w["devices"] for w in summary["workers"]["workers"]] == ["0", "1"]
    assert sum(w["evaluations"] for w in summary["workers"]["workers"]) == 12
    again = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "synth_kernel",
        "--objective",
        "replay:synth_A.json.gz",
        "--gpus",
        "2",
        "--budget",
        "12",
        "--resume",
        "--db",
        "t.db",
        "--json",
        cwd=tmp_path,
        env=env,
        timeout=180,
    )
    assert json.loads(again.stdout)["from_database"] == 12  # one writer: every result stored once
    # for a person, into a pipe: the summary lines, and no progress bar drawn there
    shown = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "synth_kernel",
        "--objective",
        "replay:synth_A.json.gz",
        "--gpus",
        "2",
        "--budget",
        "12",
        "--resume",
        "--db",
        "t.db",
        cwd=tmp_path,
        env=env,
        timeout=180,
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("best: ") and "found at evaluation" in shown.stdout
    lines = shown.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("kxform: 12 evaluations (0 measured, 12 from the database")
    assert lines[1].startswith("kxform: 2 workers, ") and "\r" not in shown.stderr and "tuning:" not in shown.stderr


def test_cli_gpus_without_a_gpu_runtime_is_one_line_before_any_worker(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("pycuda") is not None:
        pytest.skip("pycuda is installed: the GPU objective's workers can start here")
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "k")
    result = run_cli(
        "tune",
        "k/sgemm_tiled.cu",
        "--kernel",
        "sgemm_tiled",
        "--pass",
        "tile",
        "--gpus",
        "2",
        cwd=tmp_path,
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")},
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("kxform: error: --gpus 2: no GPU runtime here (pycuda is not installed")
    assert "--objective replay:FILE" in result.stderr and "worker" not in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (("--gpus", "0"), "--gpus 0: must be at least 1"),
        (("--gpus", "0,0"), "distinct"),
        (("--ray", "auto", "--gpus", "0,1"), "the number of workers"),
    ],
)
def test_cli_bad_worker_options_are_one_line(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    result = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "synth_kernel",
        "--objective",
        "replay:x.json",
        *args,
        cwd=tmp_path,
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")},
        timeout=120,
    )
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.sqlite"))  # nothing written


def _without_ray(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import ray` fails, as where Ray is not installed."""
    shadow = tmp_path / "no_ray" / "ray"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'ray'\")\n")
    return {"PYTHONPATH": str(shadow.parent), "KXFORM_CACHE_DIR": str(tmp_path / "cache")}


def test_cli_ray_without_ray_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    write_recording(tmp_path)
    result = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "synth_kernel",
        "--objective",
        "replay:synth_A.json.gz",
        "--ray",
        "auto",
        cwd=tmp_path,
        env=_without_ray(tmp_path),
        timeout=120,
    )
    assert result.returncode == 2
    assert (
        result.stderr == "kxform: error: --ray needs Ray, which is not installed: pip install 'kxform[distributed]'\n"
    )


@needs_nvcc
@pytest.mark.slow
def test_the_gpu_recipe_rewrites_compiles_and_verifies_inside_the_worker(tmp_path: Path) -> None:
    """The worker side of `--gpus` on a kernel: the recipe crosses into the worker
    process, which rewrites, compiles and verifies there (on the CPU runtime: no GPU
    here); a planted bug that only TILE=32 exposes is rejected by verification, a
    configuration that verifies ends at timing, which the CPU cannot do."""
    folder = tmp_path / "sgemm"
    shutil.copytree(CORPORA / "sgemm_tiled", folder)
    path = folder / "sgemm_tiled.cu"
    sound = b"Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;"
    planted = b"Bs[ty][tx] = (t + (ty & 15) < K && col < N) ? B[(t + (ty & 15)) * N + col] : 0.0f;"
    data = path.read_bytes()
    assert data.count(sound) == 1
    path.write_bytes(data.replace(sound, planted))
    data = path.read_bytes()
    spec = load_spec(folder / "sgemm_tiled.kxspec.toml").kernel("sgemm_tiled")
    space = kernel_space(data, "sgemm_tiled", ("tile",), path=str(path), hw="h100")
    recipe = KernelRecipe(
        TuneTarget(str(path), data, "sgemm_tiled", spec, "h100"),
        space,
        MeasureOptions(check_sizes=("tiles",)),
        runtime="cpu",
    )
    backend = LocalBackend(recipe, ("0",))
    try:
        [identity] = backend.start()
        assert identity.objective == "cpu" and identity.devices == "0"
        backend.submit(0, 1, {"tile": True, "tile.TILE": 32})
        backend.submit(0, 2, {"tile": True, "tile.TILE": 8})
        done: dict[int, Evaluation | None] = {}
        while len(done) < 2:
            done.update((d.ticket, d.evaluation) for d in backend.wait())
    finally:
        backend.close()
    wrong, fine = done[1], done[2]
    assert wrong is not None and wrong.failure is Failure.VERIFY and "elements differ" in wrong.detail
    assert fine is not None and fine.failure is Failure.RUNTIME
    assert fine.detail == "time: the cpu runtime does not time kernels"


def test_a_kernel_recipe_crosses_a_process_boundary_whole() -> None:
    """Expressions (constraints, spec sizes) pickle as their text and parse again to
    the same expression: a worker gets the space and spec the driver built."""
    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    data = path.read_bytes()
    spec = load_spec(CORPORA / "sgemm_tiled" / "sgemm_tiled.kxspec.toml").kernel("sgemm_tiled")
    space = kernel_space(data, "sgemm_tiled", ("tile", "swizzle"), path=str(path), hw="h100", require=("TILE >= 2",))
    recipe = KernelRecipe(TuneTarget(str(path), data, "sgemm_tiled", spec, "h100"), space, MeasureOptions())
    copy = pickle.loads(pickle.dumps(recipe))
    assert copy == recipe
    constraint = next(c for c in copy.space.space.constraints if "TILE >= 2" in c.expr.text)
    assert not constraint.expr.holds({"tile": True, "tile.TILE": 1})
    assert constraint.expr.holds({"tile": True, "tile.TILE": 2}) and constraint.expr.holds(
        {"tile": False, "tile.TILE": 1}
    )


def test_a_directory_gives_one_job_per_kernel_and_bench_size(tmp_path: Path) -> None:
    for name in ("sgemm_tiled", "layernorm"):
        shutil.copytree(CORPORA / name, tmp_path / name)
    jobs, skipped = find_jobs(tmp_path, ("tile",), "h100")
    assert [job.label for job in jobs] == [f"{tmp_path}/sgemm_tiled/sgemm_tiled.cu:sgemm_tiled@bench"]
    [job] = jobs
    assert job.recipe.measure.size.name == "bench" and len(job.search) == 6  # off, and 5 other tile sizes
    assert job.key_parts == ((tmp_path / "sgemm_tiled" / "sgemm_tiled.cu").read_bytes(), "sgemm_tiled")
    assert [label.rsplit("/", 1)[1] for label, _ in skipped] == ["layernorm.cu:layernorm_forward_kernel"]
    assert "nothing to tune under tile" in skipped[0][1]


@pytest.mark.parametrize(
    "args, message",
    [
        (("--ray", "auto"), "empty: nothing to tune (0 kernels skipped)"),
        (("--gpus", "2"), "a directory is tuned over a Ray cluster"),
    ],
)
def test_cli_directory_needs_ray_and_kernels(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    (tmp_path / "empty").mkdir()
    result = run_cli(
        "tune", "empty", *args, cwd=tmp_path, env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")}, timeout=120
    )
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_file_needs_a_kernel(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    result = run_cli("tune", "k.cu", cwd=tmp_path, env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")}, timeout=120)
    assert result.returncode == 2 and result.stderr.startswith("kxform: error: k.cu: --kernel K is required")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.gpu
def test_gpus_all_tunes_on_every_gpu_with_verification(tmp_path: Path) -> None:
    """The `--gpus` path on real GPUs (every GPU of the host): each configuration is
    verified and timed on a worker's own GPU, the planted TILE=32 bug is rejected there,
    and the best is written through the driver."""
    from kxform.runtime.gpu import GpuRuntime

    ok, why = GpuRuntime().available()
    if not ok:
        pytest.skip(f"needs a CUDA GPU and pycuda: {why}")
    folder = tmp_path / "sgemm"
    shutil.copytree(CORPORA / "sgemm_tiled", folder)
    path = folder / "sgemm_tiled.cu"
    sound = b"Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;"
    path.write_bytes(
        path.read_bytes().replace(
            sound, b"Bs[ty][tx] = (t + (ty & 15) < K && col < N) ? B[(t + (ty & 15)) * N + col] : 0.0f;"
        )
    )
    proc = run_cli(
        "tune",
        str(path),
        "--kernel",
        "sgemm_tiled",
        "--pass",
        "tile",
        "--strategy",
        "exhaustive",
        "--budget",
        "10",
        "--size",
        "M=512,N=512,K=512",
        "--repeat",
        "10",
        "--json",
        "--write",
        "--gpus",
        "all",
        "--db",
        str(tmp_path / "t.sqlite"),
        "--log",
        str(tmp_path / "t.jsonl"),
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    by_tile = {e["params"]["tile.TILE"]: e for e in summary["evaluations"] if e["params"]["tile"]}
    # TILE=16 is the code as written: the first evaluation (tile off), not evaluated again with tile on
    assert set(by_tile) == {1, 2, 4, 8, 32} and summary["objective"] == "gpu"
    original = summary["evaluations"][0]
    assert not original["params"]["tile"] and original["status"] == "ok" and original["time_ms"] > 0
    assert by_tile[32]["status"] == "verification_failed" and by_tile[32]["time_ms"] is None
    assert all(by_tile[t]["status"] == "ok" and by_tile[t]["time_ms"] > 0 for t in (2, 4, 8))
    workers = summary["workers"]["workers"]
    assert workers and all(w["reference_ms"] > 0 for w in workers) and workers[0]["factor"] == 1.0
    assert len({w["devices"] for w in workers}) == len(workers)
    assert summary["best"]["config"]["tile.TILE"] != 32
    assert f"#define TILE {summary['best']['config']['tile.TILE']}\n" in path.read_text()


@pytest.mark.slow
def test_a_configuration_that_kills_every_worker_is_recorded_as_failed(recording: Path, tmp_path: Path) -> None:
    """Given to a worker MAX_TRIES times, each time killing it: recorded as a runtime
    failure with the reason, and the run finishes its budget on the restarted workers."""
    killer = "4,4,1,2"  # the optimum: the strategy is sure to propose it
    recipe = ReplayRecipe(str(recording), crash_key=killer)
    run = run_pool(LocalBackend(recipe, ("0", "1")), recording, 85, tmp_path / "k.db", strategy="exhaustive")
    assert_complete(run, 85)
    [step] = [s for s in run.result.steps if s.config == {"bx": 4, "by": 4, "unroll": 1, "tile": 2}]
    assert step.evaluation.failure is Failure.RUNTIME
    assert step.evaluation.detail.startswith(f"lost its worker {MAX_TRIES} times: worker ")
    # Each kill also sends back whatever else was in flight on that worker: at least MAX_TRIES - 1.
    assert run.report.lost == 1 and run.report.resubmitted >= MAX_TRIES - 1


def test_a_configuration_in_flight_beside_the_killer_is_not_charged_with_its_kills(
    recording: Path, tmp_path: Path
) -> None:
    """One worker, two configurations in flight: a kill takes the killer's neighbour too
    (when one is in flight beside it). Submitted again alone, the neighbour is evaluated;
    only the killer is recorded as failed (charged with every kill, the neighbour went
    back beside it and was lost MAX_TRIES times too)."""
    killer = "4,4,1,2"
    recipe = ReplayRecipe(str(recording), crash_key=killer)
    run = run_pool(LocalBackend(recipe, ("0",)), recording, 85, tmp_path / "k.db", strategy="exhaustive")
    assert_complete(run, 85)
    lost = [s for s in run.result.steps if s.evaluation.detail.startswith("lost its worker")]
    assert [s.config for s in lost] == [{"bx": 4, "by": 4, "unroll": 1, "tile": 2}]
    assert run.report.lost == 1 and run.report.resubmitted >= MAX_TRIES - 1


@pytest.mark.slow
def test_cli_directory_on_a_cluster_without_gpus_is_one_line(tmp_path: Path) -> None:
    """`--ray local` on this machine starts a Ray cluster with no GPU: the jobs would
    wait for one forever, so the run stops first, with the reason."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'kxform[distributed]')")
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "lib" / "sgemm_tiled")
    result = run_cli(
        "tune",
        "lib",
        "--ray",
        "local",
        cwd=tmp_path,
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache"), "CUDA_VISIBLE_DEVICES": ""},
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr == "kxform: error: --ray local: the cluster has no GPU\n"
