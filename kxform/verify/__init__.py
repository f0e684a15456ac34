"""Differential verification (original vs rewritten, kernel vs reference), the verification stage of `apply`, and whole-program mode."""
