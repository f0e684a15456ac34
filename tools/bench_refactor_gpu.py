#!/usr/bin/env python3
"""The model-refactor pipeline on a GPU with recorded templates: each template is
validated, verified against the original on the GPU at every check size over its covering
sample, run under compute-sanitizer (memcheck and racecheck) on that sample, tuned over
its space by kxform's tuner with times measured on the GPU, and the kept configuration's
speed-up over the original measured in the same process.

    python tools/bench_refactor_gpu.py [--families layernorm,transpose] [--out FILE] [--hw NAME]
                                       [--budget N] [--launch-budget S]
    python tools/bench_refactor_gpu.py --dry-run [--families ...]   # no GPU: CPU runtime, no timing

The templates are the recorded answers of tests/fixtures/refactor (sessions.json: the
parameters, launch and constraints; FAMILY.cu: the code), for the corpus's naive kernels
(corpora/naive/FAMILY). They reach the evaluator exactly as a model's answer does (a
proposal whose payload is the template), so every rule and check of
`kxform.propose.template_session.TemplateEvaluator` applies; only the model call is
replayed. Times: `kxform.propose.template_timing.GpuTemplateTiming` (one set of inputs at
the spec's bench size for the original and every configuration, kxform's timer).

Exit status: 0 every template verified and measured; 1 some template was rejected or
not measured; 2 usage error or no GPU (without --dry-run).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any


from kxform.bench.output import write_json
from kxform.bench.paths import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "refactor"
NAIVE = ROOT / "corpora" / "naive"
TOOL = "bench_refactor_gpu"


def recorded() -> dict[str, dict[str, Any]]:
    """Family -> the recorded `propose_refactor` input (code, params, launch, constraints)."""
    sessions = json.loads((FIXTURES / "sessions.json").read_text())
    out = {}
    for family, entry in sessions.items():
        if family == "about":
            continue
        out[family] = {
            "last_attempt": "first attempt",
            "expectation": "recorded template",
            "code": (FIXTURES / f"{family}.cu").read_text(),
            **entry,
        }
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--families",
        default="layernorm,transpose",
        help="recorded templates to run (comma-separated; 'all' for every one)",
    )
    p.add_argument("--out", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--hw", help="hardware profile (default: the device's; h100 with --dry-run)")
    p.add_argument("--budget", type=int, default=24, help="tuning evaluations per template (default 24)")
    p.add_argument("--launch-budget", type=float, default=0.25, help="seconds of timed launches per version")
    p.add_argument("--dry-run", action="store_true", help="no GPU: verify on the CPU runtime, time nothing")
    args = p.parse_args(argv)
    known = recorded()
    args.names = list(known) if args.families == "all" else [f for f in args.families.split(",") if f]
    unknown = [f for f in args.names if f not in known]
    if unknown:
        p.error(f"no recorded template for '{unknown[0]}' (recorded: {', '.join(known)})")
    if args.budget < 1:
        p.error("--budget must be at least 1")
    return args


def run_family(
    family: str, data: dict[str, Any], runtime: Any, hw: Any, budget: int, launch_budget: float, timed: bool
) -> dict[str, Any]:
    from kxform.engine.proposal import Proposal
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec
    from kxform.propose.template import config_label, read_template
    from kxform.propose.template_session import TemplateEvaluator
    from kxform.propose.template_timing import GpuTemplateTiming

    kernel = f"{family}_naive"
    model = parse_model(read_source(NAIVE / family / "naive.cu"))
    spec = load_spec(NAIVE / family / "naive.kxspec.toml").kernel(kernel)
    function = next(f for f in model.functions if f.name == kernel)
    template = read_template(data, kernel)
    timing = GpuTemplateTiming(model.source, function, spec, runtime, launch_budget_s=launch_budget) if timed else None
    row: dict[str, Any] = {
        "family": family,
        "kernel": kernel,
        "runtime": runtime.name,
        "size": timing.size.name if timing else None,
    }
    if timing is not None:
        row["original_ms"] = round(timing.original_timing().median_ms, 4)
    evaluator = TemplateEvaluator(model, kernel, spec, runtime, hw, timing, budget=budget)
    proposal = Proposal.of("refactor", kernel, {}, "recorded template", payload=template.payload())  # type: ignore[union-attr]
    started = time.perf_counter()
    evaluation = evaluator.evaluate(None, proposal)  # type: ignore[arg-type]
    row["seconds"] = round(time.perf_counter() - started, 1)
    if evaluation.rejection is not None:
        row.update(status="rejected", stage=evaluation.rejection.stage, reason=evaluation.rejection.reason)
        return row
    _, config = evaluator.kept[proposal.label()]
    row.update(
        status="verified",
        checks=[f"{c.name}: {c.detail}" for c in evaluation.checks],
        kept=config_label(config),
        kept_ms=evaluation.time_ms,
        reproducing_ms=evaluation.baseline_ms,
        failures=dict(timing.failures) if timing else {},
    )
    if timing is not None and evaluation.time_ms:
        row["speedup"] = round(row["original_ms"] / evaluation.time_ms, 3)
    return row


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from kxform.hw import load_profile

    if args.dry_run:
        from kxform.runtime.cpu import CpuRuntime

        runtime: Any = CpuRuntime()
        hw = load_profile(args.hw or "h100")
        device = "CPU runtime (dry run)"
    else:
        from kxform.runtime.gpu import GpuRuntime

        runtime = GpuRuntime()
        ok, why = runtime.available()
        if not ok:
            print(f"{TOOL}: no GPU: {why}", file=sys.stderr)
            return 2
        from kxform.hw import detect

        device = runtime.device_info().name
        hw = load_profile(args.hw) if args.hw else detect()
    print(f"{TOOL}: {device}; profile {hw.name}; budget {args.budget}", flush=True)
    templates = recorded()
    rows = []
    for family in args.names:
        try:
            row = run_family(family, templates[family], runtime, hw, args.budget, args.launch_budget, not args.dry_run)
        except Exception as exc:  # noqa: BLE001 - one family's failure must not lose the others' figures
            row = {"family": family, "status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
        write_json(args.out, {"tool": TOOL, "device": device, "hw": hw.name, "budget": args.budget, "rows": rows})
    print(f"\n{'family':<12}{'status':<10}{'original ms':>12}{'kept ms':>10}{'speed-up':>10}  kept / reason")
    for r in rows:
        print(
            f"{r['family']:<12}{r['status']:<10}{r.get('original_ms') or '-':>12}{r.get('kept_ms') or '-':>10}"
            f"{r.get('speedup') or '-':>10}  {r.get('kept') or r.get('reason', '')[:100]}"
        )
    getattr(runtime, "close", lambda: None)()
    return 0 if all(r["status"] == "verified" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
