// The box the emulation binary runs kernel code in.
//
// The binary runs the user's code natively: the kernel, and the host code of its
// translation unit (static initialisers run before main). Before any of it runs (an
// entry in .preinit_array, which the dynamic loader calls before every constructor),
// the process
//   - takes the resource limits the launcher passed in KXCPU_LIMITS (address space,
//     file size, CPU time, open files, no core dumps) and dies with its parent;
//   - sets no_new_privs and drops every capability (a run as root keeps none);
//   - with Landlock (Linux 5.13+): may create, write, truncate or remove files only
//     below its work directory (the directory of the manifest, argv[1]), may execute
//     nothing, may not use TCP, and (Linux 6.12+) may not signal or reach abstract
//     sockets of processes outside the box;
//   - with seccomp: may not execute programs, create processes (threads only), trace or
//     read other processes, or open sockets, and may signal only itself.
// What the kernel does not offer is skipped (the runtime says which in its docs):
// reads are never restricted, and without Landlock writes are limited only by the
// file-size limit and the permissions of the user running kxform.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef AUDIT_ARCH_X86_64
#define AUDIT_ARCH_X86_64 0xC000003Eu
#endif
#ifndef AUDIT_ARCH_AARCH64
#define AUDIT_ARCH_AARCH64 0xC00000B7u
#endif

namespace kxcpu {
namespace sandbox {

inline unsigned long long env_number(const char* text, const char* key) {
  const size_t n = strlen(key);
  for (const char* p = text; p != nullptr && *p != '\0';) {
    if (strncmp(p, key, n) == 0 && p[n] == '=') return strtoull(p + n + 1, nullptr, 10);
    p = strchr(p, ',');
    if (p != nullptr) ++p;
  }
  return 0;
}

inline void set_limit(int resource, unsigned long long value) {
  if (value == 0) return;
  struct rlimit r;
  r.rlim_cur = r.rlim_max = static_cast<rlim_t>(value);
  setrlimit(resource, &r);
}

inline void drop_capabilities() {
  struct {
    uint32_t version;
    int pid;
  } header = {0x20080522u /* _LINUX_CAPABILITY_VERSION_3 */, 0};
  uint32_t data[6] = {0, 0, 0, 0, 0, 0};
  syscall(SYS_capset, &header, data);
}

#ifdef SYS_landlock_create_ruleset
struct RulesetAttr {
  uint64_t handled_access_fs, handled_access_net, scoped;
};
struct PathBeneath {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));

inline void restrict_files(const char* work_dir) {
  const long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u /* VERSION */);
  if (abi < 1) return;
  const uint64_t execute = 1u << 0, read_file = 1u << 2, read_dir = 1u << 3;
  uint64_t fs = (1ull << 13) - 1;       // ABI 1: execute ... make_sym
  if (abi >= 2) fs |= 1ull << 13;       // refer
  if (abi >= 3) fs |= 1ull << 14;       // truncate
  if (abi >= 5) fs |= 1ull << 15;       // ioctl_dev
  fs &= ~(read_file | read_dir);        // reading stays allowed everywhere
  RulesetAttr attr = {fs, abi >= 4 ? 3ull /* bind, connect TCP */ : 0, abi >= 6 ? 3ull /* sockets, signals */ : 0};
  const size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  const long ruleset = syscall(SYS_landlock_create_ruleset, &attr, size, 0u);
  if (ruleset < 0) return;
  const int dir = open(work_dir, O_PATH | O_CLOEXEC);
  if (dir >= 0) {
    PathBeneath rule = {fs & ~execute, dir};
    syscall(SYS_landlock_add_rule, static_cast<int>(ruleset), 1 /* PATH_BENEATH */, &rule, 0u);
    close(dir);
  }
  syscall(SYS_landlock_restrict_self, static_cast<int>(ruleset), 0u);
  close(static_cast<int>(ruleset));
}
#else
inline void restrict_files(const char*) {}
#endif

