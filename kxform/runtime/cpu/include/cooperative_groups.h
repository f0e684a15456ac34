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

template <unsigned _KxN>
class thread_block_tile {
  static_assert(_KxN >= 1 && _KxN <= KXCPU_WARP_SIZE && (_KxN & (_KxN - 1)) == 0,
                "tiles are powers of two no larger than a warp");

 public:
  static constexpr unsigned num_threads_v = _KxN;
  unsigned long long build_mask() const {
    unsigned long long ones = _KxN >= 64 ? ~0ull : ((1ull << _KxN) - 1);
    return ones << (kxcpu::lane_id() / _KxN * _KxN);
  }
  void sync(KXCPU_SITE) const { __syncwarp(build_mask(), kx_file, kx_line); }
  unsigned thread_rank() const { return kxcpu::lane_id() % _KxN; }
  unsigned size() const { return _KxN; }
  unsigned num_threads() const { return _KxN; }
  unsigned meta_group_rank() const { return details::linear_tid() / _KxN; }
  unsigned meta_group_size() const { return (details::block_threads() + _KxN - 1) / _KxN; }
  template <class _KxT>
  _KxT shfl(_KxT v, int src, KXCPU_SITE) const { return __shfl_sync(build_mask(), v, src, _KxN, kx_file, kx_line); }
  template <class _KxT>
  _KxT shfl_down(_KxT v, unsigned d, KXCPU_SITE) const { return __shfl_down_sync(build_mask(), v, d, _KxN, kx_file, kx_line); }
  template <class _KxT>
  _KxT shfl_up(_KxT v, unsigned d, KXCPU_SITE) const { return __shfl_up_sync(build_mask(), v, d, _KxN, kx_file, kx_line); }
  template <class _KxT>
  _KxT shfl_xor(_KxT v, int m, KXCPU_SITE) const { return __shfl_xor_sync(build_mask(), v, m, _KxN, kx_file, kx_line); }
  int any(int p, KXCPU_SITE) const { return __any_sync(build_mask(), p, kx_file, kx_line); }
  int all(int p, KXCPU_SITE) const { return __all_sync(build_mask(), p, kx_file, kx_line); }
  unsigned long long ballot(int p, KXCPU_SITE) const {
    return static_cast<unsigned long long>(__ballot_sync(build_mask(), p, kx_file, kx_line)) >> (kxcpu::lane_id() / _KxN * _KxN);
  }
};

template <unsigned _KxN, class Parent>
static inline thread_block_tile<_KxN> tiled_partition(const Parent&) { return thread_block_tile<_KxN>(); }

template <class Group>
static inline void sync(const Group& g, KXCPU_SITE) { g.sync(kx_file, kx_line); }

template <class _KxT> struct plus { _KxT operator()(const _KxT& a, const _KxT& b) const { return a + b; } };
template <class _KxT> struct less { _KxT operator()(const _KxT& a, const _KxT& b) const { return b < a ? b : a; } };
template <class _KxT> struct greater { _KxT operator()(const _KxT& a, const _KxT& b) const { return a < b ? b : a; } };
template <class _KxT> struct bit_and { _KxT operator()(const _KxT& a, const _KxT& b) const { return a & b; } };
template <class _KxT> struct bit_or { _KxT operator()(const _KxT& a, const _KxT& b) const { return a | b; } };
template <class _KxT> struct bit_xor { _KxT operator()(const _KxT& a, const _KxT& b) const { return a ^ b; } };

/// Butterfly reduction over a tile: every lane gets the result.
template <unsigned _KxN, class _KxT, class Op>
static inline _KxT reduce(const thread_block_tile<_KxN>& g, _KxT value, Op op) {
  for (unsigned offset = _KxN / 2; offset > 0; offset /= 2) value = op(value, g.shfl_xor(value, static_cast<int>(offset)));
  return value;
}

/// Inclusive and exclusive scans over a tile (Hillis-Steele).
template <unsigned _KxN, class _KxT, class Op>
static inline _KxT inclusive_scan(const thread_block_tile<_KxN>& g, _KxT value, Op op) {
  for (unsigned d = 1; d < _KxN; d *= 2) {
    _KxT other = g.shfl_up(value, d);
    if (g.thread_rank() >= d) value = op(value, other);
  }
  return value;
}
template <unsigned _KxN, class _KxT>
static inline _KxT inclusive_scan(const thread_block_tile<_KxN>& g, _KxT value) { return inclusive_scan(g, value, plus<_KxT>()); }
template <unsigned _KxN, class _KxT, class Op>
static inline _KxT exclusive_scan(const thread_block_tile<_KxN>& g, _KxT value, Op op) {
  _KxT incl = inclusive_scan(g, value, op);
  _KxT prev = g.shfl_up(incl, 1);
  return g.thread_rank() == 0 ? _KxT() : prev;
}
template <unsigned _KxN, class _KxT>
static inline _KxT exclusive_scan(const thread_block_tile<_KxN>& g, _KxT value) { return exclusive_scan(g, value, plus<_KxT>()); }

}  // namespace cooperative_groups
