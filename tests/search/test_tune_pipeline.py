"""`kxform tune` over pass pipelines, end to end through the console script, on the CPU.

`--objective cpu+replay:FILE` runs everything a GPU run does but the stopwatch: each
configuration is rewritten by its passes (with their checks), compiled, and verified
against the original on the CPU runtime; its time comes from FILE (a `tune --json`
summary, as a GPU run writes it). The times written here are synthetic and favour the
configurations a planted bug breaks: only verification stands between them and the
result.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPORA, needs_nvcc, run_cli
from kxform.search.kernel_space import kernel_space

SOUND_LOAD = b"Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;"
PLANTED_LOAD = b"Bs[ty][tx] = (t + (ty & 15) < K && col < N) ? B[(t + (ty & 15)) * N + col] : 0.0f;"
"""Right only while TILE <= 16 (tests/test_tune_kernel.py)."""


def _copy(folder: Path, planted: bool = False) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", folder)
    path = folder / "sgemm_tiled.cu"
    if planted:
        data = path.read_bytes()
        assert data.count(SOUND_LOAD) == 1
        path.write_bytes(data.replace(SOUND_LOAD, PLANTED_LOAD))
    return path


def synthetic_ms(config: dict[str, Any]) -> float:
    """Original 10 ms; larger tiles faster (TILE=32 fastest), any remap 0.5 ms off."""
    ms = 10.0
    if config["tile"]:
        ms -= 2.0 * math.log2(config["tile.TILE"] / 16) if config["tile.TILE"] >= 16 else -1.0
    if config.get("swizzle"):
        ms -= 0.5
    return ms


def write_times(path: Path, source: Path, passes: tuple[str, ...] | None) -> dict[str, Any]:
    """A `tune --json`-shaped summary with a time for every configuration of the space."""
    space = kernel_space(source.read_bytes(), "sgemm_tiled", passes, path=str(source), hw="h100")
    from kxform.hw import load_profile

    rows = space.search(load_profile("h100"))
    evaluations = [
        {"params": rows.config(r), "time_ms": synthetic_ms(rows.config(r)), "spread_ms": 0.05} for r in range(len(rows))
    ]
    summary = {"kernel": "sgemm_tiled", "evaluations": evaluations}
    path.write_text(json.dumps(summary))
    return summary


def _tune(cwd: Path, *args: str):  # type: ignore[no-untyped-def]
    env = {"OPENBLAS_NUM_THREADS": "1"}
    return run_cli("tune", *args, "--db", str(cwd / "t.sqlite"), cwd=cwd, env=env, timeout=600)


@pytest.mark.slow
@needs_nvcc
def test_without_pass_the_pipeline_is_searched_from_the_original_and_written_through_apply(tmp_path: Path) -> None:
    source = _copy(tmp_path / "k")
    write_times(tmp_path / "times.json", source, None)
    before = source.read_bytes()
    proc = _tune(
        tmp_path,
        str(source),
        "--kernel",
        "sgemm_tiled",
        "--objective",
        "cpu+replay:times.json",
        "--budget",
        "4",
        "--json",
        "--write",
        "--log",
        "t.jsonl",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    first = summary["evaluations"][0]
    result = summary["result"]
    considered = result["considered"]
    assert considered[0] == "tile" and considered[-1] == "swizzle" and result["original_ms"] == 10.0
    assert {k: v for k, v in first["params"].items() if "." not in k} == dict.fromkeys(considered, False)
    assert first["params"]["tile.TILE"] == 16 and first["params"]["swizzle.pattern"] == "column"
    assert first["time_ms"] == 10.0 and summary["objective"] == "cpu+replay"
    phases = summary["phases_s"]  # where the run's time went: real rewrites, builds and verification
    assert set(phases) == {"rewrite", "predict", "compile", "verify", "time"}
    assert phases["compile"] > 0 and phases["verify"] > 0 and phases["rewrite"] > 0
    best = summary["best"]
    assert all(e["status"] in ("ok", "cut_off") for e in summary["evaluations"])  # sound code: every one verified
    # each evaluation carries the time the cost model predicted before it was built
    assert any(e.get("predicted_ms") for e in summary["evaluations"]) and "kendall_tau" in summary["cost_model"]
    assert not result["kept_original"] and best["time_ms"] < 10.0 - 0.05
    assert result["time_ms"] == best["time_ms"] and result["speedup"] == pytest.approx(10.0 / best["time_ms"], 1e-3)
    applied = [name for name in considered if best["config"][name]]
    assert result["passes"] == applied and result["spread_ms"] == 0.05
    assert set(result["values"]) == {k for k in best["config"] if k.split(".")[0] in applied and "." in k}
    # Written the way `apply --pass PIPELINE` writes it, every check of every pass run again.
    written = summary["written"]
    assert written["written"] == [result["pipeline"]] and "verify" in written["checks"]
    after = source.read_bytes()
    assert after != before
    if "tile" in applied:
        assert f"#define TILE {result['values']['tile.TILE']}\n".encode() in after
    if "swizzle" in applied:
        assert b"kxform_swizzle_" in after


@pytest.mark.slow
@needs_nvcc
def test_tune_dir_tunes_every_kernel_with_a_spec_and_rejects_the_planted_configuration(tmp_path: Path) -> None:
    folder = tmp_path / "tree"
    source = _copy(folder / "sgemm", planted=True)
    shutil.copytree(CORPORA / "layernorm", folder / "layernorm")  # nothing to tune: its original is kept
    times = write_times(tmp_path / "times.json", source, ("tile",))
    (tmp_path / "all.json").write_text(json.dumps({"kernels": [times]}))
    before = source.read_bytes()
    proc = _tune(
        tmp_path,
        str(folder),
        "--pass",
        "tile",
        "--objective",
        "cpu+replay:all.json",
        "--strategy",
        "exhaustive",
        "--json",
        "--write",
        "--log",
        "dir.jsonl",
    )
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)
    assert run["failed"] == 0
    assert [k["kernel"] for k in run["kernels"]] == ["layernorm_forward_kernel", "sgemm_tiled"]
    naive = run["kernels"][0]["result"]
    assert naive["kept_original"] and "has nothing to tune under tile: " in naive["reason"]
    summary = run["kernels"][1]
    status = {e["params"]["tile.TILE"] if e["params"]["tile"] else None: e["status"] for e in summary["evaluations"]}
    assert status[32] == "verification_failed"  # the fastest recorded time, and wrong
    assert {status[t] for t in (None, 1, 2, 4, 8)} == {"ok"} and 16 not in status  # on at 16 is the original
    result = summary["result"]
    assert result["passes"] == [] and result["kept_original"]  # TILE < 16 is slower in the recording
    assert source.read_bytes() == before and summary["written"] == {"written": [], "kept_original": True}
    # the report's speed-up table has a row per kernel, the one with nothing to tune included
    page = run_cli("report", "dir.jsonl", "-o", "dir.html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "dir.html").read_text(encoding="utf-8")
    table = html[html.index('<table class="tuned">') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 3 and "layernorm_forward_kernel" in table and "sgemm_tiled" in table
    assert "original kept: " + naive["reason"].replace("'", "&#x27;") in table
    assert f'<td class="num">{result["original_ms"]:.4g}</td>' in table
    assert ">verification_failed<" in html  # the planted configuration, in the failure strip of its plot
    table = _tune(
        tmp_path, str(folder), "--pass", "tile", "--objective", "cpu+replay:all.json", "--strategy", "exhaustive"
    )
    assert table.returncode == 0, table.stderr
    header, naive_row, row, *notes = table.stdout.splitlines()
    assert header.split()[:3] == ["FILE", "KERNEL", "PASSES"]
    assert "layernorm_forward_kernel" in naive_row and "(original kept)" in naive_row
    assert "sgemm_tiled" in row and "(original kept)" in row and "1.000x" in row
    assert notes[0].startswith("layernorm_forward_kernel: original kept: ") and len(notes) == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "times.json:1: not JSON"),
        ('{"kernel": "other", "evaluations": []}', "times of kernel 'other', not 'sgemm_tiled'"),
        ('{"evaluations": [{"time_ms": 1.0}]}', "evaluation 1: expected an object with `params`"),
        ('{"evaluations": [{"params": {}, "time_ms": -1}]}', "`time_ms` must be a positive number"),
        ('{"evaluations": [{"params": {}, "time_ms": 1, "spread_ms": "x"}]}', "`spread_ms` must be a number"),
    ],
)
def test_a_bad_times_file_is_one_line_exit_2_and_nothing_written(tmp_path: Path, content: str, message: str) -> None:
    source = _copy(tmp_path / "k")
    (tmp_path / "times.json").write_text(content)
    before = source.read_bytes()
    proc = _tune(tmp_path, str(source), "--kernel", "sgemm_tiled", "--objective", "cpu+replay:times.json", "--write")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert source.read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("k/sgemm_tiled.cu",), "--kernel K is required with a file"),
        (("k", "--kernel", "nosuch"), "no harness spec under it describes a kernel 'nosuch'"),
        (("k", "--objective", "replay:x.json"), "a recorded space is one kernel's"),
        (
            (
                "k/sgemm_tiled.cu",
                "--kernel",
                "sgemm_tiled",
                "--pass",
                "tile",
                "--require",
                "NOPE > 1",
                "--objective",
                "cpu+replay:t.json",
            ),
            "'NOPE' is not a parameter of 'sgemm_tiled' (parameters: tile.TILE)",
        ),
    ],
)
def test_bad_pipeline_arguments_are_one_line_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    _copy(tmp_path / "k")
    (tmp_path / "t.json").write_text('{"evaluations": []}')
    proc = _tune(tmp_path, *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr


@pytest.mark.slow
@needs_nvcc
def test_write_runs_apply_s_checks_again_and_refuses_a_pipeline_that_does_not_verify(tmp_path: Path) -> None:
    """Whatever the tuner concluded, `--write` writes only what `apply` itself verifies:
    handed a pipeline that the planted kernel breaks, it refuses and leaves the file alone."""
    from kxform.orchestrate.tune_write import write_pipeline
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.search.kernel_objective import KernelObjective, TuneTarget
    from kxform.verify.differential import pick_runtime

    source = _copy(tmp_path / "k", planted=True)
    before = source.read_bytes()
    space = kernel_space(before, "sgemm_tiled", ("tile",), path=str(source), hw="h100")
    spec_path = find_spec_for(str(source))
    assert spec_path is not None
    target = TuneTarget(str(source), before, "sgemm_tiled", load_spec(spec_path).kernel("sgemm_tiled"), "h100")
    objective = KernelObjective(target, space, pick_runtime("cpu"))
    refused = write_pipeline(str(spec_path), objective, "tile{TILE=32}")
    assert refused["written"] == [] and "tile: verify" in refused["refused"], refused
    assert "elements differ" in refused["refused"] and source.read_bytes() == before
    written = write_pipeline(str(spec_path), objective, "tile{TILE=8}")  # right while TILE <= 16
    assert written["written"] == ["tile{TILE=8}"] and b"#define TILE 8\n" in source.read_bytes()
