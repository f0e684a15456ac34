"""`refactor` as a pass of the ordinary pipeline: a recorded session's kept template goes
into kxform.lock, and `kxform apply --pass refactor --proposer lock --lock kxform.lock`
replays it without a model through every check, the verification at the recorded
configuration and the atomic write; a tampered entry is refused with its reason and the
file is left as it was."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from refactor_helpers import NAIVE, reply, template_input

from kxform.cli.main import main
from kxform.frontend.source import read_source
from kxform.propose.lock import Decision
from kxform.propose.lockfile import kernel_digests, read_lock, render
from kxform.propose.template import Template

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "refactor"
KERNEL = "transpose_naive"
PARAMS = [{"name": "TILE", "values": [8, 16, 32], "original": 16}]
GRID = ["ceil_div(cols, TILE)", "ceil_div(rows, TILE)"]
BLOCK = ["TILE", "TILE"]
CONSTRAINTS = ["TILE * TILE <= hw.max_threads_per_block"]


def _copy(tmp_path: Path) -> Path:
    work = tmp_path / "transpose"
    shutil.copytree(NAIVE / "transpose", work)
    return work / "naive.cu"


def _template(code: str, grid: list[str] | None = None) -> Template:
    return Template(
        KERNEL, code, (("TILE", (8, 16, 32)),), tuple(CONSTRAINTS), tuple(grid or GRID), tuple(BLOCK), (("TILE", 16),)
    )


def _lock_with(path: Path, template: Template, tile: int = 16, digest: str | None = None) -> Path:
    """A lockfile holding one applied refactor entry for `path` (as a session records one)."""
    payload = template.payload()
    named = digest or hashlib.sha256(payload.encode()).hexdigest()[:10]
    entry = Decision(
        KERNEL,
        "refactor",
        (("template", named), ("TILE", tile)),
        path.name,
        payload,
        "claude",
        "claude-sonnet-4-6",
        "attempt 1: verified",
        "rule",
        source=kernel_digests(read_source(path))[KERNEL],
        hw="h100-sxm",
        kxform="0.1.0",
    )
    lock = path.parent / "kxform.lock"
    lock.write_bytes(render([entry]))
    return lock


def _apply(path: Path, lock: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(
        [
            "apply",
            "--pass",
            "refactor",
            "--proposer",
            "lock",
            f"--lock={lock}",
            "--log",
            str(path.parent / "log.jsonl"),
            str(path),
        ]
    )
    out = capsys.readouterr()
    return code, out.out + out.err


def _log_records(log: Path) -> list[dict]:
    """Every record of a pass log."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _log_kernels(path: Path) -> list[dict]:
    """The kernel records of the last run's pass log."""
    lines = (path.parent / "log.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    last = records[-1]["run"]
    return [r for r in records if r.get("type") == "kernel" and r["run"] == last]


@pytest.mark.slow
def test_a_recorded_session_is_locked_and_apply_replays_it_without_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """tools/refactor_session.py over recorded wire traffic keeps a template and records it in
    kxform.lock; `kxform apply --proposer lock` then writes the verified rewrite with no
    traffic and no key, and a second run finds the kernel as locked."""
    path = _copy(tmp_path)
    before = path.read_bytes()
    traffic = tmp_path / "traffic.json"
    code = (FIXTURES / "transpose.cu").read_text()
    traffic.write_text(json.dumps([{"body": reply(template_input(code, PARAMS, GRID, BLOCK, CONSTRAINTS)).body}]))
    lock = path.parent / "kxform.lock"
    env = {
        **os.environ,
        "KXFORM_LLM_REPLAY": str(traffic),
        "KXFORM_CACHE_DIR": str(tmp_path / "cache"),
        "ANTHROPIC_API_KEY": "",
    }
    live = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "refactor_session.py"),
            str(path),
            "--kernel",
            KERNEL,
            "--attempts",
            "1",
            "--lock",
            str(lock),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert live.returncode == 0, live.stderr + live.stdout
    assert path.read_bytes() == before  # the session itself writes no source
    (entry,) = read_lock(lock)
    assert (entry.file, entry.kernel, entry.pass_name, entry.outcome) == ("naive.cu", KERNEL, "refactor", "applied")
    assert entry.source == kernel_digests(read_source(path))[KERNEL] and entry.result.startswith("sha256:")
    assert Template.from_payload(entry.payload).kernel == KERNEL and dict(entry.params)["TILE"] == 16

    for name in ("KXFORM_LLM_REPLAY", "ANTHROPIC_API_KEY"):  # no traffic, no key: nothing could be asked
        monkeypatch.delenv(name, raising=False)
    code_, text = _apply(path, lock, capsys)
    assert code_ == 0, text
    written = path.read_text()
    assert "#define TILE 16" in written and "__shared__ float tile[TILE][TILE + 1];" in written
    assert "transpose_naive<<<dim3(" in written
    assert kernel_digests(read_source(path))[KERNEL] == entry.result  # the rewrite the lock records
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["outcome"] == "applied" and record["proposal"]["provenance"]["proposer"] == "lock"
    checks = {c["name"]: c for c in record["checks"]}
    assert checks["template"]["ok"] and checks["configuration"]["ok"] and checks["sizes"]["ok"]
    assert checks["compile"]["status"] == "passed" and checks["idempotence"]["ok"]
    assert checks["verify"]["status"] == "passed" and checks["verify"]["figures"]["runtime"] == "cpu"
    assert "TILE" in checks["verify"]["detail"]  # verified at the template's launch, at TILE=16
    # replayed again: the kernel already is the locked rewrite
    again, text = _apply(path, lock, capsys)
    assert again == 0 and path.read_text() == written, text


