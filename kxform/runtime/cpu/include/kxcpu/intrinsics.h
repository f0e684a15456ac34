// Device math, conversion, bit-manipulation and memory-hint intrinsics.
//
// Precise functions map to libm. The "fast" variants (`__expf`, `__fdividef`, ...)
// also map to the precise ones: results differ from the GPU by its documented error
// bounds either way, and differential checks compare with tolerances. Directed-rounding
// arithmetic (`__fadd_rz`, ...) is exact: it derives the rounding error with an
// error-free transform and steps one ulp when the requested direction needs it.
#pragma once

#include <time.h>

// ----------------------------------------------------------------------------------
// min / max: CUDA overloads them for every pair of arithmetic types (non-templates, so
// a user's own `template <class T> T min(T, T)` still resolves unambiguously).
#define KXCPU_MINMAX_PAIR(_KxA, _KxB)                                                        \
  static inline std::common_type_t<_KxA, _KxB> min(_KxA a, _KxB b) {                               \
    using _KxC = std::common_type_t<_KxA, _KxB>;                                                \
    return static_cast<_KxC>(b) < static_cast<_KxC>(a) ? static_cast<_KxC>(b) : static_cast<_KxC>(a); \
  }                                                                                    \
  static inline std::common_type_t<_KxA, _KxB> max(_KxA a, _KxB b) {                               \
    using _KxC = std::common_type_t<_KxA, _KxB>;                                                \
    return static_cast<_KxC>(a) < static_cast<_KxC>(b) ? static_cast<_KxC>(b) : static_cast<_KxC>(a); \
  }
#define KXCPU_MINMAX_ROW(_KxA)                                                              \
  KXCPU_MINMAX_PAIR(_KxA, int) KXCPU_MINMAX_PAIR(_KxA, unsigned int) KXCPU_MINMAX_PAIR(_KxA, long) \
  KXCPU_MINMAX_PAIR(_KxA, unsigned long) KXCPU_MINMAX_PAIR(_KxA, long long)                     \
  KXCPU_MINMAX_PAIR(_KxA, unsigned long long)
KXCPU_MINMAX_ROW(int)
KXCPU_MINMAX_ROW(unsigned int)
KXCPU_MINMAX_ROW(long)
KXCPU_MINMAX_ROW(unsigned long)
KXCPU_MINMAX_ROW(long long)
KXCPU_MINMAX_ROW(unsigned long long)
#undef KXCPU_MINMAX_ROW
#undef KXCPU_MINMAX_PAIR
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline float min(float a, int b) { return fminf(a, static_cast<float>(b)); }
static inline float min(int a, float b) { return fminf(static_cast<float>(a), b); }
static inline float max(float a, int b) { return fmaxf(a, static_cast<float>(b)); }
static inline float max(int a, float b) { return fmaxf(static_cast<float>(a), b); }
static inline double min(double a, float b) { return fmin(a, b); }
static inline double min(float a, double b) { return fmin(a, b); }
static inline double max(double a, float b) { return fmax(a, b); }
static inline double max(float a, double b) { return fmax(a, b); }
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a < b ? b : a; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a < b ? b : a; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a < b ? b : a; }

// ----------------------------------------------------------------------------------
// Single- and double-precision math beyond libm.
// glibc already declares these fast-math names as C functions (without exporting
// them), so they are defined here as C-linkage inline functions.
extern "C" {
inline float __expf(float x) noexcept { return expf(x); }
inline float __exp10f(float x) noexcept { return exp10f(x); }
inline float __logf(float x) noexcept { return logf(x); }
inline float __log2f(float x) noexcept { return log2f(x); }
inline float __log10f(float x) noexcept { return log10f(x); }
inline float __sinf(float x) noexcept { return sinf(x); }
inline float __cosf(float x) noexcept { return cosf(x); }
inline float __tanf(float x) noexcept { return tanf(x); }
inline float __powf(float x, float y) noexcept { return powf(x, y); }
inline void __sincosf(float x, float* s, float* c) noexcept { *s = sinf(x); *c = cosf(x); }
}
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
static inline float sinpif(float x) { return static_cast<float>(sin(M_PI * static_cast<double>(x))); }
static inline float cospif(float x) { return static_cast<float>(cos(M_PI * static_cast<double>(x))); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * static_cast<float>(M_SQRT1_2)); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
static inline float rnormf(int n, const float* a) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += static_cast<double>(a[i]) * a[i];
  return static_cast<float>(1.0 / sqrt(s));
}

