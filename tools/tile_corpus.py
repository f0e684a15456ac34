"""The tile pass over the corpus: what it lifts and refuses, and every lifted kernel verified.

For each kernel of corpora/index.toml: the tile pass's verdict (the parameters it lifts,
or the reasons it refuses). For each lifted kernel with a harness spec, `kxform apply`
(the real pipeline: checks, nvcc, differential run) at the original values, where the
rewrite must verify bit-exact, and at `--points` non-default configurations (the pass's
nearest valid candidates), each verified on the CPU runtime against the original at its
own launch. Nothing is written (`--check` mode on copies). Then `tile,swizzle` in one
pipeline on the tiled GEMMs. Prints a table; exit 1 if any verification failed.

    .venv/bin/python tools/tile_corpus.py [--points 3] [--hw h100] [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import time


from corpus_apply import ROOT, apply_config, candidates, manifest  # noqa: E402

from kxform.api import explain  # noqa: E402
from kxform.engine.pass_api import Outcome  # noqa: E402
from kxform.errors import InputError  # noqa: E402

GEMMS = ("sgemm_tiled", "batched_scores_3d", "macro_index_sqdist")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3, help="non-default configurations per kernel (default 3)")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--only", action="append", default=[], help="only these manifest entries")
    args = parser.parse_args()
    entries = manifest()
    lifted, refused, failures = 0, 0, 0
    started = time.perf_counter()
    for entry in entries:
        if args.only and entry["name"] not in args.only:
            continue
        path = ROOT / "corpora" / entry["path"]
        kernel = entry["kernel"].split("<")[0]
        try:
            info = explain(path.read_bytes(), kernel, path=str(path), hw=args.hw)
        except InputError as exc:  # the file does not parse: nothing is touched
            print(f"{entry['name']:<22} input error: {exc}")
            refused += 1
            continue
        if info["status"] == "refused":
            refused += 1
            print(f"{entry['name']:<22} refused   {info['reasons'][0]}")
            continue
        lifted += 1
        names = ", ".join(f"{p['name']}={p['default']}" for p in info["params"])
        print(f"{entry['name']:<22} lifted    {names}; {len(info['constraints'])} constraints")
        for note in info["not_lifted"]:
            print(f"{'':<32}not lifted: {note[:140]}")
        if "spec" not in entry:
            print(f"{'':<32}no harness spec: not verified")
            continue
        applied = apply_config(path, "tile", kernel, args.hw)
        if applied.outcome is Outcome.UNCHANGED:  # constexprs only: already parameters, nothing to rewrite
            shown = f"{applied.label}: already parameters (constexpr): nothing to rewrite at the original values"
        else:
            failures += not applied.bit_exact
            shown = applied.line()
        print(f"{'':<32}defaults: {shown}")
        for label in candidates(path, kernel, "tile", args.hw)[: args.points]:
            applied = apply_config(path, label, kernel, args.hw)
            failures += not applied.verified
            print(f"{'':<32}{label:<34} {applied.line()}")
    for name in GEMMS:
        entry = next(e for e in entries if e["name"] == name)
        if args.only and name not in args.only:
            continue
        path = ROOT / "corpora" / entry["path"]
        applied = apply_config(path, "tile{TILE=32},swizzle", entry["kernel"], args.hw)
        failures += not applied.verified
        print(f"{name:<22} tile{{TILE=32}},swizzle: {applied.line()}")
    print(
        f"kernels: {lifted} lifted, {refused} refused; verification failures: {failures}; "
        f"{time.perf_counter() - started:.0f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
