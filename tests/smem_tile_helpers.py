"""Shared by the smem-tile tests: a rewrite verified against the original on a runtime
(planted bugs replace bytes of the rewrite first), and a profile of a GPU without
asynchronous copies."""

from __future__ import annotations

from pathlib import Path

from kxform.engine.pass_api import Outcome
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import find_spec_for, load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import rewrite


def verify(
    path: Path,
    kernel: str,
    spec: str,
    runtime,  # type: ignore[no-untyped-def]
    hw: str = "h100",
    plant: tuple[bytes, bytes] | None = None,
    sizes: tuple[str, ...] = ("ragged",),
) -> tuple[bool, list[str]]:
    """Whether `spec`'s rewrite of `kernel` (with `plant` applied) verifies at `sizes`, and what each size said."""
    original = path.read_bytes()
    result = rewrite(original, spec, path=str(path), hw=hw)
    (done,) = [r for r in result.results if r.kernel == kernel]
    assert done.outcome is Outcome.APPLIED, done.reasons
    data = result.new_data if plant is None else result.new_data.replace(*plant)
    assert plant is None or data != result.new_data, plant
    found = find_spec_for(path)
    assert found is not None
    report = verify_pair(
        validate_bytes(str(path), original),
        validate_bytes(str(path), data),
        load_spec(found).kernel(kernel),
        runtime,
        sizes=sizes,
        policy=done.policy,
    )
    return report.ok, [s.summary() for s in report.sizes]


def older_gpu(tmp_path: Path) -> str:
    """A profile of a GPU without asynchronous copies (the A100's figures, sm_75)."""
    text = (Path(__file__).parents[1] / "hw" / "a100.toml").read_text()
    text = text.replace('name = "a100"', 'name = "sm75-test"').replace('arch = "sm_80"', 'arch = "sm_75"')
    lines = [line for line in text.splitlines() if not line.startswith("aliases")]
    path = tmp_path / "sm75.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)
