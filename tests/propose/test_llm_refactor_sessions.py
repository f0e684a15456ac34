"""End-to-end refactoring sessions on corpus naive kernels: a recorded template, served to
the real anthropic client over wire-format replies, is validated, verified on the CPU
runtime over its covering sample, tuned over replayed times, written, and the written
kernel verified again; the kept decision replays the same file without a call."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from kxform.engine.policy import VerifyPolicy
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source, validate_bytes
from kxform.harness.spec import load_spec
from kxform.propose.template import Template
from kxform.propose.template_session import rewrite
from kxform.hw import load_profile
from kxform.propose.template_verify import comparison, covering_sample, launch_of
from kxform.runtime.cpu import CpuRuntime
from kxform.verify.differential import verify_pair
from kxform.workspace.files import write_atomic
from llm_replies import PLANTED_KEY
from refactor_helpers import NAIVE, reply, session, template_input

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "refactor"
TIMES = json.loads((FIXTURES / "times.json").read_text())

SESSIONS = {
    family: (entry["params"], entry["grid"], entry["block"], entry["constraints"])
    for family, entry in json.loads((FIXTURES / "sessions.json").read_text()).items()
    if family != "about"
}


def _timing(family: str):  # type: ignore[no-untyped-def]
    recorded = TIMES[family]
    return lambda template, config: recorded.get(",".join(f"{k}={v}" for k, v in sorted(config.items())))


@pytest.mark.slow
@pytest.mark.parametrize("family", list(SESSIONS))
def test_a_recorded_template_is_verified_tuned_and_written(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    params, grid, block, constraints = SESSIONS[family]
    code = (FIXTURES / f"{family}.cu").read_text()
    answer = template_input(code, params, grid, block, constraints)
    placed = any(s.layout for s in load_spec(NAIVE / family / "naive.kxspec.toml").kernel(f"{family}_naive").sizes)
    if placed:  # the recorded templates assume aligned, distinct buffers: the spec's placed sizes reject them
        refused, *_ = session(family, [reply(answer)], timing=_timing(family))
        (attempt,) = refused.attempts
        assert attempt.status != "verified" and ("misaligned" in attempt.reason or "overlapping" in attempt.reason)
    result, evaluator, model, records = session(family, [reply(answer)], timing=_timing(family), placed=False)
    (attempt,) = result.attempts
    assert attempt.status == "verified", attempt.reason
    assert result.decision is not None and result.decision.pass_name == "refactor"
    template, config = evaluator.kept[attempt.label]
    verified = attempt.evaluation.checks[0].detail  # type: ignore[union-attr]
    sample = int(verified.split()[0])
    assert sample >= max(len(values["values"]) for values in params)
    # tuned by kxform's tuner over the whole (small) space, from the reproducing start: the
    # fastest configuration with a replayed time, each outside the sample verified first
    times = TIMES[family]
    start = dict(template.original) if template.original is not None else None
    space = template.space()
    assert len(covering_sample(space, load_profile("h100"), start)) == sample
    valid = [
        dict(zip(space.names, values))
        for values in itertools.product(*(p.values for p in space.params))
        if space.is_valid(dict(zip(space.names, values)), load_profile("h100"))
    ]
    labels = [",".join(f"{k}={v}" for k, v in sorted(c.items())) for c in valid]
    fastest = min((times[lb], lb) for lb in labels if lb in times)
    assert (attempt.score, ",".join(f"{k}={v}" for k, v in sorted(config.items()))) == fastest
    if start is not None:  # the original's configuration is the baseline
        key = ",".join(f"{k}={v}" for k, v in sorted(start.items()))
        assert attempt.evaluation.baseline_ms == times[key]  # type: ignore[union-attr]
    # written atomically, the launches rewritten by the launch-site primitive
    target = tmp_path / "naive.cu"
    new = rewrite(model, template, config)
    write_atomic(target, new)
    written = parse_model(read_source(target))
    (site,) = [s for s in written.launches if s.kernel == f"{family}_naive"]
    assert site.config[0].startswith("dim3(") and site.config[1].startswith("dim3(")
    # the written kernel agrees with the original at every check size
    spec = load_spec(NAIVE / family / "naive.kxspec.toml").kernel(f"{family}_naive")
    function = next(f for f in model.functions if f.name == f"{family}_naive")
    compare = comparison(model, function)
    report = verify_pair(
        model.source,
        validate_bytes(str(target), new),
        spec,
        CpuRuntime(),
        sizes=tuple(s.name for s in spec.check_sizes if not s.layout),
        policy=VerifyPolicy(launch_of(template, config), compare),
    )
    assert report.ok, report.reason
    # the decision replays: its payload is the template, and it writes the same bytes
    replayed = Template.from_payload(result.decision.payload)
    assert rewrite(model, replayed, config) == new
    assert any(r["type"] == "llm_session" for r in records)


@pytest.mark.slow
def test_inspect_prompt_shows_the_refactoring_context(capsys: pytest.CaptureFixture[str]) -> None:
    from kxform.cli.main import main

    assert (
        main(
            [
                "inspect",
                "--prompt",
                str(NAIVE / "matvec" / "naive.cu"),
                "--kernel",
                "matvec_naive",
                "--pass",
                "refactor",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    for section in (
        "## Source",
        "## Memory accesses",
        "## Hardware",
        "## ptxas resources of the original",
        "## What the deterministic passes do with it",
        "## Nsight Compute",
        '"propose_refactor"',
    ):
        assert section in text, section
    assert "matvec_naive(float* y, const float* A, const float* x, int M, int N)" in text
    assert "- rows:" in text and "No Nsight Compute summary" in text


def test_inspect_prompt_of_an_unknown_kernel_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from kxform.cli.main import main

    assert (
        main(["inspect", "--prompt", str(NAIVE / "matvec" / "naive.cu"), "--kernel", "nope", "--pass", "refactor"]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no kernel 'nope'" in err[0], err


def _tool(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os
    import sys

    root = Path(__file__).resolve().parents[2]
    return subprocess.run(
        [sys.executable, str(root / "tools" / "refactor_session.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        cwd=root,
    )


@pytest.mark.slow
def test_the_live_command_over_recorded_traffic_records_and_the_record_replays_without_calls(tmp_path: Path) -> None:
    """tools/refactor_session.py as a user runs it, the API answered from recorded wire traffic
    (KXFORM_LLM_REPLAY); its record then replays with no traffic at all, and --write writes."""
    import shutil

    params, grid, block, constraints = SESSIONS["transpose"]
    code = (FIXTURES / "transpose.cu").read_text()
    traffic = tmp_path / "traffic.json"
    traffic.write_text(json.dumps([{"body": reply(template_input(code, params, grid, block, constraints)).body}]))
    work = tmp_path / "transpose"
    shutil.copytree(NAIVE / "transpose", work)
    before = (work / "naive.cu").read_bytes()
    env = {"KXFORM_LLM_REPLAY": str(traffic), "KXFORM_CACHE_DIR": str(tmp_path / "cache"), "ANTHROPIC_API_KEY": ""}
    live = _tool(
        str(work / "naive.cu"),
        "--kernel",
        "transpose_naive",
        "--attempts",
        "1",
        "--record",
        str(tmp_path / "kept.json"),
        "--log",
        str(tmp_path / "log.jsonl"),
        env=env,
    )
    assert live.returncode == 0, live.stderr + live.stdout
    assert "attempt 1: verified" in live.stdout and "+    __shared__ float tile[TILE][TILE + 1];" in live.stdout
    assert (work / "naive.cu").read_bytes() == before  # no --write: the diff only
    (kept,) = json.loads((tmp_path / "kept.json").read_text())["decisions"]
    assert kept["pass"] == "refactor" and kept["params"]["TILE"] in (8, 16, 32)
    logged = [json.loads(line)["type"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert logged[0] == "llm_prompt" and "llm_session" in logged
    offline = {"KXFORM_LLM_REPLAY": "", "ANTHROPIC_API_KEY": ""}
    again = _tool(
        str(work / "naive.cu"),
        "--kernel",
        "transpose_naive",
        "--replay",
        str(tmp_path / "kept.json"),
        "--write",
        env=offline,
    )
    assert again.returncode == 0, again.stderr + again.stdout
    written = (work / "naive.cu").read_text()
    assert f"#define TILE {kept['params']['TILE']}" in written and "transpose_naive<<<dim3(" in written


def test_a_replayed_record_for_another_kernel_is_one_line_and_touches_nothing(tmp_path: Path) -> None:
    record = tmp_path / "kept.json"
    record.write_text(json.dumps({"version": 1, "decisions": []}))
    path = NAIVE / "transpose" / "naive.cu"
    before = path.read_bytes()
    done = _tool(str(path), "--kernel", "transpose_naive", "--replay", str(record), "--write", env={})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no refactor decision" in done.stderr
    assert path.read_bytes() == before


@pytest.mark.slow
def test_the_tuner_verifies_a_configuration_outside_the_sample_and_refuses_a_wrong_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A template wrong only at one configuration the covering sample leaves out, and that
    configuration the fastest by the replayed times: the tuner's verification refuses it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_KEY)
    params, grid, block, constraints = SESSIONS["matvec"]
    hw = load_profile("h100")
    clean = Template(
        "matvec_naive",
        "",
        tuple((p["name"], tuple(p["values"])) for p in params),
        tuple(constraints),
        tuple(grid),
        tuple(block),
        None,
    )
    space = clean.space()
    sample = covering_sample(space, hw, None)
    outside = [
        dict(zip(space.names, v))
        for v in itertools.product(*(p.values for p in space.params))
        if space.is_valid(dict(zip(space.names, v)), hw) and dict(zip(space.names, v)) not in sample
    ]
    assert outside, "the covering sample holds every valid configuration: nothing to plant"
    bad = outside[0]
    code = (
        (FIXTURES / "matvec.cu")
        .read_text()
        .replace(
            "        y[i] = acc;",
            f"        y[i] = (LANES == {bad['LANES']} && ROWS == {bad['ROWS']}) ? 2.0f * acc : acc;",
        )
    )
    label = ",".join(f"{k}={v}" for k, v in sorted(bad.items()))
    times = {**TIMES["matvec"], label: 0.01}
    result, evaluator, _, _ = session(
        "matvec",
        [reply(template_input(code, params, grid, block, constraints))],
        timing=lambda t, c: times.get(",".join(f"{k}={v}" for k, v in sorted(c.items()))),
    )
    (attempt,) = result.attempts
    assert attempt.status == "verified", attempt.reason
    _, kept = evaluator.kept[attempt.label]
    assert kept != bad and attempt.score is not None and attempt.score > 0.01
