"""`vectorize`: contiguous accesses of a one-element-per-thread kernel widened to vector loads and stores."""

from kxform.passes.vectorize.vectorize import PASS, Vectorize

__all__ = ["PASS", "Vectorize"]
