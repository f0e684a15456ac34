"""The tuning database and loop: resume skips done work, concurrent writers, corrupt files, defaults first."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
from pathlib import Path

import pytest

from kxform.errors import InputError
from kxform.search.db import TuneKey, TuningDB
from kxform.search.objective import Evaluation, Failure, Objective, Prepared
from kxform.search.pipeline import PipelineOptions
from kxform.search.recorded import load_recording
from kxform.search.tuner import TuneOptions, tune
from search_helpers import write_recording

KEY = TuneKey("hash0", "synth_kernel", "Test GPU A", ("bx", "by", "unroll", "tile"))


class CountingObjective(Objective):
    """The replay objective, counting what it is asked to measure."""

    name = "counting"

    def __init__(self, inner: Objective) -> None:
        self.inner = inner
        self.hardware = inner.hardware
        self.measured: list[str] = []

    def prepare(self, config):  # type: ignore[no-untyped-def]
        return self.inner.prepare(config)

    def evaluate(self, prepared: Prepared) -> Evaluation:
        self.measured.append(prepared.code_key)
        return self.inner.evaluate(prepared)


def test_resume_never_repeats_an_evaluation(tmp_path: Path) -> None:
    recording = load_recording(write_recording(tmp_path))
    with TuningDB(tmp_path / "t.sqlite") as db:
        first = CountingObjective(recording.objective)
        done = tune(recording.search, first, TuneOptions(budget=12, seed=1), db=db, key=KEY)
        assert len(first.measured) == 12 and done.stopped == "budget"
        again = CountingObjective(recording.objective)
        resumed = tune(recording.search, again, TuneOptions(budget=20, seed=1, resume=True), db=db, key=KEY)
        assert len(again.measured) == 8  # only the 8 new ones
        assert not set(again.measured) & set(first.measured)
        assert [s.source for s in resumed.steps[:12]] == ["resumed"] * 12
        fresh = CountingObjective(recording.objective)
        rerun = tune(recording.search, fresh, TuneOptions(budget=12, seed=1), db=db, key=KEY)
        assert fresh.measured == []  # the same proposals: all served from the database
        assert rerun.best is not None and rerun.best.evaluation == done.best.evaluation  # type: ignore[union-attr]
        assert len(db.all(KEY)) == 20


def _writer(path: str, worker: int, count: int) -> None:
    with TuningDB(path) as db:
        for i in range(count):
            db.put(KEY, {"bx": worker, "by": i, "unroll": 0, "tile": 1}, Evaluation(1.0 + i, 0.0, None, 0.1))
            db.put(KEY, {"bx": 0, "by": i, "unroll": 0, "tile": 1}, Evaluation(2.0, 0.0, None, 0.1))  # shared rows


def test_two_processes_writing_at_once(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    TuningDB(path).close()
    context = mp.get_context("spawn")
    workers = [context.Process(target=_writer, args=(path, w, 150)) for w in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    with TuningDB(path) as db:
        rows = db.all(KEY)
        assert len(rows) == 3 * 150  # each worker's own rows plus the shared ones once
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_corrupt_and_foreign_files(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(InputError, match="garbage.sqlite: not a usable kxform tuning database"):
        TuningDB(garbage)
    assert garbage.read_bytes() == b"this is not a database at all" * 100  # untouched
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(InputError, match="an SQLite file, but not a kxform tuning database"):
        TuningDB(foreign)
    damaged = tmp_path / "damaged.sqlite"
    with TuningDB(damaged) as db:
        for i in range(400):
            db.put(KEY, {"bx": i, "by": 1, "unroll": 0, "tile": 1}, Evaluation(1.0, 0.0, None, 0.1))
    data = bytearray(damaged.read_bytes())
    data[4096:] = b"\xff" * (len(data) - 4096)  # the header survives, every other page is smashed
    damaged.write_bytes(bytes(data))
    with pytest.raises(InputError, match="damaged.sqlite: (corrupt tuning database|not a usable)"):
        with TuningDB(damaged) as db:
            db.all(KEY)


@pytest.mark.parametrize(
    "column, value, words",
    [
        ("config", "{not json", "malformed row of kernel 'synth_kernel' (configuration '{not json')"),
        ("config", '{"bx": [1]}', "not an object of integers, strings and booleans"),
        ("failure", "melted", "'melted' is not a valid Failure"),
        ("time_ms", "fast", "time_ms is 'fast', not a number"),
    ],
)
def test_a_row_kxform_did_not_write_is_a_one_line_input_error(
    tmp_path: Path, column: str, value: str, words: str
) -> None:
    path = tmp_path / "t.sqlite"
    with TuningDB(path) as db:
        db.put(KEY, {"bx": 4, "by": 4, "unroll": 0, "tile": 2}, Evaluation(1.0))
    with sqlite3.connect(path) as raw:
        raw.execute(f"UPDATE evaluations SET {column} = ?", (value,))
    with TuningDB(path) as db, pytest.raises(InputError, match="t.sqlite: a malformed row") as error:
        db.all(KEY)
    assert words in str(error.value)


def test_related_results_for_warm_start(tmp_path: Path) -> None:
    with TuningDB(tmp_path / "t.sqlite") as db:
        config = {"bx": 4, "by": 4, "unroll": 0, "tile": 2}
        db.put(KEY, config, Evaluation(1.0))
        other_gpu = TuneKey("hash0", "synth_kernel", "Test GPU B", KEY.param_names)
        db.put(other_gpu, config, Evaluation(2.0))
        older_source = TuneKey("hash1", "synth_kernel", "Test GPU A", KEY.param_names)
        db.put(older_source, config, Evaluation.failed(Failure.COMPILE, 3.0, "nvcc"))
        related = db.related(KEY)
        assert sorted(label.split(" (")[0] for label in related) == [
            "synth_kernel@Test GPU A",
            "synth_kernel@Test GPU B",
        ]
        assert all(len(v) == 1 for v in related.values())


def test_pipeline_prepares_ahead_and_keeps_order_of_results(tmp_path: Path) -> None:
    """With several preparing threads the results are the same evaluations, each once."""
    recording = load_recording(write_recording(tmp_path))
    objective = CountingObjective(recording.objective)
    result = tune(
        recording.search, objective, TuneOptions(budget=30, seed=2, pipeline=PipelineOptions(jobs=3, ahead=4))
    )
    assert len(result.steps) == 30 and len(set(objective.measured)) == 30
    sequential = tune(recording.search, recording.objective, TuneOptions(strategy="random", budget=30, seed=2))
    piped = tune(
        recording.search,
        recording.objective,
        TuneOptions(strategy="random", budget=30, seed=2, pipeline=PipelineOptions(jobs=3, ahead=4)),
    )
    assert [s.config for s in piped.steps] == [s.config for s in sequential.steps]


def test_a_run_started_at_the_defaults_measures_them_first_and_once(tmp_path: Path) -> None:
    """`kxform tune` on a kernel starts from the source's current values: they are the
    first evaluation, the strategy goes on from there and never proposes them again."""
    recording = load_recording(write_recording(tmp_path))
    search = recording.search
    row = search.default_row()
    assert row is not None
    defaults = search.config(row)
    started = tune(search, recording.objective, TuneOptions(budget=6, seed=1, start_at_defaults=True))
    assert started.steps[0].config == defaults and len(started.steps) == 6
    assert [s.config for s in started.steps].count(defaults) == 1
    plain = tune(search, recording.objective, TuneOptions(budget=6, seed=1))
    assert plain.steps[0].config != defaults  # without it the strategy's own first proposal comes first
