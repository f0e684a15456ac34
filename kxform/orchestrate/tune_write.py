"""`kxform tune --write` of a pipeline that won: written the way `kxform apply` writes.

The tuning objective already rewrote, checked, compiled and verified the winning
configuration, but through the pure core only. Writing goes through `apply`'s whole
path instead (kxform.orchestrate.runner.run_apply): every pass of the pipeline with its
explicit options, libclang's semantic checks, the compile check through every
translation unit, the differential run on the runtime that tuned it, and the atomic
write under the tree lock. Anything that path refuses leaves the file untouched and is
reported (`refused`, exit 1): a tuned result is never written on weaker evidence than
an applied one.
"""

from __future__ import annotations

import os
from typing import Any

from kxform.engine.pass_api import Outcome
from kxform.hw import load_profile
from kxform.log.report import WriteBack
from kxform.orchestrate.runner import ApplyConfig, run_apply
from kxform.runtime.gpu import GpuRuntime
from kxform.search.kernel_objective import KernelObjective


def write_pipeline(spec: str | None, objective: KernelObjective, pipeline: str) -> dict[str, Any]:
    """Apply `pipeline` (`tile{TILE=32},swizzle{...}`) to the tuned kernel and write it;
    `spec`: the harness spec the run was given (its directory is searched for specs)."""
    target = objective.target
    spec_dirs = (os.path.dirname(os.path.abspath(spec)),) if spec else ()
    config = ApplyConfig(
        pipeline=pipeline,
        hw=load_profile(target.hw),
        kernels=(target.kernel,),
        verify="gpu" if isinstance(objective.runtime, GpuRuntime) else "cpu",
        write_back=WriteBack.WRITE,
        build_dir=target.build_dir,
        spec_dirs=spec_dirs,
        expected=((os.path.abspath(target.path), target.data),),
    )
    _, outcomes = run_apply([target.path], config, emit=lambda text: None)
    outcome = outcomes[0] if outcomes else None
    results = [r for r in (outcome.results if outcome else []) if r.kernel == target.kernel]
    failed = next((r for r in results if r.outcome is not Outcome.APPLIED), None)
    if outcome is None or outcome.error or failed is not None or not results:
        why = (
            outcome.error
            if outcome and outcome.error
            else f"{failed.pass_name}: {failed.stage or failed.outcome.value}: "
            f"{failed.reasons[0] if failed.reasons else failed.outcome.value}"
            if failed
            else "nothing was applied"
        )
        return {"written": [], "pipeline": pipeline, "refused": why}
    checks = sorted({c.name for r in results for c in r.checks})
    return {"written": [pipeline], "pipeline": pipeline, "checks": checks}
