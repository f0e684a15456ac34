#!/usr/bin/env python3
"""The search's own cost: time to enumerate a space of about 10^5 valid configurations
and time per proposed configuration for each strategy (target: under 5 ms).

    python tools/bench_search_speed.py [--proposals N] [--seeds N]

The space is synthetic (six parameters, two constraints, 10^5 valid configurations)
and so is the objective (a smooth bowl in log time with interactions and a failing
region), so only the strategy's work is timed: model fitting, candidate scoring,
bookkeeping. Prints mean, median and 95th percentile per proposal, of wall time and
of the CPU time of the proposing thread (BLAS is held to one thread): on a machine
shared with other work the wall time also counts the time other processes held the
core, the CPU time is the search's own cost. The load average is printed beside them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from kxform.engine.params import Constraint, Param, ParamSpace
from kxform.search.space import SearchSpace
from kxform.search.strategy import STRATEGIES, History, load_strategy, make_strategy


def synthetic_space() -> ParamSpace:
    return ParamSpace(
        (
            Param.ints("bx", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], 32),
            Param.ints("by", [1, 2, 4, 8, 16, 32, 64], 1),
            Param.int_range("tx", 1, 24, 1),
            Param.int_range("ty", 1, 24, 1),
            Param.ints("unroll", [0, 1, 2, 4, 8], 0),
            Param.ints("vec", [1, 2, 4], 1),
        ),
        (Constraint.parse("32 <= bx * by <= 1024"), Constraint.parse("tx * ty * vec <= 96")),
    )


def synthetic_time(config: dict[str, int]) -> float | None:
    if config["tx"] * config["ty"] > 48 and config["unroll"] == 8:
        return None  # a region that fails to compile
    threads = math.log2(config["bx"] * config["by"])
    return math.exp(
        0.2 * (threads - 8) ** 2
        + 0.05 * (config["tx"] - 4) ** 2
        + 0.05 * (config["ty"] - 2) ** 2
        + 0.1 * abs(math.log2(config["vec"]) - 1)
        - 0.02 * config["unroll"] * (config["tx"] > 2)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proposals", type=int, default=400)
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    started = time.perf_counter()
    space = SearchSpace.build(synthetic_space())
    print(
        f"space: {len(space)} valid of {space.params.cardinality()} configurations, "
        f"enumerated in {time.perf_counter() - started:.2f} s"
    )
    for name in STRATEGIES:
        load_strategy(name)  # module imports (scipy) are not the strategy's work
        samples: list[float] = []
        cpu: list[float] = []
        setup: list[float] = []
        for seed in range(args.seeds):
            begin = time.perf_counter()
            strategy = make_strategy(name, space, seed)
            setup.append(time.perf_counter() - begin)
            history = History(len(space))
            for _ in range(args.proposals):
                begin, begin_cpu = time.perf_counter(), time.thread_time()
                row = strategy.propose(history)
                samples.append(time.perf_counter() - begin)
                cpu.append(time.thread_time() - begin_cpu)
                if row is None:
                    break
                history.start(row)
                history.add(row, synthetic_time(space.config(row)))
        ms, cpu_ms = 1000 * np.asarray(samples), 1000 * np.asarray(cpu)
        print(
            f"{name:<12} per proposal, CPU: mean {cpu_ms.mean():.2f} ms, median {np.median(cpu_ms):.2f} ms, "
            f"p95 {np.percentile(cpu_ms, 95):.2f} ms; wall: mean {ms.mean():.2f} ms, median {np.median(ms):.2f} ms, "
            f"p95 {np.percentile(ms, 95):.2f} ms, max {ms.max():.1f} ms over {ms.size} proposals; "
            f"set-up {1000 * np.mean(setup):.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
