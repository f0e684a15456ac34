"""`kxform optimize FILE --kernel K`: a kernel the user owns (no spec, its own launcher)
drafted, verified, its space listed, tuned with recorded times, the best verified
version written; and every way it stops early, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from kxform.runtime.cpu import CpuRuntime

needs_cpu = pytest.mark.skipif(not CpuRuntime().available()[0], reason="the CPU runtime needs a host compiler")

BLEND = """#include <cuda_runtime.h>

__global__ void blend(const float* a, const float* b, float* out, float t, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float w = 1.0f - t;
    if (i < n) {
        out[i] = w * a[i] + t * b[i];
    }
}

void run_blend(const float* a, const float* b, float* out, float t, int n) {
    int threads = 128;
    blend<<<(n + threads - 1) / threads, threads>>>(a, b, out, t, n);
}
"""


def _optimize(cwd: Path, *args: str):  # type: ignore[no-untyped-def]
    env = {"KXFORM_CACHE_DIR": str(cwd / "cache"), "OPENBLAS_NUM_THREADS": "1"}
    return run_cli("optimize", "blend.cu", "--kernel", "blend", *args, cwd=cwd, env=env, timeout=900)


def _no_gpu() -> str | None:
    from kxform.runtime.gpu import GpuRuntime

    ok, why = GpuRuntime().available()
    return None if ok else why


@needs_cpu
@pytest.mark.slow
def test_without_a_gpu_it_drafts_verifies_and_lists_what_it_would_tune(tmp_path: Path) -> None:
    if _no_gpu() is None:
        pytest.skip("a GPU is here: optimize tunes on it (the no-GPU path is what this test checks)")
    (tmp_path / "blend.cu").write_text(BLEND)
    proc = _optimize(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    spec = report["spec"]
    assert spec["drafted"] and spec["path"] == ".kxform/specs/blend.kxspec.toml"
    assert spec["assumed"]["arg out"].startswith("out    float32[n]  (measured: ")
    assert spec["assumed"]["arg t"] == "scalar float32 = 0.75  (review)"
    assert report["original"]["status"] == "ok" and report["original"]["sizes"] == ["ragged", "tiles"]
    offered = {p["pass"]: p for p in report["space"]["passes"]}
    assert "launch" in offered and offered["launch"]["configurations"] > 1
    assert report["space"]["configurations"] > sum(p["configurations"] for p in offered.values())
    assert {n["pass"] for n in report["space"]["not_offered"]} >= {"rows", "smem-tile"}
    assert report["not_tuned"] == _no_gpu() and "tuned" not in report
    assert (tmp_path / "blend.cu").read_text() == BLEND and not (tmp_path / "blend.kxspec.toml").exists()
    # the same run for a person: each assumption on its line, and what a GPU would add
    human = _optimize(tmp_path)
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[0].startswith("spec: none beside blend.cu; drafted one as `kxform harness infer` does: ")
    assert any(line.startswith("  arg a    in     float32[n]  (measured: extent touched") for line in lines)
    assert "original: runs and writes its outputs at every check size (ragged, tiles), CPU runtime" in lines
    assert lines[-1].startswith("not tuned: no GPU here (") and "--objective cpu+replay:FILE" in lines[-1]
    # --write keeps the verified draft beside the source; the code is not touched untimed
    written = _optimize(tmp_path, "--write")
    assert written.returncode == 0, written.stderr
    assert "spec: written beside the source: blend.kxspec.toml" in written.stdout
    assert (tmp_path / "blend.cu").read_text() == BLEND
    again = _optimize(tmp_path)
    assert again.stdout.splitlines()[0] == "spec: blend.kxspec.toml" and "note" not in again.stderr


def _times(folder: Path) -> Path:
    """Times as a GPU run would record them: coarsening by 4 halves the original's 1 ms."""
    from kxform.hw import load_profile
    from kxform.search.kernel_space import kernel_space

    space = kernel_space(BLEND.encode(), "blend", None, path=str(folder / "blend.cu"), hw="h100")
    rows = space.search(load_profile("h100"))
    evaluations = []
    for r in range(len(rows)):
        config = rows.config(r)
        ms = 0.5 if config.get("coarsen") and not config.get("launch") and config["coarsen.factor"] == "4" else 1.0
        evaluations.append({"params": config, "time_ms": ms, "spread_ms": 0.01})
    path = folder / "times.json"
    path.write_text(json.dumps({"kernel": "blend", "evaluations": evaluations}))
    return path


