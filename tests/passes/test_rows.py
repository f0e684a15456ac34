"""The `rows` pass: a thread's row loops shared over G lanes with parallel reductions,
rewritten byte for byte as reviewed, refused with its reasons, its space and spec through
the Pass API, and its rewrites verified on the CPU runtime, where planted wrong reductions
(a missed element, a wrong identity, a missing broadcast, a missing barrier) are rejected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from kxform.api import space_of
from kxform.engine.pass_api import Outcome
from kxform.engine.registry import default_registry
from kxform.frontend.source import validate_bytes
from kxform.harness.spec import load_spec
from kxform.verify.differential import verify_pair
from swizzle_helpers import outcomes, rewrite

NAIVE = ROOT / "corpora" / "naive"
GOLDEN = Path(__file__).parents[1] / "golden"
ROWMAX = Path(__file__).parents[1] / "fixtures" / "rows" / "rowmax"
LASTSCALE = Path(__file__).parents[1] / "fixtures" / "rows" / "lastscale"


def _file(family: str) -> Path:
    return NAIVE / family / "naive.cu"


@pytest.mark.parametrize(
    "family, spec, golden",
    [
        ("layernorm", "rows{lanes=32,rows=8}", "layernorm_naive.rows32x8.cu"),
        ("softmax", "rows{lanes=256,rows=1}", "softmax_naive.rows256x1.cu"),
    ],
)
def test_golden_rewrite_and_a_second_run_changes_nothing(family: str, spec: str, golden: str) -> None:
    path = _file(family)
    result = rewrite(path.read_bytes(), spec, path=str(path))
    assert outcomes(result)[f"{family}_naive"] is Outcome.APPLIED, [r.format(full=True) for r in result.remarks]
    assert result.new_data == (GOLDEN / golden).read_bytes()
    again = rewrite(result.new_data, spec, path=str(path))
    assert not again.changed and outcomes(again)[f"{family}_naive"] is Outcome.UNCHANGED


def test_without_values_nothing_is_proposed() -> None:
    path = _file("rmsnorm")
    result = rewrite(path.read_bytes(), "rows", path=str(path))
    assert not result.changed
    assert any("NoEvidence" in r.format() or "no lanes per row" in r.format(full=True) for r in result.remarks)


KERNEL = """#include <cuda_runtime.h>
__global__ void k(float* out, const float* x, int* counts, int N, int C, float* x2)
{{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= N)
        return;
{body}
}}
void launch(float* out, const float* x, int* counts, int N, int C, float* x2)
{{
    k<<<(N + 127) / 128, 128>>>(out, x, counts, N, C, x2);
}}
"""


@pytest.mark.parametrize(
    "body, remark",
    [
        (
            "    float acc = 0.0f;\n    for (int i = 0; i < C; i++) {\n        acc = acc * 0.5f + x[row * C + i];\n"
            "        out[row * C + i] = acc;\n    }",
            "cannot be shared out",
        ),
        (
            "    float p = 1.0f;\n    for (int i = 0; i < C; i++)\n        p *= x[row * C + i];\n    out[row] = p;",
            "accumulates with '*'",
        ),
        ("    for (int i = 0; i < C; i++)\n        atomicAdd(&counts[i], 1);", "atomic update"),
        (
            "    float last = 0.0f;\n    for (int i = 0; i < C; i++)\n        last = x[row * C + i];\n    out[row] = last;",
            "'last' is assigned in the loop",
        ),
        (
            "    out[row] += 1.0f;\n    for (int i = 0; i < C; i++)\n        out[row * C + i] = x[i];",
            "updates global memory outside",
        ),
        (  # a barrier after a loop in a `switch` is not placed: the read of another lane's element stays refused
            "    switch (C) {\n    case 1: {\n        for (int i = 0; i < C; i++)\n"
            "            out[row * C + i] = x[row * C + i];\n        break;\n    }\n    default:\n        break;\n    }\n"
            "    x2[row] = out[row * C];",
            "cannot be placed after the loop: the loop lies in a case",
        ),
        (  # nor in a kernel that jumps
            "    for (int i = 0; i < C; i++)\n        out[row * C + i] = x[row * C + i];\n    if (C > 3)\n"
            "        goto done;\n    x2[row] = out[row * C];\ndone:\n    ;",
            "cannot be placed after the loop: the kernel jumps with goto",
        ),
        # forms of communication the pass once missed (kxform.analysis.communication has them all)
        (
            "    for (int i = 0; i < C; i++)\n        out[row * C + i] = __any_sync(0xffffffff, x[i] > 0.0f);",
            "already communicate (__any_sync)",
        ),
        (
            "    for (int i = 0; i < C; i++)\n        out[row * C + i] = __all_sync(0xffffffff, x[i] > 0.0f);",
            "already communicate (__all_sync)",
        ),
        (
            "    auto block = cooperative_groups::this_thread_block();\n    for (int i = 0; i < C; i++)\n"
            "        out[row * C + i] = x[i];",
            "already communicate (this_thread_block)",
        ),
        (
            "    for (int i = 0; i < C; i++)\n        out[row * C + i] = x[i];\n"
            "    auto t = cooperative_groups::tiled_partition<32>(cooperative_groups::this_thread_block());",
            "already communicate (tiled_partition)",
        ),
        (
            "    float s = 1.0f;\n    if (C > 0)\n        for (int i = 0; i < C; i++)\n            s += x[row * C + i];"
            "\n    out[row] = s;",
            "is not a statement of a block",
        ),
    ],
)
def test_refusals_name_their_reason_and_line(body: str, remark: str) -> None:
    text = KERNEL.format(body=body)
    result = rewrite(text, "rows{lanes=32,rows=4}", path="k.cu")
    assert not result.changed
    said = " ".join(r.format(full=True) for r in result.remarks)
    assert remark in said and "(line " in said, said


_COPY = "    for (int i = 0; i < C; i++)\n        out[row * C + i] = x[row * C + i];\n"
_BARRIER = "kxform_rows_warp_sync<K_LANES>();"


@pytest.mark.parametrize(
    "body, before",
    [
        # every lane reads the element lane 0 stored
        (
            "    for (int i = 0; i < C; i++)\n        out[row * C + i] = 2.0f * x[row * C + i];\n    x2[row] = out[row * C];",
            ["x2[row] = out[row * C];"],
        ),
        # the second loop gives element i + 1 to the lane that stored element i
        (
            _COPY + "    for (int i = 0; i < C - 1; i++)\n        x2[row * C + i] = out[row * C + i + 1];",
            ["for (int i = rows_lane; rows_lane < rows_share && i < C - 1; i += rows_share)"],
        ),
        # a later loop stores the element an earlier one read on another lane (write after read)
        (
            "    for (int i = 0; i < C - 1; i++)\n        x2[row * C + i] = out[row * C + i + 1];\n"
            "    for (int i = 0; i < C; i++)\n        out[row * C + i] = 1.0f;",
            ["for (int i = rows_lane; rows_lane < rows_share && i < C; i += rows_share)"],
        ),
        # one barrier after the second loop of the block serves both
        (
            _COPY + "    for (int i = 0; i < C; i++)\n        x2[row * C + i] = x[row * C + i];\n    counts[row] = 1;",
            ["counts[row] = 1;"],
        ),
        # a barrier inside the `if` is not reached when it is not taken: one after each loop
        (
            _COPY
            + "    if (C > 4) {\n        for (int i = 0; i < C; i++)\n            x2[row * C + i] = x[row * C + i];\n"
            "    }\n    counts[row] = 1;",
            ["if (C > 4) {", "}"],
        ),
        # the same lane reads what it stored; a loop that only reduces is ordered by its combine
        (_COPY + "    for (int j = 0; j < C; j++)\n        x2[row * C + j] = out[row * C + j];", []),
        ("    float s = 0.0f;\n    for (int i = 0; i < C; i++)\n        s += x[row * C + i];\n    x2[row] = s;", []),
    ],
    ids=["read-after", "other-lane-loop", "write-after-read", "one-for-two", "in-an-if", "same-lane", "only-reduces"],
)
def test_an_access_another_lane_may_meet_gets_a_barrier_after_its_loop(body: str, before: list[str]) -> None:
    """Each barrier over the row's lanes stands right after a loop and before the line `before` names."""
    result = rewrite(KERNEL.format(body=body), "rows{lanes=32,rows=4}", path="k.cu")
    assert outcomes(result) == {"k": Outcome.APPLIED}, [r.format(full=True) for r in result.remarks]
    lines = [line.strip() for line in result.new_data.decode().split("__global__", 1)[1].splitlines()]
    after = [lines[i + 1] for i, line in enumerate(lines) if line == _BARRIER]
    assert after == before
    block = rewrite(KERNEL.format(body=body), "rows{lanes=256,rows=1}", path="k.cu").new_data.decode()
    assert block.count("__syncthreads();  // the row's lanes") == len(before) and "kxform_rows_warp_sync" not in block


