"""The swizzle pattern library (kept importable here; defined in kxform.remap, which the
locality model shares without importing this pass)."""

from kxform.remap import ALONG, GROUP, PATTERNS, XCDS, Params, ParamSpec, Pattern, RemapConfig, get_pattern

__all__ = ["ALONG", "GROUP", "PATTERNS", "XCDS", "ParamSpec", "Params", "Pattern", "RemapConfig", "get_pattern"]