@needs_cpu
@pytest.mark.slow
def test_with_recorded_times_it_tunes_prints_the_table_and_writes_the_best_verified_version(tmp_path: Path) -> None:
    (tmp_path / "blend.cu").write_text(BLEND)
    _times(tmp_path)
    proc = _optimize(
        tmp_path,
        "--objective",
        "cpu+replay:times.json",
        "--require",
        "not launch",
        "--strategy",
        "exhaustive",
        "--write",
        "--db",
        "t.sqlite",
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    table = out[out.index("               TIME ms") :]
    rows = table.splitlines()
    assert rows[0].split() == ["TIME", "ms", "COPY", "BANDWIDTH", "(h100-sxm:", "3000", "GB/s)"]
    # 3 buffers of 4-byte floats at n = 2^25 each move once: 402.7 GB/s at 1 ms, 13.4% of 3000 GB/s
    assert rows[1].split() == ["original", "1", "402.7", "GB/s,", "13.4%"]
    assert rows[2].split() == ["best", "verified", "0.5", "805.3", "GB/s,", "26.8%"]
    assert rows[3] == "speed-up: 2.000x" and rows[4].startswith("changed: coarsen{factor=4,")
    assert "written: blend.cu (coarsen{factor=4," in out and "report: .kxform/logs/" in out
    report = next(line for line in out.splitlines() if line.startswith("report: "))
    assert Path(tmp_path / report.split()[1]).read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    written = (tmp_path / "blend.cu").read_text()
    assert written != BLEND and "blend<<<" in written
    assert (tmp_path / "blend.kxspec.toml").is_file()  # the draft that verified it, kept beside it


@needs_cpu
@pytest.mark.slow
def test_a_draft_with_lines_to_fill_in_stops_before_anything_runs(tmp_path: Path) -> None:
    grid_from_a_query = BLEND.replace(
        "    blend<<<(n + threads - 1) / threads, threads>>>(a, b, out, t, n);",
        "    int sms = 0;\n    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);\n"
        "    blend<<<sms, threads>>>(a, b, out, t, n);",
    )
    (tmp_path / "blend.cu").write_text(grid_from_a_query)
    proc = _optimize(tmp_path, "--write")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(
        "kxform: error: blend.cu: the drafted spec of 'blend' has lines to fill in (.kxform/specs/blend.kxspec.toml:"
    )
    assert "run again with --spec .kxform/specs/blend.kxspec.toml" in proc.stderr
    assert (tmp_path / "blend.cu").read_text() == grid_from_a_query and not (tmp_path / "blend.kxspec.toml").exists()


@needs_cpu
@pytest.mark.slow
def test_a_spec_the_original_does_not_satisfy_stops_with_the_reason(tmp_path: Path) -> None:
    """A spec that says `a` is written (the kernel never writes it): the comparison
    could not have failed, so no rewrite could be verified against it: exit 3."""
    (tmp_path / "blend.cu").write_text(BLEND)
    draft = run_cli("harness", "infer", "blend.cu", "--kernel", "blend", "-o", ".", cwd=tmp_path)
    assert draft.returncode == 0, draft.stderr
    spec = tmp_path / "blend.kxspec.toml"
    text = spec.read_text()
    planted = text.replace('role = "in"', 'role = "inout"', 1)  # the first buffer, a
    assert planted != text
    spec.write_text(planted)
    proc = _optimize(tmp_path, "--write")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "original: inconclusive" in proc.stdout and "fix it (blend.kxspec.toml)" in proc.stdout
    assert (tmp_path / "blend.cu").read_text() == BLEND


def test_a_recorded_space_alone_is_refused(tmp_path: Path) -> None:
    (tmp_path / "blend.cu").write_text(BLEND)
    proc = _optimize(tmp_path, "--objective", "replay:kt.json")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "optimize rewrites and verifies the kernel, so it takes gpu or cpu+replay:FILE" in proc.stderr
