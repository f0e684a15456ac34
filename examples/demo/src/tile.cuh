// Tile index helpers shared by the demo's kernels (a quoted header: kxform copies it
// beside the rewritten sources, and a change to it re-runs kxform on its includers).
#pragma once

__device__ __forceinline__ int tile_origin(int block, int tile) { return block * tile; }
