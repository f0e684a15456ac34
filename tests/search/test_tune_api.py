"""Tuning as a library entry: `kxform.api.tune` runs what `kxform tune` runs and returns a
typed outcome; a request that cannot run is refused before any file is read or written;
the command line only parses and prints (its module reaches no worker, pool or database)."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from kxform import api
from kxform.api import MeasureSettings, OutputSettings, RunKind, SearchSettings, TuneRequest
from kxform.errors import InputError, UsageError
from search_helpers import KERNEL_SOURCE, write_recording

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    write_recording(tmp_path)
    monkeypatch.setenv("KXFORM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _request(workdir: Path, **search: object) -> TuneRequest:
    return TuneRequest(
        str(workdir / "k.cu"),
        "synth_kernel",
        search=SearchSettings(db=str(workdir / "t.sqlite"), **search),  # type: ignore[arg-type]
        measure=MeasureSettings(objective=f"replay:{workdir / 'synth_A.json.gz'}"),
        output=OutputSettings(log=str(workdir / "t.jsonl")),
    )


def test_tune_returns_the_record_the_command_line_prints(workdir: Path) -> None:
    outcome = api.tune(_request(workdir, budget=12))
    assert outcome.kind is RunKind.KERNEL and outcome.failed == 0 and outcome.refused is None
    record = outcome.record
    assert record["evaluated"] == 12 and record["stopped"] == "budget" and record["best"]["time_ms"] > 0
    assert outcome.summaries == [record]
    logged = [json.loads(line) for line in (workdir / "t.jsonl").read_text().splitlines()]
    assert [r["type"] for r in logged] == ["run", "tune", "summary"] and logged[1]["best"] == record["best"]
    steps: list[int] = []
    listening = api.Listeners(on_step=lambda step: steps.append(step.index))
    again = api.tune(_request(workdir, budget=15, resume=True), listeners=listening)
    assert again.record["from_database"] == 12 and steps == list(range(15))


def test_keywords_build_the_same_request(workdir: Path) -> None:
    recording = f"replay:{workdir / 'synth_A.json.gz'}"
    outcome = api.tune(str(workdir / "k.cu"), "synth_kernel", budget=5, objective=recording)
    assert outcome.record["evaluated"] == 5
    with pytest.raises(TypeError, match="settings in the request"):
        api.tune(_request(workdir), budget=5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda: {"search": SearchSettings(budget=0)}, "--budget 0"),
        (lambda: {"passes": ("tile", "nope")}, "unknown pass 'nope'"),
        (lambda: {"kernel": None}, "--kernel K is required"),
        (lambda: {"measure": MeasureSettings(objective="replay")}, "expected gpu, cpu+replay:FILE or replay:FILE"),
    ],
)
def test_a_request_that_cannot_run_is_refused_before_anything_is_written(
    workdir: Path, change: object, message: str
) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        api.tune(replace(_request(workdir, budget=3), **change()))  # type: ignore[operator]
    assert not (workdir / "t.sqlite").exists() and not (workdir / "t.jsonl").exists()


def test_a_settings_value_that_cannot_run_is_refused_where_it_is_made() -> None:
    with pytest.raises(UsageError, match="-j must be at least 1"):
        MeasureSettings(jobs=0)
    with pytest.raises(UsageError, match="--time"):
        SearchSettings(time_s=-1.0)


def test_a_recording_of_another_kernel_is_an_input_error(workdir: Path) -> None:
    (workdir / "other.cu").write_text(KERNEL_SOURCE.replace("synth_kernel", "other_kernel"))
    request = replace(_request(workdir, budget=3), path=str(workdir / "other.cu"), kernel="other_kernel")
    with pytest.raises(UsageError, match="a recording of kernel 'synth_kernel'"):
        api.tune(request)
    with pytest.raises(InputError, match="no kernel 'missing'"):
        api.tune(replace(request, kernel="missing"))


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_command_line_reaches_tuning_through_the_library_only() -> None:
    """The CLI's tune modules import no worker, pool, Ray, database or objective: those are
    the library's (planted: the old CLI imported them, and this would name them)."""
    reached = set().union(*(_imports(p) for p in (ROOT / "kxform" / "cli").glob("tune*.py")))
    forbidden = {
        "kxform.search.db",
        "kxform.search.pool",
        "kxform.search.local_pool",
        "kxform.search.ray_pool",
        "kxform.search.workers",
        "kxform.search.kernel_objective",
        "kxform.search.tuner",
        "kxform.orchestrate.tune",
    }
    assert not reached & forbidden, sorted(reached & forbidden)
    assert "kxform.api" in reached
