// Block barriers, warp collectives (shuffles, votes, match, reduce) and lane helpers.
//
// Every collective is a rendezvous: a lane publishes its operand, waits until all
// lanes of its mask have arrived, then reads the result. Call sites are recorded
// (`__builtin_FILE/LINE` as default arguments) so that barrier divergence and
// deadlocks are reported with the line of each waiting thread.
#pragma once

#if KXCPU_WARP_SIZE == 64
typedef unsigned long long kxcpu_lanemask_t;
#else
typedef unsigned int kxcpu_lanemask_t;
#endif

#define KXCPU_SITE const char *kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()

// ---------------------------------------------------------------- block barriers
// Macros, so that each textual barrier gets its own __COUNTER__ id: two different
// barriers reached by different threads are divergence even on the same source line.
namespace kxcpu {
static inline void syncthreads_at(const char* f, int l, int site) { block_barrier(kBarPlain, 0, f, l, site); }
}  // namespace kxcpu
#define __syncthreads() ::kxcpu::syncthreads_at(__FILE__, __LINE__, __COUNTER__)
#define __syncthreads_count(pred) ::kxcpu::block_barrier(::kxcpu::kBarCount, (pred), __FILE__, __LINE__, __COUNTER__)
#define __syncthreads_and(pred) ::kxcpu::block_barrier(::kxcpu::kBarAnd, (pred), __FILE__, __LINE__, __COUNTER__)
#define __syncthreads_or(pred) ::kxcpu::block_barrier(::kxcpu::kBarOr, (pred), __FILE__, __LINE__, __COUNTER__)

// ---------------------------------------------------------------- warp collectives
namespace kxcpu {
template <class _KxT>
static inline u64 to_bits(const _KxT& v) {
  static_assert(sizeof(_KxT) <= 8 && std::is_trivially_copyable<_KxT>::value,
                "warp collectives exchange trivially copyable values of at most 8 bytes");
  u64 b = 0;
  std::memcpy(&b, &v, sizeof(_KxT));
  return b;
}
template <class _KxT>
static inline _KxT from_bits(u64 b) {
  _KxT v;
  std::memcpy(&v, &b, sizeof(_KxT));
  return v;
}
template <class _KxT>
static inline _KxT shuffle(int op, u64 mask, const _KxT& v, int arg, int width, const char* f, int l) {
  WarpCall c{mask, to_bits(v), op, arg, width, static_cast<int>(sizeof(_KxT)), f, l};
  return from_bits<_KxT>(warp_collective(c, nullptr));
}
static inline u64 vote(int op, u64 mask, u64 value, const char* f, int l) {
  WarpCall c{mask, value, op, 0, KXCPU_WARP_SIZE, 8, f, l};
  return warp_collective(c, nullptr);
}
static inline unsigned lane_id() {
  unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return linear % KXCPU_WARP_SIZE;
}
}  // namespace kxcpu

