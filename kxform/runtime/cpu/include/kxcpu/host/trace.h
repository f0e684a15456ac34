// Exact 32-byte-sector traces of global-memory accesses, per traced block, and the
// watch of a launch (extents touched, reads of `out` buffers before any write).
//
// Trace builds compile the kernel TU with GCC's -fsanitize=thread instrumentation but
// link no sanitizer runtime: the compiler then calls __tsan_readN/__tsan_writeN (and
// atomic and range variants) for every memory access of the kernel, and this file
// provides those entry points. They record an access only while a traced block runs
// on the calling worker and only when it falls inside an argument buffer, so untraced
// blocks pay one thread-local load and a branch per access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kxcpu {
namespace host {

constexpr std::size_t kSectorBytes = 32;

/// Sector bitsets of one buffer for one block.
struct BufferTrace {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  std::vector<std::uint64_t> reads, writes;
};

/// Everything one traced block touched, buffer by buffer (argument order). [lo, lo + span)
/// covers every buffer: accesses outside it (locals, shared memory) are rejected at once.
struct BlockTrace {
  unsigned x = 0, y = 0, z = 0;
  std::vector<BufferTrace> buffers;
  std::uintptr_t lo = 0, span = 0;
};

/// The trace being recorded on this worker (null while an untraced block runs).
extern __thread BlockTrace* t_trace;

inline void mark(std::vector<std::uint64_t>& bits, std::size_t first, std::size_t last) {
  for (std::size_t s = first; s <= last; ++s) bits[s >> 6] |= 1ull << (s & 63);
}

/// Marks the sectors of [addr, addr + n) in every buffer the range overlaps. Kept out
/// of line: the hundred-odd hooks below then compile to a load, a test and a call.
__attribute__((noinline)) inline void record_slow(BlockTrace* t, std::uintptr_t a, std::size_t n, bool write) {
  for (BufferTrace& b : t->buffers) {
    if (a - b.base < b.size || (a < b.base && a + n > b.base)) {
      std::size_t lo = a < b.base ? 0 : a - b.base;
      std::size_t hi = a + n - b.base;  // one past the last byte
      if (hi > b.size) hi = b.size;
      mark(write ? b.writes : b.reads, lo / kSectorBytes, (hi - 1) / kSectorBytes);
    }
  }
}

/// One argument buffer under watch (`LaunchRequest.watch`): the extent the kernel
/// touched, and for `out` buffers (poisoned) which bytes were written so far and the
/// first read of a byte nothing had written yet, with the reading instruction's address.
struct Watched {
  std::uintptr_t base = 0;
  std::size_t size = 0;
  bool poisoned = false;
  std::vector<unsigned char> written;  // one flag per byte (poisoned buffers only)
  std::size_t extent = 0;              // one past the highest byte touched
  int reported = 0;
  std::size_t first_offset = 0;
  const void* first_pc = nullptr;
};

/// The watched buffers (empty unless the launch asked for a watch).
extern std::vector<Watched> g_watched;

/// The bounds check of every access (host/bounds.h, in the same host object): a watched
/// unit is instrumented for the watch, not with kernel-address hooks, so its accesses
/// are checked here.
inline void check_access(std::uintptr_t a, std::size_t n, bool write);

/// Extent and read-before-write bookkeeping of one access. Flags are plain bytes updated
/// with relaxed atomics: blocks run concurrently, and a race between two blocks on one
/// element is a race in the kernel too.
__attribute__((noinline)) inline void watch_slow(std::uintptr_t a, std::size_t n, bool write, const void* pc) {
  for (Watched& w : g_watched) {
    if (a + n <= w.base || a >= w.base + w.size) continue;
    std::size_t lo = a < w.base ? 0 : a - w.base;
    std::size_t hi = a + n - w.base;
    if (hi > w.size) hi = w.size;
    std::size_t seen = __atomic_load_n(&w.extent, __ATOMIC_RELAXED);
    while (seen < hi && !__atomic_compare_exchange_n(&w.extent, &seen, hi, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    if (!w.poisoned) continue;
    if (write) {
      for (std::size_t i = lo; i < hi; ++i) __atomic_store_n(&w.written[i], 1, __ATOMIC_RELAXED);
      continue;
    }
    for (std::size_t i = lo; i < hi; ++i) {
      if (__atomic_load_n(&w.written[i], __ATOMIC_RELAXED)) continue;
      int expected = 0;
      if (__atomic_compare_exchange_n(&w.reported, &expected, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        w.first_offset = i;
        w.first_pc = pc;
      }
      break;
    }
  }
}

/// Records the byte range [addr, addr + n) as read or written by the running thread:
/// in the traced block's sector sets, and in the watch. `pc` is the accessing instruction.
inline void record(const volatile void* addr, std::size_t n, bool write, const void* pc) {
  BlockTrace* t = t_trace;
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  if (__builtin_expect(t != nullptr && n != 0, 0)) {
    if (a - t->lo < t->span || (a < t->lo && a + n > t->lo)) record_slow(t, a, n, write);
  }
  if (__builtin_expect(!g_watched.empty() && n != 0, 0)) {
    check_access(a, n, write);
    watch_slow(a, n, write, pc);
  }
}

}  // namespace host
}  // namespace kxcpu

// ------------------------------------------------------------- instrumentation hooks
// Signatures follow the sanitizer interface (tsan_interface.h / tsan_interface_atomic.h).
// Atomics must really happen here: the instrumented code calls these instead of
// issuing the atomic instruction itself.
extern "C" {
#define KXCPU_PC __builtin_return_address(0)
#define KXCPU_RW(_KxN)                                                                                     \
  void __tsan_read##_KxN(void* p) { kxcpu::host::record(p, _KxN, false, KXCPU_PC); }                        \
  void __tsan_write##_KxN(void* p) { kxcpu::host::record(p, _KxN, true, KXCPU_PC); }                        \
  void __tsan_unaligned_read##_KxN(void* p) { kxcpu::host::record(p, _KxN, false, KXCPU_PC); }              \
  void __tsan_unaligned_write##_KxN(void* p) { kxcpu::host::record(p, _KxN, true, KXCPU_PC); }              \
  void __tsan_volatile_read##_KxN(void* p) { kxcpu::host::record(p, _KxN, false, KXCPU_PC); }               \
  void __tsan_volatile_write##_KxN(void* p) { kxcpu::host::record(p, _KxN, true, KXCPU_PC); }               \
  void __tsan_unaligned_volatile_read##_KxN(void* p) { kxcpu::host::record(p, _KxN, false, KXCPU_PC); }     \
  void __tsan_unaligned_volatile_write##_KxN(void* p) { kxcpu::host::record(p, _KxN, true, KXCPU_PC); }     \
  void __tsan_read##_KxN##_pc(void* p, void*) { kxcpu::host::record(p, _KxN, false, KXCPU_PC); }            \
  void __tsan_write##_KxN##_pc(void* p, void*) { kxcpu::host::record(p, _KxN, true, KXCPU_PC); }
KXCPU_RW(1)
KXCPU_RW(2)
KXCPU_RW(4)
KXCPU_RW(8)
KXCPU_RW(16)
#undef KXCPU_RW
void __tsan_read_range(void* p, unsigned long n) { kxcpu::host::record(p, n, false, KXCPU_PC); }
void __tsan_write_range(void* p, unsigned long n) { kxcpu::host::record(p, n, true, KXCPU_PC); }
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#define KXCPU_ATOMICS(BITS, _KxT)                                                                        \
  _KxT __tsan_atomic##BITS##_load(const volatile _KxT* a, int) {                                         \
    kxcpu::host::record(a, sizeof(_KxT), false, KXCPU_PC);                                                       \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                 \
  void __tsan_atomic##BITS##_store(volatile _KxT* a, _KxT v, int) {                                       \
    kxcpu::host::record(a, sizeof(_KxT), true, KXCPU_PC);                                                        \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                       \
  }                                                                                                 \
  _KxT __tsan_atomic##BITS##_exchange(volatile _KxT* a, _KxT v, int) { /* a write first: the watch sees no read */ \
    kxcpu::host::record(a, sizeof(_KxT), true, KXCPU_PC);                                                        \
    kxcpu::host::record(a, sizeof(_KxT), false, KXCPU_PC);                                                       \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                             \
  }                                                                                                 \
  KXCPU_ATOMIC_RMW(BITS, _KxT, fetch_add, __atomic_fetch_add)                                          \
  KXCPU_ATOMIC_RMW(BITS, _KxT, fetch_sub, __atomic_fetch_sub)                                          \
  KXCPU_ATOMIC_RMW(BITS, _KxT, fetch_and, __atomic_fetch_and)                                          \
  KXCPU_ATOMIC_RMW(BITS, _KxT, fetch_or, __atomic_fetch_or)                                            \
  KXCPU_ATOMIC_RMW(BITS, _KxT, fetch_xor, __atomic_fetch_xor)                                          \
  KXCPU_ATOMIC_RMW(BITS, _KxT, fetch_nand, __atomic_fetch_nand)                                        \
  int __tsan_atomic##BITS##_compare_exchange_strong(volatile _KxT* a, _KxT* c, _KxT v, int, int) {          \
    kxcpu::host::record(a, sizeof(_KxT), false, KXCPU_PC);                                                       \
    kxcpu::host::record(a, sizeof(_KxT), true, KXCPU_PC);                                                        \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);         \
  }                                                                                                 \
  int __tsan_atomic##BITS##_compare_exchange_weak(volatile _KxT* a, _KxT* c, _KxT v, int, int) {            \
    return __tsan_atomic##BITS##_compare_exchange_strong(a, c, v, 0, 0);                            \
  }                                                                                                 \
  _KxT __tsan_atomic##BITS##_compare_exchange_val(volatile _KxT* a, _KxT c, _KxT v, int, int) {                \
    __tsan_atomic##BITS##_compare_exchange_strong(a, &c, v, 0, 0);                                  \
    return c;                                                                                       \
  }
#define KXCPU_ATOMIC_RMW(BITS, _KxT, NAME, BUILTIN)                                                      \
  _KxT __tsan_atomic##BITS##_##NAME(volatile _KxT* a, _KxT v, int) {                                         \
    kxcpu::host::record(a, sizeof(_KxT), false, KXCPU_PC);                                                       \
    kxcpu::host::record(a, sizeof(_KxT), true, KXCPU_PC);                                                        \
    return BUILTIN(a, v, __ATOMIC_SEQ_CST);                                                         \
  }
KXCPU_ATOMICS(8, char)
KXCPU_ATOMICS(16, short)
KXCPU_ATOMICS(32, int)
KXCPU_ATOMICS(64, long long)
#undef KXCPU_ATOMICS
#undef KXCPU_ATOMIC_RMW
#undef KXCPU_PC
}
