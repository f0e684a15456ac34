"""The launch pass over the corpus and the test fixtures: which kernels' block sizes it lifts
and which it refuses (with the reasons), and every lift verified.

For each kernel of corpora/index.toml and of every `.cu` file under tests/fixtures: the
launch pass's verdict (the parameters it lifts and where each was written, or the
reasons it refuses). For each lifted kernel with a harness spec, `kxform apply` (the real
pipeline: checks, nvcc, differential run) at the original values, where the rewrite must
verify bit-exact, and at `--points` other block sizes (the pass's nearest valid
candidates), each verified on the CPU runtime against the original at its own launch.
Nothing is written (`--check` mode on copies). A value whose launch cannot be read in
terms of the kernel's arguments, or whose launch read at the original value is not the
spec's (the verifier's "could not tell"), is "not verifiable", nothing written, and
counted apart. Prints a table; exit 1 if any verification failed.

    .venv/bin/python tools/launch_corpus.py [--points 3] [--hw h100] [--only NAME]
"""

from __future__ import annotations

import argparse
import sys
import time


from corpus_apply import apply_config, candidates, fixture_kernels, has_spec, manifest_kernels  # noqa: E402

from kxform.api import explain  # noqa: E402
from kxform.errors import InputError  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=3, help="non-default block sizes per kernel (default 3)")
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--only", action="append", default=[], help="only entries whose label contains this")
    args = parser.parse_args()
    lifted, refused, failures, unverifiable = 0, 0, 0, 0
    started = time.perf_counter()
    for label, path, kernel in manifest_kernels() + fixture_kernels():
        if args.only and not any(o in label for o in args.only):
            continue
        try:
            info = explain(path.read_bytes(), kernel, "launch", path=str(path), hw=args.hw)
        except InputError as exc:
            print(f"{label:<44} input error: {str(exc)[:120]}")
            refused += 1
            continue
        if info["status"] == "refused":
            refused += 1
            print(f"{label:<44} refused   {info['reasons'][0][:150]}")
            continue
        lifted += 1
        names = ", ".join(f"{p['name']}={p['default']}" for p in info["params"])
        print(f"{label:<44} lifted    {names}; {len(info['constraints'])} constraints")
        for where in info["written"]:
            print(f"{'':<54}written: {where}")
        for constraint in info["constraints"][1:]:
            print(f"{'':<54}requires {constraint['expr']} [{constraint['origin']}]")
        if not has_spec(path, kernel):
            print(f"{'':<54}no harness spec: not verified")
            continue
        applied = apply_config(path, "launch", kernel, args.hw)
        failures += not applied.bit_exact
        print(f"{'':<54}defaults: {applied.line()}")
        for spec in candidates(path, kernel, "launch", args.hw)[: args.points]:
            applied = apply_config(path, spec, kernel, args.hw)
            if applied.could_not_tell:  # the launch the source writes is not the spec's: nothing written
                unverifiable += 1
                print(f"{'':<54}{spec:<46} not verifiable (nothing written): {applied.detail}")
                continue
            failures += not applied.verified
            print(f"{'':<54}{spec:<46} {applied.line()}")
    print(
        f"kernels: {lifted} lifted, {refused} refused; verification failures: {failures}; not verifiable "
        f"(refused, nothing written): {unverifiable}; {time.perf_counter() - started:.0f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
