// Fatal-error reporting of the emulated launch.
//
// The child process ends at the first error with one line on stderr and an exit code
// that tells the Python side which exception to raise: barrier divergence and
// deadlocks become LaunchTimeout, faults and traps RuntimeError_.
#pragma once

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kxcpu {
namespace host {

enum ExitCode : int { kExitOk = 0, kExitUsage = 2, kExitDeadlock = 3, kExitFault = 4, kExitTrap = 5 };

/// Writes "kxcpu: <message>" to stderr and ends the process without unwinding: other
/// workers may be mid-block, and nothing they hold needs cleaning up.
[[noreturn]] inline void fail(int code, const char* fmt, ...) {
  char buf[2048];
  int n = std::snprintf(buf, sizeof buf, "kxcpu: ");
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(buf + n, sizeof buf - static_cast<std::size_t>(n) - 2, fmt, ap);
  va_end(ap);
  std::size_t len = static_cast<std::size_t>(n) + (m < 0 ? 0 : static_cast<std::size_t>(m));
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t ignored = write(2, buf, len);
  (void)ignored;
  _exit(code);
}

/// Appends printf-formatted text to a fixed buffer (diagnostics built piece by piece).
struct Text {
  char buf[1536];
  std::size_t len = 0;
  void add(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    if (len + 1 >= sizeof buf) return;
    va_list ap;
    va_start(ap, fmt);
    int m = std::vsnprintf(buf + len, sizeof buf - len, fmt, ap);
    va_end(ap);
    if (m > 0) len = len + static_cast<std::size_t>(m) < sizeof buf ? len + static_cast<std::size_t>(m) : sizeof buf - 1;
  }
  const char* c_str() const { return buf; }
  Text() { buf[0] = '\0'; }
};

inline const char* op_name(int op) {
  static const char* const names[] = {
      "__syncwarp", "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
      "__ballot_sync", "__any_sync", "__all_sync", "__activemask", "__match_any_sync",
      "__match_all_sync", "__reduce_add_sync", "__reduce_min_sync", "__reduce_min_sync",
      "__reduce_max_sync", "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync",
      "__reduce_xor_sync"};
  return op >= 0 && op < static_cast<int>(sizeof names / sizeof names[0]) ? names[op] : "warp collective";
}

inline const char* barrier_name(int kind) {
  static const char* const names[] = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or"};
  return kind >= 0 && kind < 4 ? names[kind] : "__syncthreads";
}

inline bool same_site(const char* f1, int l1, const char* f2, int l2) {
  return l1 == l2 && (f1 == f2 || std::strcmp(f1, f2) == 0);
}

}  // namespace host
}  // namespace kxcpu
