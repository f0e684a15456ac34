"""`smem_tile`: shared-memory tiling and register blocking of naive reduction nests.

The pass itself is `smem_tile.py`; beside it: which kernels have the form and why others
are refused (`nest`), the tiled body and launch (`emit`), and the structural barrier
check of the rewrite (`barriers`).
"""

from kxform.passes.smem_tile.smem_tile import PASS, SmemTile

__all__ = ["PASS", "SmemTile"]
