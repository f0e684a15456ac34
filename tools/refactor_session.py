#!/usr/bin/env python3
"""Ask Claude for a refactoring of one kernel (a template over integer parameters), or
replay a recorded one without a call; either way the template is validated, verified
against the original on the CPU runtime (every check size, a covering sample of its
space), and the file is written only with --write (else the diff is printed).

    ANTHROPIC_API_KEY=... .venv/bin/python tools/refactor_session.py FILE --kernel K \\
        [--attempts 4] [--hw h100] [--runtime cpu|gpu] [--lock kxform.lock] [--record kept.json]
        [--log session.jsonl] [--write]
    .venv/bin/python tools/refactor_session.py FILE --kernel K --replay kept.json [--write]
    kxform apply --pass refactor --proposer lock --lock kxform.lock FILE

`--lock` records the kept decision in the lockfile (docs/lockfile.md: the kernel's
digest, the template as payload, its tuned configuration as params), which `kxform apply
--pass refactor --proposer lock --lock kxform.lock FILE` replays through the ordinary
pipeline, without a model: the template's rules, the compile check, the differential
verification at the recorded configuration, the atomic write, remarks and the pass log.

Exit 0 when a verified refactoring was kept (and written with --write), 1 when none
was, 2 for bad input (one line naming the cause).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path


from kxform.engine.pass_api import PassContext, RunOptions
from kxform.errors import KxformError
from kxform.frontend.cuda import parse_model
from kxform.frontend.source import read_source
from kxform.hw import load_profile
from kxform.log.remarks import RemarkSink
from kxform.propose.lock import load_decisions, write_decisions
from kxform.propose.lockfile import update_lock
from kxform.propose.refactor_run import Rewritten, lock_entry, refactor_kernel, replay
from kxform.propose.session import SessionOptions
from kxform.runtime.base import Runtime
from kxform.verify.differential import pick_runtime
from kxform.verify.stage import spec_for_file
from kxform.workspace.files import write_atomic


def _session(args: argparse.Namespace, ctx: PassContext, spec: object, runtime: Runtime) -> Rewritten | None:
    from kxform.propose.client import DEFAULT_MODEL, MODEL_ENV, ClaudeClient, ClientOptions, require_claude

    require_claude()
    client = ClaudeClient(ClientOptions(model=os.environ.get(MODEL_ENV) or DEFAULT_MODEL))
    log = open(args.log, "a", encoding="utf-8") if args.log else None
    try:
        gpu = None
        if runtime.name == "gpu" and spec is not None:  # measured times and Nsight Compute summaries
            from kxform.propose.template_timing import GpuTemplateTiming

            function = next(f for f in ctx.model.functions if f.name == args.kernel)
            gpu = GpuTemplateTiming(ctx.model.source, function, spec, runtime)  # type: ignore[arg-type]
        session, done = refactor_kernel(
            ctx,
            args.kernel,
            spec,
            runtime,
            client,  # type: ignore[arg-type]
            SessionOptions(args.attempts, 2),
            lambda r: log.write(json.dumps(r) + "\n") if log else None,
            timing=gpu,
            profiler=gpu,
        )
    finally:
        if log:
            log.close()
    for attempt in session.attempts:
        print(f"attempt {attempt.index}: {attempt.status} at {attempt.stage}: {attempt.reason[:200]}")
    print(f"cost: {session.usage.to_json()}")
    if done is not None and args.record:
        write_decisions(args.record, [done.decision])
    if done is not None and args.lock:
        lock = Path(args.lock)
        entry = lock_entry(args.file, lock, ctx.model, done, ctx.hw.name)
        update_lock(lock, {entry.key: entry})
        print(
            f"recorded in {args.lock}: replay with kxform apply --pass refactor --proposer lock --lock {args.lock} "
            f"{args.file}"
        )
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file")
    parser.add_argument("--kernel", required=True)
    parser.add_argument("--hw", default="h100")
    parser.add_argument("--attempts", type=int, default=4)
    parser.add_argument("--record", help="save the kept decision (JSON) for --replay")
    parser.add_argument(
        "--lock",
        help="record the kept decision in this lockfile (kxform.lock) for "
        "kxform apply --pass refactor --proposer lock --lock FILE",
    )
    parser.add_argument("--replay", help="apply a recorded decision without calling a model")
    parser.add_argument("--log", help="append the prompt and every attempt as JSON lines")
    parser.add_argument("--write", action="store_true", help="write the file (atomically); else print the diff")
    parser.add_argument(
        "--runtime",
        choices=("cpu", "gpu"),
        default="cpu",
        help="where templates are verified (gpu: also compute-sanitizer memcheck and racecheck, "
        "tuning on measured times, Nsight Compute summaries in the prompt)",
    )
    args = parser.parse_args()
    try:
        hw = load_profile(args.hw)
        model = parse_model(read_source(args.file))
        file_spec = spec_for_file(args.file)
        spec = file_spec.find(args.kernel) if file_spec is not None else None
        runtime = pick_runtime(args.runtime)
        if args.replay:
            found = [d for d in load_decisions(args.replay) if d.kernel == args.kernel and d.pass_name == "refactor"]
            if not found:
                raise KxformError(f"{args.replay}: no refactor decision for {args.kernel!r}")
            done: Rewritten | None = replay(model, found[0], spec, runtime, hw)
        else:
            ctx = PassContext(model, hw, RunOptions(kernels=(args.kernel,), arch=hw.arch), RemarkSink())
            done = _session(args, ctx, spec, runtime)
    except KxformError as exc:
        print(f"kxform: error: {exc}", file=sys.stderr)
        return 2
    if done is None:
        print("no verified refactoring was kept; nothing written")
        return 1
    print(done.detail)
    if args.write:
        write_atomic(args.file, done.data)
        print(f"wrote {args.file}")
    else:
        old = model.source.data.decode("utf-8", "replace").splitlines(keepends=True)
        sys.stdout.writelines(
            difflib.unified_diff(old, done.data.decode().splitlines(keepends=True), args.file, args.file)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
