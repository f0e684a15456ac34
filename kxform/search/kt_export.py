"""A tuning run's results in Kernel Tuner's cache format (`kxform tune --export FILE`).

Kernel Tuner reads a cache file to resume a run, to replay it in its simulation mode
and in its dashboard: a JSON object with `device_name`, `kernel_name`, `tune_params`
(parameter -> values), `tune_params_keys` (their order), `objective` and `cache`, one
record per evaluated configuration keyed by its values joined with commas. A record
holds the parameter values, `time` (ms, or the name of a failure class:
`InvalidConfig`, `CompilationFailedConfig`, `RuntimeFailedConfig`) and what the
evaluation cost (`compile_time`, `verification_time`, `benchmark_time`, ms; kxform
keeps one total per evaluation, written as `benchmark_time`). kxform reads the same
format back (kxform.search.recorded), so an exported run replays with
`--objective replay:FILE`.
"""

from __future__ import annotations

from typing import Any

from kxform.engine.params import ParamSpace
from kxform.search.objective import Failure
from kxform.search.tuner import TuneResult

FAILURE_NAMES = {
    Failure.INVALID: "InvalidConfig",
    Failure.COMPILE: "CompilationFailedConfig",
    Failure.RUNTIME: "RuntimeFailedConfig",
    Failure.VERIFY: "RuntimeFailedConfig",  # Kernel Tuner has no class of its own for wrong output
}


def kernel_tuner_cache(result: TuneResult, params: ParamSpace, kernel: str, device: str) -> dict[str, Any]:
    """The cache object of `result` (each configuration once, in evaluation order)."""
    keys = list(params.names)
    cache: dict[str, dict[str, Any]] = {}
    for step in result.steps:
        values = [step.config[name] for name in keys]
        evaluation = step.evaluation
        record: dict[str, Any] = dict(zip(keys, values))
        if evaluation.time_ms is not None:
            record["time"] = evaluation.time_ms
        else:
            assert evaluation.failure is not None
            record["time"] = FAILURE_NAMES[evaluation.failure]
        record.update(
            {
                "compile_time": 0.0,
                "verification_time": 0.0,
                "benchmark_time": round(evaluation.cost_s * 1000.0, 6),
                "strategy_time": 0.0,
                "framework_time": 0.0,
            }
        )
        cache[",".join(str(v) for v in values)] = record
    return {
        "device_name": device,
        "kernel_name": kernel,
        "objective": "time",
        "tune_params_keys": keys,
        "tune_params": {p.name: list(p.values) for p in params.params},
        "cache": cache,
    }
