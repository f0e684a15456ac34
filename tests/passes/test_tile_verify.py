"""Verification of tiling rewrites on the CPU runtime: each pass's policy (launch per version,
comparison), planted bugs rejected, unverifiable candidates never written, and the
`tile,swizzle` pipeline through the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CORPORA, logged_remarks, run_cli
from kxform.engine.pass_api import Outcome
from kxform.engine.policy import LaunchBinding, VerifyPolicy
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import find_spec_for, load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import rewrite


@pytest.fixture
def sgemm(tmp_path: Path) -> Path:
    shutil.copytree(CORPORA / "sgemm_tiled", tmp_path / "sgemm_tiled")
    return tmp_path / "sgemm_tiled" / "sgemm_tiled.cu"


def _spec(path: Path, kernel: str):  # type: ignore[no-untyped-def]
    spec_path = find_spec_for(path)
    assert spec_path is not None
    return load_spec(spec_path).kernel(kernel)


def test_a_new_tile_verifies_at_its_own_launch_and_fails_at_the_old_one(sgemm: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    original = sgemm.read_bytes()
    result = rewrite(original, "tile{TILE=8}", path=str(sgemm))
    (kernel,) = result.results
    spec = _spec(sgemm, "sgemm_tiled")
    before, after = validate_bytes(str(sgemm), original), validate_bytes(str(sgemm), result.new_data)
    report = verify_pair(before, after, spec, cpu, sizes=("tiles", "ragged"), policy=kernel.policy)
    assert report.ok, [s.summary() for s in report.sizes]
    # The same rewrite launched as the spec launches the original (16x16 blocks) leaves most of C unwritten.
    stale = VerifyPolicy(compare=kernel.policy.compare, required=True)
    assert not verify_pair(before, after, spec, cpu, sizes=("tiles",), policy=stale).ok


def test_a_planted_bug_in_a_tiled_kernel_is_rejected(sgemm: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    original = sgemm.read_bytes()
    result = rewrite(original, "tile{TILE=32}", path=str(sgemm))
    broken = result.new_data.replace(b"for (int k = 0; k < TILE; ++k)", b"for (int k = 0; k < TILE - 1; ++k)")
    assert broken != result.new_data
    spec = _spec(sgemm, "sgemm_tiled")
    report = verify_pair(
        validate_bytes(str(sgemm), original),
        validate_bytes(str(sgemm), broken),
        spec,
        cpu,
        sizes=("tiles",),
        policy=result.results[0].policy,
    )
    assert not report.ok and "differ" in report.sizes[0].summary()


def test_a_derived_launch_that_disagrees_with_the_spec_is_could_not_tell(sgemm: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    original = validate_bytes(str(sgemm), sgemm.read_bytes())
    wrong = VerifyPolicy(
        LaunchBinding(
            grid=("(N + TILE - 1) / TILE", "M"),
            block=("TILE", "TILE"),
            values=(("TILE", 16),),
            defaults=(("TILE", 16),),
            origin="test",
        )
    )
    report = verify_pair(original, original, _spec(sgemm, "sgemm_tiled"), cpu, sizes=("tiles",), policy=wrong)
    assert not report.ok
    assert "could not tell" in (report.sizes[0].error or "") and "the spec says grid (4, 4, 1)" in report.sizes[0].error


@pytest.mark.slow
def test_apply_verifies_tile_then_swizzle_in_one_pipeline_and_logs_both_policies(sgemm: Path) -> None:
    log = sgemm.parent / "run.jsonl"
    proc = run_cli(
        "apply", "--pass", "tile{TILE=32},swizzle{pattern=grouped}", "--verify", "cpu", "--log", str(log), str(sgemm)
    )
    assert proc.returncode == 0, proc.stderr
    text = sgemm.read_text()
    assert "#ifndef TILE\n#define TILE 32\n#endif\n" in text and "kxform_block = kxform_swizzle_grouped" in text
    records = [json.loads(line) for line in log.read_text().splitlines() if '"type": "kernel"' in line]
    assert [(r["pass"], r["outcome"]) for r in records] == [("tile", "applied"), ("swizzle", "applied")]
    (verify,) = [c for c in records[1]["checks"] if c["name"] == "verify"]
    assert verify["ok"] and "launch from" in verify["detail"] and "TILE=32" in verify["detail"]
    assert records[0]["verify_policy"]["compare"]["mode"] == "spec" and records[0]["verify_policy"]["required"]
    assert "tile applied to 'sgemm_tiled'" in proc.stderr and "swizzle applied to 'sgemm_tiled'" in proc.stderr


@pytest.mark.slow
def test_a_new_tile_without_a_harness_spec_is_never_written(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text((CORPORA / "transpose" / "transpose.cu").read_text())
    before = source.read_bytes()
    proc = run_cli("apply", "--pass", "tile{TILE_DIM=16}", "--verify", "cpu", str(source), cwd=tmp_path)
    assert proc.returncode == 1
    assert source.read_bytes() == before
    remarks = logged_remarks(proc, tmp_path)
    assert "could not verify" in remarks and "no harness spec" in remarks
    assert "tile applied" not in proc.stderr
    lifted = run_cli("apply", "--pass", "tile", "--verify", "static", str(source))  # the lift alone may be written
    assert lifted.returncode == 0, lifted.stderr
    assert b"#ifndef TILE_DIM\n#define TILE_DIM 32\n#endif\n" in source.read_bytes()


def test_inspect_shows_parameters_and_constraints_with_their_lines() -> None:
    path = str(CORPORA / "transpose" / "transpose.cu")
    table = run_cli("inspect", "--pass", "tile", path)
    assert table.returncode == 0, table.stderr
    assert "param TILE_DIM = 32" in table.stdout
    assert "require (TILE_DIM) % (BLOCK_ROWS) == 0  [" in table.stdout and "transpose.cu:32]" in table.stdout
    data = json.loads(run_cli("inspect", "--json", path).stdout)
    tile = data[0]["kernels"][0]["passes"]["tile"]
    assert tile["status"] == "liftable" and [p["name"] for p in tile["params"]] == ["TILE_DIM", "BLOCK_ROWS"]
    assert {c["expr"] for c in tile["constraints"]} >= {"TILE_DIM * BLOCK_ROWS <= hw.max_threads_per_block"}
    assert data[0]["kernels"][0]["swizzle"] == "safe"  # every pass describes itself


def test_verification_policy_of_swizzle_is_exact_unless_float_atomics() -> None:
    plain = rewrite("__global__ void k(float* o) { o[blockIdx.y * 9 + blockIdx.x] = 1; }\n")
    assert plain.results[0].policy.compare.mode == "exact" and plain.results[0].policy.launch.is_spec
    atomics = rewrite(
        "__global__ void k(float* o, const float* x) { atomicAdd(&o[0], x[blockIdx.y * 9 + blockIdx.x]); }\n"
    )
    assert atomics.results[0].policy.compare.mode == "spec"
    assert atomics.results[0].outcome is Outcome.APPLIED
