"""Typed results between stages: a status for every check and a stable key for every reason.

A stage learns what an earlier one established from these, never from its sentences:
the messages are for people and may change; `Status` and the keys below may not (the
pass log stores both, and `kxform log show` reads them back). Passes name their own
keys (`Blocker.key`, `CheckFailed(..., key=...)`); the keys here are the later stages'.
"""

from __future__ import annotations

import enum

__all__ = [
    "BUILD_ENVIRONMENT",
    "DOES_NOT_COMPILE",
    "NOT_FASTER",
    "NO_HARNESS_SPEC",
    "NO_DIFFERENTIAL_RUN",
    "ORIGINAL_DOES_NOT_COMPILE",
    "REVERTED_WITH_FILE",
    "Status",
    "UNVERIFIABLE_LAUNCH",
    "UNVERIFIED",
    "VERIFY_INCONCLUSIVE",
    "VERIFY_MISMATCH",
]


class Status(enum.Enum):
    """What one check established about a rewrite."""

    PASSED = "passed"
    FAILED = "failed"
    """The check refutes the rewrite."""
    SKIPPED = "skipped"
    """The check did not run (not asked for, or nothing to run it on: no harness spec)."""
    UNCONFIRMED = "unconfirmed"
    """It ran and found nothing against the rewrite, but cannot confirm it either (the
    original does not compile here): written unless the run required confirmation."""
    INCONCLUSIVE = "inconclusive"
    """It ran and could not decide (a differential run with vacuous outputs, a runtime
    that cannot run the kernel): never written, never reported as passed."""

    @property
    def could_not_tell(self) -> bool:
        """Neither passed nor refuted: a later candidate would fare alike."""
        return self in (Status.UNCONFIRMED, Status.INCONCLUSIVE)


NOT_FASTER = "NotFaster"
"""The measure stage: the rewrite was not faster than the original beyond the spread."""
REVERTED_WITH_FILE = "RevertedWithFile"
"""Left out only because another kernel of its file failed a later stage."""
VERIFY_MISMATCH = "VerifyMismatch"
"""The differential run found a different output."""
VERIFY_INCONCLUSIVE = "VerifyInconclusive"
"""The differential run could not decide (or the harness spec is unusable)."""
UNVERIFIED = "Unverified"
"""No runtime could run the kernel."""
NO_HARNESS_SPEC = "NoHarnessSpec"
"""Verification skipped: no harness spec names the kernel."""
NO_DIFFERENTIAL_RUN = "NoDifferentialRun"
"""A pass requires a differential run and none happened."""
BUILD_ENVIRONMENT = "BuildEnvironment"
"""A build failed for a cause of the machine (a header no longer found, a full disk, a
missing tool), not of the code: a tuner stops rather than blame the configuration."""
DOES_NOT_COMPILE = "DoesNotCompile"
"""The rewrite (or a candidate built for its resources) does not compile."""
ORIGINAL_DOES_NOT_COMPILE = "OriginalDoesNotCompile"
"""The compile check is unconfirmed: the original fails the same way."""
UNVERIFIABLE_LAUNCH = "UnverifiableLaunch"
"""A pass's launch check: the rewritten launch reads values the kernel does not receive,
so no differential run could judge it (could not tell; nothing is written)."""
