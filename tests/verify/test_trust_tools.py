"""The mutation suite and the fuzzer run, count what they claim, and find what they should."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from kxform.runtime.cpu import CpuRuntime

sys.path.insert(0, str(ROOT / "tools"))

import fuzz  # noqa: E402
import mutants  # noqa: E402


@pytest.mark.slow
def test_every_planted_sgemm_rewrite_is_caught(tmp_path: Path) -> None:
    if not CpuRuntime().available()[0]:
        pytest.skip("no host C++ compiler for the CPU runtime")
    out = tmp_path / "mutants.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutants.py"), "--kernel", "sgemm_tiled", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads(out.read_text())
    kinds = {o["kind"] for o in row["outcomes"]}
    assert {"non-bijective", "xy-swap", "off-by-one", "wrong-grid", "partial-swizzle", "wrong-tile"} <= kinds
    assert row["caught"] == row["planted"] == len(row["outcomes"])
    assert all(o["status"] == "mismatch" for o in row["outcomes"])


def test_plants_really_change_the_mapping() -> None:
    from kxform.frontend.source import read_source

    source = read_source(ROOT / "corpora" / "transpose" / "transpose.cu")
    found, skipped = mutants.plants(source, "transposeNoBankConflicts", "mi300x")
    assert {p.kind for p in found} == {
        "non-bijective",
        "xy-swap",
        "off-by-one",
        "partial-remap",
        "wrong-grid",
        "partial-swizzle",
        "wrong-tile",
    } and not skipped
    assert all(p.text != source.data for p in found)
    (grid,) = [p for p in found if p.kind == "wrong-grid"]
    assert b"gridDim.x + 1, " in grid.text and b"kxform_swizzle_" in grid.text


def test_fuzz_inputs_are_reproducible_and_varied() -> None:
    first = [fuzz.make_input(5, i) for i in range(40)]
    again = [fuzz.make_input(5, i) for i in range(40)]
    assert [f[1] for f in first] == [a[1] for a in again]
    assert len({f[1] for f in first}) == 40
    assert {m for f in first for m in f[2]} >= {"byte_flip", "truncate", "insert_macro", "inline_ptx"}


@pytest.mark.slow
def test_a_short_fuzz_run_counts_and_finds_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state.jsonl"
    cmd = [
        sys.executable,
        str(ROOT / "tools" / "fuzz.py"),
        "--count",
        "60",
        "--seed",
        "11",
        "--jobs",
        "2",
        "--state",
        str(state),
        "--out",
        str(tmp_path / "findings"),
        "--cli-every",
        "30",
        "--verify-share",
        "0",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "inputs tried:              60" in proc.stdout
    assert "crashes:                   0" in proc.stdout and "unsafe rewrites accepted:  0" in proc.stdout
    rows = [json.loads(line) for line in state.read_text().splitlines()]
    assert sorted(r["i"] for r in rows) == list(range(60)) and sum("cli" in r for r in rows) == 2
    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert "60 inputs done, 0 to go" in resumed.stdout


class _TimingCpu(CpuRuntime):
    """The CPU runtime with `time` built on its own runs: the timed path of the benchmarks
    (written for the GPU) runs here on real launches and a real `TimedRun`."""

    def time(self, request, *, warmup: int = 3, repeat: int = 20, keep_outputs: bool = False):  # type: ignore[no-untyped-def]
        from kxform.runtime.base import TimedRun

        return TimedRun(tuple(self.run(request).elapsed_ms or 0.0 for _ in range(2)))


@pytest.mark.slow
def test_bench_verify_times_both_versions_through_timed_runs() -> None:
    import bench_verify  # noqa: E402

    from kxform.frontend.source import validate_bytes

    if not CpuRuntime().available()[0]:
        pytest.skip("no host C++ compiler for the CPU runtime")
    from kxform.api import rewrite
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec

    original = read_source(ROOT / "corpora" / "sgemm_tiled" / "sgemm_tiled.cu")
    spec = load_spec(ROOT / "corpora" / "sgemm_tiled" / "sgemm_tiled.kxspec.toml").kernels["sgemm_tiled"]
    swizzled = rewrite(original.data, "swizzle{pattern=column}", path=original.path).new_data
    case = bench_verify.Case("sgemm_tiled", spec, original, validate_bytes(original.path, swizzled))
    rows, report = bench_verify.measure(_TimingCpu(), case, 1)
    assert report.ok and rows
    timed = [row.timed_ms for row in rows if row.size != "all sizes"]
    assert timed and all(t is not None and t[0] > 0 and t[1] > 0 for t in timed)