@pytest.mark.parametrize("row", ["blockIdx.x * blockDim.x + blockIdx.y", "blockIdx.z * blockDim.x + threadIdx.x"])
def test_a_row_not_counted_from_the_thread_index_is_refused(row: str) -> None:
    """Found by fuzzing: a row every thread of a block shares, or one that does not move with
    blockIdx.x, changes when `threadIdx.x` and `blockDim.x` are read per lane group."""
    body = "    for (int i = 0; i < C; i++)\n        out[row * C + i] = 2.0f * x[row * C + i];"
    text = KERNEL.format(body=body).replace("blockIdx.x * blockDim.x + threadIdx.x", row)
    result = rewrite(text, "rows{lanes=32,rows=4}", path="k.cu")
    assert not result.changed and result.results[0].key == "NotThreadPerRow"
    assert "blockIdx.x * blockDim.x + threadIdx.x" in " ".join(result.results[0].reasons)


def test_a_row_shorter_than_the_lanes_is_guarded_not_refused() -> None:
    path = ROWMAX / "rowmax.cu"
    result = rewrite(path.read_bytes(), "rows{lanes=32,rows=2}", path=str(path))
    assert result.changed
    assert b"for (int i = rows_lane; i < C; i += ROWMAX_LANES)" in result.new_data


