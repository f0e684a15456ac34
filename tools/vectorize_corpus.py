"""The vectorize and coarsen passes over the corpora: which kernels each applies to and
which it refuses (with the reasons), and every applied configuration verified.

For each kernel of corpora/index.toml and corpora/naive/index.toml (the naive versions):
the pass's verdict (its space: the widths or factors it offers, or the first reason it
refuses). With `--verify`, each value of the space on a kernel with a harness spec goes
through `kxform apply --check --verify cpu` on a copy (checks, nvcc, a differential run
on the CPU runtime at every non-bench size of the spec; the policy is bit-exact).
Nothing is written. Exit 1 if any verification failed.

    .venv/bin/python tools/vectorize_corpus.py [--pass vectorize|coarsen] [--verify] [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


from corpus_apply import ROOT, apply_config, has_spec, manifest_kernels, naive_pairs  # noqa: E402

from kxform.api import explain, space_of  # noqa: E402
from kxform.errors import InputError  # noqa: E402


def kernels() -> list[tuple[str, Path, str]]:
    """(label, file, kernel) for the corpus manifest and the naive versions of the naive corpus."""
    return manifest_kernels() + [
        (f"naive/{p['name']}", ROOT / "corpora" / "naive" / p["naive"], p["naive_kernel"]) for p in naive_pairs()
    ]


def _points(params: list[dict]) -> list[dict[str, str]]:
    """Every combination of the parameters' values but the first parameter's default
    (the width or factor at 1 is the code as written)."""
    points: list[dict[str, str]] = [{}]
    for param in params:
        values = [v for v in param["values"] if v != param["default"]] if param is params[0] else param["values"]
        points = [{**p, param["name"]: v} for p in points for v in values]
    return points


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pass", dest="pass_name", default="vectorize", choices=("vectorize", "coarsen"))
    parser.add_argument("--verify", action="store_true", help="verify every applied configuration on the CPU runtime")
    parser.add_argument("--only", action="append", default=[], help="only entries whose label contains this")
    parser.add_argument("--hw", default="h100")
    args = parser.parse_args()
    applies, refused, failures, verified = 0, 0, 0, 0
    started = time.perf_counter()
    for label, path, kernel in kernels():
        if args.only and not any(o in label for o in args.only):
            continue
        try:
            info = explain(path.read_bytes(), kernel, args.pass_name, path=str(path), hw=args.hw)
        except InputError as exc:
            print(f"{label:<34} input error  {str(exc)[:140]}")
            refused += 1
            continue
        if info["status"] != "applicable" or not info.get("params"):
            refused += 1
            reason = info["reasons"][0] if info["reasons"] else info["status"]
            print(f"{label:<34} refused      {reason[:170]}")
            continue
        applies += 1
        params = info["params"]
        print(f"{label:<34} applies      " + "; ".join(f"{p['name']} in {{{', '.join(p['values'])}}}" for p in params))
        if not args.verify or not has_spec(path, kernel):
            continue
        space = space_of(path.read_bytes(), kernel, args.pass_name, path=str(path), hw=args.hw)
        points = _points(params)
        valid = [p for p in points if not space.violations(space.resolve(p))]
        if len(valid) < len(points):
            print(f"{'':<34}   {len(points) - len(valid)} combination(s) outside the space's constraints: not run")
        for point in valid:
            options = ",".join(f"{k}={v}" for k, v in point.items())
            applied = apply_config(path, f"{args.pass_name}{{{options}}}", kernel, args.hw)
            verified += applied.identical
            failures += not applied.identical
            print(f"{'':<34}   {options:<40} {applied.line()}")
    print(
        f"\n{args.pass_name}: {applies} kernel(s) apply, {refused} refused; {verified} configuration(s) verified "
        f"bit-exact, {failures} failed ({time.perf_counter() - started:.0f} s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
