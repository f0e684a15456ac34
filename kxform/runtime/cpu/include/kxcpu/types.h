// CUDA built-in vector types (float4, int2, ...), uint3 and dim3 for the CPU runtime.
//
// Alignments follow CUDA's vector_types.h so that structs holding them have the same
// layout as on the GPU and 16-byte vector loads stay 16-byte aligned. No arithmetic
// operators are defined: CUDA has none either, and kernels often define their own.
#pragma once

#define KXCPU_VEC1(_KxT, _KxN) \
  struct _KxN##1 { _KxT x; }; \
  static inline _KxN##1 make_##_KxN##1(_KxT x) { return _KxN##1{x}; }
#define KXCPU_VEC2(_KxT, _KxN, _KxA) \
  struct __attribute__((aligned(_KxA))) _KxN##2 { _KxT x, y; }; \
  static inline _KxN##2 make_##_KxN##2(_KxT x, _KxT y) { return _KxN##2{x, y}; }
#define KXCPU_VEC3(_KxT, _KxN) \
  struct _KxN##3 { _KxT x, y, z; }; \
  static inline _KxN##3 make_##_KxN##3(_KxT x, _KxT y, _KxT z) { return _KxN##3{x, y, z}; }
#define KXCPU_VEC4(_KxT, _KxN, _KxA) \
  struct __attribute__((aligned(_KxA))) _KxN##4 { _KxT x, y, z, w; }; \
  static inline _KxN##4 make_##_KxN##4(_KxT x, _KxT y, _KxT z, _KxT w) { return _KxN##4{x, y, z, w}; }
#define KXCPU_VECS(_KxT, _KxN, A2, A4) KXCPU_VEC1(_KxT, _KxN) KXCPU_VEC2(_KxT, _KxN, A2) KXCPU_VEC3(_KxT, _KxN) KXCPU_VEC4(_KxT, _KxN, A4)

KXCPU_VECS(signed char, char, 2, 4)
KXCPU_VECS(unsigned char, uchar, 2, 4)
KXCPU_VECS(short, short, 4, 8)
KXCPU_VECS(unsigned short, ushort, 4, 8)
KXCPU_VECS(int, int, 8, 16)
KXCPU_VECS(unsigned int, uint, 8, 16)
KXCPU_VECS(long, long, 16, 16)
KXCPU_VECS(unsigned long, ulong, 16, 16)
KXCPU_VECS(long long, longlong, 16, 16)
KXCPU_VECS(unsigned long long, ulonglong, 16, 16)
KXCPU_VECS(float, float, 8, 16)
KXCPU_VECS(double, double, 16, 16)

#undef KXCPU_VECS
#undef KXCPU_VEC1
#undef KXCPU_VEC2
#undef KXCPU_VEC3
#undef KXCPU_VEC4

/// Launch dimensions; unspecified components default to 1 as in CUDA. The constructor
/// is constexpr so that `dim3` can be a `__thread` variable (no dynamic initialisation).
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};
