"""`launch`: a kernel's block size, wherever its launch writes it, as a checked parameter.

The pass itself is `launch.py`; beside it: where each launch writes the block size and
whether it can be lifted (`geometry`), what the kernel's code assumes about it
(`assumptions`: constraints and refusals with their lines), the edits (`rewrite`) and how
a new block size is verified (`policy`).
"""

from kxform.passes.launch.launch import PASS, Launch

__all__ = ["Launch", "PASS"]
