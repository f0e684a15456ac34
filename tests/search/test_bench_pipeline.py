"""tools/bench_pipeline.py: the dry run on two families (CPU verification, the spaces, the
nvcc builds), its refusals, how kxform's column is taken from `kxform tune`, and the GPU
run on one kernel (marked gpu: run with tools/gpu-check.sh)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT, needs_nvcc
from kxform.bench.naive_pairs import Version, check, load_pairs, verify

TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))

import bench_pipeline  # noqa: E402

SCRIPT = TOOLS / "bench_pipeline.py"


def _gpu() -> bool:
    from kxform.runtime.gpu import GpuRuntime

    return GpuRuntime().available()[0]


def run_tool(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@needs_nvcc
def test_dry_run_on_two_families(tmp_path: Path) -> None:
    out = tmp_path / "dry.json"
    done = run_tool("--dry-run", "--kernels", "gemm,residual_add", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["dry_run"] is True and data["geomean"]["kernels"] == 0
    rows = {r["name"]: r for r in data["kernels"]}
    assert list(rows) == ["residual_add", "gemm"]  # the manifest's order
    for row in rows.values():
        assert {v["status"] for v in row["verify"].values()} == {"verified"}
        assert row["builds"]["naive"]["ok"] and row["builds"]["expert"]["ok"]
        assert row["builds"]["expert"]["arch"] == "sm_90"
        assert "original_ms" not in row  # nothing timed without a GPU
    # the 2-D GEMM loop nest: block sizes, outputs per thread, shared-memory tiles, the k
    # loop's unroll factor and block orders (smem-tile and launch both set the block: the
    # composed space never applies both); the 1-D add: block sizes, vector widths (bf16: 2,
    # 4, 8) and outputs per thread
    gemm = rows["gemm"]["spaces"]
    assert set(gemm["offered"]) == {"launch", "coarsen", "smem-tile", "swizzle", "unroll"}
    assert gemm["swizzle"]["configs"] > 1 and gemm["smem-tile"]["configs"] > 1
    assert set(rows["residual_add"]["spaces"]["offered"]) == {"launch", "vectorize", "coarsen"}
    assert rows["residual_add"]["spaces"]["vectorize"]["configs"] == 4
    assert "NoTileSize" in rows["gemm"]["spaces"]["tile"]["refused"]
    assert "NotElementwise" in rows["gemm"]["spaces"]["vectorize"]["refused"]
    for row in rows.values():  # the tuner's own CPU checker confirmed one rewritten point of each offered space
        assert row["checker"]["status"] == "verified", row["checker"]
    assert "| gemm | verified / verified |" in done.stdout
    assert "2 of 2 pairs verified on both sides" in done.stdout


@pytest.mark.slow
def test_a_broken_expert_fails_its_verification(cpu) -> None:  # type: ignore[no-untyped-def]
    """The bench's verification rejects a planted bug (an expert residual add that drops
    the scalar tail), so such a pair is never timed as a yardstick."""
    pair = load_pairs(("residual_add",))[0]
    text = pair.expert.source.data.decode().replace("for (int j = i; j < N; j++)", "for (int j = i; j < N - 1; j++)")
    from kxform.frontend.source import validate_bytes

    broken = Version(validate_bytes(pair.expert.source.path, text.encode()), pair.expert.spec, pair.expert.spec_path)
    result = verify(broken, cpu)
    assert result["status"] == "mismatch", result
    assert verify(pair.expert, cpu)["status"] == "verified"


def _residual_add(old: str = "", new: str = "") -> Version:
    from kxform.frontend.source import validate_bytes

    naive = load_pairs(("residual_add",))[0].naive
    text = naive.source.data.decode()
    assert old in text
    return Version(validate_bytes(naive.source.path, text.replace(old, new, 1).encode()), naive.spec, naive.spec_path)


@pytest.mark.slow
@needs_nvcc
def test_the_tuners_checker_confirms_a_rewritten_point() -> None:
    """The dry run's checker is `kxform tune --write`'s (kxform.search.checker): the first
    rewritten point of the offered space is rewritten, built and verified by it."""
    result = check(_residual_add(), "h100", ("launch", "vectorize", "coarsen"))
    assert result["status"] == "verified", result
    assert result["pipeline"] and any(v is True for v in result["config"].values())  # a pass is on: a rewrite


def test_the_tuners_checker_refuses_a_kernel_its_spec_no_longer_describes() -> None:
    """A planted mismatch (the kernel's last argument no longer the spec's int): the checker
    cannot be built, so the row says error, never verified."""
    broken = _residual_add("const __nv_bfloat16* b, int N)\n{", "const __nv_bfloat16* b, float N)\n{")
    result = check(broken, "h100", ("launch",))
    assert result["status"] == "error" and "N" in result["detail"], result
    assert check(broken, "h100", ()) == {"status": "nothing offered"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--kernels", "nosuch"), "unknown kernel 'nosuch'"),
        (("--budget", "0"), "--budget and -j must be at least 1"),
        (("--tune-timeout", "nan"), "--tune-timeout must be a positive number"),
        (("--passes", "tile,nosuch"), "--passes 'tile,nosuch': expected offered, all or passes among"),
        (("--also", "smem-tile,nosuch"), "--also 'smem-tile,nosuch': expected passes among"),
        (("--also", "smem-tile,swizzle=defaults"), "=defaults takes one pass"),
        (("--also", "smem-tile=best"), "--also 'smem-tile=best': expected passes among"),
    ],
)
def test_bad_arguments_are_one_line_and_exit_2(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    out = tmp_path / "x.json"
    done = run_tool("--dry-run", *args, "--out", str(out), timeout=120)
    assert done.returncode == 2
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow
def test_without_a_gpu_the_run_says_so_and_exits_2() -> None:
    if _gpu():
        pytest.skip("a GPU is available here: the refusal cannot be observed")
    done = run_tool("--kernels", "gemm", timeout=120)
    assert done.returncode == 2 and "no GPU" in done.stderr


@pytest.mark.slow
def test_tune_failure_keeps_the_original() -> None:
    """kxform's column comes from the real `kxform tune`; where it cannot run (here: no GPU)
    the row says why and counts the original (speed-up 1), never a guess."""
    if _gpu():
        pytest.skip("a GPU is available here: tune would run")
    pair = load_pairs(("gemm",))[0]
    args = SimpleNamespace(passes="offered", budget=2, jobs=1, launch_budget=0.1, tune_timeout=120.0)
    column = bench_pipeline.tune_column(pair, args, "h100", ["swizzle"])
    assert column["status"] == "failed" and column["speedup"] == 1.0
    assert "GPU" in column["detail"]
    assert bench_pipeline.tune_column(pair, args, "h100", []) == {
        "status": "nothing offered",
        "speedup": 1.0,
        "passes": [],
    }


def test_tune_command_passes_the_offered_passes_or_none() -> None:
    pair = load_pairs(("gemm",))[0]
    args = SimpleNamespace(passes="offered", budget=40, jobs=4, launch_budget=0.5)
    command = bench_pipeline.tune_command(pair, args, "h100", bench_pipeline.tune_passes(args, ["swizzle"]), Path("/s"))
    assert command[command.index("--pass") + 1] == "swizzle"
    assert command[command.index("--budget") + 1] == "40" and "--json" in command
    searched = SimpleNamespace(passes="all", budget=40, jobs=4, launch_budget=0.5)
    assert "--pass" not in bench_pipeline.tune_command(
        pair, searched, "h100", bench_pipeline.tune_passes(searched, ["swizzle"]), Path("/s")
    )


def test_also_at_the_defaults_leaves_one_configuration_the_pass_on_at_its_tuning_defaults() -> None:
    """`--also smem-tile=defaults` times the pass's known-good shape alone, through the same
    `kxform tune` (rewrite, checks, GPU verification, timer): its requirements leave exactly
    that configuration of the pass's tuning space."""
    from kxform.hw import load_profile
    from kxform.search.kernel_space import kernel_space

    pair = load_pairs(("gemm",))[0]
    extra = bench_pipeline.pinned_defaults(pair, "smem-tile", "h200")
    assert extra[:2] == ["--strategy", "exhaustive"]
    requires = tuple(extra[i + 1] for i, a in enumerate(extra) if a == "--require")
    naive = pair.naive
    space = kernel_space(
        naive.source.data, naive.kernel, ("smem-tile",), path=naive.source.path, hw="h200", require=requires
    )
    valid = space.search(load_profile("h200"))
    assert [space.spec(valid.config(r)) for r in range(len(valid))] == [
        "smem-tile{BM=128,BN=128,BK=8,TM=8,TN=8,WM=32,WN=64,STAGES=2,PAD=4,VEC=4}"
    ]
    args = SimpleNamespace(passes="all", budget=40, jobs=4, launch_budget=0.5)
    command = bench_pipeline.tune_command(pair, args, "h200", ["smem-tile"], Path("/s"), extra)
    assert command[command.index("--pass") + 1] == "smem-tile" and command[-len(extra) :] == extra


