// Argument buffers and the fault handler.
//
// Each buffer gets its own mapping with PROT_NONE pages on both sides and its end
// placed (16-byte aligned) right against the upper guard page, so an out-of-bounds
// access past the end faults instead of silently hitting a neighbour. The fault
// handler names the block, the thread and, when it can, the buffer and the distance.
//
// What the guard pages cannot see (the up to 15 bytes between the end and the guard,
// and the rest of the first page before the start) is covered twice: the kernel unit
// is instrumented so every load and store is checked against its buffer (bounds.h),
// and the slack on both sides is filled with a canary that is checked after the launch
// (writes the instrumentation does not see: atomics, memcpy).
#pragma once

#include <signal.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "report.h"
#include "sched.h"

namespace kxcpu {
namespace host {

/// One argument buffer of the launch.
struct Buffer {
  std::string name, role, path;
  std::size_t bytes = 0;
  unsigned char* data = nullptr;
  unsigned char* map = nullptr;
  std::size_t map_bytes = 0;
};

constexpr std::size_t kBufferAlign = 16;
constexpr unsigned char kCanary = 0xA5;

/// Maps `bytes` (at least one byte's worth) between guard pages; end within 16 bytes
/// of the upper guard, start 16-byte aligned (what float4/int4 loads need).
inline unsigned char* alloc_guarded(std::size_t bytes, unsigned char** map, std::size_t* map_bytes) {
  const std::size_t pg = page_size();
  const std::size_t need = (bytes == 0 ? 1 : bytes) + kBufferAlign;
  const std::size_t data_pages = (need + pg - 1) / pg;
  const std::size_t total = (data_pages + 2) * pg;
  void* m = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* base = static_cast<unsigned char*>(m);
  if (mprotect(base + pg, data_pages * pg, PROT_READ | PROT_WRITE) != 0) return nullptr;
  *map = base;
  *map_bytes = total;
  std::memset(base + pg, kCanary, data_pages * pg);  // the data is loaded over it; the slack keeps it
  auto end = reinterpret_cast<std::uintptr_t>(base + pg + data_pages * pg);
  return reinterpret_cast<unsigned char*>((end - bytes) & ~static_cast<std::uintptr_t>(kBufferAlign - 1));
}

/// The buffers' mappings in a compact form for the bounds checks (bounds.h): one range
/// test rules out every access outside all of them (locals, shared memory, the runtime).
struct BoundsTable {
  struct Range {
    std::uintptr_t map, size, lo, hi;
    const Buffer* buffer;
  };
  static constexpr std::size_t kMax = 256;
  Range ranges[kMax];
  std::size_t count = 0;
  std::uintptr_t lo = 0, span = 0;
};

inline BoundsTable& bounds_table() {
  static BoundsTable t;
  return t;
}

/// Fills the table (before the workers start; never changed while they run).
inline void arm_bounds(const std::vector<Buffer>& bufs) {
  BoundsTable& t = bounds_table();
  std::uintptr_t lo = ~static_cast<std::uintptr_t>(0), hi = 0;
  t.count = 0;
  for (const Buffer& b : bufs) {
    if (t.count == BoundsTable::kMax) break;
    const auto map = reinterpret_cast<std::uintptr_t>(b.map), data = reinterpret_cast<std::uintptr_t>(b.data);
    t.ranges[t.count++] = {map, b.map_bytes, data, data + b.bytes, &b};
    lo = map < lo ? map : lo;
    hi = map + b.map_bytes > hi ? map + b.map_bytes : hi;
  }
  t.lo = lo;
  t.span = hi > lo ? hi - lo : 0;
}

/// After the launch: the first canary byte of any buffer's slack that was overwritten
/// is an out-of-bounds write (fails the run with the buffer and the byte offset).
inline void check_canaries(const std::vector<Buffer>& bufs) {
  const std::size_t pg = page_size();
  for (const Buffer& b : bufs) {
    const unsigned char* lo = b.map + pg;
    const unsigned char* hi = b.map + b.map_bytes - pg;
    const unsigned char* end = b.data + b.bytes;
    const unsigned char* hit = nullptr;
    for (const unsigned char* p = b.data; p > lo && hit == nullptr;) {  // nearest the start first
      --p;
      if (*p != kCanary) hit = p;
    }
    for (const unsigned char* p = end; p < hi && hit == nullptr; ++p)
      if (*p != kCanary) hit = p;
    if (hit != nullptr)
      fail(kExitFault, "out-of-bounds write at byte offset %lld of buffer '%s' (%zu bytes), found after the launch "
           "(a write the bounds checks do not see, such as an atomic or memcpy)",
           static_cast<long long>(hit - b.data), b.name.c_str(), b.bytes);
  }
}

/// Describes where `addr` lies relative to the buffers ("4 bytes past the end of 'y'").
inline void describe_address(Text& t, const std::vector<Buffer>& bufs, std::uintptr_t addr) {
  for (const Buffer& b : bufs) {
    auto lo = reinterpret_cast<std::uintptr_t>(b.data), hi = lo + b.bytes;
    auto mlo = reinterpret_cast<std::uintptr_t>(b.map), mhi = mlo + b.map_bytes;
    if (addr < mlo || addr >= mhi) continue;
    const long long offset = static_cast<long long>(addr) - static_cast<long long>(lo);
    if (addr >= hi || addr < lo)
      t.add(": out-of-bounds access at byte offset %lld of buffer '%s' (%zu bytes)", offset, b.name.c_str(), b.bytes);
    else
      t.add(": at byte offset %lld of buffer '%s' (%zu bytes)", offset, b.name.c_str(), b.bytes);
    return;
  }
  t.add(": address 0x%llx is outside every argument buffer", static_cast<unsigned long long>(addr));
}

/// Buffers of the running launch, for the fault handler (set before workers start).
inline const std::vector<Buffer>*& fault_buffers() {
  static const std::vector<Buffer>* b = nullptr;
  return b;
}

inline void on_fault(int sig, siginfo_t* info, void*) {
  Text t;
  const char* what = sig == SIGSEGV ? "invalid memory access (segmentation fault)"
                     : sig == SIGBUS ? "misaligned or invalid memory access (bus error)"
                     : sig == SIGFPE ? "arithmetic exception (integer division by zero?)"
                     : sig == SIGILL ? "illegal instruction"
                     : "abort";
  t.add("%s", what);
  Worker* w = t_worker;
  const Fiber* f = w != nullptr ? w->current() : nullptr;
  if (f != nullptr)
    t.add(" in thread (%u,%u,%u) of block (%u,%u,%u)", f->tid.x, f->tid.y, f->tid.z, blockIdx.x, blockIdx.y, blockIdx.z);
  if (sig == SIGSEGV || sig == SIGBUS) {
    if (w != nullptr && w->stack_guard_hit(info->si_addr)) t.add(": stack overflow (a thread used more than its fiber stack; raise stack_kib)");
    else if (fault_buffers() != nullptr) describe_address(t, *fault_buffers(), reinterpret_cast<std::uintptr_t>(info->si_addr));
  }
  fail(sig == SIGABRT ? kExitTrap : kExitFault, "%s", t.c_str());
}

/// Gives the calling OS thread an alternate signal stack (a fiber's stack may be the
/// one that overflowed) and installs the fault handler.
inline void install_fault_handler() {
  static thread_local std::vector<unsigned char> alt(1 << 16);
  stack_t ss{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = &on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace host
}  // namespace kxcpu
