"""A short Nsight Compute summary of one kernel launch: memory and SM throughput, achieved
occupancy and the top warp-stall reasons, what a performance engineer looks at first. It
is the refactoring prompt's "Nsight Compute" section (the original, and each kept
template configuration in the attempt's feedback) when the run has a GPU.

The kernel runs once, in a child process of ncu (`python -m kxform.profile.nsight JOB`:
the extracted kernel, its spec and launch pickled), on the spec's inputs at the timing
size; ncu profiles that one launch (`--launch-count 1`, filtered by the kernel's entry
name) with `--csv --print-units base`. Without ncu, without the counters' permission, or
when the metrics are unknown to this ncu, the summary is one line saying why: the prompt
then says there is no profile, never an invented one.
"""

from __future__ import annotations

import glob
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kxform.profile.ncu_csv import NcuLaunch, NcuOutput, parse_ncu_csv

FIGURES = (
    ("gpu__time_duration.sum", "duration", "ns"),
    ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "memory throughput", "%"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "DRAM throughput", "%"),
    ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM throughput", "%"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved occupancy", "%"),
)
"""(metric, what it is called in the summary, unit) of the headline figures."""

STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "wait",
    "barrier",
    "membar",
    "mio_throttle",
    "lg_throttle",
    "math_pipe_throttle",
    "tex_throttle",
    "not_selected",
    "selected",
    "no_instruction",
    "dispatch_stall",
    "drain",
    "imc_miss",
    "branch_resolving",
    "sleeping",
)


def stall_metric(reason: str) -> str:
    """Warps stalled for `reason` per issued instruction (ncu's WarpStateStats breakdown)."""
    return f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"


UNKNOWN_METRIC = ("Failed to find metric", "invalid metric", "Unknown metric")


@dataclass(frozen=True)
class NsightSummary:
    figures: tuple[tuple[str, float, str], ...]
    """(name, value, unit) of the headline figures ncu measured."""
    stalls: tuple[tuple[str, float], ...]
    """The largest stall reasons, largest first: (reason, warps per issued instruction)."""

    def text(self) -> str:
        parts = []
        for name, value, unit in self.figures:
            parts.append(
                f"{name} {value / 1e6:.4g} ms"
                if unit == "ns"
                else f"{name} {value:.1f}% of peak"
                if name != "achieved occupancy"
                else f"{name} {value:.1f}%"
            )
        line = "; ".join(parts) or "no headline figure measured"
        if self.stalls:
            line += "; top stall reasons (warps stalled per issued instruction): " + ", ".join(
                f"{reason} {value:.2f}" for reason, value in self.stalls
            )
        return line


def summarize(launch: NcuLaunch, top: int = 3) -> NsightSummary:
    figures = tuple(
        (name, value, unit) for metric, name, unit in FIGURES if (value := launch.metrics.get(metric)) is not None
    )
    stalls = [
        (reason, value)
        for reason in STALL_REASONS
        if (value := launch.metrics.get(stall_metric(reason))) is not None and value > 0
    ]
    stalls.sort(key=lambda item: -item[1])
    return NsightSummary(figures, tuple(stalls[:top]))


def find_ncu(given: str | None = None) -> str | None:
    """`given`, $NCU, ncu on PATH, /usr/local/cuda/bin/ncu, or the newest /opt/nvidia/nsight-compute."""
    for candidate in (
        given,
        os.environ.get("NCU"),
        shutil.which("ncu"),
        "/usr/local/cuda/bin/ncu",
        *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True),
    ):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def command(ncu: str, entry: str | None, metrics: list[str], job: Path, log: Path) -> list[str]:
    """ncu on this module's child mode: one launch (of `entry` when given)."""
    where = ["--kernel-name-base", "mangled", "--kernel-name", f"regex:^{entry}$"] if entry else []
    return [
        ncu,
        "--target-processes",
        "all",
        "--metrics",
        ",".join(metrics),
        "--csv",
        "--print-units",
        "base",
        *where,
        "--launch-count",
        "1",
        "--log-file",
        str(log),
        sys.executable,
        "-m",
        "kxform.profile.nsight",
        str(job),
    ]


