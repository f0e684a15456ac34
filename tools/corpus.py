"""A pass over the corpus: which kernels it applies to and why it refuses the others, and
with --verify every configuration verified on the CPU runtime (kxform.bench.corpus).

For each kernel of the chosen sets (the manifest, the naive corpus, the test fixtures):
the pass's verdict (its parameters, or the first reason it refuses). With --verify, on
each kernel that has a harness spec, `kxform apply --check --verify cpu` on a copy (the
pass's checks, nvcc, the differential run against the original at its own launch) of
each configuration: the given ones (--config), else the bare pass where its defaults are
the code as written (it must verify bit-exact) and --points of its own candidates, or
of its space's points where it has none. With --space, every point of the pass's tuning
space (what `kxform tune` times) goes through the pass's checks (constraints, nvcc and
ptxas for --hw's architecture: registers and spills, re-parse, idempotence), one line
each with its registers, and with --verify through the CPU run too (-j points at once).
With --reverify (implies --verify), each rewrite that would be written is verified again
the way `kxform verify ORIGINAL REWRITTEN` does it: each file launched as its own
launcher says, nothing taken from the pass; one that is not is a failure.
A pipeline (`tile{TILE=32},swizzle`) is applied as given to each kernel. Nothing is written. A configuration nothing could judge (a
launch the verifier cannot read, an inconclusive run) is counted apart. Exit 1 if a
verification failed (or, with --strict, could not tell).

    .venv/bin/python tools/corpus.py PASS|PIPELINE [--corpus manifest|naive|fixtures]... [--only TEXT]...
        [--verify|--reverify] [--points N|all] [--config K=V,...]... [--space [-j N]] [--strict] [--hw h100]
"""

from __future__ import annotations

import argparse
import sys
import time

from concurrent.futures import ThreadPoolExecutor

from kxform.bench.corpus import (
    SETS,
    Applied,
    Kernel,
    apply_config,
    checked,
    configurations,
    has_spec,
    kernels,
    reverify,
    tuning_points,
    verdict,
)
from kxform.engine.pass_api import Outcome
from kxform.errors import KxformError

WIDTH = 40


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="a pass (launch, tile, vectorize, ...) or a pipeline to apply as given")
    parser.add_argument("--corpus", action="append", choices=sorted(SETS), help="kernel sets (default manifest, naive)")
    parser.add_argument("--only", action="append", default=[], help="only kernels whose label contains this")
    parser.add_argument("--verify", action="store_true", help="verify configurations on the CPU runtime")
    parser.add_argument(
        "--reverify",
        action="store_true",
        help="verify each written rewrite again from the two files (as kxform verify)",
    )
    parser.add_argument("--points", default="3", help="candidates or space points per kernel (default 3; all)")
    parser.add_argument("--config", action="append", default=[], help="a configuration to verify (K=V,...)")
    parser.add_argument("--space", action="store_true", help="every point of the tuning space through the checks")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="with --space: points checked at once (default 2)")
    parser.add_argument("--strict", action="store_true", help="a configuration that could not be told fails")
    parser.add_argument("--hw", default="h100")
    args = parser.parse_args(argv)
    if args.points != "all" and not args.points.isdigit():
        parser.error(f"--points {args.points}: a count or 'all'")
    limit = None if args.points == "all" else int(args.points)
    args.verify = args.verify or args.reverify
    pipeline = "{" in args.spec or "," in args.spec
    counts = {"apply": 0, "refused": 0, "checked": 0, "verified": 0, "failed": 0, "could not tell": 0}
    counts.update({"re-verified": 0, "not re-verified": 0})
    started = time.perf_counter()
    for kernel in kernels(args.corpus or ["manifest", "naive"], args.only):
        if pipeline:
            _verify(kernel, [args.spec], args.spec, args.hw, counts, args.reverify)
            continue
        if not _verdict(kernel, args.spec, args.hw, counts):
            continue
        if args.space:
            _space(kernel, tuning_points(kernel, args.spec, args.hw), args, counts)
            continue
        if not args.verify:
            continue
        if not has_spec(kernel.path, kernel.name):
            print(f"{'':<{WIDTH}} no harness spec: not verified")
            continue
        specs = [f"{args.spec}{{{c}}}" for c in args.config] or configurations(
            kernel.path, kernel.name, args.spec, args.hw, limit
        )
        _verify(kernel, specs, args.spec, args.hw, counts, args.reverify)
    print(
        f"\n{args.spec}: {counts['apply']} kernel(s) apply, {counts['refused']} refused; configurations: "
        + (f"{counts['checked']} passed the checks, " if counts["checked"] else "")
        + f"{counts['verified']} verified, {counts['failed']} failed, {counts['could not tell']} could not tell "
        + (
            f"(re-verified from the two files {counts['re-verified']}, not {counts['not re-verified']}) "
            if args.reverify
            else ""
        )
        + f"({time.perf_counter() - started:.0f} s)"
    )
    return 1 if counts["failed"] or (args.strict and counts["could not tell"]) else 0


