"""`split-reduce`: a thread's reduction loop split over workers per column (threads and
blocks along the launch's y axis), partials combined in a fixed order.

The pass itself is `split_reduce.py`; beside it: which loop and reductions a kernel has
and why it may or may not be rewritten (`plan`), and the kernel's and launches' edits
(`rewrite`). The bound on the reordered sums is kxform.engine.reorder's.
"""

from kxform.passes.split_reduce.split_reduce import PASS, SplitReduce

__all__ = ["PASS", "SplitReduce"]
