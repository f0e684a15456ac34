// Bounds checks of every load and store the kernel unit makes to an argument buffer.
//
// Untraced kernel units are compiled with GCC's (or clang's) kernel-address
// instrumentation in callback mode and no sanitizer runtime: the compiler calls
// __asan_loadN_noabort / __asan_storeN_noabort before each memory access, and this file
// provides them. An access that lands in a buffer's mapping but outside its bytes
// (the slack the guard pages leave: before the start, and up to 15 bytes past the end)
// stops the launch with the buffer, the byte offset and the thread. Accesses elsewhere
// (locals, shared memory, the runtime's own data) cost one range test per buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory.h"

namespace kxcpu {
namespace host {

[[noreturn]] __attribute__((noinline, cold)) inline void report_out_of_bounds(const Buffer& b, std::uintptr_t a,
                                                                            std::size_t n, bool write) {
  Text t;
  t.add("out-of-bounds %s of %zu byte%s at byte offset %lld of buffer '%s' (%zu bytes)", write ? "write" : "read",
        n, n == 1 ? "" : "s", static_cast<long long>(a) - static_cast<long long>(reinterpret_cast<std::uintptr_t>(b.data)),
        b.name.c_str(), b.bytes);
  Worker* w = t_worker;
  const Fiber* f = w != nullptr ? w->current() : nullptr;
  if (f != nullptr)
    t.add(" in thread (%u,%u,%u) of block (%u,%u,%u)", f->tid.x, f->tid.y, f->tid.z, blockIdx.x, blockIdx.y, blockIdx.z);
  fail(kExitFault, "%s", t.c_str());
}

/// Fails the launch when [a, a + n) touches a buffer's mapping outside the buffer.
__attribute__((hot)) inline void check_access(std::uintptr_t a, std::size_t n, bool write) {
  const BoundsTable& t = bounds_table();
  if (__builtin_expect(a - t.lo >= t.span, 1)) return;
  for (std::size_t i = 0; i < t.count; ++i) {
    const BoundsTable::Range& r = t.ranges[i];
    if (a - r.map >= r.size) continue;
    if (__builtin_expect(a < r.lo || a + n > r.hi, 0)) report_out_of_bounds(*r.buffer, a, n, write);
    return;
  }
}

/// What the alignment instrumentation passes for a misaligned typed access (the layout
/// GCC and clang share for `__ubsan_handle_type_mismatch_v1`).
struct UbsanLocation {
  const char* file;
  unsigned line, column;
};
struct UbsanType {
  unsigned short kind, info;
  char name[1];
};
struct UbsanMismatch {
  UbsanLocation where;
  const UbsanType* type;
  unsigned char log_alignment;
  unsigned char check_kind;  // 0 load, 1 store, 2 reference binding, 3 member access, ...
};

/// A typed access at an address its type's alignment does not allow: the GPU faults
/// (misaligned address), so the launch fails, naming the buffer and the thread.
[[noreturn]] __attribute__((noinline, cold)) inline void report_misaligned(const UbsanMismatch* d, std::uintptr_t a) {
  Text t;
  const char* what = d->check_kind == 1 ? "store" : d->check_kind == 0 ? "load" : "access";
  t.add("misaligned address: a %s of %s (alignment %u) at address 0x%llx", what, d->type ? d->type->name : "?",
        1u << d->log_alignment, static_cast<unsigned long long>(a));
  const BoundsTable& table = bounds_table();
  for (std::size_t i = 0; i < table.count; ++i) {
    const BoundsTable::Range& r = table.ranges[i];
    if (a - r.map < r.size)
      t.add(", byte offset %lld of buffer '%s'",
            static_cast<long long>(a) - static_cast<long long>(reinterpret_cast<std::uintptr_t>(r.buffer->data)),
            r.buffer->name.c_str());
  }
  if (d->where.file != nullptr) t.add(" at %s:%u", d->where.file, d->where.line);
  Worker* w = t_worker;
  const Fiber* f = w != nullptr ? w->current() : nullptr;
  if (f != nullptr)
    t.add(" in thread (%u,%u,%u) of block (%u,%u,%u)", f->tid.x, f->tid.y, f->tid.z, blockIdx.x, blockIdx.y, blockIdx.z);
  t.add("; the GPU faults on it (a vector access needs an address that is a multiple of its size)");
  fail(kExitFault, "%s", t.c_str());
}

}  // namespace host
}  // namespace kxcpu

extern "C" {
void __ubsan_handle_type_mismatch_v1(kxcpu::host::UbsanMismatch* d, std::uintptr_t p) {
  kxcpu::host::report_misaligned(d, p);
}
void __ubsan_handle_type_mismatch_v1_abort(kxcpu::host::UbsanMismatch* d, std::uintptr_t p) {
  kxcpu::host::report_misaligned(d, p);
}
#define KXCPU_BOUNDS_HOOK(_KxN)                                                                         \
  void __asan_load##_KxN##_noabort(std::uintptr_t p) { kxcpu::host::check_access(p, _KxN, false); }         \
  void __asan_store##_KxN##_noabort(std::uintptr_t p) { kxcpu::host::check_access(p, _KxN, true); }
KXCPU_BOUNDS_HOOK(1)
KXCPU_BOUNDS_HOOK(2)
KXCPU_BOUNDS_HOOK(4)
KXCPU_BOUNDS_HOOK(8)
KXCPU_BOUNDS_HOOK(16)
#undef KXCPU_BOUNDS_HOOK
void __asan_loadN_noabort(std::uintptr_t p, std::size_t n) { kxcpu::host::check_access(p, n, false); }
void __asan_storeN_noabort(std::uintptr_t p, std::size_t n) { kxcpu::host::check_access(p, n, true); }
// Bookkeeping the instrumentation may also call; nothing to do without redzones.
void __asan_handle_no_return() {}
void __asan_before_dynamic_init(const char*) {}
void __asan_after_dynamic_init() {}
void __asan_register_globals(void*, std::size_t) {}
void __asan_unregister_globals(void*, std::size_t) {}
void __asan_alloca_poison(std::uintptr_t, std::size_t) {}
void __asan_allocas_unpoison(std::uintptr_t, std::uintptr_t) {}
void __asan_poison_stack_memory(std::uintptr_t, std::size_t) {}
void __asan_unpoison_stack_memory(std::uintptr_t, std::size_t) {}
}
