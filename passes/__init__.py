"""The pass library: one pass per module, each exposing `PASS` (its class).

The module name is the pass name (`swizzle.py` -> `swizzle`); see kxform.engine.registry.
"""
