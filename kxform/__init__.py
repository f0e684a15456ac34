"""kxform: a source-to-source optimizer for CUDA and HIP kernels.

Passes (block-index swizzles, tiling) are proposed, checked, applied as minimal
byte-range edits, compiled and verified differentially against the original.
"""

__version__ = "0.1.0"