static inline void __syncwarp(unsigned long long mask = ~0ull, KXCPU_SITE) {
  kxcpu::vote(kxcpu::kSync, mask, 0, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_sync(unsigned long long mask, _KxT var, int src, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflIdx, mask, var, src, width, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_up_sync(unsigned long long mask, _KxT var, unsigned int delta, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflUp, mask, var, static_cast<int>(delta), width, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_down_sync(unsigned long long mask, _KxT var, unsigned int delta, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflDown, mask, var, static_cast<int>(delta), width, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_xor_sync(unsigned long long mask, _KxT var, int lane_mask, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflXor, mask, var, lane_mask, width, kx_file, kx_line);
}
static inline kxcpu_lanemask_t __ballot_sync(unsigned long long mask, int pred, KXCPU_SITE) {
  return static_cast<kxcpu_lanemask_t>(kxcpu::vote(kxcpu::kBallot, mask, pred != 0, kx_file, kx_line));
}
static inline int __any_sync(unsigned long long mask, int pred, KXCPU_SITE) {
  return static_cast<int>(kxcpu::vote(kxcpu::kAny, mask, pred != 0, kx_file, kx_line));
}
static inline int __all_sync(unsigned long long mask, int pred, KXCPU_SITE) {
  return static_cast<int>(kxcpu::vote(kxcpu::kAll, mask, pred != 0, kx_file, kx_line));
}
static inline int __uni_sync(unsigned long long mask, int pred, KXCPU_SITE) {
  kxcpu::u64 any = kxcpu::vote(kxcpu::kAny, mask, pred != 0, kx_file, kx_line);
  return any == 0 || kxcpu::vote(kxcpu::kAll, mask, pred != 0, kx_file, kx_line) != 0;
}
/// The lanes of the warp that have not exited. All of them must reach this same call:
/// which lanes a divergent branch holds is not modelled, and a lane found elsewhere is
/// reported as a deadlock instead of guessing a mask.
static inline kxcpu_lanemask_t __activemask(KXCPU_SITE) {
  return static_cast<kxcpu_lanemask_t>(kxcpu::vote(kxcpu::kActiveMask, ~0ull, 0, kx_file, kx_line));
}
template <class _KxT>
static inline kxcpu_lanemask_t __match_any_sync(unsigned long long mask, _KxT value, KXCPU_SITE) {
  kxcpu::WarpCall c{mask, kxcpu::to_bits(value), kxcpu::kMatchAny, 0, KXCPU_WARP_SIZE, static_cast<int>(sizeof(_KxT)), kx_file, kx_line};
  return static_cast<kxcpu_lanemask_t>(kxcpu::warp_collective(c, nullptr));
}
template <class _KxT>
static inline kxcpu_lanemask_t __match_all_sync(unsigned long long mask, _KxT value, int* pred, KXCPU_SITE) {
  kxcpu::WarpCall c{mask, kxcpu::to_bits(value), kxcpu::kMatchAll, 0, KXCPU_WARP_SIZE, static_cast<int>(sizeof(_KxT)), kx_file, kx_line};
  return static_cast<kxcpu_lanemask_t>(kxcpu::warp_collective(c, pred));
}
#define KXCPU_REDUCE(NAME, _KxT, OP)                                                        \
  static inline _KxT NAME(unsigned long long mask, _KxT value, KXCPU_SITE) {                   \
    kxcpu::WarpCall c{mask, static_cast<unsigned>(value), OP, 0, KXCPU_WARP_SIZE, 4, kx_file, kx_line}; \
    return static_cast<_KxT>(kxcpu::warp_collective(c, nullptr));                           \
  }
KXCPU_REDUCE(__reduce_add_sync, unsigned, kxcpu::kRedAdd)
KXCPU_REDUCE(__reduce_add_sync, int, kxcpu::kRedAdd)
KXCPU_REDUCE(__reduce_min_sync, unsigned, kxcpu::kRedMinU)
KXCPU_REDUCE(__reduce_min_sync, int, kxcpu::kRedMinI)
KXCPU_REDUCE(__reduce_max_sync, unsigned, kxcpu::kRedMaxU)
KXCPU_REDUCE(__reduce_max_sync, int, kxcpu::kRedMaxI)
KXCPU_REDUCE(__reduce_and_sync, unsigned, kxcpu::kRedAnd)
KXCPU_REDUCE(__reduce_or_sync, unsigned, kxcpu::kRedOr)
KXCPU_REDUCE(__reduce_xor_sync, unsigned, kxcpu::kRedXor)
#undef KXCPU_REDUCE

// Mask-less forms (HIP; pre-Volta CUDA): the whole warp participates.
template <class _KxT>
static inline _KxT __shfl(_KxT var, int src, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflIdx, ~0ull, var, src, width, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_up(_KxT var, unsigned int delta, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflUp, ~0ull, var, static_cast<int>(delta), width, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_down(_KxT var, unsigned int delta, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflDown, ~0ull, var, static_cast<int>(delta), width, kx_file, kx_line);
}
template <class _KxT>
static inline _KxT __shfl_xor(_KxT var, int lane_mask, int width = warpSize, KXCPU_SITE) {
  return kxcpu::shuffle(kxcpu::kShflXor, ~0ull, var, lane_mask, width, kx_file, kx_line);
}
static inline unsigned long long __ballot(int pred, KXCPU_SITE) {
  return kxcpu::vote(kxcpu::kBallot, ~0ull, pred != 0, kx_file, kx_line);
}
static inline int __any(int pred, KXCPU_SITE) { return static_cast<int>(kxcpu::vote(kxcpu::kAny, ~0ull, pred != 0, kx_file, kx_line)); }
static inline int __all(int pred, KXCPU_SITE) { return static_cast<int>(kxcpu::vote(kxcpu::kAll, ~0ull, pred != 0, kx_file, kx_line)); }
static inline unsigned __lane_id() { return kxcpu::lane_id(); }
static inline kxcpu_lanemask_t __lanemask_lt() { return static_cast<kxcpu_lanemask_t>((1ull << kxcpu::lane_id()) - 1); }
static inline kxcpu_lanemask_t __lanemask_le() { return static_cast<kxcpu_lanemask_t>((2ull << kxcpu::lane_id()) - 1); }
static inline kxcpu_lanemask_t __lanemask_gt() { return static_cast<kxcpu_lanemask_t>(~((2ull << kxcpu::lane_id()) - 1)); }
static inline kxcpu_lanemask_t __lanemask_ge() { return static_cast<kxcpu_lanemask_t>(~((1ull << kxcpu::lane_id()) - 1)); }
