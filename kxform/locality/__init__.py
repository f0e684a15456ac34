"""The L2 and DRAM locality model: what each block order does to the memory hierarchy.

Predictions come from the CPU runtime's exact sector traces of a few blocks, extrapolated
to the whole grid and fed through a simulated L2 built from the hardware profile
(docs/locality-model.md). Entry points: `predict.rank_orders` (every candidate order of
one kernel, ranked, with the proposer's decision), `propose.judge` (what the swizzle
pass's default proposer asks), `kxform inspect --l2`, and `tile.rank_tile_orders` (the
orders of a kernel rewritten at a tile configuration).
"""
