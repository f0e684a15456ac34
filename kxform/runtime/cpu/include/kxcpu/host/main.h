// The emulator's main(): reads a launch manifest, runs the grid, writes results back.
//
// Included by exactly one generated driver .cpp, compiled once per compiler and
// header version and linked with each kernel TU. The manifest (written by
// kxform/runtime/cpu/launch.py) lists the launch shape and the arguments in
// parameter order; buffers travel as raw files that are overwritten with the results.
#pragma once

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "memory.h"
#include "sched.h"
#include "trace.h"

__thread uint3 threadIdx;
__thread uint3 blockIdx;
__thread dim3 blockDim;
__thread dim3 gridDim;

namespace kxcpu {
__thread unsigned char* dyn_smem = nullptr;
namespace host {
__thread Worker* t_worker = nullptr;
__thread BlockTrace* t_trace = nullptr;
std::vector<Watched> g_watched;
void* const* g_args = nullptr;
}  // namespace host

u64 warp_collective(const WarpCall& c, int* pred_out) { return host::t_worker->warp_op(c, pred_out); }
int block_barrier(int kind, int pred, const char* file, int line, int site) {
  return host::t_worker->barrier(kind, pred, file, line, site);
}
void fiber_yield() { host::t_worker->yield(); }
void device_trap(const char* what, const char* file, int line) {
  const host::Fiber* f = host::t_worker != nullptr ? host::t_worker->current() : nullptr;
  uint3 t = f != nullptr ? f->tid : uint3{0, 0, 0};
  host::fail(host::kExitTrap, "%s at %s:%d in thread (%u,%u,%u) of block (%u,%u,%u)", what, file, line, t.x, t.y, t.z,
             blockIdx.x, blockIdx.y, blockIdx.z);
}
}  // namespace kxcpu

extern "C" [[noreturn]] void kxcpu_fiber_main(void*) {
  kxcpu_tu_run_thread(kxcpu::host::g_args);
  kxcpu::host::t_worker->exit_current();
}

