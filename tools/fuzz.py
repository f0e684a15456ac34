#!/usr/bin/env python3
"""Fuzzing the swizzle pass with mutated corpus files, through the API and the CLI.

Each input is a corpus file changed by one to three seeded mutations (byte flips, token
deletion and duplication, truncation, swapped indices, inserted macros, `#if 0`, inline
PTX, deep nesting). It goes through `kxform.api.rewrite` with nvcc hidden from the pass,
so that the source analysis must refuse everything it cannot see through on its own;
every 100th input also goes through `kxform apply --diff` (exit codes 0, 1 or 2 only,
no file touched). Then every rewrite the pass accepted is checked the hard way: each
applied kernel's unit is compiled by nvcc with a constant prologue, and a %ctaid.x/.y
left in its PTX is an unsafe rewrite (so is a sampled differential run on the CPU
runtime that finds a mismatch, for kernels whose corpus spec still fits).

Counted: inputs tried, crashes (any exception that is not kxform's one-line input or
usage error; CLI exit 123), hangs (over --timeout), rewrites accepted, unsafe rewrites
accepted, rewrites the compiler could not confirm (the mutated kernel no longer builds).

    python tools/fuzz.py --count 100000 --seed 1 [--jobs N] [--state fuzz.jsonl] [--minutes M]

Resumable: results go to --state as JSON Lines, and a rerun skips the indices already
there (`--recheck` runs again those the compiler could not confirm; the last row of an
index counts). Input i is a pure function of (--seed, i), so any crash reproduces with
`--replay I` (which also writes the input to --out).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from kxform.bench.paths import ROOT

SEEDS = sorted(
    p for p in (ROOT / "corpora").glob("*/*") if p.suffix in (".cu", ".hip") and "syntax_error" not in str(p)
)
TOKEN_RE = re.compile(rb"[A-Za-z_]\w*|\d+(?:\.\d*)?[fFuUlL]*|<<<|>>>|->|::|[<>=!+\-*/%&|^]=?|\S")
PATTERNS = ("grouped", "column", "diagonal", "hilbert", "morton", "xcd", "xcd-grouped", None)


class Hang(Exception):
    """The input took longer than the per-input limit."""


# ------------------------------------------------------------------------ mutators


def _tokens(data: bytes) -> list[re.Match[bytes]]:
    return list(TOKEN_RE.finditer(data))


def byte_flip(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def token_delete(data: bytes, rng: random.Random) -> bytes:
    toks = _tokens(data)
    if not toks:
        return data
    t = rng.choice(toks)
    return data[: t.start()] + data[t.end() :]


def token_duplicate(data: bytes, rng: random.Random) -> bytes:
    toks = _tokens(data)
    if not toks:
        return data
    t = rng.choice(toks)
    return data[: t.end()] + b" " + t.group(0) + data[t.end() :]


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[: rng.randrange(len(data) + 1)]


def swap_indices(data: bytes, rng: random.Random) -> bytes:
    spots = [m for m in re.finditer(rb"\b(blockIdx|threadIdx|gridDim|blockDim)\.([xyz])\b", data)]
    if not spots:
        return data
    m = rng.choice(spots)
    builtin = rng.choice([b"blockIdx", b"threadIdx", b"gridDim", b"blockDim", m.group(1)])
    axis = rng.choice([b"x", b"y", b"z"])
    return data[: m.start()] + builtin + b"." + axis + data[m.end() :]


MACROS = (
    b"#define KXF_IDX(a) blockIdx.a\n",
    b"#define KXF_ROW blockIdx.y\n",
    b"#define KXF_P(a, b) a##b\n",
    b"#define KXF_COL (KXF_ROW + blockIdx.x)\n",
    b'#define KXF_ASM(r) asm("mov.u32 %0, %%ctaid.x;" : "=r"(r))\n',
    b"#define blockIdx blockIdx\n",
    b"#define KXF_CALL(f) f()\n",
    b"#define KXF_S(x) #x\n",
)
USES = (b"KXF_IDX(y)", b"KXF_ROW", b"KXF_P(block, Idx).x", b"KXF_COL", b"KXF_P(blockI, dx).y", b"(int)KXF_ROW")


def insert_macro(data: bytes, rng: random.Random) -> bytes:
    macro = rng.choice(MACROS)
    lines = data.split(b"\n")
    lines.insert(rng.randrange(len(lines) + 1), macro.rstrip(b"\n"))
    out = b"\n".join(lines)
    spots = list(re.finditer(rb"\bblockIdx\.[xy]\b", out))
    if spots and rng.random() < 0.8:
        m = rng.choice(spots)
        out = out[: m.start()] + rng.choice(USES) + out[m.end() :]
    return out


def if_zero(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    a = rng.randrange(len(lines) + 1)
    b = min(len(lines), a + rng.randint(0, 8))
    head = rng.choice([b"#if 0", b"#if 1", b"#ifdef __CUDA_ARCH__", b"#if 0\nint x = blockIdx.y;\n#else"])
    return b"\n".join(lines[:a] + [head] + lines[a:b] + [b"#endif"] + lines[b:])


PTX = (
    b'{ unsigned kxf_r; asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(kxf_r)); (void)kxf_r; }',
    b'{ unsigned kxf_r; asm("mov.u32 %0, %%nctaid.x;" : "=r"(kxf_r)); (void)kxf_r; }',
    b'asm volatile("" ::: "memory");',
    b'{ int kxf_v; asm("mov.b32 %0, 1;" : "=r"(kxf_v)); }',
)


def inline_ptx(data: bytes, rng: random.Random) -> bytes:
    bodies = [m.end() for m in re.finditer(rb"__global__[^{;]*\{", data)] or [
        m.end() for m in re.finditer(rb"\{", data)
    ]
    if not bodies:
        return data
    at = rng.choice(bodies)
    return data[:at] + b"\n" + rng.choice(PTX) + b"\n" + data[at:]


def deep_nest(data: bytes, rng: random.Random) -> bytes:
    spots = list(re.finditer(rb"\bblockIdx\.[xy]\b|\b\d+\b", data))
    if not spots:
        return data
    m = rng.choice(spots)
    depth = rng.choice([50, 300, 1000, 3000])
    kind = rng.choice([(b"(", b")"), (b"{", b"}"), (b"-(", b")"), (b"!(", b")")])
    return data[: m.start()] + kind[0] * depth + m.group(0) + kind[1] * depth + data[m.end() :]


MUTATORS = {
    f.__name__: f
    for f in (
        byte_flip,
        token_delete,
        token_duplicate,
        truncate,
        swap_indices,
        insert_macro,
        if_zero,
        inline_ptx,
        deep_nest,
    )
}


def make_input(seed: int, index: int) -> tuple[Path, bytes, list[str], str | None, bool]:
    """Input `index` under `seed`: source file, mutated bytes, mutators, pattern, semantic."""
    rng = random.Random(seed * 1_000_003 + index)
    path = rng.choice(SEEDS)
    data = path.read_bytes()
    names = [rng.choice(list(MUTATORS)) for _ in range(rng.choice((1, 1, 2, 3)))]
    for name in names:
        data = MUTATORS[name](data, rng)
    return path, data, names, rng.choice(PATTERNS), rng.random() < 0.05


# ------------------------------------------------------------------------ one input

_NVCC: str | None = None
_BUILDER = None


def _init(nvcc: str | None) -> None:
    global _NVCC, _BUILDER
    os.environ["KXFORM_NVCC"] = "kxform-fuzz-hides-nvcc"  # the pass must stand on its source analysis
    from kxform.passes.swizzle import ptx_coverage

    ptx_coverage._builder.cache_clear()
    _NVCC = nvcc
    if nvcc:
        from kxform.build.builder import Builder

        _BUILDER = Builder(nvcc=nvcc, jobs=1)
    signal.signal(signal.SIGALRM, _alarm)


def _alarm(signum: int, frame: object) -> None:
    raise Hang()


def run_one(args: tuple[int, int, float, float, int]) -> dict:
    seed, index, timeout, verify_share, cli_every = args
    path, data, names, pattern, semantic = make_input(seed, index)
    row: dict = {"i": index, "file": path.name, "mutators": names, "status": "rejected"}
    started = time.perf_counter()
    _through_api(row, path, data, pattern, semantic, timeout, verify_share)
    if cli_every and index % cli_every == 0:  # every Nth input, whatever the API made of it
        row.update(_cli(path, data, timeout))
    return _done(row, started)


def _through_api(
    row: dict, path: Path, data: bytes, pattern: str | None, semantic: bool, timeout: float, verify_share: float
) -> None:
    from kxform.api import rewrite
    from kxform.engine.pass_api import Outcome
    from kxform.errors import KxformError

    options = {"pattern": pattern} if pattern else {}
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        result = rewrite(
            data,
            "swizzle",
            path=str(path),
            hw="mi300x" if pattern in ("xcd", "xcd-grouped") else "h100",
            semantic=semantic,
            **options,
        )
    except Hang:
        row["status"] = "hang"
        return
    except (KxformError, UnicodeDecodeError) as exc:
        row["error"] = str(exc)[:200] if not isinstance(exc, UnicodeDecodeError) else "not UTF-8"
        return
    except BaseException as exc:  # noqa: BLE001 - a crash is what we are looking for
        signal.setitimer(signal.ITIMER_REAL, 0)
        row.update(
            status="crash", error=f"{type(exc).__name__}: {str(exc)[:200]}", trace=traceback.format_exc()[-2000:]
        )
        return
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    applied = [r.kernel for r in result.results if r.outcome is Outcome.APPLIED]
    row["status"] = "accepted" if result.changed and applied else "unchanged"
    if row["status"] == "accepted":
        row.update(_confirm(path, result.new_data, applied))
        if random.Random(row["i"]).random() < verify_share:
            row.update(_verify(path, data, result.new_data, applied))


def _done(row: dict, started: float) -> dict:
    row["seconds"] = round(time.perf_counter() - started, 3)
    return row


def _confirm(path: Path, new: bytes, applied: list[str]) -> dict:
    if _BUILDER is None:
        return {"confirm": "no-nvcc"}
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import SourceText
    from kxform.passes.swizzle.ptx_coverage import confirm
    from kxform.passes.swizzle.swizzle import PROLOGUE_MARK

    model = parse_model(SourceText(str(path), new))
    verdicts = {}
    for name in applied:
        kernel = next(k for k in model.kernels if k.name == name)
        verdict = confirm(model, kernel, PROLOGUE_MARK, builder=_BUILDER)
        verdicts[name] = (
            "unsafe: " + ", ".join(verdict.unmapped)
            if verdict.confirmed and verdict.unmapped
            else "safe"
            if verdict.confirmed
            else f"unconfirmable: {verdict.why_not[:120]}"
        )
    worst = (
        "unsafe"
        if any(v.startswith("unsafe") for v in verdicts.values())
        else "unconfirmable"
        if any(v.startswith("unconfirmable") for v in verdicts.values())
        else "safe"
    )
    return {"confirm": worst, "kernels": verdicts}


def _verify(path: Path, original: bytes, new: bytes, applied: list[str]) -> dict:
    from kxform.errors import KxformError
    from kxform.frontend.source import SourceText
    from kxform.harness.spec import find_spec_for, load_spec
    from kxform.runtime.cpu import CpuOptions, CpuRuntime
    from kxform.verify.differential import verify_pair

    spec_path = find_spec_for(path)
    if spec_path is None:
        return {"verify": "no-spec"}
    statuses = []
    for name in applied:
        for kernel in load_spec(spec_path).instantiations(name):
            try:
                report = verify_pair(
                    SourceText(str(path), original),
                    SourceText(str(path), new),
                    kernel,
                    CpuRuntime(CpuOptions(workers=1)),
                    timeout_s=20,
                )
            except KxformError as exc:
                statuses.append(f"unverifiable: {exc.cause[:80]}")
                continue
            statuses.append(report.status if report.status != "mismatch" else f"mismatch: {report.reason[:160]}")
    worst = next((s for s in statuses if s.startswith("mismatch")), statuses[0] if statuses else "no-spec")
    return {"verify": worst}


def _cli(path: Path, data: bytes, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="kxform-fuzz-") as tmp:
        target = Path(tmp) / path.name
        target.write_bytes(data)
        exe = Path(sys.executable).parent / "kxform"
        try:
            proc = subprocess.run(
                [
                    str(exe),
                    "apply",
                    "--pass",
                    "swizzle",
                    "--verify",
                    "static",
                    "--diff",
                    "-q",
                    "--log",
                    str(Path(tmp) / "log.jsonl"),
                    str(target),
                ],
                capture_output=True,
                text=True,
                timeout=max(60.0, timeout * 4),
                cwd=tmp,
            )
        except subprocess.TimeoutExpired:
            return {"cli": "hang"}
        untouched = target.read_bytes() == data
    ok = proc.returncode in (0, 1, 2) and untouched and "Traceback" not in proc.stderr
    return {"cli": "ok" if ok else f"crash: exit {proc.returncode}: {proc.stderr.strip()[-200:]}"}


# ------------------------------------------------------------------------ driver


def _load(state: Path) -> dict[int, dict]:
    rows: dict[int, dict] = {}
    if state.exists():
        for line in state.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["i"]] = row
    return rows


def summary(rows: dict[int, dict], elapsed: float, tried_now: int) -> str:
    values = list(rows.values())
    count = lambda pred: sum(1 for r in values if pred(r))  # noqa: E731
    accepted = count(lambda r: r["status"] == "accepted")
    lines = [
        f"inputs tried:              {len(values)}"
        + (f" ({tried_now} in this run, {tried_now / elapsed:.1f}/s)" if elapsed > 0 and tried_now else ""),
        f"crashes:                   {count(lambda r: r['status'] == 'crash' or str(r.get('cli', '')).startswith('crash'))}",
        f"hangs:                     {count(lambda r: r['status'] == 'hang' or r.get('cli') == 'hang')}",
        f"rejected (input errors):   {count(lambda r: r['status'] == 'rejected')}",
        f"unchanged (refused/none):  {count(lambda r: r['status'] == 'unchanged')}",
        f"rewrites accepted:         {accepted}",
        f"  confirmed safe by nvcc:  {count(lambda r: r.get('confirm') == 'safe')}",
        f"  not confirmable:         {count(lambda r: r.get('confirm') == 'unconfirmable')} (the mutated kernel does "
        "not build on its own)",
        f"  verified on the CPU:     {count(lambda r: r.get('verify') == 'ok')} of "
        f"{count(lambda r: 'verify' in r and r['verify'] != 'no-spec')} sampled",
        f"unsafe rewrites accepted:  {count(lambda r: r.get('confirm') == 'unsafe' or str(r.get('verify', '')).startswith('mismatch'))}",
        f"CLI runs:                  {count(lambda r: 'cli' in r)}",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--state", default="fuzz-state.jsonl", help="JSON Lines of results (resumable)")
    parser.add_argument("--out", default="fuzz-findings", help="crashing and unsafe inputs are written here")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per input before it counts as a hang")
    parser.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0: run every input)")
    parser.add_argument("--verify-share", type=float, default=0.02, help="share of accepted rewrites run on the CPU")
    parser.add_argument("--cli-every", type=int, default=100, help="every Nth input also goes through the CLI")
    parser.add_argument("--replay", type=int, help="run input I alone and print its row")
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="run again the inputs whose rewrite the compiler could not confirm (after a fix)",
    )
    opts = parser.parse_args()
    from kxform.build.nvcc import find_nvcc

    nvcc = find_nvcc()
    if opts.replay is not None:
        _init(nvcc)
        path, data, names, pattern, semantic = make_input(opts.seed, opts.replay)
        Path(opts.out).mkdir(exist_ok=True)
        (Path(opts.out) / f"input-{opts.replay}{path.suffix}").write_bytes(data)
        print(json.dumps(run_one((opts.seed, opts.replay, opts.timeout, 1.0, 1)), indent=1))
        return 0
    state = Path(opts.state)
    rows = _load(state)
    todo = [i for i in range(opts.count) if i not in rows]
    if opts.recheck:
        todo = sorted(i for i, r in rows.items() if r.get("confirm") == "unconfirmable")
    print(
        f"fuzz: seed {opts.seed}, {len(rows)} inputs done, {len(todo)} to go, {opts.jobs} workers, "
        f"nvcc {'at ' + nvcc if nvcc else 'missing (no compiler confirmation)'}",
        flush=True,
    )
    started = time.perf_counter()
    deadline = started + opts.minutes * 60 if opts.minutes else None
    findings = Path(opts.out)
    tried = 0
    with state.open("a") as out, multiprocessing.get_context("fork").Pool(opts.jobs, _init, (nvcc,)) as pool:
        work = ((opts.seed, i, opts.timeout, opts.verify_share, opts.cli_every) for i in todo)
        for row in pool.imap_unordered(run_one, work, chunksize=8):
            rows[row["i"]] = row
            out.write(json.dumps(row) + "\n")
            tried += 1
            if (
                row["status"] in ("crash", "hang")
                or row.get("confirm") == "unsafe"
                or str(row.get("verify", "")).startswith("mismatch")
                or str(row.get("cli", "")).startswith("crash")
            ):
                findings.mkdir(exist_ok=True)
                path, data, *_ = make_input(opts.seed, row["i"])
                (findings / f"input-{row['i']}{path.suffix}").write_bytes(data)
            if tried % 1000 == 0:
                out.flush()
                elapsed = time.perf_counter() - started
                print(f"fuzz: {len(rows)} inputs, {tried / elapsed:.1f}/s", flush=True)
            if deadline and time.perf_counter() > deadline:
                pool.terminate()
                break
    print(summary(rows, time.perf_counter() - started, tried))
    return 0


if __name__ == "__main__":
    sys.exit(main())
