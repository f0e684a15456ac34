"""Check (d): a rewritten file must still compile with nvcc (`nvcc -c`), in parallel and
cached by content (kxform.build), with errors reported at the original file's lines.

A rewritten header is compiled through every translation unit of the run that includes
it, and every unit is compiled with all rewritten files of the run in place (a mirror
of the tree, kxform.build.overlay): the rewrite must compile whatever the include graph.
A header no unit of the run includes is compiled on its own.

When a unit does not compile, the original unit is compiled with the same flags and
the two error lists are compared (same message at the same original line is the same
error). An error the original does not have fails the rewrite. When the original fails
too, an empty kernel is built through the same nvcc first: if that fails as well, nvcc
cannot run here (an unusable TMPDIR, a broken toolchain) and the run stops with
BuildFailed (exit 2, nothing written). When only the sources fail the same way (a
missing library header, a removed API: the environment is what is missing) the rewrite
added nothing the compiler can see, but the compiler cannot confirm it either: the
check says "unconfirmed", which `--verify compile` (compile required) treats as a
failure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from kxform.build.builder import Builder
from kxform.build.compile_db import CompileFlags
from kxform.build.diagnostics import Diagnostic, first_error, located_errors
from kxform.build.nvcc import BuildJob, BuildResult, KernelResources
from kxform.build.overlay import OverlayFile, walk_includes
from kxform.build.toolchain import Toolchain
from kxform.engine.driver import FileTransform
from kxform.engine.pass_api import CheckRecord
from kxform.engine.status import DOES_NOT_COMPILE, ORIGINAL_DOES_NOT_COMPILE, Status
from kxform.errors import BuildFailed

PROBE = "__global__ void kxform_probe_kernel() {}\n"
"""The unit that tells a compiler that cannot run from a source that does not compile."""
NVCC_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".hh", ".inl")
UNIT_SUFFIX = ".cu"


def _resources(resources: tuple[KernelResources, ...]) -> str:
    """`; sgemm 40 regs 2048 B smem 0 B spilled, ...` from ptxas -v: what the rewrite costs."""
    if not resources:
        return ""
    parts = [
        f"{r.demangled.split('(')[0]} {r.registers} regs {r.shared_bytes} B smem "
        f"{r.spill_stores + r.spill_loads} B spilled"
        for r in resources
    ]
    return "; " + ", ".join(parts)


@dataclass
class CompileChecker:
    builder: Builder
    arch: str
    toolchain: Toolchain
    strict: bool
    notes: list[str] = field(default_factory=list)

    @classmethod
    def create(
        cls, build_dir: str | None, arch: str, jobs: int, strict: bool = False, toolchain: Toolchain | None = None
    ) -> CompileChecker | None:
        toolchain = toolchain or Toolchain.create(build_dir)
        if toolchain.nvcc is None:
            return None
        nv_arch = arch if arch.startswith(("sm_", "compute_")) else "sm_90"  # AMD profiles: check CUDA syntax only
        checker = cls(Builder(jobs=jobs or None), nv_arch, toolchain, strict)
        note = toolchain.ignored_flags_note()
        if note is not None:
            checker.notes.append(note)
        return checker

    @property
    def build_dir(self) -> str | None:
        return self.toolchain.build_dir

    def _flags(self, path: str, includer: str | None) -> CompileFlags:
        return self.toolchain.project_flags(path, includer)

    def _job(
        self,
        path: str,
        text: str,
        line_map: tuple[int, ...] | None,
        flags: CompileFlags,
        overlay: tuple[OverlayFile, ...] = (),
    ) -> BuildJob:
        return BuildJob(
            source=text,
            filename=path,
            output="check",
            arch=self.arch,
            include_dirs=tuple(flags.include_dirs),
            defines=tuple(flags.defines),
            extra_flags=tuple(flags.extra_flags),
            source_dir=os.path.dirname(os.path.abspath(path)),
            line_map=line_map,
            overlay=overlay,
            source_path=os.path.realpath(path) if overlay else None,
        )

    def check_many(self, transforms: list[FileTransform]) -> list[CheckRecord]:
        """Each file on its own (no include graph): `check_tree` with no includers."""
        return self.check_tree(transforms, {}, {})

    def check_tree(
        self,
        transforms: Sequence[FileTransform],
        includers: Mapping[str, Sequence[str]],
        originals: Mapping[str, bytes] | None = None,
        in_place: Sequence[FileTransform] = (),
    ) -> list[CheckRecord]:
        """One record per rewritten file. `includers`: real path of a header -> the units of
        the run that include it; `originals`: real path -> current bytes of every file of
        the run (units that include a rewritten header without being rewritten);
        `in_place`: rewrites already checked (an earlier round of the candidate stage),
        in place in every unit compiled but not checked again."""
        originals = dict(originals or {})
        changed = {os.path.realpath(t.source.path): t for t in in_place if t.changed}
        changed.update({os.path.realpath(t.source.path): t for t in transforms})
        for real, t in changed.items():
            originals.setdefault(real, t.source.data)
        overlay = {
            real: OverlayFile(real, t.source.path, t.new_data.decode("utf-8"), t.line_map or None)
            for real, t in changed.items()
        }
        records: dict[int, CheckRecord] = {}
        plan: dict[str, list[int]] = {}
        for i, t in enumerate(transforms):
            path = t.source.path
            if not path.endswith(NVCC_SUFFIXES):
                records[i] = CheckRecord(
                    "compile", Status.SKIPPED, "skipped: not a CUDA source nvcc can compile (HIP)", "HipSource"
                )
                continue
            real = os.path.realpath(path)
            units = [u for u in includers.get(real, ()) if os.path.realpath(u) in originals]
            units = [path] if path.endswith(UNIT_SUFFIX) or not units else units
            for unit in units:
                plan.setdefault(unit, []).append(i)
        outcomes = self._check_units(list(plan), changed, originals, overlay, includers)
        for i in range(len(transforms)):
            if i not in records:
                units = [u for u, members in plan.items() if i in members]
                records[i] = self._combine([outcomes[u] for u in units], units, transforms[i].source.path)
        return [records[i] for i in range(len(transforms))]

    def _check_units(
        self,
        units: list[str],
        changed: Mapping[str, FileTransform],
        originals: Mapping[str, bytes],
        overlay: Mapping[str, OverlayFile],
        includers: Mapping[str, Sequence[str]],
    ) -> dict[str, CheckRecord]:
        new_jobs, old_jobs = [], []
        for unit in units:
            real = os.path.realpath(unit)
            includer = None if unit.endswith(UNIT_SUFFIX) else next(iter(includers.get(real, ())), None)
            flags = self._flags(unit, includer)
            transform = changed.get(real)
            old_text = originals.get(real, b"").decode("utf-8")
            new_text = transform.new_data.decode("utf-8") if transform else old_text
            line_map = (transform.line_map or None) if transform else None
            base = Path(os.path.dirname(os.path.abspath(unit)))
            dirs = [(base / d).resolve() for d in flags.include_dirs]
            replaced = {p: o.text.encode("utf-8") for p, o in overlay.items() if p != real}
            reached = {r for _, r, _ in walk_includes(base, new_text, dirs, replaced)}
            extra = tuple(o for p, o in sorted(overlay.items()) if p in reached and p != real)
            new_jobs.append(self._job(unit, new_text, line_map, flags, extra))
            old_jobs.append(self._job(unit, old_text, None, flags))
        results = dict(zip(units, self.builder.build_many(new_jobs)))
        failed = [i for i, unit in enumerate(units) if not results[unit].ok]
        baseline = dict(zip([units[i] for i in failed], self.builder.build_many([old_jobs[i] for i in failed])))
        if any(not b.ok for b in baseline.values()):
            self._probe_environment(units[failed[0]])
        return {unit: self._record(results[unit], baseline.get(unit)) for unit in units}

    def _probe_environment(self, unit: str) -> None:
        """When an original does not compile either, whether nvcc builds anything here: an
        empty kernel through the same nvcc, arch and directory. If it does not (an unusable
        TMPDIR, a broken toolchain) no source is to blame: BuildFailed, the run stops (exit
        2) and nothing is written, instead of judging the rewrite against a compiler that
        cannot run."""
        job = BuildJob(
            source=PROBE,
            filename=os.path.join(os.path.dirname(os.path.abspath(unit)), "kxform_probe.cu"),
            output="check",
            arch=self.arch,
            source_dir=os.path.dirname(os.path.abspath(unit)),
        )
        probe = self.builder.build(job)
        if not probe.ok:
            lines = [line.strip() for line in probe.log.strip().splitlines() if line.strip()]
            raise BuildFailed(
                f"nvcc does not build even an empty kernel here, so no compile check can judge a "
                f"rewrite; nothing written: {lines[0] if lines else 'nvcc failed'}"
            )

    def _record(self, result: BuildResult, original: BuildResult | None) -> CheckRecord:
        if result.ok:
            cached = " (cached)" if result.cached else ""
            return CheckRecord(
                "compile", Status.PASSED, f"nvcc -c -arch={self.arch} succeeded{cached}{_resources(result.resources)}"
            )
        error = first_error(result.log)
        detail = str(error) if error else "nvcc failed"
        if original is None or original.ok:
            return CheckRecord("compile", Status.FAILED, f"rewritten file does not compile: {detail}", DOES_NOT_COMPILE)
        new = _new_errors(result.log, original.log)
        if new:
            return CheckRecord(
                "compile",
                Status.FAILED,
                f"the rewrite adds an error the original does not have: {new[0]}",
                DOES_NOT_COMPILE,
            )
        base = first_error(original.log)
        hint = "" if self.build_dir else " (pass -p BUILD_DIR for the project's include paths and defines)"
        return CheckRecord(
            "compile",
            Status.UNCONFIRMED,
            f"unconfirmed: the original does not compile either ({base or 'nvcc failed'}); the "
            f"rewrite adds no error, but nvcc cannot confirm it{hint}",
            ORIGINAL_DOES_NOT_COMPILE,
            required=self.strict,
        )

    @staticmethod
    def _combine(records: list[CheckRecord], units: list[str], path: str) -> CheckRecord:
        worst = (
            next((r for r in records if not r.ok), None)
            or next((r for r in records if r.status is Status.UNCONFIRMED), None)
            or records[0]
        )
        if len(units) == 1 and units[0] == path:
            return worst
        where = f"through {units[0]}" if len(units) == 1 else f"through {len(units)} units including it"
        return replace(worst, detail=f"{worst.detail} ({where})")


def _new_errors(rewritten: str, original: str) -> list[Diagnostic]:
    """Errors of the rewritten unit that the original does not have (by file, original
    line and message)."""

    def key(d: Diagnostic) -> tuple[str, int, str]:
        return (os.path.realpath(d.path) if d.path else "", d.line, d.message)

    before = {key(d) for d in located_errors(original)}
    return [d for d in located_errors(rewritten) if key(d) not in before]
