"""`kxform log list|show|diff` on real runs and on the documented records of GPU and tuning runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from log_fixtures import gpu_style_run, real_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    """Three real runs in one tree: default swizzle, column order, default again."""
    tree = tmp_path_factory.mktemp("logs")
    logs = [
        real_run(tree, "--pass", "swizzle", "--verify", "static"),
        real_run(tree, "--pass", "swizzle{pattern=column}", "--verify", "static"),
        real_run(tree, "--pass", "swizzle", "--verify", "static"),
    ]
    return tree, logs


def _id(log: Path) -> str:
    return log.stem


@pytest.mark.slow
def test_list_shows_every_run_with_passes_and_counts(runs: tuple[Path, list[Path]]) -> None:
    tree, logs = runs
    proc = run_cli("log", "list", cwd=tree / "sgemm_tiled")  # found walking up, as .git is
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["RUN", "STARTED"]
    assert [line.split()[0] for line in lines[1:]] == [_id(log) for log in logs]
    assert "swizzle{pattern=column}" in lines[2] and "2 applied" in lines[2] and "2 changed" in lines[2]


def test_show_prints_decisions_checks_remarks_and_diffs(runs: tuple[Path, list[Path]]) -> None:
    tree, logs = runs
    proc = run_cli("log", "show", "last~1", cwd=tree)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"run {_id(logs[1])}")
    assert "sgemm_tiled (line 29) swizzle: applied  swizzle{pattern=column}" in out
    assert "check bijection: ok" in out and "check coverage: ok" in out
    assert "remark: Passed swizzle/Applied" in out
    assert "+    const uint2 kxform_block" in out and "\033[" not in out  # piped: no colour
    assert "kxform_block" not in run_cli("log", "show", "last~1", "--no-diff", cwd=tree).stdout


def test_show_filters_by_kernel_and_outcome(runs: tuple[Path, list[Path]]) -> None:
    tree, logs = runs
    out = run_cli("log", "show", str(logs[0]), "--kernel", "transpose*", cwd=tree).stdout
    assert "transposeNoBankConflicts" in out and "sgemm_tiled (line" not in out and "sgemm_tiled.cu" not in out
    out = run_cli("log", "show", _id(logs[0])[:20], "--outcome", "missed", cwd=tree).stdout
    # the locality model leaves the transpose alone (no L2 gain); the applied GEMM is filtered out
    assert "transposeNoBankConflicts" in out and "missed" in out and "sgemm_tiled (line" not in out
    out = run_cli("log", "show", _id(logs[0])[:20], "--outcome", "failed", cwd=tree).stdout
    assert out.rstrip().endswith("no kernel matches the filter")
    colored = run_cli("log", "--color", "always", "show", "last", cwd=tree).stdout
    assert "\033[32mapplied\033[0m" in colored


def test_diff_reports_changed_decisions_and_exit_codes(runs: tuple[Path, list[Path]]) -> None:
    tree, logs = runs
    same = run_cli("log", "diff", str(logs[0]), str(logs[2]), cwd=tree)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "kernels: 2 with the same decision and outcome, 0 in one run only" in same.stdout
    changed = run_cli("log", "diff", _id(logs[0]), _id(logs[1]), cwd=tree)
    assert changed.returncode == 1
    assert (
        "~ sgemm_tiled/sgemm_tiled.cu sgemm_tiled [swizzle]: decision swizzle{pattern=grouped,along=y,group=8} "
        "-> swizzle{pattern=column}"
    ) in changed.stdout
    assert "time: " in changed.stdout and "per pass: swizzle" in changed.stdout


@pytest.mark.slow
def test_show_and_diff_of_a_tile_then_swizzle_pipeline(tmp_path: Path) -> None:
    """The kernel record's engine fields from real runs: a tile candidate the verify stage
    refused (no differential run under --verify static), then the lift alone applied."""
    refused = real_run(tmp_path, "--pass", "tile{TILE=32},swizzle", "--verify", "static", corpora=("sgemm_tiled",))
    out = run_cli("log", "show", str(refused), "--no-diff", cwd=tmp_path).stdout
    assert "sgemm_tiled (line 29) tile: failed at verify" in out
    assert "rejected: tile{TILE=32} at verify: could not verify: this rewrite changes the computation's shape" in out
    assert (
        "policy: the spec's launch; outputs bit-exact (the rewrite changes no arithmetic)\n"
        "    alternates: swizzle{pattern="
    ) in out  # swizzle's record
    assert "[heuristic, predicted, model kxform.locality" in out  # the locality model's choice, with provenance
    lifted = real_run(tmp_path, "--pass", "tile,swizzle", "--verify", "static", corpora=("sgemm_tiled",))
    out = run_cli("log", "show", str(lifted), "--no-diff", "--kernel", "sgemm_tiled", cwd=tmp_path).stdout
    assert "sgemm_tiled (line 29) tile: applied  tile\n" in out
    assert "policy: the spec's launch; outputs bit-exact (at the original values only names change)" in out
    assert "rejected:" not in out and "required" not in out
    proc = run_cli("log", "diff", str(refused), str(lifted), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "~ sgemm_tiled/sgemm_tiled.cu sgemm_tiled [tile]: outcome failed -> applied" in proc.stdout
    assert "decision none -> tile" in proc.stdout


def test_gpu_and_tuning_figures_are_shown(tmp_path: Path) -> None:
    first = gpu_style_run(tmp_path / "a.jsonl")
    out = run_cli("log", "show", str(first), cwd=tmp_path).stdout
    assert "times: original 66.1000 ms, rewritten 65.1000 ms, speedup 1.015x (size bench, gpu)" in out
    assert "stencil5 (line 12) swizzle: missed at measure" in out and "reason: NotFaster" in out
    assert "why: predicted by the model: 2.5x less DRAM traffic [deterministic, predicted]" in out
    assert "alternates: swizzle{pattern=column}" in out and "rejected: swizzle{pattern=hilbert} at measure" in out
    assert 'payload: {"remap": "grouped", "rows": 8}' in out
    assert "tune src/gemm.cu sgemm_128 (bayes): 5 evaluations, best 65.1000 ms at eval 4 {'group': 8}" in out
    assert "grouped        L2 hit  80.0%" in out and "other records: 1 future_kind" in out
    second = gpu_style_run(tmp_path / "b.jsonl", gemm_ms=60.0)
    proc = run_cli("log", "diff", str(first), str(second), cwd=tmp_path)
    assert proc.returncode == 0  # same decisions; only times moved
    assert "speedup 1.015x -> 0.922x" in proc.stdout


def test_runs_appended_to_one_file_are_separate(tmp_path: Path) -> None:
    log = tmp_path / "all.jsonl"
    gpu_style_run(log)
    gpu_style_run(log, gemm_ms=70.0)
    proc = run_cli("log", "list", str(log), cwd=tmp_path)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 3
    assert "70.0000" in run_cli("log", "show", str(log), cwd=tmp_path).stdout  # a file means its last run


@pytest.mark.parametrize(
    "content, where, problem",
    [
        ('{"type": "run", "run": "r1"}\n{"type": "kernel", "run": "r1"\n', ":2:", "corrupt log: not JSON"),
        ('{"type": "run", "run": "r1"}\n[1, 2]\n', ":2", "corrupt log: a record must be a JSON object"),
        ('{"run": "r1"}\n', ":1", "corrupt log: record has no 'type'"),
        ('{"type": "kernel"}\n', ":1", "record has no 'run' id and follows no run record"),
        ("\n\n", "", "log file holds no records"),
        ('{"type": "run", "run": "r1", "argv": 7}\n', ":1", "run record: 'argv' is 7, expected an array of strings"),
        (
            '{"type": "run", "run": "r1"}\n{"type": "kernel", "run": "r1", "line": "3"}\n',
            ":2",
            "kernel record: 'line' is \"3\", expected an integer",
        ),
        (
            '{"type": "run", "run": "r1"}\n{"type": "kernel", "run": "r1", "reasons": [1]}\n',
            ":2",
            "'reasons' is [1], expected an array of strings",
        ),
        (
            '{"type": "run", "run": "r1"}\n{"type": "remark", "run": "r1", "message": ["x"]}\n',
            ":2",
            "remark record: 'message' is [\"x\"], expected a string",
        ),
        (
            '{"type": "run", "run": "r1"}\n{"type": "summary", "run": "r1", "exit_code": true}\n',
            ":2",
            "'exit_code' is true, expected an integer",
        ),
    ],
)
def test_corrupt_log_is_one_line_exit_2(tmp_path: Path, content: str, where: str, problem: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    for args in (("log", "show", str(bad)), ("report", str(bad), "-o", "out.html")):
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"kxform: error: {bad}{where}") and problem in line, line
        assert not (tmp_path / "out.html").exists()


def test_list_shows_good_runs_and_fails_on_a_corrupt_file(tmp_path: Path) -> None:
    logs = tmp_path / ".kxform" / "logs"
    logs.mkdir(parents=True)
    gpu_style_run(logs / "good.jsonl")
    (logs / "bad.jsonl").write_text('{"type": "run", "run": "x"}\nnot json\n')
    (logs / "killed.jsonl").write_text("")  # a run killed before its first write
    proc = run_cli("log", "list", cwd=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stdout.splitlines()) == 2 and "swizzle" in proc.stdout
    assert (
        proc.stderr.strip()
        == f"kxform: error: {logs / 'bad.jsonl'}:2:1: corrupt log: not JSON (Expecting value at column 1)"
    )


@pytest.mark.slow
def test_missing_and_ambiguous_runs(runs: tuple[Path, list[Path]], tmp_path: Path) -> None:
    tree, _ = runs
    for spec, message in (
        ("nope", "no run 'nope'"),
        ("2", "run '2' is ambiguous (3 runs match)"),
        ("last~7", "no run 'last~7' (3 runs)"),
    ):
        proc = run_cli("log", "show", spec, cwd=tree)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("log", "show", "last", cwd=tmp_path)  # no .kxform/logs here or above
    assert proc.returncode == 2 and "no .kxform/logs here or above" in proc.stderr
    proc = run_cli("log", "show", "missing.jsonl", cwd=tmp_path)
    assert proc.returncode == 2 and "missing.jsonl: no such log file" in proc.stderr


def test_unknown_fields_and_kinds_are_kept(tmp_path: Path) -> None:
    log = gpu_style_run(tmp_path / "run.jsonl")
    lines = log.read_text().splitlines()
    record = json.loads(lines[1])
    record["provenance"] = {"by": "a newer writer"}
    lines[1] = json.dumps(record)
    log.write_text("\n".join(lines) + "\n")
    proc = run_cli("log", "show", str(log), cwd=tmp_path)
    assert proc.returncode == 0 and "sgemm_128" in proc.stdout


def test_a_measured_bound_is_shown_with_the_sums_its_probe_moves() -> None:
    from kxform.engine.policy import OutputCompare, VerifyPolicy
    from kxform.engine.reorder_probe import ProbedSum, ReorderProbe
    from kxform.log.view import policy

    probe = ReorderProbe("/* the instrumented original */", "k", (ProbedSum("mean", "float", 12, "KX_PROBE_0"),))
    compare = OutputCompare("bound", reason="reordered sums", probe=probe)
    line = policy({"verify_policy": VerifyPolicy(compare=compare, required=True).to_json()})
    assert line == (
        "the spec's launch; outputs an absolute bound per output, measured by the reorder probe ('mean' (float, "
        "line 12)) (reordered sums); a differential run is required before writing"
    )


def test_escape_sequences_in_file_names_and_log_fields_are_printed_escaped(tmp_path: Path) -> None:
    name = "ev\x1b[31mil.cu"
    (tmp_path / name).write_text(
        "#define TILE 16\n__global__ void k(float* o, int n) { if (n > 100000 / TILE) "
        "o[0] = 1; o[blockIdx.x * TILE + threadIdx.x] = 0; }\n"
        "void go(float* o, int n) { k<<<n / TILE, TILE>>>(o, n); }\n"
    )
    done = run_cli("apply", "--pass", "tile", "--diff", name, cwd=tmp_path)
    assert "\x1b" not in done.stderr and "ev\\x1b[31mil.cu:2:" in done.stderr, done.stderr
    log = next((tmp_path / ".kxform" / "logs").glob("*.jsonl"))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    records[0]["argv"].append("\x1b]0;owned\x07")  # a log field, as a hostile log could hold it
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    for args in (("log", "--color", "never", "show", str(log)), ("log", "list", str(log))):
        proc = run_cli(*args, cwd=tmp_path)
        assert proc.returncode == 0 and "\x1b" not in proc.stdout + proc.stderr, proc.stdout
    assert "\\x1b]0;owned\\x07" in run_cli("log", "--color", "never", "show", str(log), cwd=tmp_path).stdout
