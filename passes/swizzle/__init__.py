"""`swizzle`: remap the block index so blocks that run together share data in L2.

The pass itself is `swizzle.py`; what only it needs lives beside it: where kernels read
the block index (`index_usage`), which kernels are unsafe to reorder (`order_safety`),
the remap pattern library (`patterns`), custom remaps in kxform's own formula language
(`formula`, `formula_eval`) and the bijection check of the emitted helper (`bijection`).
"""

from kxform.passes.swizzle.swizzle import PASS, Swizzle

__all__ = ["PASS", "Swizzle"]
