"""CPU runtime schedules: the threads of a block run in thread order, in reverse, in a
seeded random order or with one warp delayed; a kernel without races gives the same
outputs in every order, and a read of another thread's store with no barrier between
them (planted here) gives a different one in some order, where thread order hides it."""

from __future__ import annotations

import numpy as np
import pytest

from kxform.runtime.base import ADVERSARIAL_SCHEDULES, BufferArg, LaunchRequest, schedule_kind
from kxform.runtime.cpu import CpuRuntime

# Each thread stores its input, then reads the value the first thread of its group stored.
# `SYNC` is the barrier that makes the read safe; without it the result depends on the order.
LEADER = r"""
#include <cuda_runtime.h>
__global__ void leader(float* out, const float* in)
{{
    __shared__ float s[128];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * 128 + t];
    {sync}
    out[blockIdx.x * 128 + t] = s[t & ~{group}u] + s[t];
}}
"""


def _run(cpu: CpuRuntime, source: str, schedule: str) -> np.ndarray:
    data = np.arange(512, dtype=np.float32) + 1.0
    request = LaunchRequest(
        source=source,
        kernel="leader",
        params=(),
        args=(BufferArg("out", np.zeros(512, np.float32), "out"), BufferArg("in", data, "in")),
        grid=(4, 1, 1),
        block=(128, 1, 1),
        label=f"leader[{schedule}]",
        schedule=schedule,
    )
    return cpu.run(request).outputs["out"]


def _expected(group: int) -> np.ndarray:
    data = np.arange(512, dtype=np.float32) + 1.0
    t = np.arange(512)
    return data[t & ~group] + data


@pytest.mark.slow
@pytest.mark.parametrize("sync, group", [("__syncthreads();", 127), ("__syncwarp();", 31)])
def test_a_kernel_without_races_gives_the_same_outputs_in_every_order(cpu: CpuRuntime, sync: str, group: int) -> None:
    source = LEADER.format(sync=sync, group=group)
    for schedule in ("forward", *ADVERSARIAL_SCHEDULES):
        np.testing.assert_array_equal(_run(cpu, source, schedule), _expected(group), err_msg=schedule)


@pytest.mark.slow
@pytest.mark.parametrize(
    "group, catches",
    [
        (31, {"reverse", "random:1"}),  # lane 0 of each warp stores what its warp reads: a missing __syncwarp
        (127, {"reverse", "random:1", "delay:0"}),  # thread 0 stores what the block reads: a missing barrier
    ],
)
def test_a_missing_barrier_shows_in_an_adversarial_order_where_thread_order_hides_it(
    cpu: CpuRuntime, group: int, catches: set[str]
) -> None:
    source = LEADER.format(sync="", group=group)
    np.testing.assert_array_equal(_run(cpu, source, "forward"), _expected(group))
    differs = {s for s in ADVERSARIAL_SCHEDULES if not np.array_equal(_run(cpu, source, s), _expected(group))}
    assert catches <= differs


def test_schedules_are_read_and_a_bad_one_is_named() -> None:
    assert schedule_kind("random:7") == ("random", 7)
    assert schedule_kind("delay:0") == ("delay", 0)
    assert schedule_kind("reverse") == ("reverse", 0)
    with pytest.raises(ValueError, match="backwards"):
        schedule_kind("backwards")
    with pytest.raises(ValueError, match="random"):
        schedule_kind("random")