def test_an_also_column_is_measured_against_the_same_yardstick(capsys: pytest.CaptureFixture[str]) -> None:
    from kxform.bench.pipeline_table import _also

    gemm_pair = load_pairs(("gemm",))[0]
    data = {"copy": None, "gemm": [{"shape": [1, 4096, 4096, 4096], "ms": 3.0}]}
    column = {"status": "tuned", "passes": ["smem-tile"], "evaluated": 1, "failed": 0, "kept": "tuned",
              "best_config": {"smem_tile": True}, "speedup": 5.0, "raw_speedup": 5.0, "ms": 4.0}  # fmt: skip
    row = {
        "name": "gemm",
        "original_ms": 20.0,
        "kxform_ms": 6.0,
        "expert_ms": 8.0,
        "also": {"smem-tile=defaults": column},
    }
    row["yardstick"] = bench_pipeline.yardstick(gemm_pair, row, data)
    assert row["yardstick"]["also smem-tile=defaults"] == pytest.approx(0.75)
    line = _also(row, "smem-tile=defaults", column)
    assert line.startswith("gemm, also smem-tile=defaults: 4.0000 ms, 5.00x the original, 75% of cuBLAS;")


def test_fraction_is_the_log_ratio_and_geomeans_keep_the_original() -> None:
    assert bench_pipeline.log_fraction(2.0, 4.0) == pytest.approx(0.5)
    assert bench_pipeline.log_fraction(1.0, 4.0) == 0.0
    assert bench_pipeline.log_fraction(1.5, 0.9) is None  # the expert is not faster: nothing to reach
    rows = [
        {"original_ms": 8.0, "expert_ms": 1.0, "kxform": {"speedup": 2.0}},
        {"original_ms": 2.0, "expert_ms": 1.0, "kxform": {"speedup": 1.0}},
        {"name": "cut", "skipped": "time"},
    ]
    for row in rows[:2]:
        bench_pipeline.speeds(row)
    assert rows[0]["kxform_ms"] == 4.0 and rows[0]["fraction"] == pytest.approx(1 / 3)
    s = bench_pipeline.summary(rows)
    assert s["kernels"] == 2
    assert s["kxform_speedup"] == pytest.approx(math.sqrt(2.0)) and s["expert_speedup"] == pytest.approx(4.0)
    assert s["fraction"] == pytest.approx(math.log(math.sqrt(2)) / math.log(4))


