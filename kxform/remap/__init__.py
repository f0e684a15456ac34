"""Block-index remaps: the pattern library, its C emitter and reference implementations."""

from kxform.remap.patterns import PATTERNS, Pattern, RemapConfig, get_pattern

__all__ = ["PATTERNS", "Pattern", "RemapConfig", "get_pattern"]
