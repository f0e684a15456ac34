"""A refactoring template wrong only beyond its spec's sizes is refused: the verification
sizes of a rewrite include sizes derived from it (kxform.verify.sizes), and a template's
literal constants are suspect bounds. A GELU template that stops at block 64 or at
element 8192 agrees with the original at the spec's N = 5003 and 4099 and is caught at
N = 8193 and at more blocks than 8192; the same template without the limit is written."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from template_inputs import GELU

from kxform.cli.main import main
from kxform.frontend.source import read_source
from kxform.propose.lock import Decision
from kxform.propose.lockfile import kernel_digests, render
from kxform.propose.template import Template

NAIVE = Path(__file__).resolve().parents[2] / "corpora" / "naive"
KERNEL = "gelu_f32_naive"


def _template(guard: str) -> Template:
    return Template(
        KERNEL,
        GELU.format(guard=guard, scale="").replace("{{", "{").replace("}}", "}"),
        (("BLOCK", (64, 128, 256)), ("VEC", (1, 2, 4))),
        (),
        ("ceil_div(N, BLOCK * VEC)",),
        ("BLOCK",),
        (("BLOCK", 128), ("VEC", 1)),
    )


def _lock(path: Path, template: Template) -> Path:
    payload = template.payload()
    entry = Decision(
        KERNEL,
        "refactor",
        (("template", hashlib.sha256(payload.encode()).hexdigest()[:10]), ("BLOCK", 128), ("VEC", 2)),
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


@pytest.mark.slow
@pytest.mark.parametrize(
    "guard, size",
    [
        ("if (blockIdx.x >= 64) return;\n        if (i < N)", "blocks"),
        ("if (i < N && i < 8192)", "past-N-8192"),
        ("if (i < N)", ""),
    ],
)
def test_a_template_wrong_past_its_own_constants_is_refused_at_a_derived_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], guard: str, size: str
) -> None:
    work = tmp_path / "gelu"
    shutil.copytree(NAIVE / "gelu_f32", work)
    path = work / "naive.cu"
    before = path.read_bytes()
    lock = _lock(path, _template(guard))
    log = work / "log.jsonl"
    code = main(["apply", "--pass", "refactor", "--proposer", "lock", f"--lock={lock}", "--log", str(log), str(path)])
    capsys.readouterr()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    (record,) = [r for r in records if r.get("type") == "kernel" and r.get("pass") == "refactor"]
    if not size:
        verify = next(c for c in record["checks"] if c["name"] == "verify")
        assert code == 0 and record["outcome"] == "applied", record
        assert "blocks: ok" in verify["detail"]  # more blocks than the template's constants, and it holds
        return
    reasons = " ".join(record["reasons"])
    assert code != 0 and path.read_bytes() == before
    assert record["outcome"] == "failed" and record["key"] == "VerifyMismatch", record
    assert "ragged: ok" in reasons and "vector-tail: ok" in reasons  # the spec's sizes pass
    assert f"{size}: out:" in reasons, reasons
