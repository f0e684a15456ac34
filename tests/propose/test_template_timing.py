"""Times of a template's configurations (kxform.propose.template_timing) and the GPU run of
recorded templates (tools/bench_refactor_gpu.py): a configuration that cannot be measured
has no time and says why, never a number; the tool's dry run verifies recorded templates
on the CPU runtime."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from template_inputs import gelu

ROOT = Path(__file__).resolve().parents[2]
NAIVE = ROOT / "corpora" / "naive"


def _gelu():  # type: ignore[no-untyped-def]
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec

    model = parse_model(read_source(NAIVE / "gelu_f32" / "naive.cu"))
    kernel = next(f for f in model.functions if f.name == "gelu_f32_naive")
    spec = load_spec(NAIVE / "gelu_f32" / "naive.kxspec.toml").kernel("gelu_f32_naive")
    return model, kernel, spec


def _small(spec):  # type: ignore[no-untyped-def]
    return spec.check_sizes[-1]


def test_a_runtime_that_cannot_time_gives_no_time_and_the_reason(cpu) -> None:  # type: ignore[no-untyped-def]
    from kxform.propose.template import read_template
    from kxform.propose.template_timing import GpuTemplateTiming

    model, kernel, spec = _gelu()
    timing = GpuTemplateTiming(model.source, kernel, spec, cpu, size=_small(spec))
    template = read_template(gelu(), "gelu_f32_naive")
    assert timing(template, {"BLOCK": 128, "VEC": 1}) is None
    assert timing.failures == {"BLOCK=128,VEC=1": "cpu runtime does not time kernels"}


def _gpu_or_skip():  # type: ignore[no-untyped-def]
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        runtime.close()
        pytest.skip(f"gpu runtime unavailable: {why}")
    return runtime


@pytest.mark.gpu
def test_configurations_are_timed_on_the_gpu_and_a_broken_one_has_no_time() -> None:
    from kxform.propose.template import read_template
    from kxform.propose.template_timing import GpuTemplateTiming

    runtime = _gpu_or_skip()
    try:
        model, kernel, spec = _gelu()
        timing = GpuTemplateTiming(model.source, kernel, spec, runtime, size=_small(spec), launch_budget_s=0.02)
        assert timing.original_timing().median_ms > 0
        good = read_template(gelu(), "gelu_f32_naive")
        assert (timing(good, {"BLOCK": 128, "VEC": 4}) or 0) > 0
        # planted: the code does not build at VEC=4 (an undeclared name): no time, the reason kept
        broken = read_template(gelu(guard="if (i < N && (VEC != 4 || undeclared_name))"), "gelu_f32_naive")
        assert timing(broken, {"BLOCK": 128, "VEC": 4}) is None
        assert "undeclared_name" in timing.failures["BLOCK=128,VEC=4"]
    finally:
        runtime.close()


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench_refactor_gpu.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_the_dry_run_verifies_a_recorded_template_on_the_cpu() -> None:
    proc = _tool("--dry-run", "--families", "transpose")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '"status": "verified"' in proc.stdout and "TILE=16" in proc.stdout


def test_an_unknown_family_is_one_line_and_exit_2() -> None:
    proc = _tool("--families", "nosuch")
    assert proc.returncode == 2
    assert "no recorded template for 'nosuch'" in proc.stderr and proc.stdout == ""
