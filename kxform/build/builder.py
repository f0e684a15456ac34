"""Builds jobs with nvcc: cached by content, in parallel, with a timeout on each call.

nvcc is a separate process, so a thread pool gives real parallelism without pickling
jobs. The builder counts the nvcc processes it started (`nvcc_calls`): tests and
reports use it to tell a cache hit from a fast compile without timing anything.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from kxform.build.cache import BuildCache, default_cache_dir, job_key
from kxform.build.diagnostics import build_failure
from kxform.build.entry import demangle, find_demangler
from kxform.build.nvcc import BuildJob, BuildResult, find_nvcc, nvcc_version, run_nvcc
from kxform.errors import BuildFailed


class Builder:
    """Compiles `BuildJob`s. One builder per configuration; it holds no device state.

    `cache_dir=None` uses `default_cache_dir()`; `use_cache=False` always runs nvcc (and
    stores nothing). `jobs` bounds parallel nvcc processes (default: CPU count).
    Raises `BuildFailed` at construction when no nvcc can be found or run.
    """

    def __init__(
        self,
        cache_dir: str | Path | None = None,
        nvcc: str | None = None,
        jobs: int | None = None,
        *,
        timeout_s: float = 600.0,
        use_cache: bool = True,
    ) -> None:
        found = nvcc or find_nvcc()
        if found is None:
            raise BuildFailed("nvcc not found: install the CUDA toolkit, put nvcc on PATH or set KXFORM_NVCC")
        self.nvcc = found
        self.version = nvcc_version(found)
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.timeout_s = timeout_s
        self.cache = BuildCache(cache_dir if cache_dir is not None else default_cache_dir()) if use_cache else None
        self.demangler = find_demangler(found)
        self._lock = threading.Lock()
        self._nvcc_calls = 0

    @property
    def nvcc_calls(self) -> int:
        """How many nvcc processes this builder has started (cache hits start none)."""
        with self._lock:
            return self._nvcc_calls

    def key(self, job: BuildJob) -> str:
        """The cache key of `job` under this builder's nvcc."""
        return job_key(job, self.version)

    def build(self, job: BuildJob) -> BuildResult:
        """Compile `job` (or fetch it from the cache). Compiler errors give `ok=False`."""
        key = self.key(job)
        if self.cache is not None:
            hit = self.cache.get(key, job.filename)
            if hit is not None:
                return hit
        with self._lock:
            self._nvcc_calls += 1
        result = run_nvcc(self.nvcc, job, self.timeout_s)
        if result.resources:
            names = demangle([r.mangled for r in result.resources], self.demangler)
            result = replace(
                result, resources=tuple(replace(r, demangled=n) for r, n in zip(result.resources, names, strict=True))
            )
        if self.cache is not None:
            self.cache.put(key, result, job.filename)
        return result

    def build_many(self, jobs: Sequence[BuildJob]) -> list[BuildResult]:
        """Build every job, at most `self.jobs` at a time; results in the order of `jobs`.

        Identical jobs (same key) are compiled once.
        """
        keys = [self.key(job) for job in jobs]
        unique = dict(zip(keys, jobs, strict=True))
        if len(unique) <= 1 or self.jobs == 1:
            done = {key: self.build(job) for key, job in unique.items()}
        else:
            with ThreadPoolExecutor(max_workers=min(self.jobs, len(unique)), thread_name_prefix="kxform-nvcc") as pool:
                futures = {key: pool.submit(self.build, job) for key, job in unique.items()}
                done = {key: future.result() for key, future in futures.items()}
        return [done[key] for key in keys]

    def build_or_raise(self, job: BuildJob) -> BuildResult:
        """`build`, raising `BuildFailed` with the first error as `file:line: error: ...`."""
        result = self.build(job)
        if not result.ok:
            raise build_failure(job.filename, result.log)
        return result
