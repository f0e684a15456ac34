"""`tile`: lift hard-coded tile sizes into checked, verified parameters.

The pass itself is `tile.py`; beside it: which constants are tile sizes and which are
refused (`quantities`), the parameter space and the constraints derived from the code
and the hardware (`constraints`), the edits (`lift`), the verification policy of a
rewrite (`policy`) and the ptxas check of a candidate (`resources`).
"""

from kxform.passes.tile.tile import PASS, Tile

__all__ = ["PASS", "Tile"]
