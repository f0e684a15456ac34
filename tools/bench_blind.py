#!/usr/bin/env python3
"""The blind set (corpora/blind), tuned once as a new user would: the measurement.

    python tools/bench_blind.py --draft                 # on any machine: the drafted specs
    python tools/bench_blind.py [--budget N] [--kernels a,b] [--out FILE]   # on a GPU

`--draft` writes, for every kernel of corpora/blind/index.toml that has none, the spec
`kxform harness infer` drafts, unedited, as corpora/blind/STEM.KERNEL.kxspec.toml, and
prints what each draft asks a person to fill in (nothing is filled in).

Without `--draft`, on a GPU: the device-to-device copy bandwidth is measured once (1 GiB
read and written, CUDA events, median of 20), then every kernel is tuned by `kxform tune`
with its drafted spec, every pass that has something to tune, the given budget, and the
timing size of the index (`bench`: the variables the draft names). Each row gives the
original's and the best verified version's time from the tune run (measured there on the
same inputs), the speed-up (1 where the original is kept), what changed, and the fraction
of the copy bandwidth each reaches (the kernel's least traffic: every input read once,
every output written once, over its time). Results are reported as they fall: a kernel
whose draft does not load, or whose tune fails, is a row saying so. The JSON goes to
`--out` after every kernel.

Exit status: 0 every kernel was measured, 1 some row failed, 2 usage (or no GPU).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from kxform.bench import yardsticks
from kxform.bench.output import geomean
from kxform.fileio import write_atomic
from kxform.harness.model import SizeSpec
from kxform.harness.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
BLIND = ROOT / "corpora" / "blind"
COPY_BYTES = 1 << 30


def entries(only: set[str]) -> list[dict[str, Any]]:
    listed = tomllib.loads((BLIND / "index.toml").read_text())["kernel"]
    chosen = [e for e in listed if not only or e["kernel"].split("<")[0] in only or e["file"] in only]
    if only and not chosen:
        raise SystemExit(f"bench_blind: error: no kernel of corpora/blind/index.toml is named {sorted(only)}")
    return chosen


def spec_path(entry: dict[str, Any]) -> Path:
    ident = re.sub(r"\W+", "_", entry["kernel"]).strip("_")
    return BLIND / f"{Path(entry['file']).stem}.{ident}.kxspec.toml"


def kxform(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "kxform.cli.main", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def draft(entry: dict[str, Any]) -> str:
    """Write the draft of one kernel (never over an existing one); what it asks to fill in."""
    target = spec_path(entry)
    if target.exists():
        return f"{target.name}: kept (drafted before)"
    proc = kxform(
        "harness", "infer", str(BLIND / entry["file"]), "--kernel", entry["kernel"], "-o", str(target), timeout=900
    )
    todos = [line for line in proc.stderr.splitlines() if "fill in" in line or "WARNING" in line or "warning" in line]
    state = "drafted" if proc.returncode == 0 else f"harness infer exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    return f"{target.name}: {state}" + "".join(f"\n    {t}" for t in todos)


def bench_values(entry: dict[str, Any], spec: Any) -> dict[str, int]:
    """The index's timing size, restricted to the size variables the draft names."""
    known = set().union(*(s.values for s in spec.sizes)) if spec.sizes else set()
    return {k: int(v) for k, v in entry.get("bench", {}).items() if k in known}


def least_bytes(spec: Any, values: dict[str, int]) -> int:
    """Each input buffer read once, each output written once (inout both) at the size
    (kxform.bench.yardsticks)."""
    base = dict(spec.sizes[-1].values) if spec.sizes else {}
    return yardsticks.least_bytes(spec, SizeSpec("bench", True, {**base, **values}))