namespace kxcpu {
/// erfinv by a rational first guess refined with Newton steps in double precision.
static inline double erfinv_d(double y) {
  if (!(y > -1.0 && y < 1.0)) return y == 1.0 ? HUGE_VAL : (y == -1.0 ? -HUGE_VAL : NAN);
  double w = -log((1.0 - y) * (1.0 + y)), x;
  if (w < 5.0) {
    w -= 2.5;
    x = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                     -0.00125372503, -0.00417768164, 0.246640727, 1.50140941}) x = c + x * w;
  } else {
    w = sqrt(w) - 3.0;
    x = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                     -0.0076224613, 0.00943887047, 1.00167406, 2.83297682}) x = c + x * w;
  }
  x *= y;
  for (int i = 0; i < 3; ++i) x -= (erf(x) - y) / (M_2_SQRTPI * exp(-x * x));
  return x;
}
}  // namespace kxcpu
static inline double erfinv(double y) { return kxcpu::erfinv_d(y); }
static inline float erfinvf(float y) { return static_cast<float>(kxcpu::erfinv_d(y)); }
static inline double erfcinv(double y) { return kxcpu::erfinv_d(1.0 - y); }
static inline float erfcinvf(float y) { return static_cast<float>(kxcpu::erfinv_d(1.0 - static_cast<double>(y))); }
static inline float normcdfinvf(float p) { return static_cast<float>(-M_SQRT2 * kxcpu::erfinv_d(1.0 - 2.0 * p)); }
static inline double normcdfinv(double p) { return -M_SQRT2 * kxcpu::erfinv_d(1.0 - 2.0 * p); }

