#!/usr/bin/env python3
"""Time `kxform apply --lock` replaying decisions against deciding them, on the corpus.

    python tools/bench_lock.py [--pass tile,swizzle] [--verify static] [--repeat 3]

Copies the corpus (every kernel directory that parses; `syntax_error` is left out) into
a temporary directory and runs, through the installed console script:

1. decide, cold: `apply --lock` with an empty kxform cache (the locality model simulates
   every candidate order of every kernel with a harness spec; `tile` checks its
   configurations with ptxas), recording kxform.lock;
2. decide, warm: the same on a fresh copy with the cache the first run filled (the model's
   rankings are cached by content), with no lock;
3. replay: a fresh copy of the originals with the lock from run 1, `--proposer claude`
   and no API key (claude would fail if it were asked; nothing asks it).

Prints the times (median of --repeat for runs 2 and 3), the kernels and entries, whether
the replay reproduced run 1's sources byte for byte and left the lock as it was, and
which proposers the replay's log names. Exits non-zero if the replay did not reproduce.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from kxform.bench.paths import ROOT


def copy_corpus(target: Path) -> None:
    # corpora/naive is a corpus of its own (its expert versions are never inputs to a pass)
    shutil.copytree(ROOT / "corpora", target, ignore=shutil.ignore_patterns("syntax_error", "index.toml", "naive"))


def sources(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.cu")) if ".kxform" not in p.parts}


def run(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    exe = shutil.which("kxform") or str(Path(sys.executable).parent / "kxform")
    start = time.perf_counter()
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"kxform {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pass", dest="passes", default="swizzle")
    parser.add_argument("--verify", default="static", help="apply --verify mode of every run (default: static)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of the warm decide and of the replay")
    opts = parser.parse_args()
    common = ["apply", "--pass", opts.passes, "--verify", opts.verify, "-q", "--log", "run.jsonl"]
    with tempfile.TemporaryDirectory(prefix="kxform-bench-lock-") as tmp:
        root = Path(tmp)
        env = dict(os.environ, KXFORM_CACHE_DIR=str(root / "cache"))
        first = root / "decide-cold"
        copy_corpus(first)
        cold = run([*common, "--lock", "."], first, env)
        lock = (first / "kxform.lock").read_bytes()
        output = sources(first)
        warm, replay = [], []
        for i in range(opts.repeat):
            tree = root / f"decide-warm-{i}"
            copy_corpus(tree)
            warm.append(run([*common, "--lock", "."], tree, env))
            tree = root / f"replay-{i}"
            copy_corpus(tree)
            (tree / "kxform.lock").write_bytes(lock)
            replay.append(
                run(
                    [*common, "--proposer", "claude", "--lock", "."],
                    tree,
                    dict(env, ANTHROPIC_API_KEY="", KXFORM_LLM_REPLAY=""),
                )
            )
        last = root / f"replay-{opts.repeat - 1}"
        log = [json.loads(line) for line in (last / "run.jsonl").read_text().splitlines()]
        kernels = [r for r in log if r["type"] == "kernel"]
        proposers = sorted({k["proposal"]["provenance"]["proposer"] for k in kernels if k["proposal"]})
        same = sources(last) == output
        lock_kept = (last / "kxform.lock").read_bytes() == lock
    entries = lock.count(b"\n[[decision]]\n")
    print(
        f"corpus: {len(output)} files, pipeline {opts.passes}, --verify {opts.verify}, {entries} lock entries, "
        f"{len(lock)} bytes"
    )
    print(f"{'run':<26}{'wall s':>9}")
    print(f"{'decide (cold cache)':<26}{cold:>9.2f}")
    print(f"{'decide (warm cache)':<26}{statistics.median(warm):>9.2f}")
    print(f"{'replay from kxform.lock':<26}{statistics.median(replay):>9.2f}")
    print(
        f"replay vs cold decide: {cold / statistics.median(replay):.1f}x faster; vs warm: "
        f"{statistics.median(warm) / statistics.median(replay):.1f}x"
    )
    print(
        f"replay reproduced the sources byte for byte: {same}; lock unchanged: {lock_kept}; "
        f"proposers in the replay's log: {', '.join(proposers) or 'none'} (claude without a key: never asked)"
    )
    return 0 if same and lock_kept and proposers in (["lock"], []) else 1


if __name__ == "__main__":
    sys.exit(main())
