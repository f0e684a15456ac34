"""Pass logs for the log viewer and report tests.

`real_run` runs `kxform apply` for real. `gpu_style_run` writes the records a GPU run
with `--measure` writes (this machine has no GPU to time on), in the documented format
(docs/pass-log.md: kernel records with provenance, a payload, the verification policy,
alternates and rejected candidates), plus `tune` and `l2` records (the branches that
write them land later), through PassLog for the run and summary records. The measure
detail follows verify/stage.py's text.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from conftest import run_cli
from kxform.engine.pass_api import Outcome
from kxform.log.passlog import PassLog
from kxform.log.report import Report

ROOT = Path(__file__).resolve().parent.parent


def real_run(tmp: Path, *args: str, corpora: tuple[str, ...] = ("sgemm_tiled", "transpose")) -> Path:
    """Copy corpus kernels into `tmp` (once) and run `kxform apply ARGS --check` there; the log's path."""
    for name in corpora:
        if not (tmp / name).exists():
            shutil.copytree(ROOT / "corpora" / name, tmp / name)
    before = set((tmp / ".kxform" / "logs").glob("*.jsonl")) if (tmp / ".kxform").exists() else set()
    run_cli("apply", *args, "--check", *corpora, cwd=tmp)
    (log,) = set((tmp / ".kxform" / "logs").glob("*.jsonl")) - before
    return log


def _measure(before: float, after: float) -> dict[str, Any]:
    return {
        "name": "measure",
        "ok": True,
        "detail": f"size bench on gpu: original {before:.4f} ms (+-0.0031), rewritten {after:.4f} ms (+-0.0029); "
        f"speedup {before / after:.3f}x (median of 200 launches, 4 input set(s) rotated, persisting L2 "
        "capped, outputs re-checked after timing)",
    }


def _kernel(
    run_id: str,
    file: str,
    name: str,
    line: int,
    outcome: str,
    params: dict[str, Any],
    rationale: str,
    evidence: str,
    checks: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    spec = "swizzle{" + ",".join(f"{k}={v}" for k, v in params.items()) + "}"
    return {
        "type": "kernel",
        "schema": 1,
        "run": run_id,
        "file": file,
        "kernel": name,
        "line": line,
        "pass": "swizzle",
        "outcome": outcome,
        "stage": extra.pop("stage", None),
        "reasons": extra.pop("reasons", [rationale] if outcome == "applied" else []),
        "proposal": {
            "spec": spec,
            "params": params,
            "rationale": rationale,
            "proposer": "deterministic",
            "measured": evidence == "measured",
            "provenance": {"proposer": "deterministic", "evidence": evidence},
            **({"payload": extra.pop("payload")} if "payload" in extra else {}),
        },
        "checks": checks,
        "verify_policy": {
            "launch": {"launch": "spec"},
            "required": False,
            "compare": {"mode": "exact", "scale": 1.0, "reason": "the rewrite changes no arithmetic"},
        },
        **extra,
    }


def gpu_style_run(path: Path, gemm_ms: float = 66.1, stencil_ms: float = 0.166) -> Path:
    """A two-kernel `--measure` run with a tuning run and L2 predictions, at `path`."""
    log = PassLog.open(str(path), hw="h200", pipeline="swizzle", argv=["apply", "--pass", "swizzle", "--measure"])
    checks = [
        {"name": "bijection", "ok": True, "detail": "emitted helper is a bijection"},
        {"name": "compile", "ok": True, "detail": "nvcc ok"},
        {"name": "verify", "ok": True, "detail": "verified on the gpu runtime (original vs rewritten, 4 sizes)"},
    ]
    log.write(
        _kernel(
            log.run_id,
            "src/gemm.cu",
            "sgemm_128",
            41,
            "applied",
            {"pattern": "grouped", "group": 8},
            "predicted by the model: 2.5x less DRAM traffic",
            "predicted",
            checks + [_measure(gemm_ms, 65.1)],
            alternates=["swizzle{pattern=column}"],
            payload={"remap": "grouped", "rows": 8},
            rejected=[{"spec": "swizzle{pattern=hilbert}", "stage": "measure", "reason": "NotFaster"}],
        )
    )
    log.write(
        _kernel(
            log.run_id,
            "src/stencil.cu",
            "stencil5",
            12,
            "missed",
            {"pattern": "column"},
            "default rule",
            "rule",
            checks + [_measure(stencil_ms, 0.207)],
            stage="measure",
            reasons=["NotFaster: the rewrite was not faster"],
        )
    )
    log.write(
        {
            "type": "file",
            "schema": 1,
            "run": log.run_id,
            "file": "src/gemm.cu",
            "changed": True,
            "error": None,
            "diff": "--- a/src/gemm.cu\n+++ b/src/gemm.cu\n@@ -41 +41 @@\n-    int row = blockIdx.y;\n"
            "+    int row = kxform_block.y;\n",
            "compile": None,
            "timings_s": {"swizzle": 0.4},
        }
    )
    log.write(
        {
            "type": "file",
            "schema": 1,
            "run": log.run_id,
            "file": "src/stencil.cu",
            "changed": False,
            "error": None,
            "diff": "",
            "compile": None,
            "timings_s": {"swizzle": 0.2},
        }
    )
    for i, (group, ms) in enumerate([(1, 70.2), (2, None), (4, 66.0), (8, 65.1), (16, 65.4)], start=1):
        log.write(
            {
                "type": "tune",
                "schema": 1,
                "run": log.run_id,
                "file": "src/gemm.cu",
                "kernel": "sgemm_128",
                "strategy": "bayes",
                "eval": i,
                "params": {"group": group},
                "time_ms": ms,
                "status": "ok" if ms is not None else "compile_failed",
            }
        )
    log.write(
        {
            "type": "l2",
            "schema": 1,
            "run": log.run_id,
            "file": "src/gemm.cu",
            "kernel": "sgemm_128",
            "hw": "h200",
            "size": "bench",
            "predictions": [
                {
                    "pattern": "row",
                    "l2_hit_rate": 0.58,
                    "dram_read_bytes": 8.74e9,
                    "dram_write_bytes": 2.7e8,
                    "rank": 3,
                    "margin": 0.0,
                },
                {
                    "pattern": "grouped",
                    "l2_hit_rate": 0.80,
                    "dram_read_bytes": 3.51e9,
                    "dram_write_bytes": 2.7e8,
                    "rank": 1,
                    "margin": 0.6,
                },
            ],
        }
    )
    log.write({"type": "future_kind", "schema": 1, "run": log.run_id, "note": "a record type no viewer knows"})
    report = Report()
    report.files_changed, report.files_unchanged = 1, 1
    report.kernel_outcomes.update({Outcome.APPLIED: 1, Outcome.MISSED: 1})
    log.close(report)
    return path


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