@pytest.mark.gpu
def test_gpu_run_on_two_kernels(tmp_path: Path) -> None:
    if not _gpu():
        pytest.skip("needs a CUDA GPU with pycuda (run with tools/gpu-check.sh)")
    out = tmp_path / "gpu.json"
    done = run_tool("--kernels", "residual_add,transpose", "--budget", "3", "--quick", "--out", str(out))
    assert done.returncode in (0, 1), done.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads(out.read_text())["kernels"]}
    for row in rows.values():
        assert row["original_ms"] > 0 and row["expert_ms"] > 0
        assert row["kxform"]["speedup"] >= 1.0
    assert rows["residual_add"]["kxform"]["status"] == "tuned", rows["residual_add"]["kxform"]
    assert rows["transpose"]["kxform"]["status"] == "tuned", rows["transpose"]["kxform"]
    assert "geometric mean over 2 kernels" in done.stdout


def test_a_tune_past_its_time_is_killed_with_its_children(tmp_path: Path) -> None:
    """run_limited kills the whole session (a tune and the GPU worker it started)."""
    marker = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(marker)!r}, 'w').write(str(p.pid)); time.sleep(60)"
    )
    code, out, err = bench_pipeline.run_limited([sys.executable, "-c", script], 2.0, str(tmp_path))
    assert (code, out, err) == (None, "", "")
    child = int(marker.read_text())
    import os
    import time

    for _ in range(50):  # the kill is delivered; give the kernel a moment to reap
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the tune's child {child} outlived the timeout")
    assert bench_pipeline.run_limited([sys.executable, "-c", "print('{}')"], 30.0, str(tmp_path)) == (0, "{}\n", "")