def test_spec_round_trip_space_and_constraints() -> None:
    assert default_registry().parse("rows{lanes=32,rows=8}").spec() == "rows{lanes=32,rows=8}"
    path = _file("layernorm")
    space = space_of(path.read_bytes(), "layernorm_naive", "rows", path=str(path), hw="h100")
    assert space.names == ("lanes", "rows")
    assert space.param("lanes").default == 1 and space.param("rows").default == 128
    assert space.is_valid({"lanes": 32, "rows": 8}) and space.is_valid({"lanes": 256, "rows": 1})
    assert not space.is_valid({"lanes": 32, "rows": 64})  # 2048 threads
    assert not space.is_valid({"lanes": 64, "rows": 2})  # block reduction needs one row per block
    assert not space.is_valid({"lanes": 4, "rows": 2})  # not whole warps
    refused = rewrite(path.read_bytes(), "rows{lanes=64,rows=2}", path=str(path))
    assert not refused.changed and "rows == 1" in " ".join(r.format(full=True) for r in refused.remarks)


def test_the_tolerance_is_measured_by_a_probe_of_the_reordered_sums() -> None:
    path = _file("layernorm")
    policy = rewrite(path.read_bytes(), "rows{lanes=32,rows=8}", path=str(path)).results[0].policy
    assert policy.compare.mode == "bound" and policy.required and policy.compare.probe is not None
    probed = {(s.var, s.ctype) for s in policy.compare.probe.sums}
    assert ("mean", "float") in probed and "Higham" in policy.compare.reason
    # the probe is the original, unchanged where its macros are 0, each sum's move behind its own macro
    text = policy.compare.probe.source
    assert text.count("#define KX_PROBE_") == len(probed) and "kx_probe_mag0" in text
    exact = rewrite((ROWMAX / "rowmax.cu").read_bytes(), "rows{lanes=32,rows=2}", path=str(ROWMAX / "rowmax.cu"))
    assert exact.results[0].policy.compare.mode == "exact"
    assert "max" in exact.results[0].policy.compare.reason
    copy = rewrite(_restricted("embedding"), "rows{lanes=32,rows=8}", path=str(_file("embedding")))
    assert copy.results[0].policy.compare.mode == "exact"


def _restricted(family: str) -> bytes:
    """The family's naive kernel with its pointer parameters `__restrict__` (the promise that
    they do not overlap, where no run-time check of the rows pass can be written)."""
    data = _file(family).read_bytes()
    head, sep, rest = data.partition(b"__global__")
    params, close, body = rest.partition(b")")
    return head + sep + re.sub(rb"\*\s*(\w+)", rb"* __restrict__ \1", params) + close + body


