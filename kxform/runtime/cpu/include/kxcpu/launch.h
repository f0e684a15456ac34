// The kernel TU's entry point: calls the kernel with arguments read from raw slots.
//
// The parameter types come from the kernel's own function type (template argument
// deduction on `&kernel`), so templated kernels need no type text from the caller, and
// the runtime can check each argument's kind and size against the real declaration.
//
// Included before the kernel's source (a `#define R 2` there cannot reach the templates
// below), while KXCPU_KERNEL_ENTRY expands after it: its expansion names only `kxcpu_`
// identifiers and keywords, so the source's macros (`run`, `size`, `args`...) leave it alone.
#pragma once

#include <cstring>
#include <type_traits>
#include <utility>

namespace kxcpu {

template <class F>
struct Signature {
  static_assert(sizeof(F) == 0, "the kernel spelling must name exactly one function (give template arguments)");
};

template <class R, class... P>
struct Signature<R (*)(P...)> {
  static_assert(std::is_void<R>::value, "a __global__ kernel returns void");
  static constexpr int kxcpu_count = static_cast<int>(sizeof...(P));
  static constexpr unsigned char kxcpu_is_ptr[sizeof...(P) + 1] = {static_cast<unsigned char>(std::is_pointer<P>::value)..., 0};
  static constexpr unsigned kxcpu_size[sizeof...(P) + 1] = {static_cast<unsigned>(sizeof(P))..., 0};

  template <class T>
  static T load(void* slot) {
    static_assert(std::is_trivially_copyable<T>::value, "kernel parameters must be trivially copyable");
    alignas(T) unsigned char raw[sizeof(T)];
    std::memcpy(raw, slot, sizeof(T));
    return *reinterpret_cast<T*>(raw);
  }
  template <std::size_t... I>
  static void call(R (*f)(P...), void* const* args, std::index_sequence<I...>) {
    f(load<P>(args[I])...);
  }
  static void kxcpu_run(R (*f)(P...), void* const* args) { call(f, args, std::index_sequence_for<P...>{}); }
};

template <class R, class... P>
struct Signature<R (*)(P...) noexcept> : Signature<R (*)(P...)> {};

}  // namespace kxcpu

/// What each thread does before the kernel: nothing, unless an emulation header the source
/// includes redefines it (kxcpu/pipeline.h clears the thread's queue of asynchronous
/// copies). It expands where KXCPU_KERNEL_ENTRY does, after the source.
#define KXCPU_THREAD_START() ((void)0)

/// Defines the TU's exports for the kernel spelled by the arguments (commas allowed).
#define KXCPU_KERNEL_ENTRY(...)                                                             \
  namespace {                                                                               \
  using kxcpu_sig = ::kxcpu::Signature<::std::decay_t<decltype(&__VA_ARGS__)>>;             \
  }                                                                                         \
  extern "C" void kxcpu_tu_run_thread(void* const* kxcpu_args) {                           \
    KXCPU_THREAD_START();                                                                   \
    kxcpu_sig::kxcpu_run(&__VA_ARGS__, kxcpu_args);                                         \
  }                                                                                         \
  extern "C" const int kxcpu_tu_param_count = kxcpu_sig::kxcpu_count;                       \
  extern "C" const unsigned char* const kxcpu_tu_param_is_ptr = kxcpu_sig::kxcpu_is_ptr;    \
  extern "C" const unsigned* const kxcpu_tu_param_size = kxcpu_sig::kxcpu_size;             \
  extern "C" const int kxcpu_tu_warp_size = KXCPU_WARP_SIZE;                                \
  extern "C" const int kxcpu_tu_traced = KXCPU_TRACED_BUILD;

#ifdef KXCPU_TRACE
#define KXCPU_TRACED_BUILD 1
#else
#define KXCPU_TRACED_BUILD 0
#endif
