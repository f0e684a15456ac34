// Fibers: one lightweight execution context per GPU thread of a block.
//
// On x86-64 a context switch is a hand-written save/restore of the callee-saved
// registers and the stack pointer (a few nanoseconds, no system call); elsewhere the
// portable ucontext fallback is used (slower: swapcontext makes a sigprocmask system
// call per switch). MXCSR and the x87 control word are not switched: device code never
// changes them, so every fiber shares the worker's floating-point environment.
// Defining KXCPU_PORTABLE_FIBERS selects the ucontext path on x86-64 as well.
#pragma once

#if defined(__x86_64__) && !defined(KXCPU_PORTABLE_FIBERS)
#define KXCPU_ASM_FIBERS 1
#endif

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

#if !defined(KXCPU_ASM_FIBERS)
#include <ucontext.h>
#endif

namespace kxcpu {
namespace host {

/// A fiber stack: `size` usable bytes above a PROT_NONE guard page, so that a stack
/// overflow faults (and is reported) instead of corrupting the neighbouring stack.
struct Stack {
  unsigned char* guard = nullptr;
  unsigned char* lo = nullptr;
  std::size_t size = 0;
  std::size_t color = 0;  // bytes left unused at the top (see alloc_stacks)
};

inline std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

/// Carves `count` guarded stacks of `bytes` each out of one lazily committed mapping.
inline bool alloc_stacks(Stack* out, int count, std::size_t bytes) {
  const std::size_t pg = page_size();
  bytes = (bytes + pg - 1) / pg * pg;
  const std::size_t each = bytes + pg;
  void* m = mmap(nullptr, each * static_cast<std::size_t>(count), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return false;
  auto* base = static_cast<unsigned char*>(m);
  for (int i = 0; i < count; ++i) {
    unsigned char* g = base + each * static_cast<std::size_t>(i);
    if (mprotect(g, pg, PROT_NONE) != 0) return false;
    // Stack tops at equal page offsets would all fall into the same L1 cache sets and
    // evict each other at every switch; staggering them by a few cache lines avoids it.
    out[i] = Stack{g, g + pg, bytes, static_cast<std::size_t>(i % 32) * 128};
  }
  return true;
}

inline bool in_guard(const Stack& s, const void* addr) {
  auto a = reinterpret_cast<std::uintptr_t>(addr), g = reinterpret_cast<std::uintptr_t>(s.guard);
  return a >= g && a < g + page_size();
}

#if defined(KXCPU_ASM_FIBERS)

extern "C" void kxcpu_ctx_switch(void** save_sp, void* next_sp);
extern "C" void kxcpu_ctx_start();
extern "C" [[noreturn]] void kxcpu_fiber_main(void* arg);

/// Saved state of a suspended context: its stack pointer (registers live on its stack).
struct Context {
  void* sp = nullptr;
};

/// Prepares `ctx` to start `kxcpu_fiber_main(arg)` on `stack` at the next switch.
inline void make_context(Context& ctx, const Stack& stack, void* arg) {
  auto top = reinterpret_cast<std::uintptr_t>(stack.lo + stack.size - stack.color) & ~static_cast<std::uintptr_t>(15);
  auto* slot = reinterpret_cast<void**>(top - 8);  // return address: after `ret`, rsp == top
  *slot = reinterpret_cast<void*>(&kxcpu_ctx_start);
  void** regs = slot - 6;  // r15 r14 r13 r12 rbx rbp, popped in that order
  for (int i = 0; i < 6; ++i) regs[i] = nullptr;
  regs[3] = arg;  // r12
  ctx.sp = regs;
}

inline void switch_context(Context& from, Context& to) { kxcpu_ctx_switch(&from.sp, to.sp); }

#else

extern "C" [[noreturn]] void kxcpu_fiber_main(void* arg);

struct Context {
  ucontext_t uc;
};

inline void kxcpu_uc_entry(unsigned hi, unsigned lo) {
  kxcpu_fiber_main(reinterpret_cast<void*>((static_cast<std::uintptr_t>(hi) << 32) | lo));
}

inline void make_context(Context& ctx, const Stack& stack, void* arg) {
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stack.lo;
  ctx.uc.uc_stack.ss_size = stack.size - stack.color;
  ctx.uc.uc_link = nullptr;
  auto a = reinterpret_cast<std::uintptr_t>(arg);
  makecontext(&ctx.uc, reinterpret_cast<void (*)()>(&kxcpu_uc_entry), 2,
              static_cast<unsigned>(a >> 32), static_cast<unsigned>(a & 0xffffffffu));
}

inline void switch_context(Context& from, Context& to) { swapcontext(&from.uc, &to.uc); }

#endif

}  // namespace host
}  // namespace kxcpu

#if defined(KXCPU_ASM_FIBERS)
// kxcpu_ctx_switch(save_sp, next_sp): pushes the callee-saved registers, stores rsp in
// *save_sp, loads next_sp and pops the next context's registers; `ret` resumes it.
// kxcpu_ctx_start: first entry of a fresh fiber; its argument arrives in r12.
__asm__(
    ".text\n"
    ".globl kxcpu_ctx_switch\n"
    ".type kxcpu_ctx_switch,@function\n"
    "kxcpu_ctx_switch:\n"
    "  pushq %rbp\n"
    "  pushq %rbx\n"
    "  pushq %r12\n"
    "  pushq %r13\n"
    "  pushq %r14\n"
    "  pushq %r15\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  popq %r15\n"
    "  popq %r14\n"
    "  popq %r13\n"
    "  popq %r12\n"
    "  popq %rbx\n"
    "  popq %rbp\n"
    "  ret\n"
    ".size kxcpu_ctx_switch,.-kxcpu_ctx_switch\n"
    ".globl kxcpu_ctx_start\n"
    ".type kxcpu_ctx_start,@function\n"
    "kxcpu_ctx_start:\n"
    "  movq %r12, %rdi\n"
    "  call kxcpu_fiber_main\n"
    "  ud2\n"
    ".size kxcpu_ctx_start,.-kxcpu_ctx_start\n");
#endif
