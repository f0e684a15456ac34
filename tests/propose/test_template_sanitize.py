"""Recorded model templates verified on the GPU under compute-sanitizer (racecheck,
memcheck): a planted race and a planted overrun are refused on their sampled
configurations, a sound template passes. Needs no LLM client."""

from __future__ import annotations

from pathlib import Path

import pytest

from template_inputs import OVERRUN, RACE_BY_BLOCK, gelu

NAIVE = Path(__file__).resolve().parent.parent.parent / "corpora" / "naive"


def _gpu_or_skip() -> None:
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime(sanitize=True)
    try:
        ok, why = runtime.available()
    finally:
        runtime.close()
    if not ok:
        pytest.skip(f"gpu runtime with compute-sanitizer unavailable: {why}")


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name, expected",
    [
        ("a race that appears only for some block sizes", "racecheck"),
        ("out of bounds for large parameters", "memcheck"),
    ],
)
def test_the_sanitizers_reject_a_planted_template_on_the_gpu(name: str, expected: str) -> None:
    """racecheck sees the missing barrier and memcheck the overrun, on the sampled configurations."""
    from kxform.frontend.cuda import parse_model
    from kxform.frontend.source import read_source
    from kxform.harness.spec import load_spec
    from kxform.hw import load_profile
    from kxform.propose.template import read_template
    from kxform.propose.template_verify import covering_sample, sanitize_template

    _gpu_or_skip()
    data = {"racecheck": RACE_BY_BLOCK, "memcheck": OVERRUN}[expected]
    template = read_template(data, "gelu_f32_naive")
    model = parse_model(read_source(NAIVE / "gelu_f32" / "naive.cu"))
    kernel = next(f for f in model.functions if f.name == "gelu_f32_naive")
    spec = load_spec(NAIVE / "gelu_f32" / "naive.kxspec.toml").kernel("gelu_f32_naive")
    sample = covering_sample(template.space(), load_profile("h100"), dict(template.original or ()))
    found = sanitize_template(model.source, kernel, template, spec, sample)
    assert found is not None and found.key in ("memcheck", "racecheck"), found
    if expected == "memcheck":  # the overrun is memcheck's finding, whatever the outputs
        assert found.key == "memcheck", found
    else:  # the race shows only where the reversed read crosses warps: BLOCK = 256
        assert "BLOCK=256" in found.message, found
    clean = read_template(gelu(), "gelu_f32_naive")
    assert (
        sanitize_template(model.source, kernel, clean, spec, covering_sample(clean.space(), load_profile("h100")))
        is None
    )
