"""`coarsen`: each thread computes F outputs along x or y instead of one, the grid divided by F."""

from kxform.passes.coarsen.coarsen import PASS, Coarsen

__all__ = ["PASS", "Coarsen"]
