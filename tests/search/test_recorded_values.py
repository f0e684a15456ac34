"""Recorded values reach the source only as typed, checked and verified configurations:
`kxform tune --write` from a recording and `apply --proposer lock` write a configuration
of the tile pass's typed space that passes its checks and a differential run, and never
copy recorded text into the source (the real console script, nvcc and the CPU runtime)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPORA, logged_remarks, needs_nvcc, run_cli

INJECTED = '16\nstatic int x = system("touch pwned");'


def _recording(folder: Path, values: list[Any], kernel: str = "sgemm_tiled") -> Path:
    """A Kernel Tuner cache of one parameter, TILE, whose fastest record is `values[0]`."""
    cache = {
        str(v): {"TILE": v, "time": 1.0 + i, "compile_time": 10.0, "verification_time": 0, "benchmark_time": 10.0}
        for i, v in enumerate(values)
    }
    data = {
        "device_name": "Test GPU",
        "kernel_name": kernel,
        "tune_params_keys": ["TILE"],
        "tune_params": {"TILE": values},
        "objective": "time",
        "cache": cache,
    }
    path = folder / "recorded.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture()
def sgemm(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm")
    return tmp_path / "sgemm"


def _tune_write(folder: Path, *extra: str):  # type: ignore[no-untyped-def]
    env = {"KXFORM_CACHE_DIR": str(folder / "cache"), "OPENBLAS_NUM_THREADS": "1"}
    return run_cli(
        "tune",
        "sgemm_tiled.cu",
        "--kernel",
        "sgemm_tiled",
        "--objective",
        "replay:recorded.json",
        "--strategy",
        "exhaustive",
        "--write",
        *extra,
        cwd=folder,
        env=env,
        timeout=300,
    )


@needs_nvcc
@pytest.mark.parametrize(
    "values, why",
    [
        ([INJECTED, "16"], "TILE='16\\nstatic int x = system"),
        (["32", "16"], "TILE='32': a str, expected an integer"),
        ([4096, 16], "TILE=4096: not one of {1, 2, 4"),  # the values the tuning space holds
        ([0, 16], "TILE=0: not one of {1, 2, 4"),
        ([999, 16], "TILE=999: not one of {1, 2, 4"),
        ([64, 16], "breaks"),  # a value of the space that breaks its constraints (64 x 64 threads)
    ],
)
def test_recorded_values_outside_the_typed_checked_space_are_refused(sgemm: Path, values: list[Any], why: str) -> None:
    _recording(sgemm, values)
    before = (sgemm / "sgemm_tiled.cu").read_bytes()
    result = _tune_write(sgemm)
    assert result.returncode == 1, result.stderr
    assert "sgemm_tiled.cu: not written:" in result.stderr and why in result.stderr, result.stderr
    assert (sgemm / "sgemm_tiled.cu").read_bytes() == before
    assert not (sgemm / "pwned").exists()


@needs_nvcc
@pytest.mark.slow
def test_a_recorded_configuration_is_written_once_it_verifies(sgemm: Path) -> None:
    _recording(sgemm, [8, 16])
    result = _tune_write(sgemm, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["written"]["written"] == ["tile{TILE=8}"]
    source = (sgemm / "sgemm_tiled.cu").read_text()
    assert "#ifndef TILE\n#define TILE 8\n#endif" in source


@needs_nvcc
@pytest.mark.parametrize(
    "value, why",
    [
        (INJECTED, "expected an integer"),
        (4096, "TILE=4096: not one of 1..1024"),
        (0, "TILE=0: not one of 1..1024"),
        (999, "TILE=999 breaks TILE * TILE <= hw.max_threads_per_block"),
    ],
)
def test_lock_entries_outside_the_typed_checked_space_are_refused(sgemm: Path, value: Any, why: str) -> None:
    record = sgemm / "decisions.json"
    record.write_text(
        json.dumps({"version": 1, "decisions": [{"kernel": "sgemm_tiled", "pass": "tile", "params": {"TILE": value}}]})
    )
    before = (sgemm / "sgemm_tiled.cu").read_bytes()
    done = run_cli(
        "apply",
        "--pass",
        "tile",
        "--proposer",
        "lock",
        "--lock",
        str(record),
        "sgemm_tiled.cu",
        cwd=sgemm,
        env={"KXFORM_CACHE_DIR": str(sgemm / "cache")},
    )
    assert done.returncode == 1 and why in logged_remarks(done, sgemm), done.stderr
    assert (sgemm / "sgemm_tiled.cu").read_bytes() == before


@needs_nvcc
@pytest.mark.slow
def test_of_two_writers_that_read_the_same_file_only_the_first_writes(sgemm: Path) -> None:
    """Two tuning runs judged the same content: the first writes; the second finds the
    file changed and is refused, never re-applying its result to text it did not tune."""
    from kxform.orchestrate.tune_write import write_pipeline
    from kxform.harness.spec import load_spec
    from kxform.runtime.cpu import CpuRuntime
    from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget
    from kxform.search.kernel_space import kernel_space

    path = sgemm / "sgemm_tiled.cu"
    data = path.read_bytes()
    spec = load_spec(str(sgemm / "sgemm_tiled.kxspec.toml")).kernel("sgemm_tiled")
    space = kernel_space(data, "sgemm_tiled", ("tile",), path=str(path), hw="h100")
    first, second = (
        KernelObjective(
            TuneTarget(str(path), data, "sgemm_tiled", spec),
            space,
            CpuRuntime(),
            MeasureOptions(check_sizes=("tiles",)),
        )
        for _ in range(2)
    )
    wrote = write_pipeline(None, first, "tile{TILE=8}")
    assert wrote["written"] == ["tile{TILE=8}"], wrote
    refused = write_pipeline(None, second, "tile{TILE=32}")
    assert refused["written"] == [] and "changed on disk while kxform ran; not written" in refused["refused"]
    assert "#define TILE 8\n" in path.read_text()


@pytest.mark.parametrize(
    ("recorded", "pipeline"),
    [
        ({"tile": True, "tile.TILE": 8}, "tile{TILE=8}"),
        ({"tile.TILE": 8, "tile": True}, "tile{TILE=8}"),
        ({"tile": False, "tile.TILE": 16}, ""),  # the original, as `tune --export` records it
        ({"tile.TILE": 8, "tile": False}, ""),  # the switch decides, whatever the order
        ({"TILE": 8}, "tile{TILE=8}"),  # a bare name: its pass applies
    ],
)
def test_a_recording_of_the_composed_space_keeps_its_pass_switches(
    sgemm: Path, recorded: dict[str, Any], pipeline: str
) -> None:
    from kxform.search.kernel_space import kernel_space
    from kxform.search.recorded_values import recorded_pipeline

    path = sgemm / "sgemm_tiled.cu"
    space = kernel_space(path.read_bytes(), "sgemm_tiled", ("tile",), path=str(path), hw="h100")
    assert recorded_pipeline(space, recorded, "h100") == pipeline


def test_a_pass_switch_of_the_wrong_type_is_refused(sgemm: Path) -> None:
    from kxform.errors import CheckFailed
    from kxform.search.kernel_space import kernel_space
    from kxform.search.recorded_values import recorded_pipeline

    path = sgemm / "sgemm_tiled.cu"
    space = kernel_space(path.read_bytes(), "sgemm_tiled", ("tile",), path=str(path), hw="h100")
    with pytest.raises(CheckFailed, match="tile"):
        recorded_pipeline(space, {"tile": "off; system(1)", "tile.TILE": 8}, "h100")


@pytest.mark.parametrize(
    "family, kernel, recorded, pipeline",
    [
        ("gemm", "gemm_naive", {"factor": 2, "along": "y"}, "coarsen{factor=2,along=y"),
        ("gelu_f32", "gelu_f32_naive", {"width": 4}, "vectorize{width=4"),
    ],
)
def test_integers_kernel_tuner_records_are_the_numeric_options_they_spell(
    family: str, kernel: str, recorded: dict[str, Any], pipeline: str
) -> None:
    """Kernel Tuner stores `width=4`, `factor=2` as numbers: each stands for the enum value
    spelled the same (nothing parsed from text); a number the domain does not spell, a
    string where a number was recorded for an integer, and a boolean are still refused."""
    from kxform.errors import CheckFailed
    from kxform.search.kernel_space import kernel_space
    from kxform.search.recorded_values import recorded_pipeline

    path = CORPORA / "naive" / family / "naive.cu"
    name = pipeline.split("{", 1)[0]
    space = kernel_space(path.read_bytes(), kernel, (name,), path=str(path), hw="h100")
    assert recorded_pipeline(space, recorded, "h100").startswith(pipeline)
    option = next(iter(recorded))
    for bad in (3, True, 4.0):
        with pytest.raises(CheckFailed, match=option):
            recorded_pipeline(space, {**recorded, option: bad}, "h100")
