"""Launch contracts end to end: rewrites that wrote wrong kernels with exit 0 before, each
refused with its reason now (or written with what makes it right):

* rows over a per-row filter its file launches in place (`(y, y)`) or shifted
  (`(y, y - 1)`): a recurrence no lane split may reorder; refused (ArgumentsAlias). From a
  launcher whose callers the run does not show, rows writes its run-time overlap check;
* launch{X_BLOCK_X=128} where the grid is `(n + 255) >> 8`: the grid does not follow the
  block and covers half the elements past n = 128; refused with the counter-example,
  through `apply` and through `tune --write` from a recording;
* rows and smem-tile over a kernel another file of the run also launches; launch bounds of
  256 threads while the other file launches 1024: refused, naming the other launch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kxform.cli.main import main
from swizzle_helpers import outcomes, rewrite

FIXTURES = Path(__file__).parents[1] / "fixtures" / "contracts"


def _rscan(tmp_path: Path, launch: str) -> Path:
    """The per-row filter with its launch's x argument as `launch`."""
    work = tmp_path / "alias"
    shutil.copytree(FIXTURES / "alias", work, dirs_exist_ok=True)
    path = work / "rscan.cu"
    path.write_text(path.read_text().replace("LAUNCH_X", launch))
    return path


def _reasons(result) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(r for k in result.results for r in k.reasons)


@pytest.mark.parametrize("argument", ["y", "y - 1", "(const float*)y + 0"])
def test_rows_is_refused_where_the_files_launch_passes_one_allocation_twice(tmp_path: Path, argument: str) -> None:
    path = _rscan(tmp_path, argument)
    result = rewrite(path.read_bytes(), "rows{lanes=32,rows=4}", path=str(path))
    assert not result.changed
    keys = {r.key for r in result.results}
    assert keys == {"ArgumentsAlias"}, _reasons(result)
    assert "rscan.cu:16" in _reasons(result) and "one allocation" in _reasons(result)


def test_rows_from_a_launcher_the_run_does_not_call_writes_its_overlap_check(tmp_path: Path) -> None:
    path = _rscan(tmp_path, "x")
    text = path.read_text().replace("void rscan_in_place(float* y,", "void rscan_run(float* y, const float* x,")
    path.write_text(text)
    result = rewrite(text, "rows{lanes=32,rows=4}", path=str(path))
    assert outcomes(result)["rscan"].value == "applied", _reasons(result)
    new = result.new_data.decode()
    assert "rows_alias" in new and "rows_lane < rows_share && j < C" in new
    checks = {c.name: c.detail for r in result.results for c in r.checks}
    assert "checked at run time" in checks["aliasing"]


def test_a_launch_whose_grid_does_not_follow_the_new_block_is_refused_with_the_sizes(tmp_path: Path) -> None:
    path = FIXTURES / "shift" / "scale.cu"
    result = rewrite(path.read_bytes(), "launch{SCALE_BLOCK_X=128}", path=str(path))
    assert not result.changed
    result_of = result.results[0]
    assert result_of.key == "GridNotFollowed"
    assert "(n + 255) >> 8" in result_of.reasons[0] and "n = 129" in result_of.reasons[0]
    larger = rewrite(path.read_bytes(), "launch{SCALE_BLOCK_X=512}", path=str(path))
    assert larger.changed, _reasons(larger)  # 512 per block covers more than 256 did: proven


def _apply(*args: str) -> int:
    return main(["apply", "--verify", "static", "--no-config", *args])


@pytest.mark.parametrize(
    "spec, kernel, words",
    [
        ("rows{lanes=32,rows=4}", "rowmax", "b.cu:9, in another file"),
        ("smem-tile{BM=32,BN=32,BK=8,TM=2,TN=2}", "gemm", "b.cu:10, in another file"),
        ("launch{ROWMAX_BLOCK_X=256,ROWMAX_MIN_BLOCKS=2}", "rowmax", "launched at"),
    ],
)
def test_a_kernel_another_file_of_the_run_launches_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, kernel: str, words: str
) -> None:
    work = tmp_path / "two"
    shutil.copytree(FIXTURES / "two_files", work)
    source = work / ("rows.cu" if kernel == "rowmax" else "gemm.cu")
    before = source.read_bytes()
    log = work / "log.jsonl"
    code = _apply("--pass", spec, "--kernel", kernel, "--log", str(log), str(source), str(work / "b.cu"))
    capsys.readouterr()
    assert source.read_bytes() == before
    assert code == 1
    records = [json.loads(line) for line in log.read_text().splitlines()]
    kernels = [r for r in records if r.get("type") == "kernel" and r.get("kernel") == kernel]
    reasons = " | ".join(" ".join(r.get("reasons", [])) for r in kernels)
    assert words in reasons, reasons
    alone = _apply("--pass", spec, "--kernel", kernel, "--check", str(source))  # the file alone: no other launch
    capsys.readouterr()
    assert alone == 1 and source.read_bytes() == before  # `--check` says it would rewrite


@pytest.mark.slow
def test_tune_write_from_a_recording_is_refused_where_the_grid_does_not_follow(tmp_path: Path) -> None:
    """A recording (what Kernel Tuner stores) whose fastest block is 128 for the `>> 8` grid:
    `tune --write` goes through the same checks as `apply`, and writes nothing."""
    from conftest import run_cli

    for name in ("scale.cu", "scale.kxspec.toml"):
        shutil.copy(FIXTURES / "shift" / name, tmp_path / name)
    times = {64: 2.0, 128: 1.0, 256: 1.5}
    recording = {
        "device_name": "Test GPU A",
        "kernel_name": "scale",
        "problem_size": [4099],
        "tune_params_keys": ["SCALE_BLOCK_X"],
        "tune_params": {"SCALE_BLOCK_X": list(times)},
        "objective": "time",
        "cache": {
            str(b): {
                "SCALE_BLOCK_X": b,
                "time": t,
                "compile_time": 900.0,
                "verification_time": 0,
                "benchmark_time": 1.0,
            }
            for b, t in times.items()
        },
    }
    (tmp_path / "rec.json").write_text(json.dumps(recording))
    before = (tmp_path / "scale.cu").read_bytes()
    done = run_cli(
        "tune",
        "scale.cu",
        "--kernel",
        "scale",
        "--pass",
        "launch",
        "--objective",
        "replay:rec.json",
        "--write",
        cwd=tmp_path,
        env={"KXFORM_CACHE_DIR": str(tmp_path / "cache")},
        timeout=600,
    )
    assert done.returncode == 1 and (tmp_path / "scale.cu").read_bytes() == before
    assert "SCALE_BLOCK_X=128" in done.stdout and "n = 129" in done.stderr, done.stderr
