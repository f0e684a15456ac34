// Shadow of cooperative_groups.h for the kxform CPU runtime: block and tile groups.
//
// `this_thread_block()` and `tiled_partition<N>()` (N a power of two up to the warp
// size) are emulated on top of the block barrier and warp collectives. Grid groups,
// clusters and coalesced groups are refused by the runtime's source scan.
#pragma once
#include "kxcpu/device.h"

namespace cooperative_groups {

namespace details {
static inline unsigned linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
static inline unsigned block_threads() { return blockDim.x * blockDim.y * blockDim.z; }
}  // namespace details

class thread_block {
 public:
  void sync(KXCPU_SITE) const { kxcpu::block_barrier(kxcpu::kBarPlain, 0, kx_file, kx_line, -1); }
  unsigned thread_rank() const { return details::linear_tid(); }
  unsigned size() const { return details::block_threads(); }
  unsigned num_threads() const { return details::block_threads(); }
  dim3 group_index() const { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
  dim3 thread_index() const { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
  dim3 group_dim() const { return blockDim; }
  dim3 dim_threads() const { return blockDim; }
};
static inline thread_block this_thread_block() { return thread_block(); }

template <unsigned N>
class thread_block_tile {
  static_assert(N >= 1 && N <= KXCPU_WARP_SIZE && (N & (N - 1)) == 0,
                "tiles are powers of two no larger than a warp");

 public:
  static constexpr unsigned num_threads_v = N;
  unsigned long long build_mask() const {
    unsigned long long ones = N >= 64 ? ~0ull : ((1ull << N) - 1);
    return ones << (kxcpu::lane_id() / N * N);
  }
  void sync(KXCPU_SITE) const { __syncwarp(build_mask(), kx_file, kx_line); }
  unsigned thread_rank() const { return kxcpu::lane_id() % N; }
  unsigned size() const { return N; }
  unsigned num_threads() const { return N; }
  unsigned meta_group_rank() const { return details::linear_tid() / N; }
  unsigned meta_group_size() const { return (details::block_threads() + N - 1) / N; }
  template <class T>
  T shfl(T v, int src, KXCPU_SITE) const { return __shfl_sync(build_mask(), v, src, N, kx_file, kx_line); }
  template <class T>
  T shfl_down(T v, unsigned d, KXCPU_SITE) const { return __shfl_down_sync(build_mask(), v, d, N, kx_file, kx_line); }
  template <class T>
  T shfl_up(T v, unsigned d, KXCPU_SITE) const { return __shfl_up_sync(build_mask(), v, d, N, kx_file, kx_line); }
  template <class T>
  T shfl_xor(T v, int m, KXCPU_SITE) const { return __shfl_xor_sync(build_mask(), v, m, N, kx_file, kx_line); }
  int any(int p, KXCPU_SITE) const { return __any_sync(build_mask(), p, kx_file, kx_line); }
  int all(int p, KXCPU_SITE) const { return __all_sync(build_mask(), p, kx_file, kx_line); }
  unsigned long long ballot(int p, KXCPU_SITE) const {
    return static_cast<unsigned long long>(__ballot_sync(build_mask(), p, kx_file, kx_line)) >> (kxcpu::lane_id() / N * N);
  }
};

template <unsigned N, class Parent>
static inline thread_block_tile<N> tiled_partition(const Parent&) { return thread_block_tile<N>(); }

template <class Group>
static inline void sync(const Group& g, KXCPU_SITE) { g.sync(kx_file, kx_line); }

template <class T> struct plus { T operator()(const T& a, const T& b) const { return a + b; } };
template <class T> struct less { T operator()(const T& a, const T& b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(const T& a, const T& b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(const T& a, const T& b) const { return a & b; } };
template <class T> struct bit_or { T operator()(const T& a, const T& b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(const T& a, const T& b) const { return a ^ b; } };

/// Butterfly reduction over a tile: every lane gets the result.
template <unsigned N, class T, class Op>
static inline T reduce(const thread_block_tile<N>& g, T value, Op op) {
  for (unsigned offset = N / 2; offset > 0; offset /= 2) value = op(value, g.shfl_xor(value, static_cast<int>(offset)));
  return value;
}

/// Inclusive and exclusive scans over a tile (Hillis-Steele).
template <unsigned N, class T, class Op>
static inline T inclusive_scan(const thread_block_tile<N>& g, T value, Op op) {
  for (unsigned d = 1; d < N; d *= 2) {
    T other = g.shfl_up(value, d);
    if (g.thread_rank() >= d) value = op(value, other);
  }
  return value;
}
template <unsigned N, class T>
static inline T inclusive_scan(const thread_block_tile<N>& g, T value) { return inclusive_scan(g, value, plus<T>()); }
template <unsigned N, class T, class Op>
static inline T exclusive_scan(const thread_block_tile<N>& g, T value, Op op) {
  T incl = inclusive_scan(g, value, op);
  T prev = g.shfl_up(incl, 1);
  return g.thread_rank() == 0 ? T() : prev;
}
template <unsigned N, class T>
static inline T exclusive_scan(const thread_block_tile<N>& g, T value) { return exclusive_scan(g, value, plus<T>()); }

}  // namespace cooperative_groups