def test_yardsticks_are_fractions_of_copy_bandwidth_and_cublas() -> None:
    copy_pair, gemm_pair = load_pairs(("residual_add", "gemm"))
    data = {"copy": {"gbps": 3000.0}, "gemm": [{"shape": [1, 4096, 4096, 4096], "ms": 3.0}]}
    row = {"original_ms": 2.0, "kxform_ms": 2.0, "expert_ms": 1.0}
    copy = bench_pipeline.yardstick(copy_pair, row, data)
    n = copy_pair.naive.spec.bench_sizes[0].values["N"]
    moved = 3 * 2 * n  # two bf16 inputs read, one bf16 output written
    assert copy is not None and copy["least_bytes"] == moved
    assert copy["original"] == pytest.approx(moved / 2.0e-3 / 3000e9)
    assert copy["expert"] == pytest.approx(2 * copy["original"])
    cublas = bench_pipeline.yardstick(gemm_pair, row, data)
    assert cublas is not None and cublas["shape"] == [1, 4096, 4096, 4096]
    assert (cublas["original"], cublas["expert"]) == (1.5, 3.0)
    assert bench_pipeline.yardstick(gemm_pair, row, {"copy": None, "gemm": []}) is None  # shape not measured
    assert bench_pipeline.yardstick(copy_pair, {"failed": "x"}, data) is None  # nothing timed


def test_gpu_table_rows_and_geomean_line(capsys: pytest.CaptureFixture[str]) -> None:
    from kxform.bench.pipeline_table import print_table

    rows = [
        {
            "name": "gemm",
            "size": {"name": "bench", "M": 64},
            "original_ms": 4.0,
            "expert_ms": 1.0,
            "kxform": {
                "status": "tuned",
                "passes": ["swizzle"],
                "evaluated": 15,
                "failed": 2,
                "kept": "tuned",
                "best_config": {"swizzle": "column"},
                "speedup": 2.0,
            },
            "yardstick": None,
        },
        {"name": "cut", "skipped": "the --budget-s time was spent"},
    ]
    bench_pipeline.speeds(rows[0])
    print_table(rows, bench_pipeline.summary(rows), dry_run=False)
    out = capsys.readouterr().out
    assert "| gemm | M=64 | 4.0000 | 2.0000 | 1.0000 | 2.00x | 4.00x | 50% |" in out
    assert "swizzle: 15 evals (2 failed), tuned kept (swizzle=column)" in out
    assert "| cut | the --budget-s time was spent |" in out
    assert "geometric mean over 1 kernels: kxform 2.00x, expert 4.00x, fraction of the expert's log speed-up 50%" in out


