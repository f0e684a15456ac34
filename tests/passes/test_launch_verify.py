"""Verification of new block sizes on the CPU runtime: a lifted kernel verifies at its own
launch, a grid that did not follow the block is caught, and a kernel bug that shows only
at another block size is rejected by the tuning objective."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import needs_nvcc
from kxform.engine.policy import LaunchBinding, VerifyPolicy
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import find_spec_for, load_spec
from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget
from kxform.search.kernel_space import kernel_space
from kxform.hw import load_profile
from kxform.search.objective import Failure
from kxform.verify.differential import verify_pair
from swizzle_helpers import rewrite

FIXTURES = Path(__file__).parents[1] / "fixtures" / "launch"


def _spec(path: Path, kernel: str):  # type: ignore[no-untyped-def]
    found = find_spec_for(path)
    assert found is not None
    return load_spec(found).kernel(kernel)


@pytest.mark.slow
def test_a_new_block_verifies_at_its_own_launch_and_a_grid_that_did_not_follow_is_caught(cpu) -> None:  # type: ignore[no-untyped-def]
    path = FIXTURES / "gemm_naive" / "gemm_naive.cu"
    original = path.read_bytes()
    result = rewrite(original, "launch{GEMM_NAIVE_BLOCK_X=32,GEMM_NAIVE_BLOCK_Y=4}", path=str(path))
    policy = result.results[0].policy
    before, after = validate_bytes(str(path), original), validate_bytes(str(path), result.new_data)
    spec = _spec(path, "gemm_naive")
    report = verify_pair(before, after, spec, cpu, policy=policy)
    assert report.ok, [s.summary() for s in report.sizes]
    # Planted: the block changes but the grid stays the original's (16 x 16 tiles): rows are left unwritten.
    stale = VerifyPolicy(
        LaunchBinding(
            ("ceil_div(N, 16)", "ceil_div(M, 16)"),
            policy.launch.block,
            values=policy.launch.values,
            defaults=policy.launch.defaults,
            origin="test",
        ),
        policy.compare,
        required=True,
    )
    assert not verify_pair(before, after, spec, cpu, sizes=("ragged",), policy=stale).ok


PLANTED = b"int i = blockIdx.x * blockDim.x + (threadIdx.x & 255);"
"""Right while the block has at most 256 threads; the launch pass cannot see it."""


@pytest.mark.slow
@needs_nvcc
def test_tuning_the_block_size_rejects_a_size_only_the_differential_run_can_see(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "gelu"
    shutil.copytree(FIXTURES / "gelu", folder)
    path = folder / "gelu.cu"
    data = path.read_bytes().replace(b"int i = blockIdx.x * blockDim.x + threadIdx.x;", PLANTED)
    assert PLANTED in data
    path.write_bytes(data)
    space = kernel_space(data, "gelu_forward", ("launch",), path=str(path), hw="h100")
    assert space.space.names == ("launch", "launch.GELU_FORWARD_BLOCK_X", "launch.GELU_FORWARD_MIN_BLOCKS")
    assert (
        space.spec({"launch": True, "launch.GELU_FORWARD_BLOCK_X": 512, "launch.GELU_FORWARD_MIN_BLOCKS": 0})
        == "launch{GELU_FORWARD_BLOCK_X=512,GELU_FORWARD_MIN_BLOCKS=0}"
    )
    objective = KernelObjective(
        TuneTarget(str(path), data, "gelu_forward", _spec(path, "gelu_forward"), "h100"),
        space,
        cpu,
        MeasureOptions(check_sizes=("ragged",)),
    )

    def evaluate(value: int, min_blocks: int = 0):  # type: ignore[no-untyped-def]
        prepared = objective.prepare(
            {"launch": True, "launch.GELU_FORWARD_BLOCK_X": value, "launch.GELU_FORWARD_MIN_BLOCKS": min_blocks}
        )
        return prepared.failure or objective.evaluate(prepared)

    wrong = evaluate(512)
    assert wrong.failure is Failure.VERIFY and "elements differ" in wrong.detail
    fine = evaluate(128)  # verified; only timing, which the CPU runtime cannot do, is left
    assert fine.failure is Failure.RUNTIME and fine.detail == "time: the cpu runtime does not time kernels"
    bounded = evaluate(128, 2)  # launch bounds added (the block, 2 blocks per SM): built, verified bit-exact
    assert bounded.failure is Failure.RUNTIME and bounded.detail == "time: the cpu runtime does not time kernels"
    searched = space.search(load_profile("h100"))
    configs = [searched.config(r) for r in range(len(searched))]
    values = sorted(
        {c["launch.GELU_FORWARD_BLOCK_X"] for c in configs if c["launch"] and c["launch.GELU_FORWARD_MIN_BLOCKS"] == 0}
    )
    assert values == [32, 64, 128, 512, 1024]  # at least a warp per block; 256, the original, is the pass off
    bounded = sorted(
        {
            c["launch.GELU_FORWARD_MIN_BLOCKS"]
            for c in configs
            if c["launch"] and c["launch.GELU_FORWARD_BLOCK_X"] == 256
        }
    )
    assert bounded == [1, 2, 4]  # the original block with launch bounds added


@pytest.mark.slow
def test_apply_through_the_command_line_logs_the_policy_and_the_verification(tmp_path: Path) -> None:
    import json

    from conftest import run_cli

    folder = tmp_path / "gemm_naive"
    shutil.copytree(FIXTURES / "gemm_naive", folder)
    path = folder / "gemm_naive.cu"
    log = tmp_path / "run.jsonl"
    proc = run_cli(
        "apply",
        "--pass",
        "launch{GEMM_NAIVE_BLOCK_X=32,GEMM_NAIVE_BLOCK_Y=8}",
        "--verify",
        "cpu",
        "--log",
        str(log),
        str(path),
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "#define GEMM_NAIVE_BLOCK_X 32\n#endif\n#ifndef GEMM_NAIVE_BLOCK_Y\n#define GEMM_NAIVE_BLOCK_Y 8\n"
        in path.read_text()
    )
    (record,) = [json.loads(line) for line in log.read_text().splitlines() if '"type": "kernel"' in line]
    assert (record["pass"], record["outcome"]) == ("launch", "applied")
    assert record["verify_policy"]["compare"]["mode"] == "exact" and record["verify_policy"]["required"]
    assert record["verify_policy"]["launch"]["block"] == ["GEMM_NAIVE_BLOCK_X", "GEMM_NAIVE_BLOCK_Y"]
    (verify,) = [c for c in record["checks"] if c["name"] == "verify"]
    assert verify["ok"] and "GEMM_NAIVE_BLOCK_X=32" in verify["detail"]
    assert "launch applied to 'gemm_naive'" in proc.stderr