def _verdict(kernel: Kernel, pass_name: str, hw: str, counts: dict[str, int]) -> bool:
    """Print what the pass makes of the kernel; whether it applies."""
    try:
        info = verdict(kernel, pass_name, hw)
    except KxformError as exc:
        counts["refused"] += 1
        print(f"{kernel.label:<{WIDTH}} input error  {str(exc)[:140]}")
        return False
    if info["status"] == "refused" or (info["status"] == "applicable" and "params" in info and not info["params"]):
        counts["refused"] += 1
        print(f"{kernel.label:<{WIDTH}} refused      {(info['reasons'] or [info['status']])[0][:150]}")
        return False
    counts["apply"] += 1
    params = "; ".join(f"{p['name']}={p['default']} in {_domain(p)}" for p in info.get("params", []))
    print(f"{kernel.label:<{WIDTH}} {info['status']:<12} {params[:150]}")
    for note in [*info.get("written", []), *info.get("not_lifted", [])]:
        print(f"{'':<{WIDTH}} {note[:150]}")
    return True


def _domain(param: dict) -> str:
    if "values" in param:
        return "{" + ", ".join(map(str, param["values"])) + "}"
    low, high, _ = param["range"]
    return f"{low}..{high}"


def _verify(
    kernel: Kernel, specs: list[str], pass_name: str, hw: str, counts: dict[str, int], again: bool = False
) -> None:
    for spec in specs:
        at = time.perf_counter()
        applied = apply_config(kernel.path, spec, kernel.name, hw)
        verdict_ = _judge(applied, as_written=spec == pass_name)
        if again and verdict_ == "verified" and applied.rewritten:
            ok, words = reverify(kernel.path, kernel.name, applied.rewritten)
            counts["re-verified" if ok else "not re-verified"] += 1
            verdict_ = "verified" if ok else "failed"
            print(f"{'':<4}verified again from the two files: {words[:150]}")
        counts[verdict_] += 1
        shown = f"{kernel.label} {spec}" if "{" in pass_name or "," in pass_name else spec
        print(f"{'':<4}{shown:<{WIDTH + 20}} {applied.line()} ({time.perf_counter() - at:.0f} s)", flush=True)


def _space(kernel: Kernel, specs: list[str], args: argparse.Namespace, counts: dict[str, int]) -> None:
    """Each point through the pass's checks (and with --verify the CPU run), -j at once."""

    def one(spec: str) -> tuple[str, str, str]:
        ok, line = checked(kernel, spec, args.hw)
        if not ok or not args.verify:
            return spec, line, "checked" if ok else "failed"
        applied = apply_config(kernel.path, spec, kernel.name, args.hw)
        return spec, f"{line}; {applied.line()}", _judge(applied, as_written=False)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for spec, line, verdict_ in pool.map(one, specs):
            counts[verdict_] += 1
            print(f"{'':<4}{spec:<{WIDTH + 48}} {line}", flush=True)


def _judge(applied: Applied, as_written: bool) -> str:
    """verified, failed or could not tell. The bare pass whose defaults are the code as
    written must verify bit-exact; where there is nothing to rewrite (already parameters)
    it is unchanged, which is no failure."""
    if as_written and applied.outcome is Outcome.UNCHANGED:
        return "verified"
    if applied.could_not_tell:
        return "could not tell"
    ok = applied.bit_exact if as_written else applied.verified
    return "verified" if ok else "failed"


if __name__ == "__main__":
    sys.exit(main())