namespace kxcpu {
namespace host {

struct Manifest {
  dim3 grid, block;
  std::size_t shared = 0, stack = 256 * 1024;
  unsigned workers = 1;
  bool watch = false;
  bool only_traced = false;  // run the traced blocks only (outputs are then not written back)
  Schedule schedule = kForward;
  unsigned long long seed = 0;
  std::vector<uint3> traced;
  std::vector<Buffer> buffers;
  std::vector<Buffer> arena_buffers;  // while parsing: appended to `buffers` at the end
  std::vector<std::vector<unsigned char>> scalars;  // raw bytes, per argument
  std::vector<int> buffer_of;                       // argument -> buffer index or -1
  std::vector<unsigned long long> offset_of;        // argument -> bytes into its buffer
  std::vector<long long> arena_of;                  // argument -> arena number (a view), or -1
  std::size_t arenas = 0;
  std::string dir;
};

inline std::vector<unsigned char> unhex(const char* h) {
  std::vector<unsigned char> out(std::strlen(h) / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    unsigned v = 0;
    std::sscanf(h + 2 * i, "%2x", &v);
    out[i] = static_cast<unsigned char>(v);
  }
  return out;
}

/// Parses the manifest: one "key values..." line per item (launch.py writes it; names
/// and file names never contain spaces).
inline Manifest read_manifest(const std::string& path) {
  FILE* in = std::fopen(path.c_str(), "r");
  if (in == nullptr) fail(kExitUsage, "cannot read manifest %s", path.c_str());
  Manifest m;
  m.dir = path.substr(0, path.find_last_of('/') + 1);
  static char line[1 << 16], key[64], a[4096], b[64], c[4096];
  while (std::fgets(line, sizeof line, in) != nullptr) {
    if (std::sscanf(line, "%63s", key) != 1) continue;
    const char* rest = line + std::strlen(key) + 1;
    unsigned long long n = 0;
    if (!std::strcmp(key, "grid")) std::sscanf(rest, "%u %u %u", &m.grid.x, &m.grid.y, &m.grid.z);
    else if (!std::strcmp(key, "block")) std::sscanf(rest, "%u %u %u", &m.block.x, &m.block.y, &m.block.z);
    else if (!std::strcmp(key, "shared") && std::sscanf(rest, "%llu", &n) == 1) m.shared = n;
    else if (!std::strcmp(key, "stack") && std::sscanf(rest, "%llu", &n) == 1) m.stack = n;
    else if (!std::strcmp(key, "workers")) std::sscanf(rest, "%u", &m.workers);
    else if (!std::strcmp(key, "watch")) m.watch = true;
    else if (!std::strcmp(key, "only_traced")) m.only_traced = true;
    else if (!std::strcmp(key, "order") && std::sscanf(rest, "%63s %llu", b, &n) >= 1) {
      if (!std::strcmp(b, "reverse")) m.schedule = kReverse;
      else if (!std::strcmp(b, "random")) m.schedule = kRandom, m.seed = n;
      else if (!std::strcmp(b, "delay")) m.schedule = kDelayWarp, m.seed = n;
      else if (std::strcmp(b, "forward") != 0) fail(kExitUsage, "unknown order '%s' in the manifest", b);
    }
    else if (!std::strcmp(key, "trace")) {
      uint3 t{};
      std::sscanf(rest, "%u %u %u", &t.x, &t.y, &t.z);
      m.traced.push_back(t);
    } else if (!std::strcmp(key, "buffer") && std::sscanf(rest, "%4095s %63s %llu %4095s", a, b, &n, c) == 4) {
      Buffer buf;
      buf.name = a, buf.role = b, buf.bytes = n, buf.path = c;
      m.buffer_of.push_back(static_cast<int>(m.buffers.size()));
      m.offset_of.push_back(0);
      m.arena_of.push_back(-1);
      m.buffers.push_back(buf);
      m.scalars.emplace_back();
    } else if (!std::strcmp(key, "arena") && std::sscanf(rest, "%4095s %llu %4095s", a, &n, c) == 3) {
      Buffer buf;  // an allocation no argument is: views point into it (kept after the arguments' buffers)
      buf.name = a, buf.role = "inout", buf.bytes = n, buf.path = c;
      m.arena_buffers.push_back(buf);
    } else if (!std::strcmp(key, "view")) {
      unsigned long long arena = 0, offset = 0;
      std::sscanf(rest, "%4095s %llu %llu", a, &arena, &offset);
      m.buffer_of.push_back(-2);  // resolved below, once every buffer is known
      m.offset_of.push_back(offset);
      m.arena_of.push_back(static_cast<long long>(arena));
      m.scalars.emplace_back();
    } else if (!std::strcmp(key, "scalar")) {
      c[0] = '\0';
      std::sscanf(rest, "%4095s %llu %4095s", a, &n, c);
      m.buffer_of.push_back(-1);
      m.offset_of.push_back(0);
      m.arena_of.push_back(-1);
      m.scalars.push_back(unhex(c));
    }
  }
  std::fclose(in);
  const std::size_t first_arena = m.buffers.size();
  for (Buffer& b : m.arena_buffers) m.buffers.push_back(b);
  m.arenas = m.arena_buffers.size();
  for (std::size_t i = 0; i < m.buffer_of.size(); ++i) {
    if (m.arena_of[i] < 0) continue;
    if (static_cast<std::size_t>(m.arena_of[i]) >= m.arenas) fail(kExitUsage, "argument %zu: no such arena", i + 1);
    m.buffer_of[i] = static_cast<int>(first_arena + static_cast<std::size_t>(m.arena_of[i]));
  }
  return m;
}

/// Checks every argument's kind and size against the kernel's real parameter types.
inline void check_signature(const Manifest& m) {
  const std::size_t n = m.buffer_of.size();
  if (static_cast<std::size_t>(kxcpu_tu_param_count) != n)
    fail(kExitUsage, "the kernel takes %d parameter(s) but %zu argument(s) were given", kxcpu_tu_param_count, n);
  for (std::size_t i = 0; i < n; ++i) {
    const bool is_buf = m.buffer_of[i] >= 0;
    if (is_buf != (kxcpu_tu_param_is_ptr[i] != 0))
      fail(kExitUsage, "argument %zu: the kernel parameter is %s but a %s was given", i + 1,
           kxcpu_tu_param_is_ptr[i] ? "a pointer" : "a value", is_buf ? "buffer" : "scalar");
    if (!is_buf && m.scalars[i].size() != kxcpu_tu_param_size[i])
      fail(kExitUsage, "argument %zu: the kernel parameter has %u bytes but the scalar given has %zu", i + 1,
           kxcpu_tu_param_size[i], m.scalars[i].size());
  }
}

inline void load_buffers(std::vector<Buffer>& bufs, const std::string& dir) {
  for (Buffer& b : bufs) {
    b.data = alloc_guarded(b.bytes, &b.map, &b.map_bytes);
    if (b.data == nullptr) fail(kExitUsage, "cannot allocate %zu bytes for buffer '%s'", b.bytes, b.name.c_str());
    FILE* f = std::fopen((dir + b.path).c_str(), "rb");
    if (f == nullptr || std::fread(b.data, 1, b.bytes, f) != b.bytes) fail(kExitUsage, "cannot read buffer '%s'", b.name.c_str());
    std::fclose(f);
  }
}

inline void write_outputs(const std::vector<Buffer>& bufs, const std::string& dir) {
  for (const Buffer& b : bufs) {
    if (b.role == "in") continue;
    FILE* f = std::fopen((dir + b.path).c_str(), "wb");
    if (f == nullptr || std::fwrite(b.data, 1, b.bytes, f) != b.bytes) fail(kExitUsage, "cannot write buffer '%s'", b.name.c_str());
    std::fclose(f);
  }
}

/// Sector sets as ranges: "read <buffer> 0-3 8 10-11".
inline void write_ranges(FILE* out, const char* kind, const Buffer& b, const std::vector<std::uint64_t>& bits) {
  std::fprintf(out, "%s %s", kind, b.name.c_str());
  const std::size_t n = bits.size() * 64;
  auto set = [&bits](std::size_t s) { return ((bits[s >> 6] >> (s & 63)) & 1) != 0; };
  for (std::size_t s = 0; s < n;) {
    if (!set(s)) { ++s; continue; }
    std::size_t e = s;
    while (e + 1 < n && set(e + 1)) ++e;
    if (e > s) std::fprintf(out, " %zu-%zu", s, e);
    else std::fprintf(out, " %zu", s);
    s = e + 1;
  }
  std::fputc('\n', out);
}

/// Watches every buffer; `out` buffers (poisoned) also get a written-byte map.
inline void start_watch(const std::vector<Buffer>& bufs) {
  g_watched.resize(bufs.size());
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    g_watched[i].base = reinterpret_cast<std::uintptr_t>(bufs[i].data);
    g_watched[i].size = bufs[i].bytes;
    g_watched[i].poisoned = bufs[i].role == "out";
    if (g_watched[i].poisoned) g_watched[i].written.assign(bufs[i].bytes, 0);
  }
}

/// "extent <buffer#> <bytes>" per buffer and "unwritten_read <buffer#> <offset> <pc>"
/// where `pc` is the reading instruction relative to kxcpu_tu_run_thread (the Python
/// side adds that symbol's link-time address and asks addr2line for the source line).
inline void write_watch(FILE* out) {
  const auto anchor = reinterpret_cast<std::intptr_t>(&kxcpu_tu_run_thread);
  for (std::size_t i = 0; i < g_watched.size(); ++i) {
    const Watched& w = g_watched[i];
    std::fprintf(out, "extent %zu %zu\n", i, w.extent);
    if (w.reported)
      std::fprintf(out, "unwritten_read %zu %zu %lld\n", i, w.first_offset,
                   static_cast<long long>(reinterpret_cast<std::intptr_t>(w.first_pc) - anchor));
  }
}

/// What every worker thread runs: blocks taken from a shared counter, one at a time.
/// `only` (when not null) lists the linear indices of the blocks to run, `nblocks` of them.
struct Pool {
  const Launch* launch;
  std::atomic<unsigned long long>* next;
  unsigned long long nblocks;
  BlockTrace* (*trace_for)(void*, unsigned long long);
  void* trace_ctx;
  const unsigned long long* only = nullptr;
};

inline void* work(void* arg) {
  const Pool& p = *static_cast<const Pool*>(arg);
  install_fault_handler();
  blockDim = p.launch->block;
  gridDim = p.launch->grid;
  unsigned char* map = nullptr;
  std::size_t map_bytes = 0;
  dyn_smem = alloc_guarded(p.launch->shared_bytes, &map, &map_bytes);
  Worker w(*p.launch);
  t_worker = &w;
  for (unsigned long long i; (i = p.next->fetch_add(1)) < p.nblocks;) {
    const unsigned long long b = p.only != nullptr ? p.only[i] : i;
    w.run_block(b, p.trace_for(p.trace_ctx, b));
  }
  t_worker = nullptr;
  return nullptr;
}

inline double now_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

inline int run_main(int argc, char** argv) {
  if (argc != 2) fail(kExitUsage, "usage: %s MANIFEST", argc > 0 ? argv[0] : "kxcpu");
  Manifest m = read_manifest(argv[1]);
  check_signature(m);
  if (!m.traced.empty() && !kxcpu_tu_traced) fail(kExitUsage, "sector traces need a trace build of the kernel");
  if (m.watch && !kxcpu_tu_traced) fail(kExitUsage, "a watched launch needs a trace build of the kernel");
  load_buffers(m.buffers, m.dir);
  fault_buffers() = &m.buffers;
  arm_bounds(m.buffers);
  if (m.watch) start_watch(m.buffers);

  std::vector<std::vector<unsigned char>> slots(m.buffer_of.size());
  std::vector<void*> args(m.buffer_of.size());
  for (std::size_t i = 0; i < slots.size(); ++i) {
    slots[i] = m.buffer_of[i] >= 0 ? std::vector<unsigned char>(sizeof(void*)) : m.scalars[i];
    slots[i].resize(slots[i].size() + 16);  // never empty; data() is malloc-aligned
    if (m.buffer_of[i] >= 0) {
      unsigned char* at = m.buffers[static_cast<std::size_t>(m.buffer_of[i])].data + m.offset_of[i];
      std::memcpy(slots[i].data(), &at, sizeof(void*));
    }
    args[i] = slots[i].data();
  }
  g_args = args.data();

  Launch _KxL;
  _KxL.grid = m.grid;
  _KxL.block = m.block;
  _KxL.nthreads = m.block.x * m.block.y * m.block.z;
  _KxL.warp_size = kxcpu_tu_warp_size;
  _KxL.shared_bytes = m.shared;
  _KxL.stack_bytes = m.stack;
  _KxL.schedule = m.schedule;
  _KxL.seed = m.seed;
  const unsigned long long nblocks = static_cast<unsigned long long>(m.grid.x) * m.grid.y * m.grid.z;

  std::vector<BlockTrace> traces(m.traced.size());
  for (std::size_t i = 0; i < traces.size(); ++i) {
    traces[i].x = m.traced[i].x, traces[i].y = m.traced[i].y, traces[i].z = m.traced[i].z;
    for (const Buffer& b : m.buffers) {
      BufferTrace bt;
      bt.base = reinterpret_cast<std::uintptr_t>(b.data);
      bt.size = b.bytes;
      bt.reads.assign((b.bytes / kSectorBytes + 64) / 64, 0);
      bt.writes.assign(bt.reads.size(), 0);
      traces[i].buffers.push_back(std::move(bt));
    }
    std::uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (const BufferTrace& bt : traces[i].buffers) {
      if (bt.base < lo) lo = bt.base;
      if (bt.base + bt.size > hi) hi = bt.base + bt.size;
    }
    traces[i].lo = lo;
    traces[i].span = hi > lo ? hi - lo : 0;
  }
  struct TraceIndex {
    std::vector<BlockTrace>* traces;
    dim3 grid;
  } index{&traces, m.grid};
  auto trace_for = [](void* ctx, unsigned long long linear) -> BlockTrace* {
    auto* ix = static_cast<TraceIndex*>(ctx);
    for (BlockTrace& t : *ix->traces)
      if (t.x + static_cast<unsigned long long>(ix->grid.x) * (t.y + static_cast<unsigned long long>(ix->grid.y) * t.z) == linear)
        return &t;
    return nullptr;
  };

  std::vector<unsigned long long> only;  // only_traced: the traced blocks' linear indices
  for (const BlockTrace& t : traces)
    only.push_back(t.x + static_cast<unsigned long long>(m.grid.x) * (t.y + static_cast<unsigned long long>(m.grid.y) * t.z));
  const unsigned long long nrun = m.only_traced ? only.size() : nblocks;
  std::atomic<unsigned long long> next{0};
  Pool pool{&_KxL, &next, nrun, trace_for, &index, m.only_traced ? only.data() : nullptr};
  const unsigned long long wanted = m.workers == 0 ? 1 : m.workers;
  const unsigned nworkers = static_cast<unsigned>(wanted < nrun ? wanted : (nrun > 0 ? nrun : 1));
  const double t0 = now_ms();
  std::vector<pthread_t> threads(nworkers > 1 ? nworkers - 1 : 0);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  for (pthread_t& t : threads)
    if (pthread_create(&t, &attr, &work, &pool) != 0) fail(kExitUsage, "cannot start worker threads");
  work(&pool);
  for (pthread_t& t : threads) pthread_join(t, nullptr);
  const double ms = now_ms() - t0;

  check_canaries(m.buffers);
  if (!m.only_traced) write_outputs(m.buffers, m.dir);
  FILE* tr = std::fopen((m.dir + "traces.txt").c_str(), "w");
  FILE* res = std::fopen((m.dir + "result.txt").c_str(), "w");
  if (tr == nullptr || res == nullptr) fail(kExitUsage, "cannot write results to %s", m.dir.c_str());
  for (const BlockTrace& t : traces) {
    std::fprintf(tr, "block %u %u %u\n", t.x, t.y, t.z);
    for (std::size_t i = 0; i < m.buffers.size(); ++i) {
      write_ranges(tr, "read", m.buffers[i], t.buffers[i].reads);
      write_ranges(tr, "write", m.buffers[i], t.buffers[i].writes);
    }
  }
  std::fprintf(res, "elapsed_ms %.3f\nworkers %u\n", ms, nworkers);
  write_watch(res);
  std::fclose(tr);
  std::fclose(res);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace host
}  // namespace kxcpu

int main(int argc, char** argv) { return kxcpu::host::run_main(argc, argv); }