// ----------------------------------------------------------------------------------
// Correctly rounded arithmetic with an explicit rounding direction.
namespace kxcpu {
enum RoundDir { kRn, kRz, kRu, kRd };
/// Moves the round-to-nearest result `r` one ulp when the exact value (r + err) lies on
/// the side the requested direction rounds to.
template <class _KxT>
static inline _KxT round_dir(_KxT r, _KxT err, RoundDir d) {
  if (d == kRn || err == 0 || !std::isfinite(r)) return r;
  const _KxT inf = std::numeric_limits<_KxT>::infinity();
  if (d == kRu) return err > 0 ? std::nextafter(r, inf) : r;
  if (d == kRd) return err < 0 ? std::nextafter(r, -inf) : r;
  return ((r > 0 && err < 0) || (r < 0 && err > 0)) ? std::nextafter(r, _KxT(0)) : r;
}
/// IEEE result of a finite value too large for T: directed modes stop at the largest
/// finite value on the side they round away from.
template <class _KxT>
static inline _KxT overflow_dir(bool positive, RoundDir d) {
  const _KxT inf = std::numeric_limits<_KxT>::infinity(), big = std::numeric_limits<_KxT>::max();
  if (d == kRz) return positive ? big : -big;
  if (d == kRu) return positive ? inf : -big;
  if (d == kRd) return positive ? big : -inf;
  return positive ? inf : -inf;
}
template <class _KxT> static inline _KxT add_dir(_KxT a, _KxT b, RoundDir d) {
  _KxT s = a + b, bb = s - a;
  if (std::isinf(s) && std::isfinite(a) && std::isfinite(b)) return overflow_dir<_KxT>(s > 0, d);
  return round_dir(s, (a - (s - bb)) + (b - bb), d);
}
template <class _KxT> static inline _KxT mul_dir(_KxT a, _KxT b, RoundDir d) {
  _KxT p = a * b;
  if (std::isinf(p) && std::isfinite(a) && std::isfinite(b)) return overflow_dir<_KxT>(p > 0, d);
  return round_dir(p, std::fma(a, b, -p), d);
}
template <class _KxT> static inline _KxT div_dir(_KxT a, _KxT b, RoundDir d) {
  _KxT q = a / b, r = std::fma(-q, b, a);
  if (std::isinf(q) && std::isfinite(a) && b != 0) return overflow_dir<_KxT>(q > 0, d);
  return round_dir(q, b > 0 ? r : -r, d);
}
template <class _KxT> static inline _KxT sqrt_dir(_KxT x, RoundDir d) {
  _KxT s = std::sqrt(x);
  return round_dir(s, std::fma(-s, s, x), d);
}
// Float products, quotients and roots computed in double are exact (products) or never
// land on a float exactly unless the true value does, and double does not underflow
// where float does: the residual's sign survives subnormal float results, where the
// float FMA residual above would round to zero.
static inline float f_from_d(double v, RoundDir d) {
  const float r = static_cast<float>(v);
  if (std::isinf(r) && std::isfinite(v)) return overflow_dir<float>(v > 0, d);
  const double rd = static_cast<double>(r);
  return round_dir(r, v > rd ? 1.0f : (v < rd ? -1.0f : 0.0f), d);  // only the sign matters
}
template <> inline float mul_dir<float>(float a, float b, RoundDir d) { return f_from_d(static_cast<double>(a) * b, d); }
template <> inline float div_dir<float>(float a, float b, RoundDir d) { return f_from_d(static_cast<double>(a) / b, d); }
template <> inline float sqrt_dir<float>(float x, RoundDir d) { return f_from_d(std::sqrt(static_cast<double>(x)), d); }
}  // namespace kxcpu
#define KXCPU_DIRECTED(_KxT, SUF, _KxM)                                                                   \
  static inline _KxT __##_KxM##add_##SUF(_KxT a, _KxT b) { return kxcpu::add_dir<_KxT>(a, b, kxcpu::k##SUF##_); } \
  static inline _KxT __##_KxM##sub_##SUF(_KxT a, _KxT b) { return kxcpu::add_dir<_KxT>(a, -b, kxcpu::k##SUF##_); } \
  static inline _KxT __##_KxM##mul_##SUF(_KxT a, _KxT b) { return kxcpu::mul_dir<_KxT>(a, b, kxcpu::k##SUF##_); } \
  static inline _KxT __##_KxM##div_##SUF(_KxT a, _KxT b) { return kxcpu::div_dir<_KxT>(a, b, kxcpu::k##SUF##_); } \
  static inline _KxT __##_KxM##sqrt_##SUF(_KxT x) { return kxcpu::sqrt_dir<_KxT>(x, kxcpu::k##SUF##_); }       \
  static inline _KxT __##_KxM##rcp_##SUF(_KxT x) { return kxcpu::div_dir<_KxT>(_KxT(1), x, kxcpu::k##SUF##_); }
namespace kxcpu {
constexpr RoundDir krn_ = kRn, krz_ = kRz, kru_ = kRu, krd_ = kRd;
}
KXCPU_DIRECTED(float, rn, f)
KXCPU_DIRECTED(float, rz, f)
KXCPU_DIRECTED(float, ru, f)
KXCPU_DIRECTED(float, rd, f)
KXCPU_DIRECTED(double, rn, d)
KXCPU_DIRECTED(double, rz, d)
KXCPU_DIRECTED(double, ru, d)
KXCPU_DIRECTED(double, rd, d)
#undef KXCPU_DIRECTED
static inline float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }

