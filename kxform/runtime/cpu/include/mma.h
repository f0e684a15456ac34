// nvcuda::wmma (tensor-core fragments) for the kxform CPU runtime.
//
// On a GPU a fragment is spread over the 32 lanes of a warp in an unspecified layout.
// Here every lane holds the whole tile, in row-major order: element-wise loops over
// `frag.x[0 .. num_elements)` then touch every element once per lane, which gives the
// same result as the GPU's disjoint slices (code that depends on the GPU's private
// lane layout is not portable across GPU generations either, and is not emulated).
// The *_sync operations are warp rendezvous (__syncwarp) like on the GPU, so data other
// lanes wrote before the call is seen. `mma_sync` computes D = A * B + C in float:
// half and bf16 products are exact in float, tf32 inputs keep their upper 19 bits
// (the tensor core ignores the rest; __float_to_tf32 rounds them away first), and the
// sum runs over k in order, so the last bit can differ from a GPU, whose summation
// order inside the tensor core is not specified. Supported: matrix_a / matrix_b of
// half, bf16 (m16n16k16, m32n8k16, m8n32k16) and tf32 (m16n16k8), double (m8n8k4);
// accumulators of float (and half for half inputs, double for double); row- and
// column-major inputs and memory layouts. Other shapes and types (int8, 4-bit, 1-bit)
// stop the build with "kxcpu-unsupported", which the runtime reports as unsupported.
#pragma once
#include "kxcpu/device.h"
#include "kxcpu/half.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace precision {
struct tf32 {};
}  // namespace precision
namespace experimental {
namespace precision {
struct u4 {};
struct s4 {};
struct b1 {};
}  // namespace precision
}  // namespace experimental

template <class _KxT>
struct storage_element_type {
  using type = _KxT;
};
template <>
struct storage_element_type<precision::tf32> {
  using type = float;
};

}  // namespace wmma
}  // namespace nvcuda

namespace kxcpu {
namespace wmma_impl {
namespace w = ::nvcuda::wmma;

template <class _KxT>
constexpr bool is_input() {
  return std::is_same<_KxT, __half>::value || std::is_same<_KxT, __nv_bfloat16>::value ||
         std::is_same<_KxT, w::precision::tf32>::value || std::is_same<_KxT, double>::value;
}

template <int _KxM, int _KxN, int _KxK, class _KxT>
constexpr bool shape_ok() {
  if (std::is_same<_KxT, w::precision::tf32>::value) return _KxM == 16 && _KxN == 16 && _KxK == 8;
  if (std::is_same<_KxT, double>::value) return _KxM == 8 && _KxN == 8 && _KxK == 4;
  return (_KxM == 16 && _KxN == 16 && _KxK == 16) || (_KxM == 32 && _KxN == 8 && _KxK == 16) || (_KxM == 8 && _KxN == 32 && _KxK == 16);
}

template <class Use, int _KxM, int _KxN, int _KxK>
struct dims {
  static constexpr int rows = std::is_same<Use, w::matrix_b>::value ? _KxK : _KxM;
  static constexpr int cols = std::is_same<Use, w::matrix_a>::value ? _KxK : _KxN;
};

template <class _KxT>
inline float to_float(const _KxT& v) {
  return static_cast<float>(v);
}
/// What a tensor core reads of a tf32 operand: the upper 19 bits of the float.
inline float tf32_bits(float f) { return bit_cast<float>(bit_cast<unsigned>(f) & 0xffffe000u); }

inline void warp_sync(const char* file, int line) { vote(kSync, 0xffffffffull, 0, file, line); }

}  // namespace wmma_impl
}  // namespace kxcpu

namespace nvcuda {
namespace wmma {

template <class Use, int _KxM, int _KxN, int _KxK, class _KxT, class Layout = void>
class fragment {
  static_assert(std::is_same<Use, accumulator>::value ? (std::is_same<_KxT, float>::value || std::is_same<_KxT, __half>::value ||
                                                          std::is_same<_KxT, double>::value)
                                                       : ::kxcpu::wmma_impl::is_input<_KxT>(),
                "kxcpu-unsupported: this nvcuda::wmma element type (only half, bf16, tf32 and double inputs with "
                "float, half or double accumulators are emulated)");
  static_assert(std::is_same<Use, accumulator>::value || ::kxcpu::wmma_impl::shape_ok<_KxM, _KxN, _KxK, _KxT>(),
                "kxcpu-unsupported: this nvcuda::wmma fragment shape");

