"""The GPU benchmarks of issue 15 (tools/bench_swizzle_select.py, tools/bench_l2_ncu.py,
tools/bench_integrity.py): every part that runs without a GPU, here.

Argument errors and the no-GPU exit go through the scripts themselves; the default
proposer's order comes from the real pass, proposer and locality model on the CPU
runtime; the timing paths run on `CpuTimer`, the CPU runtime timing its own launches by
wall clock (the GPU runtime's `time` contract: samples, copies, the last launch's
outputs), so the scripts' GPU code is exercised up to the device. `@pytest.mark.gpu`
tests run the scripts on a real GPU (tools/gpu-check.sh) and are skipped elsewhere.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import NVCC, needs_nvcc
from kxform.hw import load_profile
from kxform.runtime.base import LaunchRequest, TimedRun
from kxform.runtime.cpu import CpuOptions, CpuRuntime
from kxform.runtime.gpu import DeviceInfo
from kxform.verify.measure import Timing

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))

from kxform.profile import ncu_csv  # noqa: E402
from kxform.bench import gpu as common  # noqa: E402
from kxform.bench import swizzle_selection as selection  # noqa: E402
from kxform.bench import l2_ncu_report  # noqa: E402

select = importlib.import_module("bench_swizzle_select")
l2_ncu = importlib.import_module("bench_l2_ncu")
integrity = importlib.import_module("bench_integrity")

SCRIPTS = ("bench_swizzle_select.py", "bench_l2_ncu.py", "bench_integrity.py")


def _gpu_here() -> bool:
    from kxform.runtime.gpu import GpuRuntime

    return GpuRuntime().available()[0]


def _script(name: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TOOLS / name), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PATH": os.environ.get("PATH", "")},
        cwd=ROOT,
    )


class CpuTimer(CpuRuntime):
    """The CPU runtime timing its own launches (wall clock of the emulation): stands in for
    the GPU runtime's `time` so the benchmarks' timing paths run without a device."""

    def __init__(self, options: CpuOptions | None = None, corrupt: bool = False) -> None:
        super().__init__(options)
        self.corrupt = corrupt

    def time(
        self,
        request: LaunchRequest,
        *,
        warmup: int = 3,
        repeat: int = 20,
        flush_l2: bool = False,
        keep_outputs: bool = False,
        persisting_l2_limit: int = 0,
    ) -> TimedRun:
        samples, outputs = [], {}
        for _ in range(repeat):
            result = self.run(request)
            samples.append(float(result.elapsed_ms or 0.0) + 1e-3)
            outputs = result.outputs
        if self.corrupt:  # a timing loop whose last launch left its output unwritten
            outputs = {k: np.full_like(v, np.nan) if v.dtype.kind == "f" else v for k, v in outputs.items()}
        return TimedRun(tuple(samples), 1, persisting_l2_limit, outputs if keep_outputs else {})

    def compile(self, request: LaunchRequest) -> None:
        """The GPU runtime builds ahead of the launches; the CPU runtime builds when it runs."""

    def device_info(self) -> DeviceInfo:
        return DeviceInfo("CPU timer", (9, 0), 132, 50 << 20, 232448, 80 << 30)


@pytest.fixture(scope="module")
def timer(tmp_path_factory: pytest.TempPathFactory) -> CpuTimer:
    runtime = CpuTimer(CpuOptions(cache_dir=tmp_path_factory.getbasetemp() / "kxcpu-cache", workers=2))
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"CPU runtime unavailable: {why}")
    return runtime


# ------------------------------------------------------------------ command line


@pytest.mark.slow
@pytest.mark.skipif(_gpu_here(), reason="a GPU is present: the scripts would run instead of refusing")
@pytest.mark.parametrize("script", SCRIPTS)
def test_without_a_gpu_each_script_exits_2_with_one_line(script: str, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = _script(script, "--quick", "--out", str(out), timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and ("no GPU" in lines[0] or "no ncu" in lines[0]), proc.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
@pytest.mark.parametrize(
    "args, message",
    [
        (("--kernels", "nope"), "unknown kernel 'nope'"),
        (("--repeat", "0"), "--repeat"),
        (("--out", "."), "is a directory"),
    ],
)
def test_bad_arguments_exit_2_and_touch_nothing(
    script: str, args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    if script == "bench_integrity.py" and args[0] == "--kernels":
        args = ("--kernel", "nope")
    if script == "bench_l2_ncu.py" and args[0] == "--repeat":
        args, message = ("--timeout-s", "0"), "--timeout-s"
    proc = _script(script, "--dry-run", *args, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stdout == ""


@pytest.mark.slow
def test_unknown_pattern_is_a_usage_error() -> None:
    proc = _script("bench_swizzle_select.py", "--dry-run", "--patterns", "spiral", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "bench_swizzle_select: error: unknown pattern 'spiral' (patterns: column, grouped, "
        "diagonal, hilbert, morton, xcd, xcd-grouped)"
    )


def test_corpus_2d_lists_the_2d_kernels_first_kernels_first() -> None:
    names = [k.name for k in common.corpus_2d()]
    assert names[:4] == list(common.FIRST_KERNELS)
    assert {"fdtd2d_ey", "gemm_bf16_wmma", "templated_matmul_f64"} <= set(names)
    assert not {"chained_scan", "batched_scores_3d", "hip_sgemm", "grid_sync_jacobi"} & set(names)


def test_sweep_has_one_version_per_distinct_order() -> None:
    hw = load_profile("h100-sxm")
    configs = common.sweep_configs(hw)
    grid = (256, 256, 1)
    keys = {c.label(): common.order_key(c, grid) for c in configs}
    assert keys["xcd(xcds=1)"] == common.order_key(None, grid)  # one XCD: row-major
    assert keys["xcd-grouped(along=y,group=8,xcds=1)"] == keys["grouped(along=y,group=8)"]
    assert len(set(keys.values()) - {common.order_key(None, grid)}) == 7


# -------------------------------------------------------------- judging the default


def _t(median: float, spread: float = 0.0) -> Timing:
    return Timing(median, spread, 10)


def test_first_proposal_slower_beyond_the_spreads_is_a_regression() -> None:
    timings = {"row": _t(1.00, 0.01), "grouped": _t(1.20, 0.01), "column": _t(0.95, 0.01)}
    verdict = selection.judge_default(["grouped", "column"], [], timings, "row")
    assert verdict.regression and verdict.verdict == "regression"
    assert verdict.best == "column" and not verdict.best_is_original
    assert verdict.evaluations_to_best == 2


def test_leave_alone_is_correct_only_when_nothing_beats_the_original() -> None:
    close = {"row": _t(1.00, 0.005), "column": _t(0.985, 0.001)}  # 1.5% faster: within the 2% tolerance
    judged = selection.judge_default([], ["column"], close, "row")
    assert judged.verdict == "leave alone (correct)" and judged.evaluations_to_best == 0
    assert not judged.regression
    gain = {"row": _t(1.00, 0.005), "column": _t(0.90, 0.005), "hilbert": _t(1.3)}
    missed = selection.judge_default([], ["hilbert", "column"], gain, "row")
    assert missed.verdict == "leave alone (misses a gain)" and missed.evaluations_to_best is None
    assert missed.fallback_to_best == 2


def test_unmeasured_versions_count_as_evaluations_that_reach_nothing() -> None:
    timings = {"row": _t(1.0, 0.01), "column": _t(0.80, 0.01)}
    judged = selection.judge_default(["broken", "column"], [], timings, "row")
    assert judged.verdict == "not measured" and judged.evaluations_to_best == 2
    assert selection.judge_default(["broken"], [], timings, "row").evaluations_to_best is None
    with pytest.raises(ValueError):
        selection.judge_default([], [], {"column": _t(1.0)}, "row")


def test_faster_first_proposal_and_spread_tolerance() -> None:
    timings = {"row": _t(1.00, 0.02), "grouped": _t(0.90, 0.01), "morton": _t(0.91, 0.02)}
    judged = selection.judge_default(["morton", "grouped"], [], timings, "row")
    assert judged.verdict == "faster" and judged.evaluations_to_best == 1  # within the spreads of the best
    noisy = selection.judge_default(["morton"], [], {"row": _t(1.0, 0.05), "morton": _t(1.04, 0.05)}, "row")
    assert noisy.verdict == "no difference" and not noisy.regression


@pytest.mark.slow
def test_default_order_comes_from_the_pass_and_the_model() -> None:
    hw = load_profile("h100-sxm")
    transpose = common.corpus_2d(("transpose",))[0]
    order = selection.default_order(transpose.source.path, transpose.function, hw)
    assert order.modelled and order.proposals == ()  # the model leaves the transpose alone
    assert "predicted by the model" in order.first_rationale
    assert {c.pattern.name for c in order.fallback} >= {"column", "grouped"}
    assert "hilbert" not in {c.pattern.name for c in order.fallback}  # unprovable: never proposed
    gemm = common.corpus_2d(("templated_matmul_f32",))[0]
    gemm_order = selection.default_order(gemm.source.path, gemm.function, hw)
    assert gemm_order.modelled and gemm_order.proposals[0].label() == "grouped(along=y,group=8)"
    assert len(gemm_order.proposals) > 1  # the other candidates follow, ranked


# ----------------------------------------------------------------- swizzle selection


@pytest.mark.slow
def test_swizzle_select_dry_run_verifies_on_the_cpu_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "select.json"
    proc = _script(
        "bench_swizzle_select.py", "--dry-run", "--kernels", "transpose", "--patterns", "column,xcd", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    kernel = data["kernels"][0]
    assert kernel["kernel"] == "transpose" and kernel["default_order"] == []
    versions = {v["order"]: v for v in kernel["versions"]}
    assert set(versions) == {"row (original)", "column", "xcd(xcds=8)"}
    assert all(v["status"] == "ok" for v in versions.values())
    assert versions["row (original)"]["aliases"] == ["xcd(xcds=1)"]
    assert "nothing timed" in proc.stdout


def test_swizzle_select_timing_path(timer: CpuTimer) -> None:
    kernel = common.corpus_2d(("transpose",))[0]
    hw = load_profile("h100-sxm")
    result = select.run_kernel(kernel, hw, timer, ("column",), 4, timed=True, jobs=1, size_name="tiles")
    versions = {v["order"]: v for v in result["versions"]}
    assert versions["column"]["status"] == "ok" and versions["column"]["samples"] == 4
    assert len(versions["row (original)"]["original_runs_ms"]) == 2
    assert result["verdict"] in ("leave alone (correct)", "leave alone (misses a gain)")
    assert result["evaluations_to_best"] in (0, None)
    summary = select.summary([result])
    assert summary["judged"] == 1 and summary["line"].startswith("regressions of the default: 0 / 1 kernels")
    json.dumps(result)


def test_swizzle_select_reports_a_timing_loop_that_leaves_outputs_unwritten(timer: CpuTimer) -> None:
    bad = CpuTimer(timer.options, corrupt=True)
    kernel = common.corpus_2d(("transpose",))[0]
    result = select.run_kernel(
        kernel, load_profile("h100-sxm"), bad, ("column",), 4, timed=True, jobs=1, size_name="tiles"
    )
    statuses = {v["order"]: v["status"] for v in result["versions"]}
    assert statuses["row (original)"].startswith("not measured:")
    assert "differs from a single launch" in statuses["row (original)"]
    assert result["verdict"] == "original not measured"


# ------------------------------------------------------------------------- ncu


SAMPLE = ROOT / "tests" / "fixtures" / "ncu" / "two_orders.csv"
"""Written in the layout of ncu's `--csv` output (header, quoting, thousands separators,
scaled units and n/a as ncu prints them); this machine has no GPU to record one on."""


def test_ncu_csv_is_read_per_launch_with_units() -> None:
    parsed = ncu_csv.parse_ncu_csv(SAMPLE.read_text())
    assert [launch.id for launch in parsed.launches] == ["0", "1"]
    first, second = parsed.launches
    assert first.kernel == "kxform_entry_jacobi5"
    assert first.metrics == {
        "dram__bytes_read.sum": 268959744.0,
        "dram__bytes_write.sum": 268435456.0,
        "lts__t_sector_hit_rate.pct": 60.12,
    }
    assert second.metrics["dram__bytes_read.sum"] == pytest.approx(270.53e6)
    assert second.metrics["dram__bytes_write.sum"] == pytest.approx(0.27e9)
    assert second.metrics["lts__t_sector_hit_rate.pct"] is None
    assert parsed.errors == ()


def test_ncu_errors_and_missing_table() -> None:
    text = (
        "==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to "
        "access NVIDIA GPU Performance Counters on the target device 0.\n"
    )
    parsed = ncu_csv.parse_ncu_csv(text)
    assert parsed.launches == () and parsed.errors[0].startswith("ERR_NVGPUCTRPERM")
    assert ncu_csv.metric_value("1,234.5", "byte") == 1234.5
    assert ncu_csv.metric_value("2", "KiB") == 2048.0
    assert ncu_csv.metric_value("", "byte") is None and ncu_csv.metric_value("x", "%") is None


def test_measurements_attach_to_orders_in_launch_order() -> None:
    parsed = ncu_csv.parse_ncu_csv(SAMPLE.read_text())
    orders = [
        {"order": "row", "same_as": None},
        {"order": "column", "same_as": None},
        {"order": "xcd(xcds=1)", "same_as": "row"},
    ]
    l2_ncu.attach(orders, ["row", "column"], parsed)
    assert orders[0]["measured_l2_hit_rate"] == pytest.approx(0.6012)
    assert orders[2]["measured_dram_read_bytes"] == orders[0]["measured_dram_read_bytes"] == 268959744.0
    assert orders[1]["measured_l2_hit_rate"] is None
    with pytest.raises(ValueError, match="2 launches for 3 orders"):
        l2_ncu.attach(orders, ["row", "column", "grouped"], parsed)


def test_spearman_with_ties_and_degenerate_inputs() -> None:
    assert l2_ncu_report.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert l2_ncu_report.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert l2_ncu_report.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert l2_ncu_report.spearman([1, 1, 1], [1, 2, 3]) is None and l2_ncu_report.spearman([1, 2], [2, 1]) is None


def test_correlations_skip_duplicate_orders() -> None:
    orders = []
    for i, (pred, meas) in enumerate([(1, 5), (2, 6), (3, 9), (3, 9)]):
        orders.append(
            {
                "order": f"o{i}",
                "same_as": "o2" if i == 3 else None,
                "predicted_l2_hit_rate": pred,
                "measured_l2_hit_rate": meas,
                "predicted_dram_read_bytes": pred,
                "measured_dram_read_bytes": 10 - meas,
                "predicted_dram_write_bytes": 1,
                "measured_dram_write_bytes": 1,
            }
        )
    c = l2_ncu_report.correlations([{"kernel": "k", "orders": orders}])
    assert c["all"]["l2_hit_rate"] == {"pairs": 3, "spearman": pytest.approx(1.0)}
    assert c["per_kernel"]["k"]["dram_read_bytes"]["spearman"] == pytest.approx(-1.0)
    assert c["all"]["dram_write_bytes"]["spearman"] is None


@pytest.mark.slow
@needs_nvcc
def test_l2_ncu_dry_run_builds_the_command_and_the_child_launches_every_order(tmp_path: Path) -> None:
    kernel = common.corpus_2d(("transpose",))[0]
    hw = load_profile("h100-sxm")
    result = l2_ncu.run_kernel(kernel, hw, None, "/opt/ncu", tmp_path, 60.0, dry_run=True, size_name="tiles")
    assert result["status"] == "ok"
    command = result["command"]
    assert command.startswith("/opt/ncu --clock-control none ")
    assert "--metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum --csv" in command
    assert "--kernel-name-base mangled --kernel-name regex:^(kxform_entry_transposeNoBankConflicts)$" in command
    distinct = [o for o in result["orders"] if not o["same_as"]]
    assert f"--launch-count {len(distinct)} " in command and len(distinct) >= 2  # 2x2 grid: few distinct orders
    job = pickle.loads((tmp_path / "transpose.job").read_bytes())
    launched: list[str] = []

    class Recording(CpuRuntime):
        def run(self, request: LaunchRequest) -> Any:
            launched.append(request.label)
            return super().run(request)

    assert l2_ncu.launch_all(job, Recording(CpuOptions(workers=2))) == 0
    assert [label.split("] ")[1] for label in launched] == [o["order"] for o in distinct]


# ------------------------------------------------------------------------ integrity


@pytest.mark.slow
@needs_nvcc
def test_integrity_dry_run_checks_inputs_builds_the_cheats(tmp_path: Path) -> None:
    out = tmp_path / "integrity.json"
    proc = _script("bench_integrity.py", "--dry-run", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    checks = {c["name"]: c["ok"] for part in ("corpus", "cheats") for c in data[part]["checks"]}
    assert checks["input 'in' non-zero"] and checks["input 'in' re-randomised"]
    assert checks["twice_once builds for sm_90"] and checks["twice_persisting builds for sm_90"]
    assert checks["cheats caught by the timer"] is None  # not run: never reported as held
    assert data["summary"]["not_run"] and "not run here: 2" in proc.stdout


def test_integrity_timing_path(timer: CpuTimer) -> None:
    kernel = common.corpus_2d(("stencil5",))[0]
    part = integrity.corpus_part(kernel, "square", timer, 4, dry_run=False)
    checks = {c["name"]: c for c in part["checks"]}
    assert checks["timed with the carveout capped at 0 and the last launch's outputs re-checked"]["ok"]
    assert checks["a launch cannot read the previous launch's inputs from L2"]["ok"] is False  # one copy, tiny data
    assert "error" in part["uncapped"]  # no GPU runtime for the uncapped timing here
    bad = integrity.corpus_part(kernel, "square", CpuTimer(timer.options, corrupt=True), 4, dry_run=False)
    failed = {c["name"]: c for c in bad["checks"]}[
        "timed with the carveout capped at 0 and the last launch's outputs re-checked"
    ]
    assert failed["ok"] is False and "differs from a single launch" in failed["detail"]


# ------------------------------------------------------------------------ on a GPU


def _gpu_or_skip() -> None:
    if NVCC is None:
        pytest.skip("nvcc not found")
    from kxform.runtime.gpu import GpuRuntime

    ok, why = GpuRuntime().available()
    if not ok:
        pytest.skip(why)


@pytest.mark.gpu
def test_gpu_swizzle_select_on_one_kernel(tmp_path: Path) -> None:
    _gpu_or_skip()
    out = tmp_path / "select.json"
    proc = _script(
        "bench_swizzle_select.py",
        "--kernels",
        "transpose",
        "--patterns",
        "column,grouped",
        "--repeat",
        "5",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kernel = json.loads(out.read_text())["kernels"][0]
    assert all("median_ms" in v for v in kernel["versions"]) and "evaluations_to_best" in kernel


@pytest.mark.gpu
def test_gpu_integrity_catches_the_cheats(tmp_path: Path) -> None:
    _gpu_or_skip()
    out = tmp_path / "integrity.json"
    proc = _script("bench_integrity.py", "--quick", "--size", "square", "--cheat-n", str(1 << 20), "--out", str(out))
    data = json.loads(out.read_text())
    checks = {c["name"]: c["ok"] for c in data["cheats"]["checks"]}
    assert checks["kernel that skips work on later launches is caught"], proc.stdout
    assert checks["honest kernel times and re-checks"], proc.stdout


@pytest.mark.gpu
def test_gpu_l2_ncu_on_one_kernel(tmp_path: Path) -> None:
    _gpu_or_skip()
    if l2_ncu.find_ncu(None) is None:
        pytest.skip("ncu not found")
    out = tmp_path / "ncu.json"
    proc = _script("bench_l2_ncu.py", "--kernels", "transpose", "--out", str(out))
    kernel = json.loads(out.read_text())["kernels"][0]
    if "ncu failed" in kernel["status"]:
        pytest.skip(f"ncu cannot profile here: {kernel['status']}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert all(o.get("measured_dram_read_bytes") for o in kernel["orders"])