inline void restrict_syscalls() {
#if defined(__x86_64__)
  const uint32_t arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  const uint32_t arch = AUDIT_ARCH_AARCH64;
#else
  return;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
  const uint32_t self = static_cast<uint32_t>(getpid());
  const uint32_t deny = SECCOMP_RET_ERRNO | EPERM, allow = SECCOMP_RET_ALLOW;
  const int denied[] = {
      SYS_execve, SYS_execveat, SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_socket,
      SYS_socketpair, SYS_connect, SYS_bind, SYS_listen, SYS_accept, SYS_accept4, SYS_mount, SYS_umount2,
      SYS_pivot_root, SYS_chroot, SYS_unshare, SYS_setns, SYS_tkill, SYS_bpf, SYS_perf_event_open,
      SYS_keyctl, SYS_add_key, SYS_request_key, SYS_userfaultfd, SYS_init_module, SYS_finit_module,
      SYS_delete_module, SYS_kexec_load, SYS_reboot, SYS_swapon, SYS_swapoff, SYS_pidfd_send_signal,
#ifdef SYS_fork
      SYS_fork,
#endif
#ifdef SYS_vfork
      SYS_vfork,
#endif
  };
  const size_t nd = sizeof denied / sizeof denied[0];
  struct sock_filter f[128];
  size_t k = 0;
  f[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0);
  f[k++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
  f[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1);  // x32 system calls
  f[k++] = BPF_STMT(BPF_RET | BPF_K, deny);
  for (size_t i = 0; i < nd; ++i) {
    f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(denied[i]), 0, 1);
    f[k++] = BPF_STMT(BPF_RET | BPF_K, deny);
  }
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone3, 0, 1);  // glibc falls back to clone
  f[k++] = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
  // clone: threads (CLONE_THREAD) only.
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4);
  f[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x00010000u /* CLONE_THREAD */, 0, 1);
  f[k++] = BPF_STMT(BPF_RET | BPF_K, allow);
  f[k++] = BPF_STMT(BPF_RET | BPF_K, deny);
  // kill: only this process (or its own group: it leads a session of its own).
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_kill, 0, 6);
  f[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 3, 0);
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0u, 2, 0);
  f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(-static_cast<int32_t>(self)), 1, 0);
  f[k++] = BPF_STMT(BPF_RET | BPF_K, deny);
  f[k++] = BPF_STMT(BPF_RET | BPF_K, allow);
  // tgkill, rt_tgsigqueueinfo, rt_sigqueueinfo: only threads of this process.
  const int own[] = {SYS_tgkill, SYS_rt_tgsigqueueinfo, SYS_rt_sigqueueinfo};
  for (int nr : own) {
    f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 4);
    f[k++] = BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]));
    f[k++] = BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 0, 1);
    f[k++] = BPF_STMT(BPF_RET | BPF_K, allow);
    f[k++] = BPF_STMT(BPF_RET | BPF_K, deny);
  }
  f[k++] = BPF_STMT(BPF_RET | BPF_K, allow);
  struct sock_fprog prog = {static_cast<unsigned short>(k), f};
  prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#endif
}

/// Called by the dynamic loader before every constructor (see the file comment).
inline void enter(int argc, char** argv, char** envp) {
  const char* limits = nullptr;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e)
    if (strncmp(*e, "KXCPU_LIMITS=", 13) == 0) limits = *e + 13;
  if (limits == nullptr) return;  // not started by kxform (a developer running the binary by hand)
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (getppid() == 1) _exit(9);
  set_limit(RLIMIT_AS, env_number(limits, "as"));
  set_limit(RLIMIT_FSIZE, env_number(limits, "fsize"));
  set_limit(RLIMIT_CPU, env_number(limits, "cpu"));
  set_limit(RLIMIT_NOFILE, env_number(limits, "nofile"));
  struct rlimit none = {0, 0};
  setrlimit(RLIMIT_CORE, &none);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  char work[4096];
  const char* manifest = argc > 1 ? argv[1] : ".";
  const char* slash = strrchr(manifest, '/');
  const size_t n = slash == nullptr ? 0 : static_cast<size_t>(slash - manifest);
  if (n == 0 || n >= sizeof work) {
    strcpy(work, slash == manifest ? "/" : ".");
  } else {
    memcpy(work, manifest, n);
    work[n] = '\0';
  }
  restrict_files(work);
  drop_capabilities();
  restrict_syscalls();
}

}  // namespace sandbox
}  // namespace kxcpu

__attribute__((section(".preinit_array"), used)) static void (*const kxcpu_sandbox_entry)(int, char**, char**) =
    &kxcpu::sandbox::enter;
