// The block scheduler: runs every thread of a block as a fiber on one worker thread.
//
// Fibers run one at a time until they block (barrier, warp collective, yield) or exit;
// a blocking fiber switches straight to the next ready one, so a barrier phase of a
// block of N threads costs N context switches. The last thread to arrive at a barrier
// (or to complete a warp collective) releases the others and carries on without a
// switch. When no fiber is ready but some have not finished, the block can never
// finish: the scheduler reports who waits where instead of hanging.
//
// The order in which ready threads run is the launch's schedule: thread order (the
// default), reverse, a seeded random permutation per block, or one warp delayed behind
// the others (it runs only when no other thread can). A program that is correct on the GPU gives the same result in every order;
// one that reads what another thread writes without a barrier or `__syncwarp` between
// them (a race) depends on it, so verification runs a rewrite in the other orders too.
#pragma once

#include <cstdint>
#include <vector>

#include "../abi.h"
#include "fiber.h"
#include "report.h"
#include "trace.h"

namespace kxcpu {
namespace host {

enum FiberState : unsigned char { kReady, kAtBarrier, kAtWarp, kDone };

/// One GPU thread.
struct Fiber {
  Context ctx;
  uint3 tid{0, 0, 0};
  unsigned linear = 0;
  unsigned char state = kReady;
  u64 in_value = 0, out_value = 0;  // warp collective operand and result
  int in_arg = 0, in_width = 0, out_pred = 0;
};

/// Lanes of one warp that wait in one collective (keyed by the mask they passed).
struct WarpGroup {
  u64 mask, arrived;
  int op;
  const char* file;
  int line;
};

struct Warp {
  u64 exist = 0, live = 0;  // lanes the block has / lanes not yet exited
  std::vector<WarpGroup> groups;
};

/// The order ready threads run in (`order` in the manifest).
enum Schedule : unsigned char { kForward, kReverse, kRandom, kDelayWarp };

/// Launch-wide, read-only while blocks run.
struct Launch {
  dim3 grid, block;
  unsigned nthreads = 0;
  int warp_size = 32;
  std::size_t shared_bytes = 0, stack_bytes = 0;
  Schedule schedule = kForward;
  unsigned long long seed = 0;  // kRandom: the permutation's seed; kDelayWarp: the warp delayed
};

class Worker {
 public:
  explicit Worker(const Launch& launch);
  void run_block(unsigned long long linear, BlockTrace* trace);
  int barrier(int kind, int pred, const char* file, int line, int site);
  u64 warp_op(const WarpCall& c, int* pred_out);
  void yield();
  [[noreturn]] void exit_current();
  const Fiber* current() const { return cur_; }
  bool stack_guard_hit(const void* addr) const;

 private:
  // Ring buffers of ready fibers; every fiber is queued at most once, so n + 1 slots do.
  // The delayed warp (kDelayWarp) waits in a queue of its own that runs only when no other
  // fiber is ready: it is held back across every warp collective and wait of the others.
  void push(Fiber* f) {
    const bool late = L_.schedule == kDelayWarp && f->linear / static_cast<unsigned>(L_.warp_size) == late_warp_;
    std::vector<Fiber*>& q = late ? late_ : queue_;
    std::size_t& tail = late ? ltail_ : qtail_;
    q[tail] = f;
    if (++tail == q.size()) tail = 0;
  }
  Fiber* pop() {
    const bool late = qhead_ == qtail_;
    std::vector<Fiber*>& q = late ? late_ : queue_;
    std::size_t &head = late ? lhead_ : qhead_, &tail = late ? ltail_ : qtail_;
    if (head == tail) return nullptr;
    Fiber* f = q[head];
    if (++head == q.size()) head = 0;
    return f;
  }
  bool idle() const { return qhead_ == qtail_ && lhead_ == ltail_; }
  void switch_away(Fiber* from);
  void arrange(unsigned long long linear);
  void complete(unsigned warp, std::size_t group);
  void compute(const WarpGroup& g, Fiber* lanes);
  [[noreturn]] void diagnose_deadlock();