def test_a_row_whose_overlap_cannot_be_checked_at_run_time_needs_restrict() -> None:
    """embedding reads `wte[token * C + i]` (token loaded from memory): no byte range of it can
    be computed at entry, and its launcher's callers are not in the file, so whether `out`
    overlaps `wte` is unknown: refused, and written where the parameters promise it."""
    path = _file("embedding")
    refused = rewrite(path.read_bytes(), "rows{lanes=32,rows=8}", path=str(path))
    assert not refused.changed and refused.results[0].key == "AliasUnknown"
    assert "__restrict__" in " ".join(refused.results[0].reasons)
    written = rewrite(_restricted("embedding"), "rows{lanes=32,rows=8}", path=str(path))
    assert written.changed and b"rows_alias" not in written.new_data


def _verify(cpu, path: Path, kernel: str, spec_file: Path, options: str, plant: tuple[bytes, bytes] | None):  # type: ignore[no-untyped-def]
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, f"rows{{{options}}}", path=str(path))
    data = result.new_data
    if plant is not None:
        assert plant[0] in data, plant[0]
        data = data.replace(plant[0], plant[1], 1)
    return verify_pair(
        original,
        validate_bytes(str(path), data),
        spec,
        cpu,
        sizes=tuple(s.name for s in spec.check_sizes),
        policy=result.results[0].policy,
    )


LAYERNORM = (_file("layernorm"), "layernorm_naive", NAIVE / "layernorm" / "naive.kxspec.toml")
ROWMAX_CASE = (ROWMAX / "rowmax.cu", "rowmax", ROWMAX / "rowmax.kxspec.toml")


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, options",
    [
        (LAYERNORM, "lanes=32,rows=8"),
        (LAYERNORM, "lanes=8,rows=16"),
        (LAYERNORM, "lanes=256,rows=1"),
        (ROWMAX_CASE, "lanes=16,rows=4"),
    ],
)
def test_rewrites_verify_on_the_cpu_runtime(cpu, case, options: str) -> None:  # type: ignore[no-untyped-def]
    report = _verify(cpu, *case, options, None)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.slow
@pytest.mark.parametrize(
    "case, options, plant",
    [
        (LAYERNORM, "lanes=32,rows=8", (b"i < C;", b"i < C - 1;")),  # a lane misses the row's last element
        (LAYERNORM, "lanes=32,rows=8", (b"__shfl_xor_sync", b"__shfl_down_sync")),  # only lane 0 holds the sum
        (LAYERNORM, "lanes=256,rows=1", (b"    __syncthreads();  // every warp", b"    // every warp")),
        (ROWMAX_CASE, "lanes=32,rows=2", (b"float m = -INFINITY;", b"float m = 0.0f;")),  # 0 as max's identity
        (LAYERNORM, "lanes=32,rows=8", (b"float mean = 0.0f;", b"float mean = 1.0f;")),  # every lane adds 1
        (LAYERNORM, "lanes=32,rows=8", (b"(int i = rows_lane; rows_lane <", b"(int i = rows_lane + 1; rows_lane <")),
        (LAYERNORM, "lanes=8,rows=16", (b"LAYERNORM_NAIVE_LANES>(var)", b"LAYERNORM_NAIVE_LANES / 2>(var)")),
    ],
    ids=[
        "missed-element",
        "missing-broadcast",
        "missing-barrier",
        "wrong-identity",
        "wrong-sum-identity",
        "off-by-one-lane-loop",
        "half-the-lanes-combined",
    ],
)
def test_planted_wrong_reductions_are_rejected(cpu, case, options: str, plant) -> None:  # type: ignore[no-untyped-def]
    assert _verify(cpu, *case, options, None).ok
    assert plant[0] in rewrite(case[0].read_bytes(), f"rows{{{options}}}", path=str(case[0])).new_data  # it is planted
    report = _verify(cpu, *case, options, plant)
    assert not report.ok, [s.summary() for s in report.sizes]


LASTSCALE_CASE = (LASTSCALE / "naive.cu", "lastscale_naive", LASTSCALE / "naive.kxspec.toml")


@pytest.mark.slow
@pytest.mark.parametrize(
    "options, barrier",
    [
        ("lanes=32,rows=2", b"    kxform_rows_warp_sync<LASTSCALE_NAIVE_LANES>();\n"),
        ("lanes=256,rows=1", b"    __syncthreads();  // the row's lanes: what each did before is seen by all after\n"),
    ],
    ids=["group", "block"],
)
def test_the_barrier_after_a_loop_orders_a_read_of_another_lanes_element(cpu, options: str, barrier: bytes) -> None:  # type: ignore[no-untyped-def]
    """lastscale reads the row's last element after the loop that stores it (lane 76 % G's):
    with the barrier the rewrite verifies at every size; with it removed, lane 0 reads the
    element before its lane stores it and verification rejects the rewrite at every size."""
    good = _verify(cpu, *LASTSCALE_CASE, options, None)
    assert good.ok, [s.summary() for s in good.sizes]
    planted = _verify(cpu, *LASTSCALE_CASE, options, (barrier, b""))
    assert [s.status for s in planted.sizes] == ["mismatch"] * len(planted.sizes), [s.summary() for s in planted.sizes]