// ----------------------------------------------------------------------------------
// Conversions. Float-to-integer conversions saturate and map NaN to 0, like the GPU's
// cvt instructions (a plain C++ cast would be undefined out of range).
namespace kxcpu {
template <class _KxI, class _KxF>
static inline _KxI sat_cast(_KxF x) {
  if (std::isnan(x)) return 0;
  if (x <= static_cast<_KxF>(std::numeric_limits<_KxI>::min())) return std::numeric_limits<_KxI>::min();
  if (x >= static_cast<_KxF>(std::numeric_limits<_KxI>::max())) return std::numeric_limits<_KxI>::max();
  return static_cast<_KxI>(x);
}
}  // namespace kxcpu
#define KXCPU_F2I(_KxF, FN, _KxI, IN)                                                                    \
  static inline _KxI __##FN##2##IN##_rn(_KxF x) { return kxcpu::sat_cast<_KxI>(std::nearbyint(x)); } \
  static inline _KxI __##FN##2##IN##_rz(_KxF x) { return kxcpu::sat_cast<_KxI>(std::trunc(x)); }     \
  static inline _KxI __##FN##2##IN##_rd(_KxF x) { return kxcpu::sat_cast<_KxI>(std::floor(x)); }     \
  static inline _KxI __##FN##2##IN##_ru(_KxF x) { return kxcpu::sat_cast<_KxI>(std::ceil(x)); }
KXCPU_F2I(float, float, int, int)
KXCPU_F2I(float, float, unsigned int, uint)
KXCPU_F2I(float, float, long long, ll)
KXCPU_F2I(float, float, unsigned long long, ull)
KXCPU_F2I(double, double, int, int)
KXCPU_F2I(double, double, unsigned int, uint)
KXCPU_F2I(double, double, long long, ll)
KXCPU_F2I(double, double, unsigned long long, ull)
#undef KXCPU_F2I
static inline float __int2float_rn(int x) { return static_cast<float>(x); }
static inline float __uint2float_rn(unsigned int x) { return static_cast<float>(x); }
static inline float __ll2float_rn(long long x) { return static_cast<float>(x); }
static inline float __ull2float_rn(unsigned long long x) { return static_cast<float>(x); }
static inline double __int2double_rn(int x) { return x; }
static inline double __uint2double_rn(unsigned int x) { return x; }
static inline double __ll2double_rn(long long x) { return static_cast<double>(x); }
static inline float __double2float_rn(double x) { return static_cast<float>(x); }
namespace kxcpu {
template <class To, class From>
static inline To bit_cast(From v) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast needs equal sizes");
  To r;
  std::memcpy(&r, &v, sizeof(To));
  return r;
}
}  // namespace kxcpu
static inline int __float_as_int(float x) { return kxcpu::bit_cast<int>(x); }
static inline unsigned int __float_as_uint(float x) { return kxcpu::bit_cast<unsigned int>(x); }
static inline float __int_as_float(int x) { return kxcpu::bit_cast<float>(x); }
static inline float __uint_as_float(unsigned int x) { return kxcpu::bit_cast<float>(x); }
static inline long long __double_as_longlong(double x) { return kxcpu::bit_cast<long long>(x); }
static inline double __longlong_as_double(long long x) { return kxcpu::bit_cast<double>(x); }
static inline int __double2hiint(double x) { return static_cast<int>(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return static_cast<int>(__double_as_longlong(x)); }
static inline double __hiloint2double(int hi, int lo) {
  return __longlong_as_double(static_cast<long long>((static_cast<unsigned long long>(static_cast<unsigned>(hi)) << 32) | static_cast<unsigned>(lo)));
}

// ----------------------------------------------------------------------------------
// Integer and bit intrinsics.
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
  return (static_cast<unsigned long long>(__brev(static_cast<unsigned>(x))) << 32) | __brev(static_cast<unsigned>(x >> 32));
}
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long v = (static_cast<unsigned long long>(y) << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
static inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (s & 31)) >> 32);
}
static inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>((v << (s > 32 ? 32 : s)) >> 32);
}
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (s & 31));
}
static inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int s) {
  unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  return static_cast<unsigned>(v >> (s > 32 ? 32 : s));
}
static inline int __mulhi(int a, int b) { return static_cast<int>((static_cast<long long>(a) * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return static_cast<unsigned>((static_cast<unsigned long long>(a) * b) >> 32);
}
static inline long long __mul64hi(long long a, long long b) { return static_cast<long long>((static_cast<__int128>(a) * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
}
static inline int __mul24(int a, int b) { return ((a << 8) >> 8) * ((b << 8) >> 8); }
static inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
static inline unsigned int __sad(int x, int y, unsigned int z) { return (x > y ? static_cast<unsigned>(x - y) : static_cast<unsigned>(y - x)) + z; }
static inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
static inline int __hadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y) >> 1); }
static inline int __rhadd(int x, int y) { return static_cast<int>((static_cast<long long>(x) + y + 1) >> 1); }
static inline unsigned int __uhadd(unsigned int x, unsigned int y) { return static_cast<unsigned>((static_cast<unsigned long long>(x) + y) >> 1); }
static inline unsigned int __urhadd(unsigned int x, unsigned int y) { return static_cast<unsigned>((static_cast<unsigned long long>(x) + y + 1) >> 1); }
static inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += static_cast<signed char>(a >> (8 * i)) * static_cast<signed char>(b >> (8 * i));
  return c;
}
static inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return c;
}

