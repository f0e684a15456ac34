"""The locality model end to end: `kxform inspect --l2`, the GPU measurements it must
agree with, and the swizzle pass's default proposer that asks it.

The tests marked slow trace and simulate the corpus kernels at their bench sizes (what
docs/gpu-results.md measured); footprints and per-order results are cached for the test
session, so the proposer tests reuse the traces of the measurement test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import CORPORA, ROOT, logged_remarks, needs_nvcc, run_cli
from kxform.engine.pass_api import Outcome
from kxform.frontend.source import read_source
from kxform.harness.spec import load_spec
from kxform.hw import load_profile
from kxform.locality.occupancy import kernel_registers, occupancy
from kxform.locality.predict import candidate_configs, decide, occupancy_veto, rank_orders
from kxform.locality.trace import extract, launch_shape, resolve_size, source_dir
from kxform.remap import PATTERNS, get_pattern
from kxform.runtime.cpu import CpuRuntime
from swizzle_helpers import needs_cpu, outcomes, rewrite

TRANSPOSE = CORPORA / "transpose" / "transpose.cu"
GROUPED_LIKE = {"grouped", "xcd-grouped", "hilbert", "morton"}


def measured_speedups() -> dict[tuple[str, str], float]:
    """(kernel folder, pattern) -> speed-up, from the table in docs/gpu-results.md."""
    table: dict[tuple[str, str], float] = {}
    current = ""
    for line in (ROOT / "docs" / "gpu-results.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.match(r"^\d", cells[4]):
            current = cells[0].split()[0] if cells[0] else current
            table[(current, cells[1])] = float(cells[4])
    return table


# ---------------------------------------------------------------- inspect --l2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kernel", "nope"], "no kernel 'nope' in spec"),
        (["--kernel", "transposeNoBankConflicts", "--size", "huge"], "no size 'huge'"),
        ([], "--l2 needs --kernel"),
        (["--kernel", "transposeNoBankConflicts", "--pass", "tile"], "--pass and -p do not go with --l2"),
    ],
)
def test_inspect_l2_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = run_cli("inspect", "--l2", str(TRANSPOSE), *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert message in proc.stderr and proc.stderr.count("\n") == 1


def test_inspect_l2_without_a_spec(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(TRANSPOSE.read_text())
    proc = run_cli("inspect", "--l2", "k.cu", "--kernel", "transposeNoBankConflicts", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "k.cu: no harness spec describes 'transposeNoBankConflicts' (looked for k.kxspec.toml" in proc.stderr


def test_inspect_l2_options_need_l2() -> None:
    proc = run_cli("inspect", "--kernel", "x", str(TRANSPOSE))
    assert proc.returncode == 2 and "go with --l2" in proc.stderr


@needs_cpu
def test_inspect_l2_json_lists_every_order(tmp_path: Path) -> None:
    proc = run_cli(
        "inspect",
        "--l2",
        "--json",
        str(TRANSPOSE),
        "--kernel",
        "transposeNoBankConflicts",
        "--size",
        "ragged",
        "--hw",
        "h200",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    orders = {o["order"]: o for o in data["orders"]}
    assert set(orders) >= {"row", "column", "grouped(along=y,group=8)", "diagonal"}
    assert not {"hilbert", "morton"} & set(orders)  # no proof, so no candidate (docs/trust.md)
    assert sorted(o["rank"] for o in orders.values()) == list(range(1, len(orders) + 1))
    row = orders["row"]
    assert row["margin_to_identity"] == 0 and 0 < row["l2_hit_rate"] < 1
    # 100 x 37 floats read and written once: every order moves the same 32-byte sectors
    whole = -(-100 * 37 * 4 // 32) * 32
    assert all(o["dram_read_bytes"] == o["dram_write_bytes"] == whole for o in orders.values())
    text = run_cli(
        "inspect", "--l2", str(TRANSPOSE), "--kernel", "transposeNoBankConflicts", "--size", "ragged", "--hw", "h200"
    )
    assert text.returncode == 0 and "proposal: none" in text.stdout


# ---------------------------------------------------------------- the H200 measurements


KERNELS = {
    "sgemm_tiled": ("sgemm_tiled", "sgemm_tiled"),
    "transpose": ("transpose", "transposeNoBankConflicts"),
    "stencil5": ("stencil5", "jacobi5"),
}


@needs_cpu
@pytest.mark.slow
def test_the_model_reproduces_the_direction_of_every_measured_effect() -> None:
    """Every (kernel, pattern) of docs/gpu-results.md whose measured effect exceeds 3% gets
    a predicted gain of the same sign, with one set of constants for all kernels; the
    patterns are configured as the table measured them (XCD patterns with 8 XCDs)."""
    measured = measured_speedups()
    # Every measured pattern, the ones the swizzle pass cannot prove (and so never proposes) too:
    # the model's constants are judged on all the measurements there are.
    configs = [
        pattern.resolve({"xcds": 8} if "xcds" in {q.name for q in pattern.params} else {})
        for pattern in PATTERNS.values()
        if pattern.name != "row" and 2 in pattern.dims
    ]
    assert len(configs) > len(candidate_configs(load_profile("mi300x"), 2))
    predicted, observed = [], []
    for name, (folder, kernel) in KERNELS.items():
        spec = load_spec(CORPORA / folder / f"{folder}.kxspec.toml")
        ranking = rank_orders(read_source(str(spec.source)), spec.kernel(kernel), load_profile("h200"), configs=configs)
        for p in ranking.predictions:
            if p.config is None:
                continue
            speedup = measured[(name, p.config.pattern.name)]
            predicted.append(p.gain)
            observed.append(speedup)
            if abs(speedup - 1) > 0.03:
                assert (p.gain > 0) == (speedup > 1), (name, p.label, p.gain, speedup)
    assert len(predicted) == 21
    ranks = [np.argsort(np.argsort(v)) for v in (predicted, observed)]
    assert np.corrcoef(*ranks)[0, 1] > 0.5


# ---------------------------------------------------------------- the default proposer


@needs_cpu
@pytest.mark.slow
@pytest.mark.parametrize("folder", ["stencil5", "transpose"])
def test_the_default_proposer_leaves_memory_bound_kernels_alone(folder: str) -> None:
    path = next((CORPORA / folder).glob("*.cu"))
    result = rewrite(path.read_bytes(), path=str(path), hw="h200")
    assert not result.changed
    (remark,) = [r for r in result.remarks if r.name == "NoPredictedGain"]
    assert "predicted by the model" in remark.message and "no order beats row-major" in remark.message


@needs_cpu
@pytest.mark.slow
@pytest.mark.parametrize("folder", ["sgemm_tiled", "sgemm_128"])
def test_the_default_proposer_groups_the_gemms(folder: str) -> None:
    path = next((CORPORA / folder).glob("*.cu"))
    result = rewrite(path.read_bytes(), path=str(path), hw="h200")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format() for r in result.remarks]
    assert kernel.proposal is not None and kernel.proposal.options["pattern"] in GROUPED_LIKE
    assert "predicted by the model" in kernel.proposal.rationale and "DRAM read" in kernel.proposal.rationale
    assert kernel.proposal.provenance.evidence == "predicted" and kernel.proposal.provenance.model
    # the fallbacks the later stages may try come in the model's order, each with its figures
    ranks = [
        int(re.search(r"candidate ranked (\d+) by the model", p.rationale).group(1))  # type: ignore[union-attr]
        for p in kernel.alternates
    ]
    assert kernel.alternates and ranks == sorted(ranks)
    assert all(p.provenance.evidence == "predicted" for p in kernel.alternates)


@pytest.mark.slow
@needs_nvcc
def test_an_order_whose_rewrite_lowers_occupancy_is_vetoed() -> None:
    """The WMMA GEMM's remaps take registers (64 -> 79 per thread: 8 -> 6 blocks per SM on
    an H100), and grouped ran 5% slower there while its DRAM reads fell by four fifths:
    the veto names the drop. sgemm_tiled's grouped remap keeps its 32 registers: no veto."""
    hw = load_profile("h100-sxm")
    grouped = get_pattern("grouped").resolve({})
    vetoes = {}
    for folder, kernel in (("gemm_bf16_wmma", "gemm_bf16_wmma"), ("sgemm_tiled", "sgemm_tiled")):
        harness = load_spec(CORPORA / folder / f"{folder}.kxspec.toml")
        spec = harness.kernel(kernel)
        source = read_source(str(harness.source))
        extracted = extract(source, spec)
        regs, smem, _ = kernel_registers(extracted.source, extracted.entry, hw.arch, source_dir(extracted))
        shape = launch_shape(spec, resolve_size(spec, None), None)
        original = occupancy(hw, shape.threads, regs, smem + shape.shared_bytes)
        vetoes[kernel] = occupancy_veto(source, spec, hw, shape.threads, shape.shared_bytes, original)(grouped)
    assert vetoes["sgemm_tiled"] is None
    why = vetoes["gemm_bf16_wmma"]
    assert why is not None and re.search(r"fits \d blocks/SM instead of 8 \(64 -> \d+ registers", why), why


