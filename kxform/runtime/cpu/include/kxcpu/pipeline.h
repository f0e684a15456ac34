// Asynchronous copies into shared memory: `__pipeline_memcpy_async`, `__pipeline_commit`
// and `__pipeline_wait_prior` (<cuda_pipeline_primitives.h>, cp.async on sm_80+).
//
// On the GPU a copy lands at some time between its issue and the `wait_prior` that
// covers its group; reading the destination earlier is a bug the hardware may or may not
// show. Here a copy is only recorded when issued and made when the issuing thread waits
// for its group, the latest moment the hardware allows, so a read before the wait (or a
// wait for too few groups) sees the destination's old bytes, every time. Each thread
// (fiber) keeps its own queue, found by its linear index in the block; the entry point
// clears it when the thread starts (KXCPU_THREAD_START, redefined below: units that do not
// include <cuda_pipeline_primitives.h> pay nothing), so nothing issued by an earlier block
// or launch is made later. The source is read when the copy is made, through instrumented loads of
// four bytes (or one, for a ragged size), so an out-of-bounds source is reported like
// any other read. Sizes, zero fill and alignment are checked as the hardware requires
// (a misaligned cp.async faults).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace kxcpu {

struct AsyncCopy {
  void* dst;
  const void* src;
  unsigned size;   // bytes written to dst
  unsigned fill;   // trailing bytes of dst written with zeros instead of read from src
};

struct ThreadPipeline {
  std::vector<AsyncCopy> copies;    // issued and not yet made, oldest first
  std::size_t made = 0;             // copies[0, made) are made
  std::deque<std::size_t> groups;   // end (in copies) of each committed group not yet made
};

static inline std::vector<ThreadPipeline>& block_pipelines() {
  static thread_local std::vector<ThreadPipeline> pipelines;  // one per thread of the running block
  return pipelines;
}

static inline unsigned linear_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

static inline ThreadPipeline& thread_pipeline() {
  std::vector<ThreadPipeline>& all = block_pipelines();
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  if (all.size() < threads) all.resize(threads);
  return all[linear_thread()];
}

/// Called by the entry point as each thread starts: nothing issued before is made later.
static inline void pipeline_thread_start() {
  std::vector<ThreadPipeline>& all = block_pipelines();
  const unsigned t = linear_thread();
  if (t < all.size()) all[t] = ThreadPipeline{};
}

static inline void make_copy(const AsyncCopy& c) {
  unsigned char* d = static_cast<unsigned char*>(c.dst);
  const unsigned char* s = static_cast<const unsigned char*>(c.src);
  const unsigned read = c.size - c.fill;
  unsigned n = 0;
  for (; n + 4 <= read; n += 4) {  // four-byte loads: the bounds hook sees each one
    std::uint32_t word = *reinterpret_cast<const volatile std::uint32_t*>(s + n);
    *reinterpret_cast<std::uint32_t*>(d + n) = word;
  }
  for (; n < read; ++n) d[n] = *reinterpret_cast<const volatile unsigned char*>(s + n);
  for (; n < c.size; ++n) d[n] = 0;
}

}  // namespace kxcpu

#undef KXCPU_THREAD_START
#define KXCPU_THREAD_START() ::kxcpu::pipeline_thread_start()
