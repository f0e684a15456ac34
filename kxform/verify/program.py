"""Whole-program verification for self-checking programs (files with their own `main`).

Both versions are built with nvcc into executables and run; their exit codes must match
and their output must agree line by line: numbers within a relative tolerance, other
text exactly, and lines matching a user regex (timings, addresses) skipped.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kxform.build.nvcc import find_nvcc
from kxform.build.diagnostics import build_failure
from kxform.errors import UsageError
from kxform.frontend.source import read_source

NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)", re.IGNORECASE)


@dataclass(frozen=True)
class ProgramRun:
    exit_code: int
    output: str


@dataclass(frozen=True)
class ProgramReport:
    ok: bool
    detail: str
    original: ProgramRun
    rewritten: ProgramRun

    def summary(self) -> str:
        return f"{'programs agree' if self.ok else 'programs DIFFER'}: {self.detail}"


def compare_output(a: str, b: str, masks: tuple[str, ...], rtol: float) -> str | None:
    """None if the outputs agree; else a one-line description of the first difference."""
    patterns = [re.compile(m) for m in masks]
    keep = lambda lines: [ln for ln in lines if not any(p.search(ln) for p in patterns)]  # noqa: E731
    left, right = keep(a.splitlines()), keep(b.splitlines())
    if len(left) != len(right):
        return f"{len(left)} lines vs {len(right)} lines (after masks)"
    for number, (x, y) in enumerate(zip(left, right), 1):
        if NUMBER_RE.sub("#", x) != NUMBER_RE.sub("#", y):
            return f"line {number} differs: {x!r} vs {y!r}"
        for u, v in zip(NUMBER_RE.findall(x), NUMBER_RE.findall(y)):
            fu, fv = float(u), float(v)
            if math.isnan(fu) and math.isnan(fv):
                continue
            if fu != fv and not math.isclose(fu, fv, rel_tol=rtol, abs_tol=0.0):
                return f"line {number} ({x.strip()!r} vs {y.strip()!r}): {u} vs {v} beyond rtol {rtol:g}"
    return None


def _build(path: str, out: Path, arch: str) -> None:
    nvcc = find_nvcc()
    if nvcc is None:
        raise UsageError("whole-program mode needs nvcc (not found on PATH; set KXFORM_NVCC)")
    source = read_source(path)
    proc = subprocess.run(
        [nvcc, f"-arch={arch}", "-O2", "-o", str(out), "-x", "cu", path],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=os.path.dirname(os.path.abspath(path)),
    )
    if proc.returncode != 0:
        raise build_failure(source.path, proc.stderr + proc.stdout)


def _run(exe: Path, timeout_s: float) -> ProgramRun:
    try:
        proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return ProgramRun(-1, f"timed out after {timeout_s:g} s")
    return ProgramRun(proc.returncode, proc.stdout + proc.stderr)


def verify_programs(
    original: str,
    rewritten: str,
    masks: tuple[str, ...] = (),
    rtol: float = 1e-5,
    arch: str | None = None,
    timeout_s: float = 120.0,
) -> ProgramReport:
    with tempfile.TemporaryDirectory(prefix="kxform-prog-") as tmp:
        runs = []
        for name, path in (("original", original), ("rewritten", rewritten)):
            exe = Path(tmp) / name
            _build(path, exe, arch or "sm_90")
            runs.append(_run(exe, timeout_s))
    a, b = runs
    if a.exit_code != b.exit_code:
        return ProgramReport(False, f"exit codes differ: {a.exit_code} vs {b.exit_code}", a, b)
    difference = compare_output(a.output, b.output, masks, rtol)
    if difference:
        return ProgramReport(False, difference, a, b)
    lines = len(a.output.splitlines())
    return ProgramReport(True, f"exit code {a.exit_code}, {lines} output lines match", a, b)