@needs_cpu
@pytest.mark.slow
def test_a_vetoed_order_gives_way_to_the_next_that_passes() -> None:
    """decide() with a veto planted on the order it would choose takes the next passing
    order and says which it passed over; vetoing every passing order leaves the kernel alone."""
    spec = load_spec(CORPORA / "sgemm_tiled" / "sgemm_tiled.kxspec.toml")
    ranking = rank_orders(read_source(str(spec.source)), spec.kernel("sgemm_tiled"), load_profile("h200"))
    first, _ = decide(ranking.predictions)
    assert first is not None and first.config is not None
    second, why = decide(ranking.predictions, lambda c: "planted" if c == first.config else None)
    assert second is not None and second.config != first.config and f"not {first.label} (planted)" in why
    none, why = decide(ranking.predictions, lambda c: "planted")
    assert none is None and why.startswith("every order that beats row-major by the margins is refused")


def test_what_the_model_cannot_judge_is_left_alone_with_the_reason() -> None:
    """No rule stands in for the model: a kernel it cannot judge keeps its order."""
    source = TRANSPOSE.read_text()
    result = rewrite(source, path="not-a-file.cu", hw="h200", pattern=None)
    assert outcomes(result)["transposeNoBankConflicts"] is Outcome.MISSED and not result.changed
    (missed,) = [r for r in result.remarks if r.name == "NotModelled"]
    assert "no harness spec, and none can be drafted (the source is not a file)" in missed.message