def copy_gbps() -> float:
    """Device-to-device copy bandwidth, counting bytes read plus bytes written."""
    import cupy

    src = cupy.random.random(COPY_BYTES // 8)
    dst = cupy.empty_like(src)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    times = []
    for i in range(25):
        start.record()
        cupy.copyto(dst, src)
        stop.record()
        stop.synchronize()
        if i >= 5:
            times.append(cupy.cuda.get_elapsed_time(start, stop))
    return 2 * COPY_BYTES / (sorted(times)[len(times) // 2] * 1e-3) / 1e9


def tune(entry: dict[str, Any], budget: int, gbps: float | None, timeout: float, jobs: int = 1) -> dict[str, Any]:
    row: dict[str, Any] = {"kernel": entry["kernel"], "file": entry["file"], "style": entry["style"]}
    path = spec_path(entry)
    try:
        spec = load_spec(path).kernel(entry["kernel"])
    except Exception as exc:  # noqa: BLE001 - the row reports whatever the draft's loading says
        return {**row, "error": f"the drafted spec does not load: {exc}"}
    values = bench_values(entry, spec)
    size = ",".join(f"{k}={v}" for k, v in values.items())
    with tempfile.TemporaryDirectory(prefix="kxform-blind-") as scratch:
        args = ["tune", str(BLIND / entry["file"]), "--kernel", entry["kernel"], "--spec", str(path)]
        args += ["--budget", str(budget), "-j", str(jobs), "--json", "--db", str(Path(scratch) / "tuning.sqlite")]
        args += ["--log", str(Path(scratch) / "log.jsonl"), "--hw", "h200"] + (["--size", size] if size else [])
        started = time.monotonic()
        try:
            proc = kxform(*args, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {**row, "error": f"kxform tune ran past {timeout:.0f} s"}
    row["tune_s"] = round(time.monotonic() - started, 1)
    try:
        summary = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {**row, "error": f"kxform tune exit {proc.returncode}: {(proc.stderr.strip() or proc.stdout)[-400:]}"}
    result = summary.get("result") or {}
    original = result.get("original_ms") or result.get("time_ms")
    best = result.get("time_ms")
    row.update(
        size=values,
        original_ms=original,
        best_ms=best,
        speedup=round(original / best, 3) if original and best else None,
        kept_original=result.get("kept_original", True),
        pipeline=result.get("pipeline"),
        reason=result.get("reason"),
        not_offered=result.get("not_offered"),
        evaluations=summary.get("evaluations") if isinstance(summary.get("evaluations"), int) else None,
    )
    nbytes = least_bytes(spec, values)
    if gbps:
        row["copy_fraction"] = {
            "original": round(nbytes / (original * 1e-3) / 1e9 / gbps, 4) if original else None,
            "best": round(nbytes / (best * 1e-3) / 1e9 / gbps, 4) if best else None,
        }
    return row


def table(rows: list[dict[str, Any]], gbps: float | None) -> str:
    lines = [f"copy bandwidth: {gbps:.0f} GB/s" if gbps else "copy bandwidth: not measured"]
    lines.append(f"{'kernel':<30}{'original ms':>12}{'best ms':>10}{'speed-up':>9}  copy fraction  changed")
    for r in rows:
        if "error" in r:
            lines.append(f"{r['kernel']:<30}  {r['error'][:110]}")
            continue
        frac = r.get("copy_fraction") or {}
        share = f"{_pct(frac.get('original'))} -> {_pct(frac.get('best'))}"
        changed = "original kept" if r["kept_original"] else r.get("pipeline") or ""
        lines.append(
            f"{r['kernel']:<30}{_ms(r['original_ms']):>12}{_ms(r['best_ms']):>10}{r['speedup'] or 1:>9.2f}  "
            f"{share:<13}  {changed}"
        )
    speeds = [r["speedup"] or 1.0 for r in rows if "error" not in r]
    if speeds:
        lines.append(f"geomean speed-up over {len(speeds)} kernels: {geomean(speeds):.3f}")
    return "\n".join(lines)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", action="store_true", help="draft the missing specs (no GPU needed)")
    parser.add_argument("--budget", type=int, default=40, help="evaluations per kernel (default 40)")
    parser.add_argument("--kernels", default="", help="comma-separated kernel names or files (default: all)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per kernel's tune (default 600)")
    parser.add_argument("--out", help="JSON results (written after every kernel)")
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        help="kxform tune's candidates prepared at once (wall time only; default 1)",
    )
    opts = parser.parse_args(argv)
    chosen = entries({k.strip() for k in opts.kernels.split(",") if k.strip()})
    if opts.draft:
        for entry in chosen:
            print(draft(entry), flush=True)
        return 0
    try:
        gbps: float | None = copy_gbps()
    except Exception as exc:  # noqa: BLE001 - no CuPy or no GPU: said, and the tune needs a GPU anyway
        print(f"bench_blind: error: no GPU to measure on ({exc})", file=sys.stderr)
        return 2
    rows: list[dict[str, Any]] = []
    for entry in chosen:
        rows.append(tune(entry, opts.budget, gbps, opts.timeout, opts.jobs))
        print(json.dumps(rows[-1]), flush=True)
        if opts.out:
            write_atomic(
                Path(opts.out), json.dumps({"copy_gbps": gbps, "budget": opts.budget, "rows": rows}, indent=1).encode()
            )
    print(table(rows, gbps))
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
