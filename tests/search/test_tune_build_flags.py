"""`kxform tune` builds every configuration the way the original is built: a header beside
the file, `-I`, the configuration's `include`; a build failure whose cause is the machine
(a header the original needs, not found) stops the run and is never stored as a property
of a configuration (real nvcc, the CPU runtime, the replay path of `--write`)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import CORPORA, needs_nvcc, run_cli

HEADER = "sgemm.cuh"


def _with_header(folder: Path, header_dir: str = ".") -> Path:
    """sgemm_tiled with its CUDA_CHECK macro and a device helper moved into a local header."""
    shutil.copytree(CORPORA / "sgemm_tiled", folder)
    path = folder / "sgemm_tiled.cu"
    text = path.read_text()
    start, end = text.index("#define CUDA_CHECK"), text.index("__global__")
    header = (
        "#pragma once\n"
        + text[start:end]
        + "__device__ __forceinline__ float madd(float acc, float a, float b) { return acc + a * b; }\n"
    )
    (folder / header_dir).mkdir(exist_ok=True)
    (folder / header_dir / HEADER).write_text(header)
    text = text[:start] + f'#include "{HEADER}"\n\n' + text[end:]
    path.write_text(text.replace("acc += As[ty][k] * Bs[k][tx];", "acc = madd(acc, As[ty][k], Bs[k][tx]);"))
    cache = {
        str(v): {"TILE": v, "time": 1.0 + i, "compile_time": 10.0, "verification_time": 0, "benchmark_time": 10.0}
        for i, v in enumerate([8, 16])
    }
    (folder / "recorded.json").write_text(
        json.dumps(
            {
                "device_name": "Test GPU",
                "kernel_name": "sgemm_tiled",
                "tune_params_keys": ["TILE"],
                "tune_params": {"TILE": [8, 16]},
                "objective": "time",
                "cache": cache,
            }
        )
    )
    return path


def _tune_write(folder: Path, *extra: str):  # type: ignore[no-untyped-def]
    env = {"OPENBLAS_NUM_THREADS": "1"}
    return run_cli(
        "tune",
        "sgemm_tiled.cu",
        "--kernel",
        "sgemm_tiled",
        "--objective",
        "replay:recorded.json",
        "--strategy",
        "exhaustive",
        "--db",
        "tuning.sqlite",
        "--write",
        *extra,
        cwd=folder,
        env=env,
        timeout=300,
    )


@needs_nvcc
@pytest.mark.slow
@pytest.mark.parametrize(
    "header_dir, extra, config",
    [
        (".", (), ""),
        ("inc", ("-I", "inc"), ""),
        ("inc", (), '[tool.kxform]\ninclude = ["inc"]\n'),
    ],
)
def test_a_kernel_including_a_local_header_is_tuned_and_written(
    tmp_path: Path, header_dir: str, extra: tuple[str, ...], config: str
) -> None:
    folder = tmp_path / "k"
    path = _with_header(folder, header_dir)
    if config:
        (folder / "pyproject.toml").write_text(config)
    result = _tune_write(folder, *extra)
    assert result.returncode == 0, result.stderr
    assert "#ifndef TILE\n#define TILE 8\n#endif" in path.read_text()


@needs_nvcc
def test_an_original_that_does_not_build_here_stops_the_run_and_stores_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "k"
    path = _with_header(folder, "inc")  # and no -I inc
    before = path.read_bytes()
    result = _tune_write(folder)
    assert result.returncode == 2
    assert "the original 'sgemm_tiled' does not build here" in result.stderr
    assert f"fatal error: {HEADER}: No such file or directory" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and path.read_bytes() == before
    if (folder / "tuning.sqlite").exists():
        with sqlite3.connect(folder / "tuning.sqlite") as db:
            assert db.execute("SELECT count(*) FROM evaluations").fetchone()[0] == 0


@needs_nvcc
@pytest.mark.slow
def test_a_header_lost_during_the_run_is_an_environment_failure_not_a_configurations(tmp_path: Path) -> None:
    from kxform.errors import BuildFailed
    from kxform.harness.spec import load_spec
    from kxform.runtime.cpu import CpuRuntime
    from kxform.search.kernel_objective import KernelObjective, TuneTarget
    from kxform.search.kernel_space import kernel_space

    folder = tmp_path / "k"
    path = _with_header(folder)
    data = path.read_bytes()
    spec = load_spec(str(folder / "sgemm_tiled.kxspec.toml")).kernel("sgemm_tiled")
    space = kernel_space(data, "sgemm_tiled", ("tile",), path=str(path), hw="h100")
    objective = KernelObjective(TuneTarget(str(path), data, "sgemm_tiled", spec), space, CpuRuntime())
    (folder / HEADER).unlink()
    with pytest.raises(BuildFailed, match="the build environment failed while tuning"):
        objective.prepare({"tile": True, "tile.TILE": 4})


@needs_nvcc
@pytest.mark.gpu
def test_on_the_gpu_a_kernel_including_a_local_header_is_tuned_and_written(tmp_path: Path) -> None:
    """The GPU objective builds every configuration with the header's directory, times it
    and writes the best: no configuration fails to build, the identity included."""
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    runtime.close()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    folder = tmp_path / "k"
    path = _with_header(folder)
    env: dict[str, str] = {}
    result = run_cli(
        "tune",
        "sgemm_tiled.cu",
        "--kernel",
        "sgemm_tiled",
        "--pass",
        "tile",
        "--strategy",
        "exhaustive",
        "--size",
        "M=1024,N=1024,K=1024",
        "--launch-budget",
        "0.05",
        "--db",
        "tuning.sqlite",
        "--write",
        "--json",
        cwd=folder,
        env=env,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    summary, _ = json.JSONDecoder().raw_decode(result.stdout[result.stdout.index("{") :])
    statuses = [e["status"] for e in summary["evaluations"]]
    assert len(statuses) >= 2 and "compile_failed" not in statuses, summary["evaluations"]
    assert summary["best"] is not None and summary["best"]["time_ms"] > 0
    assert f'#include "{HEADER}"' in path.read_text() and "#define TILE" in path.read_text()
