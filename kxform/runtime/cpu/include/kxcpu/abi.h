// The contract between the kernel translation unit and the CPU runtime (host.h).
//
// The kernel TU is compiled on its own (optionally with memory instrumentation for
// sector traces) and linked with the precompiled runtime object, so everything that
// crosses the boundary is declared here, with plain types only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "types.h"

namespace kxcpu {

using u64 = unsigned long long;

/// Warp-collective operations. Every one is a rendezvous of the lanes in its mask.
enum WarpOp : int {
  kSync, kShflIdx, kShflUp, kShflDown, kShflXor, kBallot, kAny, kAll, kActiveMask,
  kMatchAny, kMatchAll, kRedAdd, kRedMinU, kRedMinI, kRedMaxU, kRedMaxI, kRedAnd,
  kRedOr, kRedXor, kWarpOpCount
};

/// Block-barrier flavours: plain, and the reducing `__syncthreads_count/and/or`.
enum BarrierKind : int { kBarPlain, kBarCount, kBarAnd, kBarOr };

/// One lane's arguments to a warp collective. `value` holds the lane's operand bits
/// (zero-extended, `vsize` bytes meaningful); `arg` is the source lane, delta or xor mask.
struct WarpCall {
  u64 mask;
  u64 value;
  int op;
  int arg;
  int width;
  int vsize;
  const char* file;
  int line;
};

/// Runs a warp collective for the calling thread; returns its result bits.
/// `pred_out` (may be null) receives the predicate of `__match_all_sync`.
u64 warp_collective(const WarpCall& call, int* pred_out);

/// `__syncthreads` and its reducing variants; returns the reduced predicate. `site`
/// identifies the textual call (a `__COUNTER__` value, or -1 when only the line is known).
int block_barrier(int kind, int pred, const char* file, int line, int site);

/// Lets the other threads of the block run (spin loops: `__nanosleep`, failed CAS).
void fiber_yield();

/// `__trap()` and friends: reports the location and ends the launch.
[[noreturn]] void device_trap(const char* what, const char* file, int line);

/// Base of the block's dynamic shared memory (`shared_bytes` of the launch).
extern __thread unsigned char* dyn_smem;

}  // namespace kxcpu

// Per-thread and per-block indices. `__thread` (not `thread_local`) keeps them free of
// TLS wrapper calls; the scheduler updates `threadIdx` on every fiber switch.
extern __thread uint3 threadIdx;
extern __thread uint3 blockIdx;
extern __thread dim3 blockDim;
extern __thread dim3 gridDim;

extern "C" {
// Exported by the kernel TU (see launch.h).
void kxcpu_tu_run_thread(void* const* args);
extern const int kxcpu_tu_param_count;
extern const unsigned char* const kxcpu_tu_param_is_ptr;
extern const unsigned* const kxcpu_tu_param_size;
extern const int kxcpu_tu_warp_size;
extern const int kxcpu_tu_traced;
}
