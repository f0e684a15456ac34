// Shadow of CUDA's <cuda_pipeline_primitives.h> for the kxform CPU runtime: asynchronous
// copies to shared memory, made when the issuing thread waits for them (kxcpu/pipeline.h).
#pragma once
#include "kxcpu/device.h"
#include "kxcpu/pipeline.h"

static inline void __pipeline_memcpy_async(void* __restrict__ dst_shared, const void* __restrict__ src_global,
                                           size_t size_and_align, size_t zfill = 0, KXCPU_SITE) {
  if (size_and_align != 4 && size_and_align != 8 && size_and_align != 16)
    kxcpu::device_trap("__pipeline_memcpy_async: the size must be 4, 8 or 16 bytes", kx_file, kx_line);
  if (zfill > size_and_align)
    kxcpu::device_trap("__pipeline_memcpy_async: zero fill larger than the copy", kx_file, kx_line);
  if ((reinterpret_cast<std::uintptr_t>(dst_shared) | reinterpret_cast<std::uintptr_t>(src_global)) %
          size_and_align != 0)
    kxcpu::device_trap("misaligned address: __pipeline_memcpy_async needs both addresses aligned to its size",
                       kx_file, kx_line);
  kxcpu::thread_pipeline().copies.push_back(
      kxcpu::AsyncCopy{dst_shared, src_global, static_cast<unsigned>(size_and_align), static_cast<unsigned>(zfill)});
}

static inline void __pipeline_commit() {
  kxcpu::ThreadPipeline& p = kxcpu::thread_pipeline();
  p.groups.push_back(p.copies.size());
}

/// Waits until at most `prior` of the most recently committed groups are still in
/// flight: the older groups' copies are made now. Copies not yet committed stay pending.
static inline void __pipeline_wait_prior(size_t prior) {
  kxcpu::ThreadPipeline& p = kxcpu::thread_pipeline();
  while (p.groups.size() > prior) {
    for (; p.made < p.groups.front(); ++p.made) kxcpu::make_copy(p.copies[p.made]);
    p.groups.pop_front();
  }
  if (p.made > 0) {  // forget the copies made; the groups' ends move with them
    p.copies.erase(p.copies.begin(), p.copies.begin() + static_cast<std::ptrdiff_t>(p.made));
    for (std::size_t& end : p.groups) end -= p.made;
    p.made = 0;
  }
}