  const Launch& L_;
  std::vector<Fiber> fibers_;
  std::vector<Stack> stacks_;
  std::vector<Warp> warps_;
  std::vector<Fiber*> queue_, late_;
  unsigned late_warp_ = 0;
  std::size_t lhead_ = 0, ltail_ = 0;
  std::vector<unsigned> order_;                  // the block's threads in the order they run
  std::vector<std::vector<unsigned>> lanes_;     // per warp, its lanes in that order
  std::size_t qhead_ = 0, qtail_ = 0;
  Context sched_;
  Fiber* cur_ = nullptr;
  unsigned done_ = 0, exited_ = 0, bar_arrived_ = 0;
  int bar_kind_ = 0, bar_accum_ = 0, bar_line_ = 0, bar_site_ = -1;
  const char* bar_file_ = "";
  const Fiber* bar_first_ = nullptr;
  const Fiber* first_exited_ = nullptr;
};

/// The worker running on this OS thread (the device-side entry points go through it).
extern __thread Worker* t_worker;

inline Worker::Worker(const Launch& _KxL) : L_(_KxL), fibers_(_KxL.nthreads), stacks_(_KxL.nthreads), queue_(_KxL.nthreads + 1), late_(_KxL.nthreads + 1) {
  if (!alloc_stacks(stacks_.data(), static_cast<int>(_KxL.nthreads), _KxL.stack_bytes))
    fail(kExitUsage, "cannot map %u fiber stacks of %zu bytes", _KxL.nthreads, _KxL.stack_bytes);
  const unsigned ws = static_cast<unsigned>(_KxL.warp_size);
  warps_.resize((_KxL.nthreads + ws - 1) / ws);
  for (unsigned i = 0; i < _KxL.nthreads; ++i) {
    Fiber& f = fibers_[i];
    f.linear = i;
    f.tid = uint3{i % _KxL.block.x, i / _KxL.block.x % _KxL.block.y, i / (_KxL.block.x * _KxL.block.y)};
    warps_[i / ws].exist |= 1ull << (i % ws);
  }
  order_.resize(_KxL.nthreads);
  lanes_.resize(warps_.size());
  arrange(0);
}

/// Orders the block's threads by the launch's schedule (a random one anew per block).
inline void Worker::arrange(unsigned long long linear) {
  const unsigned n = L_.nthreads, ws = static_cast<unsigned>(L_.warp_size);
  if (L_.schedule == kForward && linear > 0) return;
  for (unsigned i = 0; i < n; ++i) order_[i] = L_.schedule == kReverse ? n - 1 - i : i;
  if (L_.schedule == kRandom) {
    u64 state = L_.seed * 0x9E3779B97F4A7C15ull + linear + 1;
    for (unsigned i = n; i > 1; --i) {  // Fisher-Yates over splitmix64
      state += 0x9E3779B97F4A7C15ull;
      u64 z = state;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      const unsigned j = static_cast<unsigned>(z % i);
      const unsigned t = order_[i - 1];
      order_[i - 1] = order_[j];
      order_[j] = t;
    }
  } else if (L_.schedule == kDelayWarp) {
    late_warp_ = static_cast<unsigned>(L_.seed % warps_.size());
  }
  for (std::vector<unsigned>& l : lanes_) l.clear();
  for (unsigned i = 0; i < n; ++i) lanes_[order_[i] / ws].push_back(order_[i] % ws);
}

inline bool Worker::stack_guard_hit(const void* addr) const {
  for (const Stack& s : stacks_)
    if (in_guard(s, addr)) return true;
  return false;
}

inline void Worker::run_block(unsigned long long linear, BlockTrace* trace) {
  blockIdx = uint3{static_cast<unsigned>(linear % L_.grid.x), static_cast<unsigned>(linear / L_.grid.x % L_.grid.y),
                   static_cast<unsigned>(linear / (static_cast<unsigned long long>(L_.grid.x) * L_.grid.y))};
  done_ = exited_ = bar_arrived_ = 0;
  first_exited_ = nullptr;
  qhead_ = qtail_ = lhead_ = ltail_ = 0;
  for (Warp& w : warps_) {
    w.live = w.exist;
    w.groups.clear();
  }
  arrange(linear);
  for (unsigned i = 0; i < L_.nthreads; ++i) {
    Fiber& f = fibers_[order_[i]];
    f.state = kReady;
    make_context(f.ctx, stacks_[order_[i]], &f);
    push(&f);
  }
  t_trace = trace;
  Fiber* first = pop();
  cur_ = first;
  threadIdx = first->tid;
  switch_context(sched_, first->ctx);
  t_trace = nullptr;
  if (done_ != L_.nthreads) diagnose_deadlock();
}

/// Suspends `from` (already marked blocked, ready-and-queued, or done) and runs the
/// next ready fiber, or returns to the scheduler when there is none.
inline void Worker::switch_away(Fiber* from) {
  Fiber* next = pop();
  if (next == from) return;  // a yield with nobody else ready
  if (next != nullptr) {
    cur_ = next;
    threadIdx = next->tid;
    switch_context(from->ctx, next->ctx);
  } else {
    cur_ = nullptr;
    switch_context(from->ctx, sched_);
  }
}

inline void Worker::yield() {
  if (idle()) return;
  push(cur_);
  switch_away(cur_);
}

inline int Worker::barrier(int kind, int pred, const char* file, int line, int site) {
  Fiber* f = cur_;
  if (exited_ > 0) {
    const uint3 e = first_exited_->tid;
    fail(kExitDeadlock,
         "barrier divergence in block (%u,%u,%u): thread (%u,%u,%u) reached %s at %s:%d after %u thread(s) of "
         "the block exited, first thread (%u,%u,%u); on the GPU this barrier would wait forever or misbehave",
         blockIdx.x, blockIdx.y, blockIdx.z, f->tid.x, f->tid.y, f->tid.z, barrier_name(kind), file, line, exited_,
         e.x, e.y, e.z);
  }
  if (bar_arrived_ == 0) {
    bar_kind_ = kind;
    bar_file_ = file;
    bar_line_ = line;
    bar_site_ = site;
    bar_first_ = f;
    bar_accum_ = kind == kBarAnd ? 1 : 0;
  } else if (kind != bar_kind_ || site != bar_site_ || !same_site(file, line, bar_file_, bar_line_)) {
    const uint3 a = bar_first_->tid;
    fail(kExitDeadlock,
         "barrier divergence in block (%u,%u,%u): thread (%u,%u,%u) waits at %s (%s:%d) but thread (%u,%u,%u) "
         "reached %s (%s:%d)%s; every thread of a block must reach the same barrier",
         blockIdx.x, blockIdx.y, blockIdx.z, a.x, a.y, a.z, barrier_name(bar_kind_), bar_file_, bar_line_, f->tid.x,
         f->tid.y, f->tid.z, barrier_name(kind), file, line, line == bar_line_ ? ", another barrier on the same line" : "");
  }
  if (kind == kBarCount) bar_accum_ += pred != 0;
  if (kind == kBarAnd) bar_accum_ &= pred != 0;
  if (kind == kBarOr) bar_accum_ |= pred != 0;
  if (++bar_arrived_ == L_.nthreads) {
    bar_arrived_ = 0;
    for (unsigned i : order_) {
      Fiber& g = fibers_[i];
      if (g.state != kAtBarrier) continue;
      g.state = kReady;
      g.out_pred = bar_accum_;
      push(&g);
    }
    return bar_accum_;
  }
  f->state = kAtBarrier;
  switch_away(f);
  return f->out_pred;
}

inline u64 Worker::warp_op(const WarpCall& c, int* pred_out) {
  Fiber* f = cur_;
  const unsigned ws = static_cast<unsigned>(L_.warp_size), wi = f->linear / ws, lane = f->linear % ws;
  Warp& w = warps_[wi];
  const u64 mask = c.op == kActiveMask ? w.exist : c.mask;
  if (((mask >> lane) & 1) == 0)
    fail(kExitDeadlock, "thread (%u,%u,%u) of block (%u,%u,%u) calls %s at %s:%d with mask 0x%llx, which excludes its own lane %u",
         f->tid.x, f->tid.y, f->tid.z, blockIdx.x, blockIdx.y, blockIdx.z, op_name(c.op), c.file, c.line, mask, lane);
  if (c.width < 1 || c.width > L_.warp_size || (c.width & (c.width - 1)) != 0)
    fail(kExitDeadlock, "%s at %s:%d: width %d is not a power of two between 1 and %d", op_name(c.op), c.file, c.line,
         c.width, L_.warp_size);
  std::size_t gi = 0;
  while (gi < w.groups.size() && w.groups[gi].mask != mask) ++gi;
  if (gi == w.groups.size()) {
    w.groups.push_back(WarpGroup{mask, 0, c.op, c.file, c.line});
  } else if (w.groups[gi].op != c.op) {
    const WarpGroup& g = w.groups[gi];
    fail(kExitDeadlock, "warp %u of block (%u,%u,%u): lanes with mask 0x%llx disagree: %s at %s:%d and %s at %s:%d", wi,
         blockIdx.x, blockIdx.y, blockIdx.z, mask, op_name(g.op), g.file, g.line, op_name(c.op), c.file, c.line);
  }
  f->in_value = c.value;
  // CUDA uses the low 5 bits of the lane/offset operand (PTX shfl: b[4:0]); HIP's
  // 64-lane shuffles compare the full value against the width instead.
  f->in_arg = L_.warp_size == 32 ? (c.arg & 31) : c.arg;
  f->in_width = c.width;
  w.groups[gi].arrived |= 1ull << lane;
  if (w.groups[gi].arrived == (mask & w.live)) {
    complete(wi, gi);
  } else {
    f->state = kAtWarp;
    switch_away(f);
  }
  if (pred_out != nullptr) *pred_out = f->out_pred;
  return f->out_value;
}

/// Computes the results of a complete group and makes its waiting lanes ready.
inline void Worker::complete(unsigned wi, std::size_t gi) {
  Warp& w = warps_[wi];
  const WarpGroup g = w.groups[gi];
  w.groups[gi] = w.groups.back();
  w.groups.pop_back();
  Fiber* lanes = &fibers_[wi * static_cast<unsigned>(L_.warp_size)];
  compute(g, lanes);
  for (unsigned lane : lanes_[wi]) {
    Fiber* l = &lanes[lane];
    if (((g.arrived >> lane) & 1) == 0 || l == cur_) continue;
    l->state = kReady;
    push(l);
  }
}

inline void Worker::compute(const WarpGroup& g, Fiber* lanes) {
  const u64 _KxP = g.arrived;
  const int ws = L_.warp_size;
  auto each = [_KxP](auto&& fn) {
    for (u64 m = _KxP; m != 0; m &= m - 1) fn(__builtin_ctzll(m));
  };
  u64 vote = 0, red = 0;
  int first = __builtin_ctzll(_KxP);
  switch (g.op) {
    case kShflIdx: case kShflUp: case kShflDown: case kShflXor:
      each([&](int i) {
        const int w = lanes[i].in_width, a = lanes[i].in_arg, base = i & ~(w - 1);
        int src = i;
        if (g.op == kShflIdx) src = base + (a & (w - 1));
        if (g.op == kShflUp && (i - base) >= a) src = i - a;
        if (g.op == kShflDown && (i - base) + a < w) src = i + a;
        if (g.op == kShflXor && (i ^ a) < base + w) src = i ^ a;
        // A source lane outside the collective (exited, absent or not in the mask) is
        // undefined on the GPU; the lane keeps its own value.
        const bool ok = src >= 0 && src < ws && ((_KxP >> src) & 1);
        lanes[i].out_value = lanes[ok ? src : i].in_value;
      });
      return;
    case kBallot: case kAny: case kAll:
      each([&](int i) { vote |= static_cast<u64>(lanes[i].in_value != 0) << i; });
      each([&](int i) { lanes[i].out_value = g.op == kBallot ? vote : g.op == kAny ? vote != 0 : vote == _KxP; });
      return;
    case kActiveMask:
      each([&](int i) { lanes[i].out_value = _KxP; });
      return;
    case kMatchAny:
      each([&](int i) {
        u64 m = 0;
        each([&](int j) { m |= static_cast<u64>(lanes[j].in_value == lanes[i].in_value) << j; });
        lanes[i].out_value = m;
      });
      return;
    case kMatchAll: {
      bool all = true;
      each([&](int i) { all = all && lanes[i].in_value == lanes[first].in_value; });
      each([&](int i) { lanes[i].out_value = all ? _KxP : 0; lanes[i].out_pred = all; });
      return;
    }
    case kRedAdd: case kRedAnd: case kRedOr: case kRedXor: case kRedMinU: case kRedMaxU: case kRedMinI: case kRedMaxI:
      red = lanes[first].in_value & 0xffffffffu;
      each([&](int i) {
        if (i == first) return;
        const std::uint32_t v = static_cast<std::uint32_t>(lanes[i].in_value), r = static_cast<std::uint32_t>(red);
        const std::int32_t sv = static_cast<std::int32_t>(v), sr = static_cast<std::int32_t>(r);
        std::uint32_t out = r;
        if (g.op == kRedAdd) out = r + v;
        if (g.op == kRedAnd) out = r & v;
        if (g.op == kRedOr) out = r | v;
        if (g.op == kRedXor) out = r ^ v;
        if (g.op == kRedMinU) out = v < r ? v : r;
        if (g.op == kRedMaxU) out = v > r ? v : r;
        if (g.op == kRedMinI) out = static_cast<std::uint32_t>(sv < sr ? sv : sr);
        if (g.op == kRedMaxI) out = static_cast<std::uint32_t>(sv > sr ? sv : sr);
        red = out;
      });
      each([&](int i) { lanes[i].out_value = red; });
      return;
    default:
      return;  // kSync: a rendezvous without data
  }
}

inline void Worker::exit_current() {
  Fiber* f = cur_;
  const unsigned ws = static_cast<unsigned>(L_.warp_size), wi = f->linear / ws;
  f->state = kDone;
  ++done_;
  if (bar_arrived_ > 0)
    fail(kExitDeadlock,
         "barrier divergence in block (%u,%u,%u): thread (%u,%u,%u) exited while %u thread(s) wait at %s (%s:%d); "
         "on the GPU this barrier would wait forever or misbehave",
         blockIdx.x, blockIdx.y, blockIdx.z, f->tid.x, f->tid.y, f->tid.z, bar_arrived_, barrier_name(bar_kind_),
         bar_file_, bar_line_);
  if (exited_++ == 0) first_exited_ = f;
  Warp& w = warps_[wi];
  w.live &= ~(1ull << (f->linear % ws));
  for (std::size_t gi = 0; gi < w.groups.size();) {
    if (w.groups[gi].arrived == (w.groups[gi].mask & w.live)) complete(wi, gi);  // may reorder: recheck gi
    else ++gi;
  }
  switch_away(f);
  __builtin_unreachable();
}

inline void Worker::diagnose_deadlock() {
  Text t;
  t.add("deadlock in block (%u,%u,%u):", blockIdx.x, blockIdx.y, blockIdx.z);
  if (bar_arrived_ > 0) t.add(" %u thread(s) wait at %s (%s:%d);", bar_arrived_, barrier_name(bar_kind_), bar_file_, bar_line_);
  bool activemask = false;
  for (std::size_t wi = 0; wi < warps_.size(); ++wi) {
    for (const WarpGroup& g : warps_[wi].groups) {
      t.add(" lanes 0x%llx of warp %zu wait at %s (%s:%d) for lanes 0x%llx;", g.arrived, wi, op_name(g.op), g.file,
            g.line, g.mask & warps_[wi].live & ~g.arrived);
      activemask = activemask || g.op == kActiveMask;
    }
  }
  if (exited_ > 0) t.add(" %u thread(s) exited;", exited_);
  if (activemask) t.add(" __activemask() must be reached by every live lane of the warp (divergent use is not emulated);");
  t.add(" no thread can make progress");
  fail(kExitDeadlock, "%s", t.c_str());
}

}  // namespace host
}  // namespace kxcpu