class CpuTimedRuntime(CpuRuntime):
    """The CPU runtime with a timer (wall time of whole runs): `--measure` without a GPU.
    Four samples stand for the GPU timer's fifty (CPU runs take far longer)."""

    name = "cpu-timed"

    def time(self, request, *, warmup=3, repeat=20, keep_outputs=False):  # type: ignore[no-untyped-def]
        import time as clock

        from kxform.runtime.base import TimedRun

        samples, last = [], None
        for _ in range(4):
            start = clock.perf_counter()
            last = self.run(request)
            samples.append((clock.perf_counter() - start) * 1e3)
        return TimedRun(tuple(samples), outputs=dict(last.outputs) if keep_outputs and last else {})


@pytest.mark.slow
@needs_cpu
def test_a_measurement_decides_and_is_logged_beside_the_prediction(tmp_path: Path) -> None:
    import dataclasses
    import shutil

    from kxform.engine.pass_api import Provenance
    from kxform.verify.stage import verify_file

    folder = tmp_path / "sgemm_128"
    shutil.copytree(CORPORA / "sgemm_128", folder)
    spec = folder / "sgemm_128.kxspec.toml"  # time at a size the CPU runs in a moment
    spec.write_text(spec.read_text().replace("M = 8192\nN = 8192\nK = 8192", "M = 256\nN = 256\nK = 32"))
    path = folder / "sgemm_128.cu"
    original = path.read_bytes()
    result = rewrite(original, path=str(path), pattern="grouped", group="2")
    (applied,) = result.results
    assert applied.proposal is not None
    prediction = "predicted by the model (h200, size bench): grouped(along=y,group=2) saves 9.9%"
    predicted = dataclasses.replace(
        applied,
        proposal=dataclasses.replace(
            applied.proposal, rationale=prediction, provenance=Provenance(model="kxform.locality", evidence="predicted")
        ),
    )
    # the rewrite also spins (same outputs, far slower): the measurement must overrule the prediction
    slower = result.new_data.replace(
        b"const int tid = threadIdx.x;",
        b"for (volatile int spin = 0; spin < 20000; spin = spin + 1) {}\n    const int tid = threadIdx.x;",
        1,
    )
    assert slower != result.new_data
    results, keep = verify_file(original, slower, str(path), [predicted], CpuTimedRuntime(), measure=True)
    (kernel,) = results
    (timing,) = [c for c in kernel.checks if c.name == "measure"]
    assert "original" in timing.detail and "rewritten" in timing.detail and timing.detail.endswith(prediction)
    assert f"; overruled by this measurement, the model had predicted: {prediction}" in timing.detail
    assert not keep and kernel.outcome is Outcome.MISSED
    assert kernel.reasons[0].startswith("NotFaster") and prediction in kernel.reasons[0]
    # a rule's proposal is logged with its measurement alone
    results, _ = verify_file(original, result.new_data, str(path), [applied], CpuTimedRuntime(), measure=True)
    (timing,) = [c for c in results[0].checks if c.name == "measure"]
    assert "predicted by the model" not in timing.detail


