// The kernel TU's entry point: calls the kernel with arguments read from raw slots.
//
// The parameter types come from the kernel's own function type (template argument
// deduction on `&kernel`), so templated kernels need no type text from the caller, and
// the runtime can check each argument's kind and size against the real declaration.
#pragma once

#include <cstring>
#include <type_traits>
#include <utility>

namespace kxcpu {

template <class _KxF>
struct Signature {
  static_assert(sizeof(_KxF) == 0, "the kernel spelling must name exactly one function (give template arguments)");
};

template <class _KxR, class... _KxP>
struct Signature<_KxR (*)(_KxP...)> {
  static_assert(std::is_void<_KxR>::value, "a __global__ kernel returns void");
  static constexpr int count = static_cast<int>(sizeof...(_KxP));
  static constexpr unsigned char is_ptr[sizeof...(_KxP) + 1] = {static_cast<unsigned char>(std::is_pointer<_KxP>::value)..., 0};
  static constexpr unsigned size[sizeof...(_KxP) + 1] = {static_cast<unsigned>(sizeof(_KxP))..., 0};

  template <class _KxT>
  static _KxT load(void* slot) {
    static_assert(std::is_trivially_copyable<_KxT>::value, "kernel parameters must be trivially copyable");
    alignas(_KxT) unsigned char raw[sizeof(_KxT)];
    std::memcpy(raw, slot, sizeof(_KxT));
    return *reinterpret_cast<_KxT*>(raw);
  }
  template <std::size_t... _KxI>
  static void call(_KxR (*f)(_KxP...), void* const* args, std::index_sequence<_KxI...>) {
    f(load<_KxP>(args[_KxI])...);
  }
  static void run(_KxR (*f)(_KxP...), void* const* args) { call(f, args, std::index_sequence_for<_KxP...>{}); }
};

template <class _KxR, class... _KxP>
struct Signature<_KxR (*)(_KxP...) noexcept> : Signature<_KxR (*)(_KxP...)> {};

}  // namespace kxcpu

/// Defines the TU's exports for the kernel spelled by the arguments (commas allowed).
#define KXCPU_KERNEL_ENTRY(...)                                                             \
  namespace {                                                                               \
  using kxcpu_sig = ::kxcpu::Signature<std::decay_t<decltype(&__VA_ARGS__)>>;               \
  }                                                                                         \
  extern "C" void kxcpu_tu_run_thread(void* const* args) { kxcpu_sig::run(&__VA_ARGS__, args); } \
  extern "C" const int kxcpu_tu_param_count = kxcpu_sig::count;                             \
  extern "C" const unsigned char* const kxcpu_tu_param_is_ptr = kxcpu_sig::is_ptr;          \
  extern "C" const unsigned* const kxcpu_tu_param_size = kxcpu_sig::size;                   \
  extern "C" const int kxcpu_tu_warp_size = KXCPU_WARP_SIZE;                                \
  extern "C" const int kxcpu_tu_traced = KXCPU_TRACED_BUILD;

#ifdef KXCPU_TRACE
#define KXCPU_TRACED_BUILD 1
#else
#define KXCPU_TRACED_BUILD 0
#endif
