"""The exit codes of every kxform command, in one place (black's and ruff's convention).

`kxform verify` alone adds UNDECIDED: a differential run that could not tell is neither
a pass nor a proven mismatch.
"""

from __future__ import annotations

OK = 0
CHANGES = 1
"""A check failed, `--check` would change a file, or a forced configuration was refused."""
USAGE = 2
"""Usage, input or environment error (one line naming file, line and cause)."""
UNDECIDED = 3
"""`kxform verify`: inconclusive or unverified (nothing proven either way)."""
INTERNAL = 123
"""A bug in kxform (the traceback is saved; see `kxform apply`)."""
INTERRUPTED = 130
"""Ctrl-C."""
