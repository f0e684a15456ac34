"""`kxform tune` end to end against a recorded space (the real console script)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from search_helpers import KERNEL_SOURCE, write_recording


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    write_recording(tmp_path)
    write_recording(tmp_path, "synth_B.json.gz", device="Test GPU B", shift=0.3)
    return tmp_path


def tune(workdir: Path, *args: str):  # type: ignore[no-untyped-def]
    env = {"KXFORM_CACHE_DIR": str(workdir / "cache"), "OPENBLAS_NUM_THREADS": "1"}
    return run_cli("tune", "k.cu", "--kernel", "synth_kernel", *args, cwd=workdir, env=env, timeout=120)


@pytest.mark.slow
def test_json_summary_log_and_resume(workdir: Path) -> None:
    first = tune(workdir, "--objective", "replay:synth_A.json.gz", "--budget", "15", "--json", "--log", "tune.jsonl")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["evaluated"] == 15 and summary["measured"] == 15 and summary["stopped"] == "budget"
    assert summary["hardware"] == "Test GPU A" and summary["space_size"] > 40
    assert summary["best"]["time_ms"] > 0 and set(summary["best"]["config"]) == {"bx", "by", "unroll", "tile"}
    assert summary["cost_s"] == pytest.approx(15.0)  # 1 s of recorded compile + benchmark per evaluation
    records = [json.loads(line) for line in (workdir / "tune.jsonl").read_text().splitlines()]
    assert [r["type"] for r in records] == ["run", "tune", "summary"]
    assert records[1]["best"] == summary["best"]
    again = tune(workdir, "--objective", "replay:synth_A.json.gz", "--budget", "25", "--resume", "--json")
    resumed = json.loads(again.stdout)
    assert resumed["measured"] == 10 and resumed["from_database"] == 15
    assert resumed["best"]["time_ms"] <= summary["best"]["time_ms"]


def test_human_output(workdir: Path) -> None:
    result = tune(workdir, "--objective", "replay:synth_A.json.gz", "--strategy", "exhaustive", "--budget", "1000")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("best: 0.905 ms (bx=4, by=4, unroll=1, tile=2)")
    assert "stopped: exhausted" in result.stderr


def test_replayed_write_needs_a_spec_to_confirm_it(workdir: Path) -> None:
    before = (workdir / "k.cu").read_bytes()
    result = tune(workdir, "--objective", "replay:synth_A.json.gz", "--budget", "3", "--write")
    assert result.returncode == 2 and "k.cu: no harness spec describes" in result.stderr
    assert "looked for k.kxspec.toml" in result.stderr and "kxform.toml" not in result.stderr
    assert (workdir / "k.cu").read_bytes() == before


def test_prior_from_another_gpu(workdir: Path) -> None:
    result = tune(
        workdir, "--objective", "replay:synth_A.json.gz", "--prior", "synth_B.json.gz", "--budget", "5", "--json"
    )
    summary = json.loads(result.stdout)
    assert summary["prior"] and "Test GPU B" in summary["prior"][0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "tuning needs a GPU or a recorded space"),
        (("--objective", "replay:synth_A.json.gz", "--budget", "0"), "--budget 0: must be at least 1 evaluation"),
        (("--objective", "replay:missing.json.gz"), "missing.json.gz: no such file"),
        (("--objective", "gpu:x"), "expected gpu, cpu+replay:FILE or replay:FILE"),
        (("--objective", "replay:synth_A.json.gz", "--strategy", "nope"), "invalid choice: 'nope'"),
        (("--objective", "replay:synth_A.json.gz", "--time", "-1"), "--time -1: must be a positive number"),
        (("--objective", "replay:synth_A.json.gz", "--db", "k.cu"), "k.cu: not a usable kxform tuning database"),
    ],
)
def test_bad_input_is_one_line_exit_2(workdir: Path, args: tuple[str, ...], message: str) -> None:
    before = (workdir / "k.cu").read_bytes()
    result = tune(workdir, *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert message in lines[-1] and (len(lines) == 1 or lines[0].startswith("usage:"))
    assert (workdir / "k.cu").read_bytes() == before


def test_bad_recording_and_kernel(workdir: Path) -> None:
    (workdir / "broken.json.gz").write_bytes((workdir / "synth_A.json.gz").read_bytes()[:200])
    result = tune(workdir, "--objective", "replay:broken.json.gz")
    assert result.returncode == 2 and "broken.json.gz: unreadable or truncated gzip data" in result.stderr
    other = run_cli(
        "tune",
        "k.cu",
        "--kernel",
        "other",
        "--objective",
        "replay:synth_A.json.gz",
        cwd=workdir,
        env={"KXFORM_CACHE_DIR": str(workdir / "cache")},
    )
    assert other.returncode == 2 and "no kernel 'other' (kernels: synth_kernel)" in other.stderr


@pytest.mark.slow
def test_log_viewer_and_report_show_the_convergence(workdir: Path) -> None:
    """The `tune` record carries each evaluation in order: `log show` and `report` read them."""
    result = tune(workdir, "--objective", "replay:synth_A.json.gz", "--budget", "12", "--json", "--log", "t.jsonl")
    summary = json.loads(result.stdout)
    evaluations = summary["evaluations"]
    assert [e["eval"] for e in evaluations] == list(range(1, 13))
    best = min((e for e in evaluations if e["time_ms"] is not None), key=lambda e: e["time_ms"])
    assert best["params"] == summary["best"]["config"] and best["eval"] == summary["best"]["found_at"]
    failed = sum(1 for e in evaluations if e["status"] != "ok")
    assert failed == summary["failed"] and all((e["time_ms"] is None) == (e["status"] != "ok") for e in evaluations)
    shown = run_cli("log", "show", "t.jsonl", cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert (
        f"tune k.cu synth_kernel (model): 12 evaluations, best {best['time_ms']:.4f} ms at eval {best['eval']}"
        in shown.stdout
    )
    page = run_cli("report", "t.jsonl", "-o", "r.html", cwd=workdir)
    assert page.returncode == 0, page.stderr
    html = (workdir / "r.html").read_text(encoding="utf-8")
    assert f"12 evaluations ({failed} failed), best {best['time_ms']:.4f} ms at evaluation {best['eval']}" in html
    assert "best so far" in html  # the convergence plot (matplotlib is in the test extra)


def test_export_writes_a_kernel_tuner_cache_that_reads_back(workdir: Path) -> None:
    """`--export` writes Kernel Tuner's cache format: the fields Kernel Tuner reads, one
    record per evaluation keyed by the comma-joined values, failures by class name; kxform's
    own reader of Kernel Tuner caches loads it back with the same times."""
    from kxform.search.recorded import load_recording

    (workdir / "out").mkdir()  # away from the recording's space definition (a partial run is not the whole space)
    proc = tune(workdir, "--objective", "replay:synth_A.json.gz", "--budget", "20", "--json", "--export", "out/kt.json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    data = json.loads((workdir / "out" / "kt.json").read_text())
    assert {"device_name", "kernel_name", "tune_params", "tune_params_keys", "objective", "cache"} <= set(data)
    assert data["kernel_name"] == "synth_kernel" and data["device_name"] == "Test GPU A"
    assert data["tune_params_keys"] == ["bx", "by", "unroll", "tile"] and data["objective"] == "time"
    assert len(data["cache"]) == summary["evaluated"] == 20
    for key, record in data["cache"].items():
        assert key == ",".join(str(record[name]) for name in data["tune_params_keys"])
        assert isinstance(record["time"], float) or record["time"] in (
            "InvalidConfig",
            "CompilationFailedConfig",
            "RuntimeFailedConfig",
        )
        assert {"compile_time", "verification_time", "benchmark_time"} <= set(record)
    best = summary["best"]
    best_key = ",".join(str(best["config"][name]) for name in data["tune_params_keys"])
    assert data["cache"][best_key]["time"] == best["time_ms"]
    back = load_recording(workdir / "out" / "kt.json")
    assert back.kernel == "synth_kernel" and back.device == "Test GPU A" and len(back.search) == 20
    bad = tune(workdir, "--objective", "replay:synth_A.json.gz", "--budget", "2", "--export", "nodir/kt.json")
    assert bad.returncode == 2 and "--export nodir/kt.json: its directory does not exist" in bad.stderr


def test_a_recording_that_names_no_kernel_is_refused_and_nothing_written(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL_SOURCE)
    write_recording(tmp_path, mutate=lambda data: data.pop("kernel_name"))
    before = (tmp_path / "k.cu").read_bytes()
    result = tune(tmp_path, "--objective", "replay:synth_A.json.gz", "--budget", "3", "--write")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "synth_A.json.gz: the recording names no kernel (kernel_name)" in result.stderr
    assert (tmp_path / "k.cu").read_bytes() == before and not list(tmp_path.rglob("*.sqlite"))
