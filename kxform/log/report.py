"""Counters, the summary line and the exit code of a run (black's `Report`, for kernels)."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

from kxform import exitcodes
from kxform.engine.pass_api import FORCED_REFUSED, KernelResult, Outcome
from kxform.engine.status import Status


class WriteBack(enum.Enum):
    """What `apply` does with a rewritten file."""

    WRITE = "write"  # in place (atomic)
    DIFF = "diff"  # print a unified diff, write nothing
    CHECK = "check"  # write nothing; exit 1 if anything would change
    CHECK_DIFF = "check-diff"  # `--check --diff`: print the diff, write nothing, exit 1 if anything would change
    OUT_DIR = "out-dir"  # write rewritten copies under another directory


@dataclass
class Report:
    write_back: WriteBack = WriteBack.WRITE
    files_changed: int = 0
    files_unchanged: int = 0
    input_errors: list[str] = field(default_factory=list)
    internal_errors: list[str] = field(default_factory=list)
    kernel_outcomes: Counter[Outcome] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """One-line notes for the user (flags kxform ignored, ...), printed once each."""
    unconfirmed: int = 0
    """Applied kernels whose compile check could not confirm the rewrite (the original
    does not compile with the flags kxform has either)."""
    forced_refused: int = 0
    """Kernels the pass refused with a configuration the user fixed (MISSED, and exit 1)."""

    def add_kernels(self, results: tuple[KernelResult, ...] | list[KernelResult]) -> None:
        for result in results:
            refused = result.outcome is Outcome.MISSED and result.stage == FORCED_REFUSED
            self.forced_refused += refused
            self.kernel_outcomes[result.outcome] += 1
            if result.outcome is Outcome.APPLIED and any(
                c.name == "compile" and c.status is Status.UNCONFIRMED for c in result.checks
            ):
                self.unconfirmed += 1
            if result.outcome is Outcome.FAILED or refused:
                self.failures.append(f"{result.path}:{result.line}: {result.kernel}: {'; '.join(result.reasons)}")

    @property
    def exit_code(self) -> int:
        if self.internal_errors:
            return exitcodes.INTERNAL
        if self.input_errors:
            return exitcodes.USAGE
        if self.failures:
            return exitcodes.CHANGES
        if self.write_back in (WriteBack.CHECK, WriteBack.CHECK_DIFF) and self.files_changed:
            return exitcodes.CHANGES
        return exitcodes.OK

    def summary(self) -> str:
        verb = {
            WriteBack.WRITE: "rewritten",
            WriteBack.OUT_DIR: "rewritten",
            WriteBack.DIFF: "would be rewritten",
            WriteBack.CHECK: "would be rewritten",
            WriteBack.CHECK_DIFF: "would be rewritten",
        }[self.write_back]
        parts = [
            f"{self.files_changed} file{'s' if self.files_changed != 1 else ''} {verb}",
            f"{self.files_unchanged} unchanged",
        ]
        kernels = ", ".join(f"{self.kernel_outcomes[o]} {o.value}" for o in Outcome if self.kernel_outcomes[o])
        if kernels:
            parts.append(f"kernels: {kernels}")
        refused = self.forced_refused
        if refused:
            parts.append(f"{refused} refused with the configuration given (exit 1)")
        if self.unconfirmed:
            parts.append(
                f"{self.unconfirmed} applied kernel{'s' if self.unconfirmed != 1 else ''} not confirmed "
                "by the compiler (the original does not compile here either)"
            )
        if self.input_errors:
            touched = " (those files left untouched)" if self.write_back in (WriteBack.WRITE, WriteBack.OUT_DIR) else ""
            parts.append(f"{len(self.input_errors)} input error{'s' if len(self.input_errors) != 1 else ''}{touched}")
        if self.internal_errors:
            parts.append(f"{len(self.internal_errors)} internal error{'s' if len(self.internal_errors) != 1 else ''}")
        return ", ".join(parts) + "."
