// CUDA atomics on global and shared memory.
//
// Blocks run concurrently on several worker threads, so every atomic is a real
// hardware atomic (GCC `__atomic` builtins; relaxed order, like CUDA's). Types without
// a native read-modify-write (float/double add, half add) use a compare-and-swap loop.
// A failed `atomicCAS` yields to the other threads of the block: a spin lock held by a
// sibling thread can only be released if that thread gets to run.
#pragma once

#define KXCPU_RLX __ATOMIC_RELAXED

#define KXCPU_ATOMIC_INT_OPS(_KxT)                                                                 \
  static inline _KxT atomicAdd(_KxT* a, _KxT v) { return __atomic_fetch_add(a, v, KXCPU_RLX); }       \
  static inline _KxT atomicSub(_KxT* a, _KxT v) { return __atomic_fetch_sub(a, v, KXCPU_RLX); }       \
  static inline _KxT atomicExch(_KxT* a, _KxT v) { return __atomic_exchange_n(a, v, KXCPU_RLX); }     \
  static inline _KxT atomicAnd(_KxT* a, _KxT v) { return __atomic_fetch_and(a, v, KXCPU_RLX); }       \
  static inline _KxT atomicOr(_KxT* a, _KxT v) { return __atomic_fetch_or(a, v, KXCPU_RLX); }         \
  static inline _KxT atomicXor(_KxT* a, _KxT v) { return __atomic_fetch_xor(a, v, KXCPU_RLX); }       \
  static inline _KxT atomicMin(_KxT* a, _KxT v) {                                                       \
    _KxT old = __atomic_load_n(a, KXCPU_RLX);                                                     \
    while (v < old && !__atomic_compare_exchange_n(a, &old, v, true, KXCPU_RLX, KXCPU_RLX)) {} \
    return old;                                                                                \
  }                                                                                            \
  static inline _KxT atomicMax(_KxT* a, _KxT v) {                                                       \
    _KxT old = __atomic_load_n(a, KXCPU_RLX);                                                     \
    while (v > old && !__atomic_compare_exchange_n(a, &old, v, true, KXCPU_RLX, KXCPU_RLX)) {} \
    return old;                                                                                \
  }                                                                                            \
  static inline _KxT atomicCAS(_KxT* a, _KxT compare, _KxT v) {                                            \
    _KxT old = compare;                                                                           \
    if (!__atomic_compare_exchange_n(a, &old, v, false, KXCPU_RLX, KXCPU_RLX)) kxcpu::fiber_yield(); \
    return old;                                                                                \
  }
KXCPU_ATOMIC_INT_OPS(int)
KXCPU_ATOMIC_INT_OPS(unsigned int)
KXCPU_ATOMIC_INT_OPS(long long)
KXCPU_ATOMIC_INT_OPS(unsigned long long)
#undef KXCPU_ATOMIC_INT_OPS

static inline unsigned short atomicCAS(unsigned short* a, unsigned short compare, unsigned short v) {
  unsigned short old = compare;
  if (!__atomic_compare_exchange_n(a, &old, v, false, KXCPU_RLX, KXCPU_RLX)) kxcpu::fiber_yield();
  return old;
}

/// `((old >= limit) ? 0 : old + 1)`, atomically.
static inline unsigned int atomicInc(unsigned int* a, unsigned int limit) {
  unsigned int old = __atomic_load_n(a, KXCPU_RLX);
  while (!__atomic_compare_exchange_n(a, &old, old >= limit ? 0u : old + 1u, true, KXCPU_RLX, KXCPU_RLX)) {}
  return old;
}
/// `((old == 0 || old > limit) ? limit : old - 1)`, atomically.
static inline unsigned int atomicDec(unsigned int* a, unsigned int limit) {
  unsigned int old = __atomic_load_n(a, KXCPU_RLX);
  while (!__atomic_compare_exchange_n(a, &old, (old == 0u || old > limit) ? limit : old - 1u, true, KXCPU_RLX, KXCPU_RLX)) {}
  return old;
}

namespace kxcpu {
/// Read-modify-write of a value of type T stored in an unsigned integer of equal size.
template <class _KxT, class Bits, class _KxF>
static inline _KxT atomic_rmw(_KxT* a, _KxF f) {
  Bits* p = reinterpret_cast<Bits*>(a);
  Bits old = __atomic_load_n(p, KXCPU_RLX);
  for (;;) {
    Bits next = bit_cast<Bits>(static_cast<_KxT>(f(bit_cast<_KxT>(old))));
    if (__atomic_compare_exchange_n(p, &old, next, true, KXCPU_RLX, KXCPU_RLX)) return bit_cast<_KxT>(old);
  }
}
}  // namespace kxcpu

static inline float atomicAdd(float* a, float v) {
  return kxcpu::atomic_rmw<float, unsigned int>(a, [v](float x) { return x + v; });
}
static inline double atomicAdd(double* a, double v) {
  return kxcpu::atomic_rmw<double, unsigned long long>(a, [v](double x) { return x + v; });
}
static inline float atomicSub(float* a, float v) {
  return kxcpu::atomic_rmw<float, unsigned int>(a, [v](float x) { return x - v; });
}
static inline float atomicExch(float* a, float v) {
  return kxcpu::bit_cast<float>(__atomic_exchange_n(reinterpret_cast<unsigned int*>(a), kxcpu::bit_cast<unsigned int>(v), KXCPU_RLX));
}
static inline float atomicMax(float* a, float v) {
  return kxcpu::atomic_rmw<float, unsigned int>(a, [v](float x) { return fmaxf(x, v); });
}
static inline float atomicMin(float* a, float v) {
  return kxcpu::atomic_rmw<float, unsigned int>(a, [v](float x) { return fminf(x, v); });
}

// Scope-qualified variants behave like the device-wide ones here.
#define KXCPU_SCOPED(NAME)                                                             \
  template <class _KxP, class... _KxA> static inline auto NAME##_block(_KxP p, _KxA... a) { return NAME(p, a...); } \
  template <class _KxP, class... _KxA> static inline auto NAME##_system(_KxP p, _KxA... a) { return NAME(p, a...); }
KXCPU_SCOPED(atomicAdd)
KXCPU_SCOPED(atomicSub)
KXCPU_SCOPED(atomicExch)
KXCPU_SCOPED(atomicMin)
KXCPU_SCOPED(atomicMax)
KXCPU_SCOPED(atomicInc)
KXCPU_SCOPED(atomicDec)
KXCPU_SCOPED(atomicCAS)
KXCPU_SCOPED(atomicAnd)
KXCPU_SCOPED(atomicOr)
KXCPU_SCOPED(atomicXor)
#undef KXCPU_SCOPED
