// __half and __nv_bfloat16 (and their pairs) with the GPU's conversions and arithmetic.
//
// Conversions from float round to nearest even exactly like the GPU (NaN becomes the
// canonical 0x7fff). Arithmetic converts to float, operates and rounds back: for +, -,
// *, / and sqrt this equals the correctly rounded half/bf16 result, because float
// carries more than twice the precision plus two bits (no double-rounding error).
#pragma once

namespace kxcpu {
static inline unsigned short f2h_rn(float f) {
  unsigned x = bit_cast<unsigned>(f);
  unsigned sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  if (ax >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);  // >= 65520: inf
  if (ax < 0x38800000u) {  // below 2^-14: subnormal half, units of 2^-24
    float s = __builtin_rintf(bit_cast<float>(ax) * 16777216.0f);
    return static_cast<unsigned short>(sign | static_cast<unsigned>(s));
  }
  ax -= 112u << 23;
  return static_cast<unsigned short>(sign | ((ax + 0x0fffu + ((ax >> 13) & 1u)) >> 13));
}
static inline unsigned short f2h_rz(float f) {
  unsigned x = bit_cast<unsigned>(f);
  unsigned sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7fff;
  if (ax == 0x7f800000u) return static_cast<unsigned short>(sign | 0x7c00u);
  if (ax >= 0x47800000u) return static_cast<unsigned short>(sign | 0x7bffu);  // >= 65536: max finite
  if (ax < 0x38800000u) return static_cast<unsigned short>(sign | static_cast<unsigned>(bit_cast<float>(ax) * 16777216.0f));
  return static_cast<unsigned short>(sign | ((ax - (112u << 23)) >> 13));
}
static inline float h2f(unsigned short h) {
  unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bit_cast<float>(m != 0 ? 0x7fffffffu : sign | 0x7f800000u);  // GPU: canonical NaN
  if (e == 0) {
    float v = static_cast<float>(m) * 5.9604644775390625e-08f;  // m * 2^-24, exact
    return sign ? -v : v;
  }
  return bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}
static inline unsigned short f2bf_rn(float f) {
  unsigned x = bit_cast<unsigned>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return static_cast<unsigned short>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
static inline unsigned short f2bf_rz(float f) {
  unsigned x = bit_cast<unsigned>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
  return static_cast<unsigned short>(x >> 16);
}
static inline float bf2f(unsigned short b) { return bit_cast<float>(static_cast<unsigned>(b) << 16); }
/// double -> float rounding to odd: a later round-to-nearest to half/bf16 is then exact.
static inline float d2f_odd(double d) {
  float f = static_cast<float>(d);
  if (!std::isfinite(f) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return bit_cast<float>(bit_cast<unsigned>(f) | 1u);
}
}  // namespace kxcpu

struct __half_raw { unsigned short x; };
struct __nv_bfloat16_raw { unsigned short x; };

#define KXCPU_HALF_CLASS(_KxH, RAW, ENC, DEC)                                              \
  struct __attribute__((aligned(2))) _KxH {                                                \
    unsigned short __x;                                                                 \
    _KxH() = default;                                                                      \
    constexpr _KxH(const RAW& r) : __x(r.x) {}                                             \
    _KxH(float f) : __x(kxcpu::ENC(f)) {}                                                  \
    _KxH(double d) : __x(kxcpu::ENC(kxcpu::d2f_odd(d))) {}                                 \
    _KxH(int v) : _KxH(static_cast<float>(v)) {}                                              \
    _KxH(unsigned int v) : _KxH(static_cast<float>(v)) {}                                     \
    _KxH(short v) : _KxH(static_cast<float>(v)) {}                                            \
    _KxH(unsigned short v) : _KxH(static_cast<float>(v)) {}                                   \
    _KxH(long long v) : _KxH(kxcpu::d2f_odd(static_cast<double>(v))) {}                       \
    _KxH(unsigned long long v) : _KxH(kxcpu::d2f_odd(static_cast<double>(v))) {}              \
    operator RAW() const { return RAW{__x}; }                                           \
    operator float() const { return kxcpu::DEC(__x); }                                  \
    _KxH& operator+=(const _KxH& o) { return *this = _KxH(float(*this) + float(o)); }            \
    _KxH& operator-=(const _KxH& o) { return *this = _KxH(float(*this) - float(o)); }            \
    _KxH& operator*=(const _KxH& o) { return *this = _KxH(float(*this) * float(o)); }            \
    _KxH& operator/=(const _KxH& o) { return *this = _KxH(float(*this) / float(o)); }            \
    _KxH& operator++() { return *this += _KxH(1.0f); }                                        \
    _KxH& operator--() { return *this -= _KxH(1.0f); }                                        \
    _KxH operator++(int) { _KxH t = *this; *this += _KxH(1.0f); return t; }                      \
    _KxH operator--(int) { _KxH t = *this; *this -= _KxH(1.0f); return t; }                      \
  };                                                                                    \
  static inline _KxH operator+(const _KxH& a, const _KxH& b) { return _KxH(float(a) + float(b)); } \
  static inline _KxH operator-(const _KxH& a, const _KxH& b) { return _KxH(float(a) - float(b)); } \
  static inline _KxH operator*(const _KxH& a, const _KxH& b) { return _KxH(float(a) * float(b)); } \
  static inline _KxH operator/(const _KxH& a, const _KxH& b) { return _KxH(float(a) / float(b)); } \
  static inline _KxH operator-(const _KxH& a) { _KxH r = a; r.__x ^= 0x8000u; return r; }       \
  static inline _KxH operator+(const _KxH& a) { return a; }                                   \
  static inline bool operator==(const _KxH& a, const _KxH& b) { return float(a) == float(b); } \
  static inline bool operator!=(const _KxH& a, const _KxH& b) { return float(a) != float(b); } \
  static inline bool operator<(const _KxH& a, const _KxH& b) { return float(a) < float(b); }  \
  static inline bool operator>(const _KxH& a, const _KxH& b) { return float(a) > float(b); }  \
  static inline bool operator<=(const _KxH& a, const _KxH& b) { return float(a) <= float(b); } \
  static inline bool operator>=(const _KxH& a, const _KxH& b) { return float(a) >= float(b); }

KXCPU_HALF_CLASS(__half, __half_raw, f2h_rn, h2f)
KXCPU_HALF_CLASS(__nv_bfloat16, __nv_bfloat16_raw, f2bf_rn, bf2f)
#undef KXCPU_HALF_CLASS

#define KXCPU_PAIR_CLASS(_KxH2, _KxH)                                                                 \
  struct __attribute__((aligned(4))) _KxH2 {                                                       \
    _KxH x, y;                                                                                     \
    _KxH2() = default;                                                                             \
    _KxH2(const _KxH& a, const _KxH& b) : x(a), y(b) {}                                                  \
    _KxH2& operator+=(const _KxH2& o) { x += o.x; y += o.y; return *this; }                           \
    _KxH2& operator-=(const _KxH2& o) { x -= o.x; y -= o.y; return *this; }                           \
    _KxH2& operator*=(const _KxH2& o) { x *= o.x; y *= o.y; return *this; }                           \
    _KxH2& operator/=(const _KxH2& o) { x /= o.x; y /= o.y; return *this; }                           \
  };                                                                                            \
  static inline _KxH2 operator+(const _KxH2& a, const _KxH2& b) { return _KxH2(a.x + b.x, a.y + b.y); }    \
  static inline _KxH2 operator-(const _KxH2& a, const _KxH2& b) { return _KxH2(a.x - b.x, a.y - b.y); }    \
  static inline _KxH2 operator*(const _KxH2& a, const _KxH2& b) { return _KxH2(a.x * b.x, a.y * b.y); }    \
  static inline _KxH2 operator/(const _KxH2& a, const _KxH2& b) { return _KxH2(a.x / b.x, a.y / b.y); }    \
  static inline _KxH2 operator-(const _KxH2& a) { return _KxH2(-a.x, -a.y); }                           \
  static inline bool operator==(const _KxH2& a, const _KxH2& b) { return a.x == b.x && a.y == b.y; } \
  static inline bool operator!=(const _KxH2& a, const _KxH2& b) { return !(a == b); }

KXCPU_PAIR_CLASS(__half2, __half)
KXCPU_PAIR_CLASS(__nv_bfloat162, __nv_bfloat16)
#undef KXCPU_PAIR_CLASS

typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

// Conversions and packing; NAME/NAME2 give CUDA's spelling (half/half2, bfloat16/bfloat162).
#define KXCPU_HALF_CONV(_KxH, _KxH2, NAME, NAME2, ENC, ENCZ, DEC)                                     \
  static inline _KxH __float2##NAME(float f) { return _KxH(f); }                                     \
  static inline _KxH __float2##NAME##_rn(float f) { return _KxH(f); }                                \
  static inline _KxH __float2##NAME##_rz(float f) { _KxH r; r.__x = kxcpu::ENCZ(f); return r; }      \
  static inline _KxH __double2##NAME(double d) { return _KxH(d); }                                   \
  static inline float __##NAME##2float(_KxH h) { return float(h); }                               \
  static inline _KxH2 __float2##NAME2##_rn(float f) { return _KxH2(_KxH(f), _KxH(f)); }                   \
  static inline _KxH2 __floats2##NAME2##_rn(float a, float b) { return _KxH2(_KxH(a), _KxH(b)); }          \
  static inline _KxH2 __float22##NAME2##_rn(float2 v) { return _KxH2(_KxH(v.x), _KxH(v.y)); }              \
  static inline float2 __##NAME2##2float2(_KxH2 v) { return make_float2(float(v.x), float(v.y)); } \
  static inline _KxH __low2##NAME(_KxH2 v) { return v.x; }                                           \
  static inline _KxH __high2##NAME(_KxH2 v) { return v.y; }                                          \
  static inline float __low2float(_KxH2 v) { return float(v.x); }                                 \
  static inline float __high2float(_KxH2 v) { return float(v.y); }                                \
  static inline _KxH2 __halves2##NAME2(_KxH a, _KxH b) { return _KxH2(a, b); }                             \
  static inline _KxH2 __##NAME##2##NAME2(_KxH a) { return _KxH2(a, a); }                                \
  static inline _KxH2 __lowhigh2highlow(_KxH2 v) { return _KxH2(v.y, v.x); }                            \
  static inline _KxH2 __lows2##NAME2(_KxH2 a, _KxH2 b) { return _KxH2(a.x, b.x); }                         \
  static inline _KxH2 __highs2##NAME2(_KxH2 a, _KxH2 b) { return _KxH2(a.y, b.y); }                        \
  static inline unsigned short __##NAME##_as_ushort(_KxH h) { return h.__x; }                     \
  static inline short __##NAME##_as_short(_KxH h) { return static_cast<short>(h.__x); }           \
  static inline _KxH __ushort_as_##NAME(unsigned short u) { _KxH r; r.__x = u; return r; }           \
  static inline _KxH __short_as_##NAME(short u) { _KxH r; r.__x = static_cast<unsigned short>(u); return r; } \
  static inline int __##NAME##2int_rn(_KxH h) { return __float2int_rn(float(h)); }                \
  static inline int __##NAME##2int_rz(_KxH h) { return __float2int_rz(float(h)); }                \
  static inline int __##NAME##2int_rd(_KxH h) { return __float2int_rd(float(h)); }                \
  static inline int __##NAME##2int_ru(_KxH h) { return __float2int_ru(float(h)); }                \
  static inline unsigned __##NAME##2uint_rz(_KxH h) { return __float2uint_rz(float(h)); }         \
  static inline long long __##NAME##2ll_rz(_KxH h) { return __float2ll_rz(float(h)); }            \
  static inline short __##NAME##2short_rz(_KxH h) { return static_cast<short>(__float2int_rz(float(h))); } \
  static inline _KxH __int2##NAME##_rn(int v) { return _KxH(v); }                                    \
  static inline _KxH __uint2##NAME##_rn(unsigned v) { return _KxH(v); }                              \
  static inline _KxH __short2##NAME##_rn(short v) { return _KxH(v); }                                \
  static inline _KxH __ushort2##NAME##_rn(unsigned short v) { return _KxH(v); }                      \
  static inline _KxH __ll2##NAME##_rn(long long v) { return _KxH(v); }

KXCPU_HALF_CONV(__half, __half2, half, half2, f2h_rn, f2h_rz, h2f)
KXCPU_HALF_CONV(__nv_bfloat16, __nv_bfloat162, bfloat16, bfloat162, f2bf_rn, f2bf_rz, bf2f)
#undef KXCPU_HALF_CONV

// Arithmetic, comparison and math, overloaded on both types like CUDA's headers.
#define KXCPU_HALF_MATH(_KxH, _KxH2)                                                                    \
  static inline _KxH __hadd(_KxH a, _KxH b) { return a + b; }                                             \
  static inline _KxH __hsub(_KxH a, _KxH b) { return a - b; }                                             \
  static inline _KxH __hmul(_KxH a, _KxH b) { return a * b; }                                             \
  static inline _KxH __hdiv(_KxH a, _KxH b) { return a / b; }                                             \
  static inline _KxH __hadd_rn(_KxH a, _KxH b) { return a + b; }                                          \
  static inline _KxH __hsub_rn(_KxH a, _KxH b) { return a - b; }                                          \
  static inline _KxH __hmul_rn(_KxH a, _KxH b) { return a * b; }                                          \
  static inline _KxH __hadd_sat(_KxH a, _KxH b) { return _KxH(__saturatef(float(a) + float(b))); }           \
  static inline _KxH __hsub_sat(_KxH a, _KxH b) { return _KxH(__saturatef(float(a) - float(b))); }           \
  static inline _KxH __hmul_sat(_KxH a, _KxH b) { return _KxH(__saturatef(float(a) * float(b))); }           \
  static inline _KxH __hfma(_KxH a, _KxH b, _KxH c) { return _KxH(kxcpu::d2f_odd(std::fma(double(float(a)), double(float(b)), double(float(c))))); } \
  static inline _KxH __hfma_sat(_KxH a, _KxH b, _KxH c) { return _KxH(__saturatef(float(__hfma(a, b, c)))); }   \
  static inline _KxH __hneg(_KxH a) { return -a; }                                                     \
  static inline _KxH __habs(_KxH a) { _KxH r = a; r.__x &= 0x7fffu; return r; }                           \
  static inline _KxH __hmax(_KxH a, _KxH b) { return _KxH(fmaxf(float(a), float(b))); }                      \
  static inline _KxH __hmin(_KxH a, _KxH b) { return _KxH(fminf(float(a), float(b))); }                      \
  static inline _KxH __hmax_nan(_KxH a, _KxH b) { return (std::isnan(float(a)) || std::isnan(float(b))) ? _KxH(NAN) : __hmax(a, b); } \
  static inline _KxH __hmin_nan(_KxH a, _KxH b) { return (std::isnan(float(a)) || std::isnan(float(b))) ? _KxH(NAN) : __hmin(a, b); } \
  static inline bool __heq(_KxH a, _KxH b) { return a == b; }                                          \
  static inline bool __hne(_KxH a, _KxH b) { return a != b; }                                          \
  static inline bool __hlt(_KxH a, _KxH b) { return a < b; }                                           \
  static inline bool __hle(_KxH a, _KxH b) { return a <= b; }                                          \
  static inline bool __hgt(_KxH a, _KxH b) { return a > b; }                                           \
  static inline bool __hge(_KxH a, _KxH b) { return a >= b; }                                          \
  static inline bool __hisnan(_KxH a) { return std::isnan(float(a)); }                              \
  static inline int __hisinf(_KxH a) { float f = float(a); return std::isinf(f) ? (f < 0 ? -1 : 1) : 0; } \
  static inline _KxH hexp(_KxH a) { return _KxH(expf(float(a))); }                                        \
  static inline _KxH hexp2(_KxH a) { return _KxH(exp2f(float(a))); }                                      \
  static inline _KxH hexp10(_KxH a) { return _KxH(exp10f(float(a))); }                                    \
  static inline _KxH hlog(_KxH a) { return _KxH(logf(float(a))); }                                        \
  static inline _KxH hlog2(_KxH a) { return _KxH(log2f(float(a))); }                                      \
  static inline _KxH hlog10(_KxH a) { return _KxH(log10f(float(a))); }                                    \
  static inline _KxH hsqrt(_KxH a) { return _KxH(sqrtf(float(a))); }                                      \
  static inline _KxH hrsqrt(_KxH a) { return _KxH(1.0f / sqrtf(float(a))); }                              \
  static inline _KxH hrcp(_KxH a) { return _KxH(1.0f / float(a)); }                                       \
  static inline _KxH hsin(_KxH a) { return _KxH(sinf(float(a))); }                                        \
  static inline _KxH hcos(_KxH a) { return _KxH(cosf(float(a))); }                                        \
  static inline _KxH htanh(_KxH a) { return _KxH(tanhf(float(a))); }                                      \
  static inline _KxH hfloor(_KxH a) { return _KxH(floorf(float(a))); }                                    \
  static inline _KxH hceil(_KxH a) { return _KxH(ceilf(float(a))); }                                      \
  static inline _KxH htrunc(_KxH a) { return _KxH(truncf(float(a))); }                                    \
  static inline _KxH hrint(_KxH a) { return _KxH(rintf(float(a))); }                                      \
  static inline _KxH2 __hadd2(_KxH2 a, _KxH2 b) { return a + b; }                                         \
  static inline _KxH2 __hsub2(_KxH2 a, _KxH2 b) { return a - b; }                                         \
  static inline _KxH2 __hmul2(_KxH2 a, _KxH2 b) { return a * b; }                                         \
  static inline _KxH2 __h2div(_KxH2 a, _KxH2 b) { return a / b; }                                         \
  static inline _KxH2 __hfma2(_KxH2 a, _KxH2 b, _KxH2 c) { return _KxH2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  static inline _KxH2 __hneg2(_KxH2 a) { return -a; }                                                  \
  static inline _KxH2 __habs2(_KxH2 a) { return _KxH2(__habs(a.x), __habs(a.y)); }                        \
  static inline _KxH2 __hmax2(_KxH2 a, _KxH2 b) { return _KxH2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }        \
  static inline _KxH2 __hmin2(_KxH2 a, _KxH2 b) { return _KxH2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }        \
  static inline bool __hbeq2(_KxH2 a, _KxH2 b) { return a.x == b.x && a.y == b.y; }                    \
  static inline _KxH2 h2exp(_KxH2 a) { return _KxH2(hexp(a.x), hexp(a.y)); }                              \
  static inline _KxH2 h2log(_KxH2 a) { return _KxH2(hlog(a.x), hlog(a.y)); }                              \
  static inline _KxH2 h2sqrt(_KxH2 a) { return _KxH2(hsqrt(a.x), hsqrt(a.y)); }                           \
  static inline _KxH2 h2rsqrt(_KxH2 a) { return _KxH2(hrsqrt(a.x), hrsqrt(a.y)); }                        \
  static inline _KxH2 h2rcp(_KxH2 a) { return _KxH2(hrcp(a.x), hrcp(a.y)); }                              \
  static inline _KxH atomicAdd(_KxH* p, _KxH v) {                                                          \
    return kxcpu::atomic_rmw<_KxH, unsigned short>(p, [v](_KxH x) { return x + v; });                 \
  }                                                                                               \
  static inline _KxH2 atomicAdd(_KxH2* p, _KxH2 v) {                                                       \
    return kxcpu::atomic_rmw<_KxH2, unsigned int>(p, [v](_KxH2 x) { return x + v; });                 \
  }

KXCPU_HALF_MATH(__half, __half2)
KXCPU_HALF_MATH(__nv_bfloat16, __nv_bfloat162)
#undef KXCPU_HALF_MATH
