"""Synthetic recorded spaces in Kernel Tuner's cache format, written by the tests."""

from __future__ import annotations

import gzip
import itertools
import json
import math
from pathlib import Path
from typing import Any

PARAMS = {"bx": [1, 2, 4, 8, 16], "by": [1, 2, 4, 8], "unroll": [0, 1], "tile": [1, 2, 3]}
RESTRICTIONS = ["bx * by <= 32", "unroll == 0 or tile > 1"]
FAILING = {"16,2,1,3"}
"""Configurations whose record says the launch failed."""


def synthetic_time(bx: int, by: int, unroll: int, tile: int, shift: float = 0.0) -> float:
    """A smooth bowl in log-space with an interaction, minimum near bx=4, by=4, tile=2."""
    return (
        1.0
        + 0.3 * (math.log2(bx) - 2 - shift) ** 2
        + 0.2 * (math.log2(by) - 2) ** 2
        + 0.15 * (tile - 2) ** 2
        - 0.1 * unroll * (tile == 2)
        + 0.01 * bx * by / 32
    )


def valid(config: dict[str, int]) -> bool:
    return config["bx"] * config["by"] <= 32 and (config["unroll"] == 0 or config["tile"] > 1)


def records(shift: float = 0.0) -> dict[str, Any]:
    cache = {}
    for values in itertools.product(*PARAMS.values()):
        config = dict(zip(PARAMS, values))
        if not valid(config):
            continue
        key = ",".join(map(str, values))
        time: Any = "RuntimeFailedConfig" if key in FAILING else synthetic_time(**config, shift=shift)
        cache[key] = {**config, "time": time, "compile_time": 900.0, "verification_time": 0, "benchmark_time": 100.0}
    return cache


def write_recording(
    folder: Path,
    name: str = "synth_A.json.gz",
    *,
    kernel: str = "synth_kernel",
    device: str = "Test GPU A",
    shift: float = 0.0,
    definition: bool = True,
    mutate: Any = None,
) -> Path:
    """Write a recording (and, with `definition`, its `*.space.json`) into `folder`."""
    data: dict[str, Any] = {
        "device_name": device,
        "kernel_name": kernel,
        "problem_size": [64, 64],
        "tune_params_keys": list(PARAMS),
        "tune_params": PARAMS,
        "objective": "time",
        "cache": records(shift),
    }
    if mutate is not None:
        mutate(data)
    path = folder / name
    raw = json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
    if definition:
        write_definition(folder / "synth.space.json")
    return path


def write_definition(path: Path, restrictions: list[str] | None = None) -> None:
    spec = {
        "ConfigurationSpace": {
            "TuningParameters": [
                {"Name": n, "Type": "int", "Values": json.dumps(v), "Default": v[0]} for n, v in PARAMS.items()
            ],
            "Conditions": [{"Expression": e, "Parameters": []} for e in (restrictions or RESTRICTIONS)],
        }
    }
    path.write_text(json.dumps(spec))


KERNEL_SOURCE = """#define bx 4
#define by 4
#define tile 1
__global__ void synth_kernel(float *out) {
    out[blockIdx.x * bx * tile + threadIdx.x] = by;
}
"""