@pytest.mark.slow
def test_a_reduction_off_by_more_than_the_measured_bound_is_rejected_at_every_size(cpu) -> None:  # type: ignore[no-untyped-def]
    """A sum off by 1e-4 relative: far above Higham's bound at the spec's row lengths, but
    within twice the spec's tolerance (what was enforced before the bound was): only the
    bound measured per size catches it."""
    from dataclasses import replace

    from kxform.engine.policy import OutputCompare

    path, kernel, spec_file = _file("softmax"), "softmax_naive", NAIVE / "softmax" / "naive.kxspec.toml"
    spec = load_spec(spec_file).kernel(kernel)
    original = validate_bytes(str(path), path.read_bytes())
    result = rewrite(original.data, "rows{lanes=32,rows=8}", path=str(path))
    policy = result.results[0].policy
    call = b"sum = kxform_rows_warp_sum_float<SOFTMAX_NAIVE_LANES>(sum);"
    assert call in result.new_data
    planted = validate_bytes(str(path), result.new_data.replace(call, call[:-1] + b" * 1.0001f;"))
    sizes = tuple(s.name for s in spec.check_sizes)
    good = verify_pair(original, validate_bytes(str(path), result.new_data), spec, cpu, sizes=sizes, policy=policy)
    assert good.ok, [s.summary() for s in good.sizes]
    caught = verify_pair(original, planted, spec, cpu, sizes=sizes, policy=policy)
    assert [s.status for s in caught.sizes] == ["mismatch"] * len(sizes), [s.summary() for s in caught.sizes]
    assert all("absolute bound per output" in s.summary() for s in caught.sizes)
    twice = replace(policy, compare=OutputCompare("spec", 2.0))
    assert verify_pair(original, planted, spec, cpu, sizes=sizes, policy=twice).ok  # the old factor let it pass


# -- tuning through the Pass API ----------------------------------------------------------


def test_the_tuning_space_of_rows_and_launch_together_has_one_owner_of_the_block() -> None:
    from kxform.hw import load_profile
    from kxform.search.kernel_space import kernel_space, parse_passes

    path = _file("layernorm")
    both = kernel_space(
        path.read_bytes(), "layernorm_naive", parse_passes("launch,rows,coarsen"), path=str(path), hw="h100"
    )
    assert set(both.passes) == {"rows", "launch", "coarsen"} and {"rows.lanes", "rows.rows"} <= set(both.space.names)
    valid = both.search(load_profile("h100"))
    configs = [valid.config(r) for r in range(len(valid))]
    pipelines = [both.spec(c) for c in configs]
    assert "rows{lanes=32,rows=8}" in pipelines and "rows{lanes=256,rows=1}" in pipelines
    assert "launch{LAYERNORM_NAIVE_BLOCK_X=256,LAYERNORM_NAIVE_MIN_BLOCKS=0}" in pipelines
    assert "launch{LAYERNORM_NAIVE_BLOCK_X=256,LAYERNORM_NAIVE_MIN_BLOCKS=2}" in pipelines  # launch bounds added
    assert not any("rows{" in p and "launch{" in p for p in pipelines)  # rows excludes launch
    assert not any("rows{" in p and "coarsen{" in p for p in pipelines)  # and coarsen (rows per thread)
    assert any("coarsen{" in p for p in pipelines)
    assert len(set(pipelines)) == len(configs)  # no rewrite is searched twice


@pytest.mark.slow
def test_tune_objective_verifies_a_rows_configuration_on_the_cpu_runtime(tmp_path: Path, cpu) -> None:  # type: ignore[no-untyped-def]
    import shutil

    from kxform.search.kernel_objective import KernelObjective, MeasureOptions, TuneTarget
    from kxform.search.kernel_space import kernel_space
    from kxform.search.objective import Failure

    shutil.copytree(NAIVE / "rmsnorm", tmp_path / "rmsnorm")
    path = tmp_path / "rmsnorm" / "naive.cu"
    data = path.read_bytes()
    spec = load_spec(tmp_path / "rmsnorm" / "naive.kxspec.toml").kernel("rmsnorm_naive")
    space = kernel_space(data, "rmsnorm_naive", ("rows",), path=str(path), hw="h100")
    objective = KernelObjective(
        TuneTarget(str(path), data, "rmsnorm_naive", spec, "h100"), space, cpu, MeasureOptions(check_sizes=("ragged",))
    )
    prepared = objective.prepare({"rows": True, "rows.lanes": 32, "rows.rows": 4})
    result = prepared.failure or objective.evaluate(prepared)
    # Verified, then timing, which the CPU runtime cannot do: never a time, never a verification failure.
    assert result.failure is Failure.RUNTIME and result.detail == "time: the cpu runtime does not time kernels"


