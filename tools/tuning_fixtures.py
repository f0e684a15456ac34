"""Write examples/tuning/: recordings of a GPU run, so tuning without a GPU can be tried from a clone.

The source is docs/data/coarsen-loads-h200.json (tools/bench_tune_gpu.py on an NVIDIA
H200, call 4: the jam sweep): the median time of each of the 25 configurations of
`gemm_naive` (corpora/naive/gemm/naive.cu) under the coarsen pass at M = N = K = 2048.
From it this tool writes, into examples/tuning/:

* `gemm_naive.cu`: the kernel the times were measured on (the corpus file, copied so a
  `--write` tried there leaves the corpus alone);
* `gemm_naive.kxspec.toml`: its harness spec (the corpus spec, its bench size the size
  measured, no NumPy reference: tuning verifies each configuration against the original);
* `gemm_naive.kt.json`: the run in Kernel Tuner's cache format (`--objective replay:FILE`);
* `gemm_naive.times.json`: the run as a per-size `tune --json` summary (`--objective
  cpu+replay:FILE`, and `--sizes bench --dispatch OUT.h`).

Each configuration is typed into the kernel's composed space as it is today (the tool
stops when the recording and the space disagree: the recording is then stale).
`--check` writes nothing and exits 1 when a shipped file differs from what the tool
would write (tests/search/test_tuning_fixtures.py runs it).

    python tools/tuning_fixtures.py [--check]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kxform.hw import load_profile
from kxform.search.kernel_space import kernel_space
from kxform.search.kt_export import kernel_tuner_cache
from kxform.search.objective import Evaluation
from kxform.search.tuner import Step, TuneResult

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "docs" / "data" / "coarsen-loads-h200.json"
CORPUS = ROOT / "corpora" / "naive" / "gemm"
OUT = ROOT / "examples" / "tuning"
KERNEL = "gemm_naive"
DEVICE = "NVIDIA H200"
SIZE = {"M": 2048, "N": 2048, "K": 2048}


def measured_case() -> dict[str, Any]:
    data = json.loads(MEASURED.read_text(encoding="utf-8"))
    (case,) = [c for c in data["calls"]["4"]["jam_sweep"]["cases"] if c["case"] == f"{KERNEL}/coarsen"]
    if case["size"] != ",".join(f"{k}={v}" for k, v in SIZE.items()):
        raise SystemExit(f"{MEASURED}: {KERNEL} was measured at {case['size']}, not {SIZE}")
    return dict(case)


def typed_times(case: dict[str, Any]) -> tuple[Any, list[tuple[dict[str, Any], float]]]:
    """The composed space of the kernel under coarsen, and each measurement's typed configuration."""
    path = CORPUS / "naive.cu"
    space = kernel_space(path.read_bytes(), KERNEL, ("coarsen",), path=str(path), hw="h200")
    rows = space.search(load_profile("h200"))
    by_label = {", ".join(f"{k}={v}" for k, v in rows.config(r).items()): rows.config(r) for r in range(len(rows))}
    labels = [m["config"] for m in case["measurements"]]
    if sorted(labels) != sorted(by_label):
        raise SystemExit(f"{MEASURED}: the measured configurations are not the space's today: the recording is stale")
    return space, [(by_label[m["config"]], float(m["ms"])) for m in case["measurements"]]


def kt_cache(space: Any, times: list[tuple[dict[str, Any], float]], cost_s: float) -> dict[str, Any]:
    steps = tuple(
        Step(i, config, Evaluation(ms, cost_s=cost_s), "measured", None) for i, (config, ms) in enumerate(times)
    )
    result = TuneResult(steps, None, len(steps), "exhaustive", "exhausted", cost_s * len(steps), 0.0)
    return kernel_tuner_cache(result, space.space, KERNEL, DEVICE)


def per_size_summary(case: dict[str, Any], times: list[tuple[dict[str, Any], float]]) -> dict[str, Any]:
    evaluations = [{"params": config, "time_ms": ms, "spread_ms": 0.0, "status": "ok"} for config, ms in times]
    return {
        "about": f"Times measured on an {DEVICE} by tools/bench_tune_gpu.py ({MEASURED.relative_to(ROOT)}, "
        "call 4): one timed size, the spec's bench size; written by tools/tuning_fixtures.py",
        "kernel": KERNEL,
        "sizes": [
            {
                "kernel": KERNEL,
                "size": "bench",
                "size_values": SIZE,
                "hardware": DEVICE,
                "original_ms": case["original_ms"],
                "evaluations": evaluations,
            }
        ],
    }


def spec_text() -> str:
    """The corpus spec of the kernel, naming the copy, its bench size the one measured."""
    text = (CORPUS / "naive.kxspec.toml").read_text(encoding="utf-8")
    edits = [
        (
            "# Harness spec for naive.cu of the gemm pair",
            "# Harness spec for gemm_naive.cu (corpora/naive/gemm/naive.cu)",
        ),
        ('file = "naive.cu"', 'file = "gemm_naive.cu"'),
        ('reference = "reference.py:gemm"\n', ""),
        ("bench = true\nM = 4096\nN = 4096\nK = 4096", "bench = true\nM = 2048\nN = 2048\nK = 2048"),
    ]
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"{CORPUS / 'naive.kxspec.toml'}: expected {old!r} once")
        text = text.replace(old, new)
    return text


def files() -> dict[Path, bytes]:
    case = measured_case()
    space, times = typed_times(case)
    cost_s = float(case["seconds_per_eval"]["total"])
    dump = lambda data: (json.dumps(data, indent=1, sort_keys=False) + "\n").encode("utf-8")  # noqa: E731
    return {
        OUT / "gemm_naive.cu": (CORPUS / "naive.cu").read_bytes(),
        OUT / "gemm_naive.kxspec.toml": spec_text().encode("utf-8"),
        OUT / "gemm_naive.kt.json": dump(kt_cache(space, times, cost_s)),
        OUT / "gemm_naive.times.json": dump(per_size_summary(case, times)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a shipped file differs")
    args = parser.parse_args(argv)
    stale = []
    for path, data in files().items():
        if args.check:
            if not path.is_file() or path.read_bytes() != data:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"wrote {path.relative_to(ROOT)} ({len(data)} bytes)")
    for path in stale:
        print(f"{path.relative_to(ROOT)}: differs from what tools/tuning_fixtures.py writes", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
