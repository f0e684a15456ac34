"""Draft rate of `kxform harness infer`: the fraction of kernels whose draft passes with no
hand edit, and why the others do not, grouped.

For every kernel (every `__global__` function; a template kernel by its name, which infer
drafts at the instantiation its first launch spells) of every `.cu` file under the given
paths (a path may also be one file), on a copy of the file's directory:

1. `kxform harness infer FILE --kernel K -o SPEC`: the draft must be written and have no
   `fill in` line;
2. `kxform harness check SPEC` must accept it;
3. `kxform verify FILE FILE --spec SPEC --runtime cpu`: the original against itself on
   the CPU runtime must verify.

A kernel passes when all three do. A failure is grouped by its stage and its message with
names, numbers and paths taken out, so one cause over many kernels is one row. Nothing is
written beside the sources.

    .venv/bin/python tools/infer_rate.py corpora tests/fixtures [--glob naive.cu] [--jobs 2]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


from kxform.frontend.cuda import parse_model
from kxform.frontend.model import FunctionKind
from kxform.frontend.source import read_source

KXFORM = [str(Path(sys.executable).parent / "kxform")]
TIMEOUT_S = 300


@dataclass(frozen=True)
class Outcome:
    path: Path
    kernel: str
    stage: str
    """"pass", or the stage that failed: infer, fill-in, check, verify."""
    reason: str


def kernels_of(path: Path) -> list[str]:
    """Names of the kernels defined in `path` (in file order), or [] where it does not parse."""
    try:
        model = parse_model(read_source(path))
    except Exception:  # a file the parser refuses is reported by infer itself
        return ["<unparsed>"]
    names = [f.name for f in model.functions if f.kind is FunctionKind.KERNEL]
    return list(dict.fromkeys(names))


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([*KXFORM, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, 124, "", f"timed out after {TIMEOUT_S} s")


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln or "fail" in ln or "cannot" in ln or "mismatch" in ln]
    return (errors or lines or ["(no output)"])[-1].strip()


def draft_kernel(path: Path, kernel: str) -> Outcome:
    """Infer, check and self-verify one kernel on a copy of its directory."""
    if kernel == "<unparsed>":
        return Outcome(path, kernel, "infer", "the file does not parse")
    with tempfile.TemporaryDirectory(prefix="kxform-infer-rate-") as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(path.parent, copy, ignore=shutil.ignore_patterns("*.toml", "__pycache__"))
        source, spec = copy / path.name, Path(tmp) / "draft" / "spec.toml"
        spec.parent.mkdir()
        proc = _run("harness", "infer", str(source), "--kernel", kernel, "-o", str(spec), cwd=copy)
        if proc.returncode != 0 or not spec.exists():
            return Outcome(path, kernel, "infer", _last_line(proc))
        todo = [ln for ln in proc.stderr.splitlines() if "fill in:" in ln]
        if todo:
            return Outcome(path, kernel, "fill-in", todo[0].split("fill in:", 1)[1].strip())
        proc = _run("harness", "check", str(spec), cwd=copy)
        if proc.returncode != 0:
            return Outcome(path, kernel, "check", _last_line(proc))
        kernel_name = _kernel_in_spec(spec) or kernel
        proc = _run(
            "verify",
            str(source),
            str(source),
            "--spec",
            str(spec),
            "--kernel",
            kernel_name,
            "--runtime",
            "cpu",
            cwd=copy,
        )
        if proc.returncode != 0:
            return Outcome(path, kernel, "verify", _last_line(proc))
        return Outcome(path, kernel, "pass", "")


def _kernel_in_spec(spec: Path) -> str | None:
    """The kernel the draft names (a template kernel's instantiation)."""
    match = re.search(r'^\[kernel\."?([^"\]]+)"?\]\s*$', spec.read_text(), re.MULTILINE)
    return match.group(1) if match else None


_NOISE = [
    (re.compile(r"(/[^\s:'\"()]+)+"), "PATH"),
    (re.compile(r"\b[\w.-]+\.(?:cu|cuh|h|hpp|toml)\b(:\d+)*"), "FILE"),
    (re.compile(r"'[^']*'"), "'X'"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "N"),
]


def reason_group(outcome: Outcome) -> str:
    """The failure with names, numbers and paths taken out: one cause, one group."""
    text = re.sub(rf"\b{re.escape(outcome.kernel)}\b", "KERNEL", outcome.reason)
    for pattern, repl in _NOISE:
        text = pattern.sub(repl, text)
    text = re.sub(r"\s+", " ", text).strip()
    return f"{outcome.stage}: {text[:160]}"


def collect(paths: list[Path], glob: str) -> list[tuple[Path, str]]:
    files: list[Path] = []
    for p in paths:
        files += [p] if p.is_file() else sorted(p.rglob(glob))
    return [(f, k) for f in files for k in kernels_of(f)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--glob", default="*.cu", help="file pattern under each directory (default *.cu)")
    parser.add_argument(
        "--exclude", action="append", default=[], help="skip files whose path contains this (repeatable)"
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per kernel")
    parser.add_argument("--kxform", help="the kxform command to measure (default: this environment's)")
    args = parser.parse_args(argv)
    if args.kxform:
        KXFORM[:] = args.kxform.split()
    todo = [(f, k) for f, k in collect(args.paths, args.glob) if not any(x in str(f) for x in args.exclude)]
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda fk: draft_kernel(*fk), todo))
    passed = sum(o.stage == "pass" for o in outcomes)
    if args.verbose:
        for o in outcomes:
            print(f"{o.path}:{o.kernel}: {o.stage}{': ' + o.reason if o.reason else ''}")
    total = len(outcomes)
    print(
        f"drafts passing infer + check + self-verify with no hand edit: {passed} of {total}"
        f" ({100.0 * passed / total if total else 0.0:.0f}%), {time.monotonic() - start:.0f} s"
    )
    groups = Counter(reason_group(o) for o in outcomes if o.stage != "pass")
    for group, count in groups.most_common():
        print(f"  {count:3d}  {group}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