@pytest.mark.parametrize(
    "family, kernel, reason",
    [
        ("gemm", "gemm_naive", "is not one-dimensional (32, 8; line"),
        ("residual_add", "residual_add_naive", "has no loop for a row's lanes to share (line"),
        ("adamw", "adamw_naive", "'params[i] -=' updates global memory outside the row's loops"),
    ],
)
def test_corpus_kernels_without_rows_are_refused_with_their_reason(family: str, kernel: str, reason: str) -> None:
    from kxform.api import explain

    path = _file(family)
    said = explain(path.read_bytes(), kernel, "rows", path=str(path))
    assert said["status"] == "refused" and reason in " ".join(said["reasons"]), said


@pytest.mark.slow
def test_apply_writes_a_verified_rewrite_from_the_command_line(tmp_path: Path) -> None:
    import shutil

    from conftest import run_cli

    shutil.copytree(NAIVE / "layernorm", tmp_path / "layernorm")
    path = tmp_path / "layernorm" / "naive.cu"
    done = run_cli(
        "apply",
        "--pass",
        "rows{lanes=32,rows=8}",
        "--verify",
        "cpu",
        str(path),
        env={},
    )
    assert done.returncode == 0, done.stderr
    assert path.read_bytes() == (GOLDEN / "layernorm_naive.rows32x8.cu").read_bytes()
    sizes = re.search(r"verify \(cpu runtime, (\d+) sizes\)", done.stderr + done.stdout)
    assert sizes is not None and int(sizes.group(1)) > 3  # the spec's 3 check sizes and those derived from the rewrite


# -- on the GPU (tools/gpu-check.sh) -----------------------------------------------------

FAMILIES = (
    "layernorm",
    "rmsnorm",
    "softmax",
    "residual_layernorm",
    "bias_grad",
    "cross_entropy",
    "matvec",
)
"""The row-wise naive families rows rewrites as they are (embedding needs `__restrict__`:
test_a_row_whose_overlap_cannot_be_checked_at_run_time_needs_restrict)."""


@pytest.fixture(scope="module")
def gpu():  # type: ignore[no-untyped-def]
    from kxform.runtime.gpu import GpuRuntime

    runtime = GpuRuntime()
    ok, why = runtime.available()
    if not ok:
        pytest.skip(f"gpu runtime unavailable: {why}")
    return runtime


@pytest.mark.gpu
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("options", ["lanes=8,rows=16", "lanes=32,rows=8", "lanes=256,rows=1"])
def test_row_wise_families_verify_on_the_gpu(family: str, options: str, gpu) -> None:  # type: ignore[no-untyped-def]
    """The derived tolerance holds with the GPU's math and real warps and barriers."""
    report = _verify(gpu, _file(family), f"{family}_naive", NAIVE / family / "naive.kxspec.toml", options, None)
    assert report.ok, [s.summary() for s in report.sizes]


@pytest.mark.parametrize(
    "ctype, mode, stated",
    [
        ("double", "bound", "'s' (double, line"),
        ("int", "exact", "exact in any order"),
    ],
)
def test_the_tolerance_follows_the_element_type(ctype: str, mode: str, stated: str) -> None:
    body = f"    {ctype} s = 0;\n    for (int i = 0; i < C; i++)\n        s += x[row * C + i];\n    out[row] = s;"
    result = rewrite(KERNEL.format(body=body), "rows{lanes=32,rows=4}", path="k.cu")
    (kernel,) = result.results
    assert kernel.outcome is Outcome.APPLIED, [r.format(full=True) for r in result.remarks]
    assert kernel.policy.compare.mode == mode and stated in kernel.policy.compare.describe()
    if ctype == "double":
        assert "((kx_probe_n0 - 1) * 1.1102230246251565e-16" in kernel.policy.compare.probe.source
