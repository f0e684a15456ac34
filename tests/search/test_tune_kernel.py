"""Tuning real code: the tuning space of a corpus kernel under tile and swizzle, and the
objective that rewrites, compiles, verifies and times each configuration.

Here (no GPU) the objective runs on the CPU runtime: it rewrites, compiles and verifies
for real, and a configuration that passes verification ends at timing, which the CPU
runtime cannot do (`runtime_failed`, never a time). A planted bug that only the
differential run can see must be rejected as `verification_failed`, with the evidence,
in the tuning database. The GPU tests (`-m gpu`, tools/gpu-check.sh) time for real.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc, run_cli
from kxform.errors import UsageError
from kxform.harness.spec import find_spec_for, load_spec
from kxform.search.db import TuneKey, TuningDB
from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget, timing_size
from kxform.search.kernel_space import kernel_space, parse_passes
from kxform.search.objective import Failure
from kxform.search.tuner import TuneOptions, tune

SOUND_LOAD = b"Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;"
PLANTED_LOAD = b"Bs[ty][tx] = (t + (ty & 15) < K && col < N) ? B[(t + (ty & 15)) * N + col] : 0.0f;"
"""A latent bug the tile pass cannot see: a mask that is right only while TILE <= 16."""


SOUND_INIT = b"    float acc = 0.0f;\n"
BROKEN_INIT = b"#if TILE == 32\n    float acc = no_such_name;\n#else\n    float acc = 0.0f;\n#endif\n"
"""Code that builds at every tile size but one."""


def _copy(tmp_path: Path, planted: bool, broken: bool = False) -> Path:
    folder = tmp_path / ("planted" if planted else "broken" if broken else "sound")
    shutil.copytree(CORPORA / "sgemm_tiled", folder)
    path = folder / "sgemm_tiled.cu"
    data = path.read_bytes()
    for wanted, sound, bad in ((planted, SOUND_LOAD, PLANTED_LOAD), (broken, SOUND_INIT, BROKEN_INIT)):
        if wanted:
            assert data.count(sound) == 1
            data = data.replace(sound, bad)
    path.write_bytes(data)
    return path


def _objective(path: Path, runtime, passes: tuple[str, ...] = ("tile",)) -> KernelObjective:  # type: ignore[no-untyped-def]
    data = path.read_bytes()
    spec_path = find_spec_for(str(path))
    assert spec_path is not None
    spec = load_spec(spec_path).kernel("sgemm_tiled")
    space = kernel_space(data, "sgemm_tiled", passes, path=str(path), hw="h100")
    target = TuneTarget(str(path), data, "sgemm_tiled", spec, "h100")
    return KernelObjective(target, space, runtime, MeasureOptions(check_sizes=("tiles", "ragged")))


def _evaluate(objective: KernelObjective, values: dict):  # type: ignore[no-untyped-def]
    """Evaluate the configuration that applies the passes of `values` (`{"TILE": 32}`)."""
    prepared = objective.prepare(_at(objective, values))
    return prepared.failure or objective.evaluate(prepared)


def _at(objective: KernelObjective, values: dict) -> dict:  # type: ignore[type-arg]
    """The composed configuration with tile on at `values`, every other pass off."""
    config = objective.space.defaults()
    config.update({"tile": True, **{f"tile.{k}": v for k, v in values.items()}})
    return config


# -- the tuning space -------------------------------------------------------------------


def test_tile_and_swizzle_spaces_compose_with_an_off_choice_per_pass() -> None:
    path = CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"
    data = path.read_bytes()
    tile = kernel_space(data, "sgemm_tiled", ("tile",), path=str(path), hw="h100")
    assert tile.space.names == ("tile", "tile.TILE")
    assert tile.space.param("tile.TILE").values == (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    valid = tile.search(_profile("h100"))
    rows = [valid.config(r) for r in range(len(valid))]
    assert rows[0] == {"tile": False, "tile.TILE": 16}  # off: the code as it is, once
    # 32 x 32 threads at most; never on at 16, the original timed again under another name
    assert [c["tile.TILE"] for c in rows[1:]] == [1, 2, 4, 8, 32]
    assert all(c["tile"] for c in rows[1:]) and valid.default_row() == 0
    # Without --pass: every pass with something to tune, in the order `requires` gives (swizzle after tile).
    both = kernel_space(data, "sgemm_tiled", parse_passes("swizzle,tile"), path=str(path), hw="h100")
    every = kernel_space(data, "sgemm_tiled", None, path=str(path), hw="h100")
    assert both.passes == ("tile", "swizzle")
    assert every.passes == (
        "tile",
        "unroll",
        "swizzle",
    )  # swizzle after every pass that changes the grid  # its k loop's #pragma unroll factor too
    # TILE is the tile pass's; __shared__: rows, split-reduce, vectorize and coarsen leave communicating threads alone
    assert dict(every.not_offered).keys() == {
        "launch",
        "rows",
        "split-reduce",
        "vectorize",
        "coarsen",
        "smem-tile",
        "refactor",
    }
    assert both.space.names == ("tile", "tile.TILE", "swizzle", "swizzle.pattern")
    assert [c.text for c in both.space.constraints][
        0
    ] == "not (tile) or (tile.TILE * tile.TILE <= hw.max_threads_per_block)"
    choices = both.space.param("swizzle.pattern").values
    assert "grouped(along=x,group=16)" in choices and "row" not in choices
    assert "hilbert" not in choices and "morton" not in choices  # no formula twin: not provable, never a point
    assert not any(str(c).startswith("xcd") for c in choices)  # one L2 on an H100
    assert len(both.search(_profile("h100"))) == 6 * (len(choices) + 1)  # tile off or at 5 sizes but its own
    off = both.defaults()
    assert both.spec(off) == "" and both.applied(off) == ()
    tuned = {**off, "tile": True, "tile.TILE": 32, "swizzle": True, "swizzle.pattern": "grouped(along=y,group=4)"}
    assert both.spec(tuned) == "tile{TILE=32},swizzle{pattern=grouped,group=4,along=y}"
    assert both.won(tuned) == {"tile.TILE": 32, "swizzle.pattern": "grouped(along=y,group=4)"}
    assert both.spec({**tuned, "tile": False}) == "swizzle{pattern=grouped,group=4,along=y}"
    chiplets = kernel_space(data, "sgemm_tiled", ("swizzle",), path=str(path), hw="mi300x")
    assert "xcd-grouped(along=y,group=8,xcds=8)" in chiplets.space.param("swizzle.pattern").values


def test_required_constraints_narrow_the_space_and_bad_ones_are_one_line_errors() -> None:
    path = CORPORA / "stencil5" / "stencil5.cu"
    data = path.read_bytes()
    wide = kernel_space(data, "jacobi5", ("tile",), path=str(path), hw="h100")
    narrow = kernel_space(data, "jacobi5", ("tile",), path=str(path), hw="h100", require=("BX >= 32", "BY <= 8"))
    rows = narrow.search(_profile("h100"))
    assert 0 < len(rows) < len(wide.search(_profile("h100")))
    on = [rows.config(r) for r in range(len(rows)) if rows.config(r)["tile"]]
    assert on and all(c["tile.BX"] >= 32 and c["tile.BY"] <= 8 for c in on)
    assert rows.config(rows.default_row())["tile"] is False  # the original stays: the constraint binds tile's values
    with pytest.raises(UsageError, match="'TILE' is not a parameter of 'jacobi5' \\(parameters: tile.BX, tile.BY\\)"):
        kernel_space(data, "jacobi5", ("tile",), path=str(path), hw="h100", require=("TILE > 2",))
    with pytest.raises(UsageError, match="--require 'BX >'"):
        kernel_space(data, "jacobi5", ("tile",), path=str(path), hw="h100", require=("BX >",))
    with pytest.raises(UsageError, match="unknown pass 'nosuch'"):
        parse_passes("tile,nosuch")
    refused = CORPORA / "layernorm" / "layernorm.cu"
    with pytest.raises(UsageError, match="nothing to tune under tile"):
        kernel_space(refused.read_bytes(), "layernorm_forward_kernel", ("tile",), path=str(refused), hw="h100")


def test_timing_size_by_name_or_by_values() -> None:
    spec = load_spec(CORPORA / "sgemm_tiled" / "sgemm_tiled.kxspec.toml").kernel("sgemm_tiled")
    assert timing_size(spec, None).name == "bench" and timing_size(spec, "ragged").values["N"] == 45
    custom = timing_size(spec, "M=512,K=256")
    assert custom.values == {"M": 512, "N": 8192, "K": 256} and custom.bench
    for text, message in (
        ("Q=3", "'Q' is not a size variable"),
        ("M=x", "M must be an integer"),
        ("M=0", "M must be at least 1"),
        ("huge", "no size 'huge'"),
    ):
        with pytest.raises(UsageError, match=message):
            timing_size(spec, text)


# -- the objective on the CPU runtime ----------------------------------------------------


@pytest.mark.slow
@needs_nvcc
def test_a_planted_wrong_configuration_is_rejected_by_verification(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    planted = _objective(_copy(tmp_path, planted=True), cpu)
    wrong = _evaluate(planted, {"TILE": 32})
    assert wrong.failure is Failure.VERIFY and wrong.time_ms is None
    assert wrong.detail.startswith("verify: tiles: C:") and "elements differ" in wrong.detail
    assert "launch from" in wrong.detail and "TILE=32" in wrong.detail  # the policy it was verified under
    # Below 16 the mask is harmless: verification passes, and only timing (not on a CPU) is left.
    fine = _evaluate(planted, {"TILE": 8})
    assert fine.failure is Failure.RUNTIME and fine.detail == "time: the cpu runtime does not time kernels"
    # The same configuration of the sound kernel verifies: the rejection is the plant's.
    sound = _evaluate(_objective(_copy(tmp_path, planted=False), cpu), {"TILE": 32})
    assert sound.failure is Failure.RUNTIME
    phases = planted.phases["tile=True, tile.TILE=32"]
    assert phases.rewrite_s > 0 and phases.compile_s > 0 and phases.verify_s > 0 and phases.time_s == 0
    # A configuration outside the pass's constraints never reaches the compiler.
    invalid = _evaluate(planted, {"TILE": 64})
    assert invalid.failure is Failure.INVALID and "TILE * TILE <= hw.max_threads_per_block" in invalid.detail
    assert planted.phases["tile=True, tile.TILE=64"].compile_s == 0


@pytest.mark.slow
@needs_nvcc
def test_failures_go_to_the_database_with_their_reasons_never_as_times(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    objective = _objective(_copy(tmp_path, planted=True), cpu)
    space = objective.space.search(_profile("h100"))
    key = TuneKey("planted-sgemm", "sgemm_tiled", objective.hardware, space.names)
    with TuningDB(tmp_path / "tuning.sqlite") as db:
        result = tune(space, objective, TuneOptions(strategy="exhaustive", budget=20), db=db, key=key)
        stored = {s.config["tile.TILE"]: s.evaluation for s in db.all(key) if s.config["tile"]}
        original = [s.evaluation for s in db.all(key) if not s.config["tile"]]
    assert result.best is None and result.stopped == "exhausted" and len(result.steps) == 6
    assert set(stored) == {1, 2, 4, 8, 32} and [e.failure for e in original] == [Failure.RUNTIME]
    assert all(e.time_ms is None and e.detail for e in stored.values())
    assert stored[32].failure is Failure.VERIFY and "elements differ" in stored[32].detail
    assert {stored[t].failure for t in (1, 2, 4, 8)} == {Failure.RUNTIME}
    with TuningDB(tmp_path / "tuning.sqlite") as db:  # a second run repeats nothing
        again = tune(space, objective, TuneOptions(strategy="exhaustive", budget=20), db=db, key=key)
    assert {s.source for s in again.steps} == {"database"}


@needs_nvcc
def test_a_configuration_that_does_not_compile_is_a_compile_failure(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    objective = _objective(_copy(tmp_path, planted=False, broken=True), cpu)
    broken = _evaluate(objective, {"TILE": 32})
    assert broken.failure is Failure.COMPILE and broken.time_ms is None
    assert "does not compile" in broken.detail and objective.phases["tile=True, tile.TILE=32"].verify_s == 0
    assert _evaluate(objective, {"TILE": 16}).failure is Failure.RUNTIME  # the others build and verify


def test_tune_without_a_gpu_says_so_in_one_line(tmp_path: Path) -> None:
    from kxform.runtime.gpu import GpuRuntime

    if GpuRuntime().available()[0]:
        pytest.skip("a GPU is available here: tune would run (the GPU tests cover it)")
    path = _copy(tmp_path, planted=False)
    before = path.read_bytes()
    proc = run_cli(
        "tune",
        str(path),
        "--kernel",
        "sgemm_tiled",
        "--pass",
        "tile,swizzle",
        "--write",
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "tuning needs a GPU or a recorded space (--objective replay:FILE); no GPU here" in lines[0]
    )
    assert path.read_bytes() == before and not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pass", "tile,nosuch"), "--pass 'tile,nosuch': unknown pass 'nosuch'"),
        (("--repeat", "0"), "--repeat 0: must be at least 1"),
        (("--launch-budget", "0"), "--launch-budget 0: must be a positive number of seconds"),
    ],
)
def test_bad_gpu_options_are_one_line_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    path = _copy(tmp_path, planted=False)
    proc = run_cli("tune", str(path), "--kernel", "sgemm_tiled", *args, env={"KXFORM_CACHE_DIR": str(tmp_path / "c")})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"kxform: error: {message}")


def _profile(name: str):  # type: ignore[no-untyped-def]
    from kxform.hw import load_profile

    return load_profile(name)


# -- on a GPU ----------------------------------------------------------------------------


def _gpu_or_skip() -> None:
    from kxform.runtime.gpu import GpuRuntime

    ok, why = GpuRuntime().available()
    if not ok:
        pytest.skip(f"needs a CUDA GPU and pycuda: {why}")


@pytest.mark.gpu
def test_tune_on_the_gpu_times_verified_configurations_and_rejects_the_plant(tmp_path: Path) -> None:
    _gpu_or_skip()
    path = _copy(tmp_path, planted=True)
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
    assert summary["best"]["config"]["tile.TILE"] != 32 and summary["original_ms"] > 0
    result = summary["result"]
    if not result["kept_original"]:  # written through apply's checks
        assert summary["written"]["written"] == [result["pipeline"]]
        assert f"#define TILE {result['values']['tile.TILE']}\n" in path.read_text()


@pytest.mark.gpu
def test_tile_and_swizzle_together_on_the_gpu(tmp_path: Path) -> None:
    _gpu_or_skip()
    path = _copy(tmp_path, planted=False)
    proc = run_cli(
        "tune",
        str(path),
        "--kernel",
        "sgemm_tiled",
        "--pass",
        "tile,swizzle",
        "--budget",
        "8",
        "--size",
        "M=512,N=512,K=512",
        "--repeat",
        "10",
        "--json",
        "--db",
        str(tmp_path / "t.sqlite"),
        "--log",
        str(tmp_path / "t.jsonl"),
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")},
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["evaluated"] == 8 and summary["best"] is not None
    assert all(e["status"] == "ok" for e in summary["evaluations"]), summary["evaluations"]