 public:
  using element_type = _KxT;
  using storage_element_type = typename ::nvcuda::wmma::storage_element_type<_KxT>::type;
  static constexpr int rows = ::kxcpu::wmma_impl::dims<Use, _KxM, _KxN, _KxK>::rows;
  static constexpr int cols = ::kxcpu::wmma_impl::dims<Use, _KxM, _KxN, _KxK>::cols;
  static constexpr int num_elements = rows * cols;
  storage_element_type x[num_elements];
};

template <class Use, int _KxM, int _KxN, int _KxK, class _KxT, class _KxL>
inline void fill_fragment(fragment<Use, _KxM, _KxN, _KxK, _KxT, _KxL>& f,
                          const typename fragment<Use, _KxM, _KxN, _KxK, _KxT, _KxL>::storage_element_type& v) {
  for (int i = 0; i < f.num_elements; ++i) f.x[i] = v;
}

/// matrix_a / matrix_b: the layout is part of the fragment's type.
template <class Use, int _KxM, int _KxN, int _KxK, class _KxT, class _KxL, class _KxP>
inline void load_matrix_sync(fragment<Use, _KxM, _KxN, _KxK, _KxT, _KxL>& f, const _KxP* p, unsigned ldm,
                             const char* kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()) {
  static_assert(std::is_same<_KxL, row_major>::value || std::is_same<_KxL, col_major>::value,
                "load_matrix_sync without a layout argument needs a matrix_a/matrix_b fragment");
  ::kxcpu::wmma_impl::warp_sync(kx_file, kx_line);
  const bool row = std::is_same<_KxL, row_major>::value;
  for (int r = 0; r < f.rows; ++r)
    for (int c = 0; c < f.cols; ++c)
      f.x[r * f.cols + c] = p[row ? static_cast<std::size_t>(r) * ldm + c : static_cast<std::size_t>(c) * ldm + r];
}

/// accumulator: the memory layout is an argument.
template <int _KxM, int _KxN, int _KxK, class _KxT, class _KxP>
inline void load_matrix_sync(fragment<accumulator, _KxM, _KxN, _KxK, _KxT>& f, const _KxP* p, unsigned ldm, layout_t layout,
                             const char* kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()) {
  ::kxcpu::wmma_impl::warp_sync(kx_file, kx_line);
  for (int r = 0; r < _KxM; ++r)
    for (int c = 0; c < _KxN; ++c)
      f.x[r * _KxN + c] = static_cast<_KxT>(p[layout == mem_row_major ? static_cast<std::size_t>(r) * ldm + c
                                                                  : static_cast<std::size_t>(c) * ldm + r]);
}

template <int _KxM, int _KxN, int _KxK, class _KxT, class _KxP>
inline void store_matrix_sync(_KxP* p, const fragment<accumulator, _KxM, _KxN, _KxK, _KxT>& f, unsigned ldm, layout_t layout,
                              const char* kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()) {
  ::kxcpu::wmma_impl::warp_sync(kx_file, kx_line);
  for (int r = 0; r < _KxM; ++r)
    for (int c = 0; c < _KxN; ++c)
      p[layout == mem_row_major ? static_cast<std::size_t>(r) * ldm + c : static_cast<std::size_t>(c) * ldm + r] =
          static_cast<_KxP>(f.x[r * _KxN + c]);
  ::kxcpu::wmma_impl::warp_sync(kx_file, kx_line);
}

template <int _KxM, int _KxN, int _KxK, class _KxTD, class _KxTA, class _KxLA, class _KxTB, class _KxLB, class _KxTC>
inline void mma_sync(fragment<accumulator, _KxM, _KxN, _KxK, _KxTD>& d, const fragment<matrix_a, _KxM, _KxN, _KxK, _KxTA, _KxLA>& a,
                     const fragment<matrix_b, _KxM, _KxN, _KxK, _KxTB, _KxLB>& b, const fragment<accumulator, _KxM, _KxN, _KxK, _KxTC>& c,
                     bool satf = false, const char* kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()) {
  static_assert(std::is_same<_KxTA, _KxTB>::value, "mma_sync: matrix_a and matrix_b must have the same element type");
  (void)satf;
  ::kxcpu::wmma_impl::warp_sync(kx_file, kx_line);
  using Acc = typename std::conditional<std::is_same<_KxTA, double>::value, double, float>::type;
  const bool tf32 = std::is_same<_KxTA, precision::tf32>::value;
  Acc out[_KxM * _KxN];
  for (int i = 0; i < _KxM; ++i)
    for (int j = 0; j < _KxN; ++j) {
      Acc sum = static_cast<Acc>(c.x[i * _KxN + j]);
      for (int k = 0; k < _KxK; ++k) {
        Acc av = static_cast<Acc>(a.x[i * _KxK + k]), bv = static_cast<Acc>(b.x[k * _KxN + j]);
        if (tf32) {
          av = static_cast<Acc>(::kxcpu::wmma_impl::tf32_bits(static_cast<float>(av)));
          bv = static_cast<Acc>(::kxcpu::wmma_impl::tf32_bits(static_cast<float>(bv)));
        }
        sum += av * bv;
      }
      out[i * _KxN + j] = sum;
    }
  for (int i = 0; i < _KxM * _KxN; ++i) d.x[i] = static_cast<_KxTD>(out[i]);
}

/// cvt.rna.tf32.f32: round to the nearest tf32 value, ties away from zero; kept in a float.
inline float __float_to_tf32(float f) {
  const unsigned x = ::kxcpu::bit_cast<unsigned>(f);
  if ((x & 0x7f800000u) == 0x7f800000u) return f;  // Inf and NaN stay
  return ::kxcpu::bit_cast<float>((x + 0x1000u) & 0xffffe000u);
}

}  // namespace wmma
}  // namespace nvcuda
