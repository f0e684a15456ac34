#!/usr/bin/env python3
"""Every structural rewrite kxform writes from the corpus, verified again from the two files.

For each kernel with a harness spec (the corpus manifest, the naive kernels of
corpora/naive, the launcher forms of tests/fixtures/launch_forms) and each structural
pass (rows, vectorize, coarsen, launch, smem-tile), up to `--points` configurations of
the pass's own tuning space (evenly inside its listing, its edges left out: deterministic) go through `kxform apply
--check --verify cpu` (tools/corpus_apply.py: every check, nothing written in place).
Each rewrite that would be written is then verified again the way `kxform verify
ORIGINAL REWRITTEN` does it (kxform.verify.own_launch.pair_policy: each file launched as
its own launcher says, nothing from the pass), on the CPU runtime.

One line per configuration, then the counts: rewrites written, re-verified, not
re-verified, rewritten files that did not compile (a defect of the pass: 0 expected),
configurations refused or not verified by apply itself. Exit 1 when a written rewrite is
not re-verified or a rewritten file did not compile.

    .venv/bin/python tools/reverify_corpus.py [--passes rows,vectorize] [--only NAME] [--points 2]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from corpus_apply import ROOT, Applied, apply_config, has_spec, manifest_kernels, naive_pairs

STRUCTURAL = ("rows", "vectorize", "coarsen", "launch", "smem-tile")
FORMS = ROOT / "tests" / "fixtures" / "launch_forms"
COMPILE_KEYS = frozenset({"DoesNotCompile", "CompileFailed"})


def kernels() -> list[tuple[str, Path, str]]:
    """(label, file, kernel) of every kernel a spec beside its file names."""
    out = [(label, path, kernel) for label, path, kernel in manifest_kernels()]
    out += [(p["name"], ROOT / "corpora" / "naive" / p["naive"], p["naive_kernel"]) for p in naive_pairs()]
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source

    for path in sorted(FORMS.rglob("*.cu")):
        out += [(f"forms/{path.parent.name}", path, k.name) for k in parse_model(read_source(str(path))).kernels]
    return [(label, path, kernel) for label, path, kernel in out if has_spec(path, kernel)]


def points(path: Path, kernel: str, pass_name: str, count: int, hw: str) -> tuple[list[str], str]:
    """Up to `count` pipeline specs of the pass's tuning space, spread over it; or why none."""
    from kxform.errors import KxformError
    from kxform.search.kernel_space import kernel_space

    try:
        space = kernel_space(path.read_bytes(), kernel, (pass_name,), path=str(path), hw=hw)
    except KxformError as exc:
        return [], exc.cause
    from kxform.hw import load_profile

    search = space.search(load_profile(hw))
    specs = [space.spec(search.config(r)) for r in range(len(search))]
    specs = [s for s in dict.fromkeys(specs) if s]
    if len(specs) <= count:
        return specs, ""
    return [specs[(i + 1) * len(specs) // (count + 1)] for i in range(count)], ""  # inner points, not the edges


def reverify(path: Path, kernel: str, rewritten: bytes) -> tuple[bool, str]:
    """`kxform verify ORIGINAL REWRITTEN` of one rewrite, on the CPU runtime, the rewritten
    file beside a copy of the original's directory (its headers resolve as they did)."""
    from kxform.frontend.source import read_source, validate_bytes
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.verify.differential import pick_runtime, verify_pair
    from kxform.verify.own_launch import pair_policy
    from kxform.verify.verdict import combined_status

    spec_path = find_spec_for(path)
    assert spec_path is not None
    spec = load_spec(spec_path)
    with tempfile.TemporaryDirectory(prefix="kxform-reverify-") as tmp:
        copy = Path(tmp) / path.parent.name
        shutil.copytree(path.parent, copy)
        target = copy / path.name
        target.write_bytes(rewritten)
        original = read_source(str(path))
        new = validate_bytes(str(target), rewritten)
        reports = []
        for kernel_spec in spec.instantiations(kernel) or (spec.kernel(kernel),):
            policy, note = pair_policy(original, new, kernel_spec.base_name)
            reports.append(verify_pair(original, new, kernel_spec, pick_runtime("cpu"), policy=policy))
    status = combined_status(reports)
    sizes = "; ".join(v.summary() for r in reports for v in r.sizes)
    return status == "ok", f"{status}: {note} | {sizes}"


def judge(applied: Applied) -> str:
    if applied.key in COMPILE_KEYS:
        return "does-not-compile"
    if applied.verified and applied.rewritten:
        return "written"
    return "not-written"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", default=",".join(STRUCTURAL))
    parser.add_argument("--only", action="append", default=[], help="kernels whose label contains this")
    parser.add_argument("--points", type=int, default=2, help="configurations per pass and kernel (default 2)")
    parser.add_argument("--hw", default="h100")
    args = parser.parse_args()
    counts: Counter[str] = Counter()
    for label, path, kernel in kernels():
        if args.only and not any(o in label for o in args.only):
            continue
        for pass_name in args.passes.split(","):
            specs, why = points(path, kernel, pass_name, args.points, args.hw)
            if not specs:
                counts["refused"] += 1
                print(f"{label:28s} {pass_name:9s} refused: {why[:110]}", flush=True)
                continue
            for spec in specs:
                start = time.perf_counter()
                applied = apply_config(path, spec, kernel, args.hw)
                verdict = judge(applied)
                counts[verdict] += 1
                detail = applied.line()
                if verdict == "written":
                    ok, detail = reverify(path, kernel, applied.rewritten)
                    counts["re-verified" if ok else "NOT re-verified"] += 1
                    verdict = "re-verified" if ok else "NOT re-verified"
                print(
                    f"{label:28s} {spec:48s} {verdict:16s} {time.perf_counter() - start:5.1f}s  {detail[:200]}",
                    flush=True,
                )
    print(
        f"written {counts['written']}, re-verified {counts['re-verified']}, NOT re-verified "
        f"{counts['NOT re-verified']}, rewritten files that do not compile {counts['does-not-compile']}, "
        f"not written by apply {counts['not-written']}, passes with nothing to tune {counts['refused']}"
    )
    return 1 if counts["NOT re-verified"] or counts["does-not-compile"] else 0


if __name__ == "__main__":
    sys.exit(main())
