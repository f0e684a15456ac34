// Sector tracing of library copies (trace builds only).
//
// The compiler's thread-sanitizer instrumentation reports every load and store of the
// kernel, but calls to memcpy/memset/memmove are left to the sanitizer runtime's
// interceptors, which we do not link. These wrappers report the byte ranges instead.
#pragma once

#include <cstring>

extern "C" void __tsan_read_range(void* addr, unsigned long size);
extern "C" void __tsan_write_range(void* addr, unsigned long size);

static inline void* kxcpu_traced_memcpy(void* d, const void* s, size_t n) {
  __tsan_read_range(const_cast<void*>(s), n);
  __tsan_write_range(d, n);
  return __builtin_memcpy(d, s, n);
}
static inline void* kxcpu_traced_memmove(void* d, const void* s, size_t n) {
  __tsan_read_range(const_cast<void*>(s), n);
  __tsan_write_range(d, n);
  return __builtin_memmove(d, s, n);
}
static inline void* kxcpu_traced_memset(void* d, int c, size_t n) {
  __tsan_write_range(d, n);
  return __builtin_memset(d, c, n);
}
namespace std {
using ::kxcpu_traced_memcpy;
using ::kxcpu_traced_memmove;
using ::kxcpu_traced_memset;
}  // namespace std
#define memcpy kxcpu_traced_memcpy
#define memmove kxcpu_traced_memmove
#define memset kxcpu_traced_memset
