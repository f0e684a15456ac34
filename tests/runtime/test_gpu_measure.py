"""Measurement integrity on a real GPU: the timer caps the persisting-L2 carveout and
re-checks the timed launches' outputs, so deliberately cheating kernels do not win.

These need a CUDA GPU and pycuda (tools/gpu-check.sh); elsewhere they are skipped with
the reason, but for the launch counting of the early cut-off, which a runtime replaying
given launch times checks on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kxform.build.builder import Builder
from kxform.build.nvcc import find_nvcc
from kxform.runtime.base import BufferArg, KernelParam, LaunchRequest, LaunchResult, Runtime, ScalarArg, TimedRun
from kxform.runtime.gpu import GpuRuntime
from kxform.verify.differential import EXACT
from kxform.verify.measure import FIRST_LAUNCHES, MeasurementError, launches_to_fill, timed_and_checked

KERNELS = (Path(__file__).parents[1] / "fixtures" / "measure" / "cheating_kernels.cu").read_text(encoding="utf-8")
"""An honest kernel and two that cheat (shared with tools/bench_integrity.py)."""


@pytest.fixture(scope="module")
def gpu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuRuntime]:
    nvcc = find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc not found")
    runtime = GpuRuntime(Builder(cache_dir=tmp_path_factory.mktemp("nvcc-cache"), nvcc=nvcc))
    ok, reason = runtime.available()
    if not ok:
        pytest.skip(reason)
    with runtime:
        yield runtime


def _request(kernel: str, n: int = 1 << 20) -> LaunchRequest:
    data = np.random.default_rng(7).uniform(-1, 1, n).astype(np.float32)
    params = (KernelParam("float*", "out"), KernelParam("const float*", "in"), KernelParam("int", "n"))
    args = (BufferArg("out", np.zeros(n, np.float32), "out"), BufferArg("in", data, "in"), ScalarArg("n", np.int32(n)))
    return LaunchRequest(KERNELS, kernel, params, args, ((n + 255) // 256, 1, 1), (256, 1, 1), label=f"{kernel}[1M]")


DTYPES = {"out": "float32"}


@pytest.mark.gpu
def test_honest_kernel_times_and_rechecks(gpu: GpuRuntime) -> None:
    timing = timed_and_checked(gpu, _request("twice"), DTYPES, EXACT, repeat=20)
    assert timing.samples == 20 and timing.median_ms > 0


@pytest.mark.gpu
def test_kernel_that_skips_work_on_later_launches_is_caught(gpu: GpuRuntime) -> None:
    with pytest.raises(MeasurementError, match=r"twice_once\[1M\]: output 'out' of the last timed launch differs"):
        timed_and_checked(gpu, _request("twice_once"), DTYPES, EXACT, repeat=20)


@pytest.mark.gpu
def test_persisting_policy_kernel_gets_no_carveout(gpu: GpuRuntime) -> None:
    timed = gpu.time(_request("twice_persisting"), warmup=2, repeat=10, keep_outputs=True)
    assert timed.persisting_l2_bytes == 0
    single = gpu.run(_request("twice_persisting"))
    np.testing.assert_array_equal(timed.outputs["out"], single.outputs["out"])
    assert timed_and_checked(gpu, _request("twice_persisting"), DTYPES, EXACT, repeat=10).samples == 10


@pytest.mark.gpu
def test_the_reference_launch_is_the_probe_that_sets_the_count(gpu: GpuRuntime) -> None:
    """A count that depends on the kernel's time is taken from the single reference launch
    (no launch of its own): the function sees that launch's milliseconds."""
    seen: list[float] = []

    def count(probe_ms: float) -> int:
        seen.append(probe_ms)
        return 7

    assert timed_and_checked(gpu, _request("twice"), DTYPES, EXACT, repeat=count).samples == 7
    assert len(seen) == 1 and seen[0] > 0


def test_the_launch_count_fills_the_budget_within_its_bounds() -> None:
    """Runs without a GPU: 0.5 s of 20 ms launches is 25; clamped to [5, 50]; a probe
    that took no measurable time gets the most."""
    assert launches_to_fill(0.5, 20.0, 5, 50) == 25
    assert launches_to_fill(0.5, 1.0, 5, 50) == 50 and launches_to_fill(0.5, 400.0, 5, 50) == 5
    assert launches_to_fill(0.5, 0.0, 5, 50) == 50


@pytest.mark.gpu
def test_a_configuration_clearly_slower_is_cut_off_after_its_first_launches(gpu: GpuRuntime) -> None:
    seen: list[int] = []

    def slower(early):  # type: ignore[no-untyped-def]
        seen.append(early.samples)
        return True

    cut = timed_and_checked(gpu, _request("twice"), DTYPES, EXACT, repeat=20, cut=slower)
    assert cut.cut_off and cut.samples == FIRST_LAUNCHES and seen == [FIRST_LAUNCHES]
    full = timed_and_checked(gpu, _request("twice"), DTYPES, EXACT, repeat=20, cut=lambda early: False)
    assert not full.cut_off and full.samples == 20
    with pytest.raises(MeasurementError, match="twice_once"):  # the first launches are checked all the same
        timed_and_checked(gpu, _request("twice_once"), DTYPES, EXACT, repeat=20, cut=slower)


class _Replayed(Runtime):
    """A runtime that answers with given launch times and outputs (the GPU's part is
    measured by the test above on a GPU): how the cut-off counts launches."""

    name = "replayed"

    def __init__(self, samples: list[float], skip_work_after: int | None = None) -> None:
        self.samples = list(samples)
        self.launched = 0
        self.skip = skip_work_after

    def available(self) -> tuple[bool, str]:
        return True, ""

    def run(self, request: LaunchRequest) -> LaunchResult:
        return LaunchResult({"out": np.ones(4, np.float32)}, {}, self.name, elapsed_ms=self.samples[0])

    def time(
        self, request: LaunchRequest, *, warmup: int = 3, repeat: int = 20, keep_outputs: bool = False
    ) -> TimedRun:
        taken = self.samples[self.launched : self.launched + repeat]
        self.launched += warmup + repeat
        wrong = self.skip is not None and self.launched > self.skip
        out = np.zeros(4, np.float32) if wrong else np.ones(4, np.float32)
        return TimedRun(tuple(taken), 1, 0, {"out": out})


def test_the_cut_off_times_the_first_launches_then_asks() -> None:
    request = _request("twice", n=4)
    slow = _Replayed([10.0] * 60)
    timing = timed_and_checked(slow, request, DTYPES, EXACT, repeat=20, cut=lambda early: early.median_ms > 5.0)
    assert timing.cut_off and timing.samples == FIRST_LAUNCHES and timing.median_ms == 10.0
    assert slow.launched == 1 + FIRST_LAUNCHES  # one warm-up, three timed: the other 17 never ran
    fast = _Replayed([1.0] * 60)
    timing = timed_and_checked(fast, request, DTYPES, EXACT, repeat=20, cut=lambda early: early.median_ms > 5.0)
    assert not timing.cut_off and timing.samples == 20
    plain = _Replayed([1.0] * 60)
    assert timed_and_checked(plain, request, DTYPES, EXACT, repeat=20).samples == 20 and plain.launched == 25
    cheat = _Replayed([1.0] * 60, skip_work_after=10)  # planted: the launches after the first ones skip work
    with pytest.raises(MeasurementError, match="differs from a single launch"):
        timed_and_checked(cheat, request, DTYPES, EXACT, repeat=20, cut=lambda early: False)
