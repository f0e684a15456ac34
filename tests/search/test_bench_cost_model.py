"""tools/bench_cost_model.py: the cost model read back against GPU sweeps recorded in
docs/data, and the searches replayed on them (the figures docs/search.md quotes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))

import bench_cost_model  # noqa: E402

DATA = ROOT / "docs" / "data" / "coarsen-loads-h200.json"


def _matvec(tmp_path: Path, reverse: bool = False) -> Path:
    """The recorded matvec sweep alone (its times reversed: a planted disagreement)."""
    sweep = next(s for s in bench_cost_model.sweeps(DATA) if s.kernel == "matvec_naive")
    times = [ms for _, ms in sweep.measurements]
    if reverse:  # the fastest configuration takes the slowest time, and so on
        ranks = sorted(range(len(times)), key=times.__getitem__)
        ordered = sorted(times)
        mirrored = [0.0] * len(times)
        for rank, index in enumerate(ranks):
            mirrored[index] = ordered[len(times) - 1 - rank]
        times = mirrored
    case = {
        "kernel": sweep.kernel,
        "case": "matvec",
        "passes": list(sweep.passes),
        "size": sweep.size,
        "measurements": [{"config": label, "ms": ms} for (label, _), ms in zip(sweep.measurements, times)],
    }
    path = tmp_path / ("reversed.json" if reverse else "matvec.json")
    path.write_text(json.dumps({"cases": [case]}))
    return path


def test_the_sweeps_are_found_however_the_file_nests_them() -> None:
    found = bench_cost_model.sweeps(DATA)
    assert {s.kernel for s in found} >= {"jacobi2d_naive", "gemm_naive", "matvec_naive", "syrk_naive", "mm2_kernel1"}
    assert all(s.measurements and s.passes == ("coarsen",) for s in found)


@pytest.mark.slow
def test_the_model_ranks_the_recorded_matvec_sweep_and_the_search_replays_it(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    times = tmp_path / "times"
    args = ["--data", str(_matvec(tmp_path)), "--seeds", "3", "--json", str(out), "--write-times", str(times)]
    assert bench_cost_model.main(args) == 0
    (row,) = json.loads(out.read_text())
    assert row["kendall_tau"] > 0.8 and row["configurations"] == 13 and row["left_out"] == 0
    assert row["reached_1pct_model"] == 1.0 and row["slow_share_model"] <= row["slow_share_without"]
    recording = json.loads(next(times.glob("*.json")).read_text())
    assert recording["kernel"] == "matvec_naive" and len(recording["evaluations"]) == 13
    bench_cost_model.main(["--data", str(_matvec(tmp_path, reverse=True)), "--seeds", "2", "--json", str(out)])
    (planted,) = json.loads(out.read_text())
    assert planted["kendall_tau"] < -0.8  # the same predictions against reversed times
