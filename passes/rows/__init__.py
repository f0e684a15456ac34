"""`rows`: a thread's independent loop shared out over G threads, its reductions made parallel.

The pass itself is `rows.py`; beside it: which loops and reductions a kernel has and why
it may or may not be rewritten (`plan`), the shuffle and block reductions it emits
(`reduce`), the edits (`rewrite`) and how reordered sums are verified (`tolerance`).
"""

from kxform.passes.rows.rows import PASS, Rows

__all__ = ["PASS", "Rows"]
