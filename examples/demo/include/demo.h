// Launchers of the demo's kernels (defined in src/sgemm.cu and src/transpose.cu).
#pragma once

#ifndef DEMO_TILE
#error "DEMO_TILE must be defined (target_compile_definitions)"
#endif

void launch_sgemm(int M, int N, int K, const float *A, const float *B, float *C);
void launch_transpose(float *out, const float *in, int width, int height);
