"""Check (d): a rewritten file must still compile with nvcc (`nvcc -c`), in parallel and
cached by content (kxform.build), with errors reported at the original file's lines.

If the rewritten file fails, the original is compiled with the same flags: when it fails
too, the environment (include paths, defines) is what is missing, not the rewrite, and
the check is reported as skipped with nvcc's first error rather than blamed on kxform.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from kxform.build.builder import Builder
from kxform.build.diagnostics import first_error
from kxform.build.nvcc import BuildJob, KernelResources, find_nvcc
from kxform.build.toolchain import Toolchain
from kxform.engine.driver import FileTransform
from kxform.engine.pass_api import CheckRecord

NVCC_SUFFIXES = (".cu", ".cuh")


def _resources(resources: tuple[KernelResources, ...]) -> str:
    """`; sgemm 40 regs 2048 B smem 0 B spilled, ...` from ptxas -v: what the rewrite costs."""
    if not resources:
        return ""
    parts = [f"{r.demangled.split('(')[0]} {r.registers} regs {r.shared_bytes} B smem "
             f"{r.spill_stores + r.spill_loads} B spilled" for r in resources]
    return "; " + ", ".join(parts)


@dataclass
class CompileChecker:
    builder: Builder
    arch: str
    build_dir: str | None
    strict: bool

    @classmethod
    def create(cls, build_dir: str | None, arch: str, jobs: int, strict: bool = False) -> CompileChecker | None:
        if find_nvcc() is None:
            return None
        nv_arch = arch if arch.startswith(("sm_", "compute_")) else "sm_90"  # AMD profiles: check CUDA syntax only
        return cls(Builder(jobs=jobs or None), nv_arch, build_dir, strict)

    def _job(self, transform: FileTransform, data: bytes, line_map: tuple[int, ...] | None) -> BuildJob:
        path = transform.source.path
        include_dirs, defines, flags = Toolchain.create(self.build_dir).project_flags(path)
        return BuildJob(source=data.decode("utf-8"), filename=path, output="check", arch=self.arch,
                        include_dirs=include_dirs, defines=defines, extra_flags=flags,
                        source_dir=os.path.dirname(os.path.abspath(path)), line_map=line_map)

    def check_many(self, transforms: list[FileTransform]) -> list[CheckRecord]:
        records: list[CheckRecord | None] = [None] * len(transforms)
        jobs, index = [], []
        for i, transform in enumerate(transforms):
            if not transform.source.path.endswith(NVCC_SUFFIXES):
                records[i] = CheckRecord("compile", True, "skipped: not a CUDA source nvcc can compile (HIP)")
                continue
            jobs.append(self._job(transform, transform.new_data, transform.line_map or None))
            index.append(i)
        failed = []
        for i, result in zip(index, self.builder.build_many(jobs)):
            if result.ok:
                cached = " (cached)" if result.cached else ""
                records[i] = CheckRecord("compile", True, f"nvcc -c -arch={self.arch} succeeded{cached}"
                                         f"{_resources(result.resources)}")
            else:
                failed.append((i, result))
        originals = self.builder.build_many([self._job(transforms[i], transforms[i].source.data, None)
                                             for i, _ in failed])
        for (i, result), original in zip(failed, originals):
            error = first_error(result.log)
            detail = str(error) if error else "nvcc failed"
            if original.ok:
                records[i] = CheckRecord("compile", False, f"rewritten file does not compile: {detail}")
            else:
                base = first_error(original.log)
                why = f"skipped: the original does not compile either ({base or 'nvcc failed'}); pass -p BUILD_DIR"
                records[i] = CheckRecord("compile", not self.strict, why)
        return [r for r in records if r is not None]