// ----------------------------------------------------------------------------------
// Cache-hinted loads and stores are plain accesses here, with the GPU's alignment rule:
// an access of a T must be aligned to alignof(T) (16 bytes for a float4), or it faults
// ("misaligned address"). A plain dereference of a misaligned float4 pointer works on the
// host, so a vector load meant for the GPU is checked when it goes through these.
namespace kxcpu {
template <class _KxT>
static inline const _KxT* aligned_access(const _KxT* p, const char* what, const char* f, int l) {
  if (reinterpret_cast<std::uintptr_t>(p) % alignof(_KxT) != 0) device_trap(what, f, l);
  return p;
}
}  // namespace kxcpu
#define KXCPU_HINTED_LOAD(_KxN)                                                                          \
  template <class _KxT>                                                                              \
  static inline _KxT _KxN(const _KxT* p, const char* kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()) { \
    return *kxcpu::aligned_access(p, "misaligned address: " #_KxN " of a pointer not aligned to its type", kx_file, kx_line); \
  }
#define KXCPU_HINTED_STORE(_KxN)                                                                         \
  template <class _KxT>                                                                              \
  static inline void _KxN(_KxT* p, _KxT v, const char* kx_file = __builtin_FILE(), int kx_line = __builtin_LINE()) { \
    *const_cast<_KxT*>(kxcpu::aligned_access(p, "misaligned address: " #_KxN " of a pointer not aligned to its type", kx_file, kx_line)) = v; \
  }
KXCPU_HINTED_LOAD(__ldg)
KXCPU_HINTED_LOAD(__ldcg)
KXCPU_HINTED_LOAD(__ldca)
KXCPU_HINTED_LOAD(__ldcs)
KXCPU_HINTED_LOAD(__ldlu)
KXCPU_HINTED_LOAD(__ldcv)
KXCPU_HINTED_STORE(__stcg)
KXCPU_HINTED_STORE(__stcs)
KXCPU_HINTED_STORE(__stwb)
KXCPU_HINTED_STORE(__stwt)
#undef KXCPU_HINTED_LOAD
#undef KXCPU_HINTED_STORE

// ----------------------------------------------------------------------------------
// Fences, timers, sleeping and traps.
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline long long clock64() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
static inline unsigned long long __globaltimer() { return static_cast<unsigned long long>(clock64()); }
static inline long long wall_clock64() { return clock64(); }
/// A sleeping thread lets the rest of its block run: spin-waits on a flag that another
/// thread of the block sets then make progress instead of spinning forever.
static inline void __nanosleep(unsigned int) { kxcpu::fiber_yield(); }
[[noreturn]] static inline void __trap(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  kxcpu::device_trap("__trap()", file, line);
}
[[noreturn]] static inline void __brkpt(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  kxcpu::device_trap("__brkpt()", file, line);
}
static inline void __prof_trigger(int) {}