@pytest.mark.slow
def test_a_locked_template_wrong_only_at_a_ragged_size_is_refused_by_verification(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An off-by-one in the grid (`cols / TILE`: the last, partial column of blocks is never
    launched) is wrong only where cols is not a multiple of TILE: the check sizes are."""
    path = _copy(tmp_path)
    before = path.read_bytes()
    lock = _lock_with(path, _template((FIXTURES / "transpose.cu").read_text(), ["cols / TILE", GRID[1]]))
    code, text = _apply(path, lock, capsys)
    assert code != 0 and path.read_bytes() == before, text
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["outcome"] == "failed" and record["stage"] == "verify", record
    assert record["key"] == "VerifyMismatch", record
    assert "ragged" in " ".join(record["reasons"])  # the size it shows at


@pytest.mark.parametrize(
    "name, code, expected",
    [
        (
            "a forbidden construct",
            (
                "__global__ void transpose_naive(float* out, const float* in, int rows, int cols)\n"
                '{\n    printf("%d\\n", TILE);\n}\n'
            ),
            "template: printf:",
        ),
        (
            "another kernel's signature",
            ("__global__ void transpose_naive(float* out, float* in, int rows, int cols)\n{\n}\n"),
            "template: signature:",
        ),
    ],
)
def test_a_locked_template_that_breaks_a_rule_is_refused_before_anything_runs(
    name: str, code: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy(tmp_path)
    before = path.read_bytes()
    lock = _lock_with(path, _template(code))
    status, text = _apply(path, lock, capsys)
    assert status != 0 and path.read_bytes() == before, text
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["outcome"] == "failed" and record["stage"] == "check" and record["key"] == "TemplateRefused"
    assert expected in " ".join(record["reasons"]), record


@pytest.mark.parametrize(
    "tile, digest, expected",
    [
        (16, "0123456789", "does not name the payload"),
        (12, None, "TILE=12 is not a point of the template's space"),
    ],
)
def test_a_locked_entry_whose_values_do_not_fit_its_template_is_refused(
    tile: int, digest: str | None, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy(tmp_path)
    before = path.read_bytes()
    lock = _lock_with(path, _template((FIXTURES / "transpose.cu").read_text()), tile, digest)
    status, text = _apply(path, lock, capsys)
    assert status != 0 and path.read_bytes() == before, text
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["key"] == "TemplateRefused" and expected in " ".join(record["reasons"]), record


@pytest.mark.parametrize(
    "payload, expected",
    [
        ("not json", "the payload is not a template: JSONDecodeError"),
        (
            '{"kernel": "transpose_naive", "code": 5, "params": {}, "constraints": [], "grid": ["1"], "block": ["1"], '
            '"original": null}',
            "`code` must hold strings",
        ),
        (
            '{"kernel": "transpose_naive", "code": "", "params": {"TILE": [1.5]}, "constraints": [], "grid": ["1"], '
            '"block": ["1"], "original": null}',
            "parameter values must be integers",
        ),
    ],
)
def test_a_locked_payload_that_is_no_template_is_refused(
    payload: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy(tmp_path)
    before = path.read_bytes()
    lock = _lock_with(path, _template(""))
    lock.write_text(lock.read_text().replace(json.dumps(_template("").payload()), json.dumps(payload)))
    status, text = _apply(path, lock, capsys)
    assert status != 0 and path.read_bytes() == before, text
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["key"] == "TemplateRefused" and expected in " ".join(record["reasons"]), record


def test_without_a_template_the_pass_proposes_nothing_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _copy(tmp_path)
    before = path.read_bytes()
    log = path.parent / "log.jsonl"
    assert main(["apply", "--pass", "refactor", "--log", str(log), str(path)]) == 0
    text = capsys.readouterr().err + "\n".join(r.get("message", "") for r in _log_records(log))
    assert "refactor not applied to 'transpose_naive': a refactoring comes only from a model" in text
    assert path.read_bytes() == before
    (record,) = _log_kernels(path)
    assert record["outcome"] == "missed" and record["key"] == "NoTemplate"


def test_the_pass_spec_prints_back_and_the_pass_is_registered() -> None:
    from kxform.engine.registry import default_registry

    registry = default_registry()
    assert "refactor" in registry.names()
    assert registry.parse("refactor").spec() == "refactor"


@pytest.mark.slow
def test_apply_with_claude_runs_a_refactoring_session_writes_the_verified_rewrite_and_locks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kxform apply --pass refactor --proposer claude --lock`, the API answered from recorded
    wire traffic: the kept template is written through the ordinary pipeline and recorded in
    the lockfile, which then replays it on a fresh copy with no traffic."""
    path = _copy(tmp_path)
    traffic = tmp_path / "traffic.json"
    code = (FIXTURES / "transpose.cu").read_text()
    traffic.write_text(json.dumps([{"body": reply(template_input(code, PARAMS, GRID, BLOCK, CONSTRAINTS)).body}]))
    monkeypatch.setenv("KXFORM_LLM_REPLAY", str(traffic))
    monkeypatch.setenv("KXFORM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "")
    lock = path.parent / "kxform.lock"
    status = main(
        [
            "apply",
            "--pass",
            "refactor",
            "--proposer",
            "claude",
            "--attempts",
            "1",
            f"--lock={lock}",
            "--log",
            str(path.parent / "log.jsonl"),
            str(path),
        ]
    )
    out = capsys.readouterr()
    assert status == 0, out.out + out.err
    written = path.read_text()
    assert "#define TILE 16" in written and "transpose_naive<<<dim3(" in written
    (entry,) = read_lock(lock)
    assert (entry.pass_name, entry.proposer, entry.outcome) == ("refactor", "claude", "applied")
    assert Template.from_payload(entry.payload).kernel == KERNEL and entry.result.startswith("sha256:")
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["outcome"] == "applied" and {c["name"]: c["status"] for c in record["checks"]}["verify"] == "passed"
    # the lock replays on a fresh copy without any traffic
    monkeypatch.delenv("KXFORM_LLM_REPLAY")
    fresh = _copy(tmp_path / "fresh")
    shutil.copy(lock, fresh.parent / "kxform.lock")
    again, text = _apply(fresh, fresh.parent / "kxform.lock", capsys)
    assert again == 0 and fresh.read_text() == written, text


def test_a_locked_template_without_a_harness_spec_is_not_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing unverified is written: without a spec no differential run can confirm it."""
    path = _copy(tmp_path)
    (path.parent / "naive.kxspec.toml").unlink()
    before = path.read_bytes()
    lock = _lock_with(path, _template((FIXTURES / "transpose.cu").read_text()))
    status, text = _apply(path, lock, capsys)
    assert status != 0 and path.read_bytes() == before, text
    (record,) = [r for r in _log_kernels(path) if r["pass"] == "refactor"]
    assert record["outcome"] == "failed" and record["key"] == "NoDifferentialRun", record
