"""Shared analyses of kernels, computed once per kernel and source version.

`ctx.analysis(AccessAnalysis, kernel)` (kxform.analysis.manager) gives every pass, the
locality model, the proposers and the prompt the same frozen facts: loops with their
bounds, reductions and dependences, and memory accesses with affine indices
(kxform.analysis.affine), guards and contiguity. See docs/analysis.md.
"""

from kxform.analysis.access import AccessAnalysis, analyse_function
from kxform.analysis.affine import Affine, Index, NotAffine
from kxform.analysis.manager import Analysis, AnalysisManager
from kxform.analysis.records import Buffer, Comparison, Guard, Loop, MemoryAccess, Reduction

__all__ = [
    "AccessAnalysis",
    "Affine",
    "Analysis",
    "AnalysisManager",
    "Buffer",
    "Comparison",
    "Guard",
    "Index",
    "Loop",
    "MemoryAccess",
    "NotAffine",
    "Reduction",
    "analyse_function",
]