def profile(
    extracted: Any, spec: Any, size: Any, launch: Any = None, ncu: str | None = None, timeout_s: float = 300.0
) -> NsightSummary | str:
    """Profile one launch of `extracted` (kxform.build.extract) at `size` of `spec`, with
    `launch` (a resolved launch; default the spec's own); the summary, or why there is none."""
    exe = find_ncu(ncu)
    if exe is None:
        return "ncu not found (not $NCU, not on PATH, not in /usr/local/cuda/bin)"
    resolved = launch if launch is not None else spec.launch(size)
    metrics = [m for m, _, _ in FIGURES] + [stall_metric(r) for r in STALL_REASONS]
    with tempfile.TemporaryDirectory(prefix="kxform-nsight-") as scratch:
        job = Path(scratch) / "job.pickle"
        job.write_bytes(pickle.dumps({"extracted": extracted, "spec": spec, "launch": resolved}))
        log = Path(scratch) / "ncu.csv"
        found = _run(command(exe, extracted.entry, metrics, job, log), log, timeout_s)
        if isinstance(found, str) and any(marker in found for marker in UNKNOWN_METRIC):
            found = _run(command(exe, extracted.entry, [m for m, _, _ in FIGURES], job, log), log, timeout_s)
        if isinstance(found, str) and "No kernels were profiled" in found:
            found = _run(command(exe, None, metrics, job, log), log, timeout_s)
    return summarize(found) if isinstance(found, NcuLaunch) else found


def summary_text(extracted: Any, spec: Any, size: Any, launch: Any = None, ncu: str | None = None) -> str:
    """The prompt's line: the summary, or `No Nsight Compute summary: WHY`."""
    try:
        found = profile(extracted, spec, size, launch, ncu)
    except Exception as exc:  # noqa: BLE001 - a profiler failure leaves the prompt without a profile, nothing more
        found = f"{type(exc).__name__}: {exc}"
    if isinstance(found, NsightSummary):
        resolved = launch if launch is not None else spec.launch(size)
        return f"at size {size.name} (grid {tuple(resolved.grid)}, block {tuple(resolved.block)}): {found.text()}"
    return f"No Nsight Compute summary: {' '.join(found.split())[:300]}"


def run_ncu(cmd: list[str], log: Path, timeout_s: float) -> NcuOutput | str:
    """Run an ncu command line that writes `--log-file log`; its parsed launches, or one
    line saying why there are none (also tools/bench_l2_ncu.py's runner)."""
    env = {**os.environ, "LC_ALL": "C", "PYTHONUNBUFFERED": "1"}
    if log.exists():
        log.unlink()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        return f"ncu timed out after {timeout_s:g} s"
    text = log.read_text(encoding="utf-8", errors="replace") if log.is_file() else ""
    parsed = parse_ncu_csv(text + "\n" + proc.stdout)
    if proc.returncode != 0 or not parsed.launches:
        said = (
            parsed.errors[0]
            if parsed.errors
            else _last_line(proc.stderr)
            or _last_line(text)
            or _last_line(proc.stdout)
            or f"exit status {proc.returncode}"
        )
        return f"ncu failed (exit {proc.returncode}): {said}"
    return parsed


def _run(cmd: list[str], log: Path, timeout_s: float) -> NcuLaunch | str:
    found = run_ncu(cmd, log, timeout_s)
    return found.launches[0] if isinstance(found, NcuOutput) else found


def _last_line(text: str) -> str:
    return next((" ".join(line.split()) for line in reversed(text.splitlines()) if line.strip()), "")


def child(job_path: str) -> int:
    """The launch ncu profiles: the job's kernel once, on the spec's inputs."""
    from kxform.harness.inputs import make_inputs
    from kxform.harness.request import launch_request
    from kxform.runtime.gpu import GpuRuntime

    job = pickle.loads(Path(job_path).read_bytes())
    inputs = make_inputs(job["spec"], job["launch"])
    with GpuRuntime() as runtime:
        runtime.run(launch_request(job["extracted"], job["launch"], inputs, "nsight profile", 600.0))
    return 0


if __name__ == "__main__":
    sys.exit(child(sys.argv[1]))