@needs_cpu
def test_block_orders_under_a_tile_configuration() -> None:
    from kxform.locality.tile import rank_tile_orders
    from kxform.locality.trace import ModelRefused

    harness = load_spec(CORPORA / "sgemm_tiled" / "sgemm_tiled.kxspec.toml")
    spec = harness.kernel("sgemm_tiled")
    source = read_source(str(harness.source))
    hw = load_profile("h200")
    as_is = rank_orders(source, spec, hw, "tiles")
    tiled = rank_tile_orders(source, spec, hw, {"TILE": 32}, "tiles")
    assert as_is.grid == (4, 4, 1) and tiled.grid == (2, 2, 1)  # 64 x 64 outputs in 16- and 32-wide tiles
    assert {p.label for p in tiled.predictions} == {p.label for p in as_is.predictions}
    # 3 x 64 x 64 floats fit in L2: DRAM sees each byte of A, B and C once under either tile
    assert as_is.identity.stats.dram_read_bytes.value == tiled.identity.stats.dram_read_bytes.value == 3 * 64 * 64 * 4
    with pytest.raises(ModelRefused, match="tile pass does not rewrite"):
        rank_tile_orders(source, spec, hw, {"TILE": 64}, "tiles")  # 4096 threads per block


@needs_cpu
@pytest.mark.slow
def test_a_saving_is_positive_in_inspect_l2_and_in_the_decision() -> None:
    """One sign convention: the grouped order saves DRAM bytes and time on the tiled SGEMM,
    and the table, its JSON and the decision text all show that saving as positive."""
    args = (
        "inspect",
        "--l2",
        str(CORPORA / "sgemm_tiled" / "sgemm_tiled.cu"),
        "--kernel",
        "sgemm_tiled",
        "--hw",
        "h200",
    )
    data = json.loads(run_cli(*args, "--json").stdout)
    grouped = next(o for o in data["orders"] if o["order"] == "grouped(along=y,group=8)")
    assert grouped["dram_saving"] > 0.5 and grouped["time_saving"] > 0.5
    assert grouped["dram_saving"] == -grouped["dram_change"]
    text = run_cli(*args).stdout
    assert " time saved DRAM saved " in text
    line = next(ln for ln in text.splitlines() if ln.split()[1:2] == ["grouped(along=y,group=8)"])
    assert f"{grouped['time_saving']:+.1%}" in line and f"{grouped['dram_saving']:+.1%}" in line
    assert f"DRAM saved {grouped['dram_saving']:+.1%}" in text


@needs_cpu
@pytest.mark.slow
def test_the_model_builds_the_kernel_with_the_projects_include_dirs_and_defines(tmp_path: Path) -> None:
    """examples/demo's sgemm.cu includes demo.h from include/ and needs DEMO_TILE from the
    build: the model's trace, register count and drafted specs build the unit with the
    run's -I and -D (as the compile check does), so it can judge, and its order is applied."""
    import shutil

    demo = tmp_path / "demo"
    shutil.copytree(ROOT / "examples" / "demo", demo)
    done = run_cli(
        "apply",
        "--pass",
        "swizzle",
        "-Iinclude",
        "-DDEMO_TILE=16",
        "--verify",
        "compile",
        "--check",
        "src",
        cwd=demo,
        env={},
    )
    assert done.returncode == 1 and "would rewrite src/sgemm.cu" in done.stderr, done.stderr  # --check: 1
    remarks = logged_remarks(done, demo)
    assert "swizzle applied to 'sgemm'" in remarks and "predicted by the model (h100-sxm, size bench" in remarks
    assert "compile error" not in remarks  # the transpose's drafted spec was measured with the flags too
    assert "swizzle not applied to 'transpose': predicted by the model" in remarks


def test_a_predicted_loss_is_worded_as_a_loss() -> None:
    """A share of row-major's time or traffic reads the same way whatever its sign: an
    order predicted 83.8% slower is "83.8% more predicted memory time", never a "saved
    -83.8%" beside another order's unsigned "saves 86.4%"."""
    from kxform.locality.predict import against_row
    from kxform.locality.propose import rationale

    assert against_row(0.864, "predicted memory time") == "86.4% less predicted memory time"
    assert against_row(-0.838, "DRAM traffic") == "83.8% more DRAM traffic"
    order = {
        "l2_hit_rate": 0.5,
        "dram_read_bytes": 1e9,
        "dram_write_bytes": 1e8,
        "dram_read_bytes_se": 1e6,
    }
    data = {
        "hw": "h200",
        "size": "bench",
        "occupancy": "8 blocks per SM",
        "chosen": "grouped(along=y,group=8)",
        "orders": [
            {**order, "order": "row", "margin_to_identity": 0.0, "predicted_ms": 5.7455},
            {**order, "order": "grouped(along=y,group=8)", "margin_to_identity": -0.838, "predicted_ms": 10.56},
        ],
    }
    said = rationale(data)
    assert "83.8% more predicted memory time than row-major (10.56 vs 5.7455 ms" in said and "saves" not in said
    data["orders"][1]["margin_to_identity"] = 0.864
    assert "86.4% less predicted memory time than row-major" in rationale(data)