def test_merge_joins_runs_in_manifest_order_and_refuses_runs_that_do_not_compare(tmp_path: Path) -> None:
    """Runs over parts of the corpus (one per GPU) become one table: rows in the manifest's
    order, the geometric means recomputed over all of them; runs on another device or
    budget are refused, naming the difference."""
    base = {
        "tool": "bench_pipeline",
        "device": "GPU X",
        "profile": "h100",
        "dry_run": False,
        "budget": 40,
        "passes": "offered",
        "total_s": 10.0,
        "baselines": None,
    }
    tuned = {
        "status": "tuned",
        "passes": ["launch"],
        "evaluated": 40,
        "failed": 0,
        "kept": "tuned",
        "best_config": {"launch": True},
        "speedup": 2.0,
    }
    gemm = {
        "name": "gemm",
        "size": {"name": "bench", "M": 64},
        "original_ms": 8.0,
        "expert_ms": 1.0,
        "kxform": tuned,
        "yardstick": None,
    }
    add = {
        "name": "residual_add",
        "size": {"name": "bench", "N": 64},
        "original_ms": 2.0,
        "expert_ms": 1.0,
        "kxform": tuned,
        "yardstick": None,
    }
    for row in (gemm, add):
        bench_pipeline.speeds(row)
    (tmp_path / "a.json").write_text(json.dumps({**base, "kernels": [gemm]}))
    (tmp_path / "b.json").write_text(json.dumps({**base, "total_s": 30.0, "kernels": [add]}))
    out = tmp_path / "all.json"
    done = run_tool("--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(out), timeout=300)
    merged = json.loads(out.read_text())
    assert [r["name"] for r in merged["kernels"]] == ["residual_add", "gemm"]
    assert merged["geomean"]["kernels"] == 2 and merged["total_s"] == 30.0
    assert merged["geomean"]["expert_speedup"] == pytest.approx(math.sqrt(8.0 * 2.0))
    assert "geometric mean over 2 kernels" in done.stdout and "2 runs merged" in done.stdout
    (tmp_path / "c.json").write_text(json.dumps({**base, "budget": 16, "kernels": [add]}))
    refused = run_tool("--merge", str(tmp_path / "a.json"), str(tmp_path / "c.json"), timeout=300)
    assert refused.returncode == 2 and "differs from" in refused.stderr and "budget" in refused.stderr


def test_the_study_tunes_the_default_pipeline_at_each_budget_and_counts_slow_evaluations() -> None:
    """kxform/bench/search_study.py (`bench_pipeline.py --study`): its tune commands, and what it
    counts from a tune summary (planted: an evaluation at 2.5x the original is slow, one
    at 1.5x and a pruned one are not)."""
    from kxform.bench import search_study

    pair = load_pairs(("gemm",))[0]
    args = SimpleNamespace(passes="offered", budget=40, jobs=4, launch_budget=0.5)
    base = bench_pipeline.tune_command(pair, args, "h100", ["swizzle"], Path("/s"))
    before = search_study.command(base, 40, ("--no-cost-model",), Path("/db/b.sqlite"))
    assert "--pass" not in before and before.count("--budget") == 1 and before.count("--db") == 1
    assert before[before.index("--budget") + 1] == "40" and before[before.index("--db") + 1] == "/db/b.sqlite"
    assert before[-1] == "--no-cost-model" and "--json" in before
    summary = {
        "original_ms": 2.0,
        "best": {"time_ms": 1.0, "config": {"rows": True}},
        "evaluated": 3,
        "failed": 0,
        "pruned": 1,
        "cut_off": 1,
        "cost_s": 4.0,
        "cost_model": {"kendall_tau": 0.6, "pairs": 3},
        "evaluations": [
            {"time_ms": 2.0, "status": "ok"},
            {"time_ms": 5.0, "status": "cut_off"},
            {"time_ms": 3.0, "status": "ok"},
            {"time_ms": None, "status": "pruned"},
        ],
    }
    column = search_study.variant_column(summary)
    assert column["timed"] == 3 and column["slow"] == 1 and column["speedup"] == 2.0
    tuned = {"status": "tuned", **column}
    rows = [{"name": "a", "study": {"before": tuned, "after": tuned, "reference": {**tuned, "best_ms": 0.95}}}]
    totals = search_study.study_summary(rows)
    assert totals["within_10pct_at_40"] == 1 and totals["after"]["slow_share"] == pytest.approx(1 / 3)
    rows[0]["study"]["reference"]["best_ms"] = 0.5  # planted: 40 evaluations found twice the time
    assert search_study.study_summary(rows)["within_10pct_at_40"] == 0


@pytest.mark.slow
@needs_nvcc
def test_dry_run_offers_and_verifies_the_new_shapes(tmp_path: Path) -> None:
    """A column reduction gets split-reduce (a structural pass: its first point is checked
    alone), a block-stride gated activation gets vectorize and coarsen (checked alone
    through --check), each point rewritten, built and verified on the CPU runtime."""
    out = tmp_path / "dry.json"
    done = run_tool("--dry-run", "--kernels", "bias_grad,geglu", "--check", "vectorize,coarsen", "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {r["name"]: r for r in json.loads(out.read_text())["kernels"]}
    assert "split-reduce" in rows["bias_grad"]["spaces"]["offered"]
    assert rows["bias_grad"]["structural"]["split-reduce"]["status"] == "verified"
    assert {"launch", "vectorize", "coarsen"} <= set(rows["geglu"]["spaces"]["offered"])
    for name in ("vectorize", "coarsen"):
        assert rows["geglu"]["structural"][name]["status"] == "verified", rows["geglu"]["structural"]
    assert "split-reduce: verified (split-reduce{" in done.stdout
