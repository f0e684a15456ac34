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

#define KXCPU_HALF_CLASS(H, RAW, ENC, DEC)                                              \
  struct __attribute__((aligned(2))) H {                                                \
    unsigned short __x;                                                                 \
    H() = default;                                                                      \
    constexpr H(const RAW& r) : __x(r.x) {}                                             \
    H(float f) : __x(kxcpu::ENC(f)) {}                                                  \
    H(double d) : __x(kxcpu::ENC(kxcpu::d2f_odd(d))) {}                                 \
    H(int v) : H(static_cast<float>(v)) {}                                              \
    H(unsigned int v) : H(static_cast<float>(v)) {}                                     \
    H(short v) : H(static_cast<float>(v)) {}                                            \
    H(unsigned short v) : H(static_cast<float>(v)) {}                                   \
    H(long long v) : H(kxcpu::d2f_odd(static_cast<double>(v))) {}                       \
    H(unsigned long long v) : H(kxcpu::d2f_odd(static_cast<double>(v))) {}              \
    operator RAW() const { return RAW{__x}; }                                           \
    operator float() const { return kxcpu::DEC(__x); }                                  \
    H& operator+=(const H& o) { return *this = H(float(*this) + float(o)); }            \
    H& operator-=(const H& o) { return *this = H(float(*this) - float(o)); }            \
    H& operator*=(const H& o) { return *this = H(float(*this) * float(o)); }            \
    H& operator/=(const H& o) { return *this = H(float(*this) / float(o)); }            \
    H& operator++() { return *this += H(1.0f); }                                        \
    H& operator--() { return *this -= H(1.0f); }                                        \
    H operator++(int) { H t = *this; *this += H(1.0f); return t; }                      \
    H operator--(int) { H t = *this; *this -= H(1.0f); return t; }                      \
  };                                                                                    \
  static inline H operator+(const H& a, const H& b) { return H(float(a) + float(b)); } \
  static inline H operator-(const H& a, const H& b) { return H(float(a) - float(b)); } \
  static inline H operator*(const H& a, const H& b) { return H(float(a) * float(b)); } \
  static inline H operator/(const H& a, const H& b) { return H(float(a) / float(b)); } \
  static inline H operator-(const H& a) { H r = a; r.__x ^= 0x8000u; return r; }       \
  static inline H operator+(const H& a) { return a; }                                   \
  static inline bool operator==(const H& a, const H& b) { return float(a) == float(b); } \
  static inline bool operator!=(const H& a, const H& b) { return float(a) != float(b); } \
  static inline bool operator<(const H& a, const H& b) { return float(a) < float(b); }  \
  static inline bool operator>(const H& a, const H& b) { return float(a) > float(b); }  \
  static inline bool operator<=(const H& a, const H& b) { return float(a) <= float(b); } \
  static inline bool operator>=(const H& a, const H& b) { return float(a) >= float(b); }

KXCPU_HALF_CLASS(__half, __half_raw, f2h_rn, h2f)
KXCPU_HALF_CLASS(__nv_bfloat16, __nv_bfloat16_raw, f2bf_rn, bf2f)
#undef KXCPU_HALF_CLASS

#define KXCPU_PAIR_CLASS(H2, H)                                                                 \
  struct __attribute__((aligned(4))) H2 {                                                       \
    H x, y;                                                                                     \
    H2() = default;                                                                             \
    H2(const H& a, const H& b) : x(a), y(b) {}                                                  \
    H2& operator+=(const H2& o) { x += o.x; y += o.y; return *this; }                           \
    H2& operator-=(const H2& o) { x -= o.x; y -= o.y; return *this; }                           \
    H2& operator*=(const H2& o) { x *= o.x; y *= o.y; return *this; }                           \
    H2& operator/=(const H2& o) { x /= o.x; y /= o.y; return *this; }                           \
  };                                                                                            \
  static inline H2 operator+(const H2& a, const H2& b) { return H2(a.x + b.x, a.y + b.y); }    \
  static inline H2 operator-(const H2& a, const H2& b) { return H2(a.x - b.x, a.y - b.y); }    \
  static inline H2 operator*(const H2& a, const H2& b) { return H2(a.x * b.x, a.y * b.y); }    \
  static inline H2 operator/(const H2& a, const H2& b) { return H2(a.x / b.x, a.y / b.y); }    \
  static inline H2 operator-(const H2& a) { return H2(-a.x, -a.y); }                           \
  static inline bool operator==(const H2& a, const H2& b) { return a.x == b.x && a.y == b.y; } \
  static inline bool operator!=(const H2& a, const H2& b) { return !(a == b); }

KXCPU_PAIR_CLASS(__half2, __half)
KXCPU_PAIR_CLASS(__nv_bfloat162, __nv_bfloat16)
#undef KXCPU_PAIR_CLASS

typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

// Conversions and packing; NAME/NAME2 give CUDA's spelling (half/half2, bfloat16/bfloat162).
#define KXCPU_HALF_CONV(H, H2, NAME, NAME2, ENC, ENCZ, DEC)                                     \
  static inline H __float2##NAME(float f) { return H(f); }                                     \
  static inline H __float2##NAME##_rn(float f) { return H(f); }                                \
  static inline H __float2##NAME##_rz(float f) { H r; r.__x = kxcpu::ENCZ(f); return r; }      \
  static inline H __double2##NAME(double d) { return H(d); }                                   \
  static inline float __##NAME##2float(H h) { return float(h); }                               \
  static inline H2 __float2##NAME2##_rn(float f) { return H2(H(f), H(f)); }                   \
  static inline H2 __floats2##NAME2##_rn(float a, float b) { return H2(H(a), H(b)); }          \
  static inline H2 __float22##NAME2##_rn(float2 v) { return H2(H(v.x), H(v.y)); }              \
  static inline float2 __##NAME2##2float2(H2 v) { return make_float2(float(v.x), float(v.y)); } \
  static inline H __low2##NAME(H2 v) { return v.x; }                                           \
  static inline H __high2##NAME(H2 v) { return v.y; }                                          \
  static inline float __low2float(H2 v) { return float(v.x); }                                 \
  static inline float __high2float(H2 v) { return float(v.y); }                                \
  static inline H2 __halves2##NAME2(H a, H b) { return H2(a, b); }                             \
  static inline H2 __##NAME##2##NAME2(H a) { return H2(a, a); }                                \
  static inline H2 __lowhigh2highlow(H2 v) { return H2(v.y, v.x); }                            \
  static inline H2 __lows2##NAME2(H2 a, H2 b) { return H2(a.x, b.x); }                         \
  static inline H2 __highs2##NAME2(H2 a, H2 b) { return H2(a.y, b.y); }                        \
  static inline unsigned short __##NAME##_as_ushort(H h) { return h.__x; }                     \
  static inline short __##NAME##_as_short(H h) { return static_cast<short>(h.__x); }           \
  static inline H __ushort_as_##NAME(unsigned short u) { H r; r.__x = u; return r; }           \
  static inline H __short_as_##NAME(short u) { H r; r.__x = static_cast<unsigned short>(u); return r; } \
  static inline int __##NAME##2int_rn(H h) { return __float2int_rn(float(h)); }                \
  static inline int __##NAME##2int_rz(H h) { return __float2int_rz(float(h)); }                \
  static inline int __##NAME##2int_rd(H h) { return __float2int_rd(float(h)); }                \
  static inline int __##NAME##2int_ru(H h) { return __float2int_ru(float(h)); }                \
  static inline unsigned __##NAME##2uint_rz(H h) { return __float2uint_rz(float(h)); }         \
  static inline long long __##NAME##2ll_rz(H h) { return __float2ll_rz(float(h)); }            \
  static inline short __##NAME##2short_rz(H h) { return static_cast<short>(__float2int_rz(float(h))); } \
  static inline H __int2##NAME##_rn(int v) { return H(v); }                                    \
  static inline H __uint2##NAME##_rn(unsigned v) { return H(v); }                              \
  static inline H __short2##NAME##_rn(short v) { return H(v); }                                \
  static inline H __ushort2##NAME##_rn(unsigned short v) { return H(v); }                      \
  static inline H __ll2##NAME##_rn(long long v) { return H(v); }

KXCPU_HALF_CONV(__half, __half2, half, half2, f2h_rn, f2h_rz, h2f)
KXCPU_HALF_CONV(__nv_bfloat16, __nv_bfloat162, bfloat16, bfloat162, f2bf_rn, f2bf_rz, bf2f)
#undef KXCPU_HALF_CONV

// Arithmetic, comparison and math, overloaded on both types like CUDA's headers.
#define KXCPU_HALF_MATH(H, H2)                                                                    \
  static inline H __hadd(H a, H b) { return a + b; }                                             \
  static inline H __hsub(H a, H b) { return a - b; }                                             \
  static inline H __hmul(H a, H b) { return a * b; }                                             \
  static inline H __hdiv(H a, H b) { return a / b; }                                             \
  static inline H __hadd_rn(H a, H b) { return a + b; }                                          \
  static inline H __hsub_rn(H a, H b) { return a - b; }                                          \
  static inline H __hmul_rn(H a, H b) { return a * b; }                                          \
  static inline H __hadd_sat(H a, H b) { return H(__saturatef(float(a) + float(b))); }           \
  static inline H __hsub_sat(H a, H b) { return H(__saturatef(float(a) - float(b))); }           \
  static inline H __hmul_sat(H a, H b) { return H(__saturatef(float(a) * float(b))); }           \
  static inline H __hfma(H a, H b, H c) { return H(kxcpu::d2f_odd(std::fma(double(float(a)), double(float(b)), double(float(c))))); } \
  static inline H __hfma_sat(H a, H b, H c) { return H(__saturatef(float(__hfma(a, b, c)))); }   \
  static inline H __hneg(H a) { return -a; }                                                     \
  static inline H __habs(H a) { H r = a; r.__x &= 0x7fffu; return r; }                           \
  static inline H __hmax(H a, H b) { return H(fmaxf(float(a), float(b))); }                      \
  static inline H __hmin(H a, H b) { return H(fminf(float(a), float(b))); }                      \
  static inline H __hmax_nan(H a, H b) { return (std::isnan(float(a)) || std::isnan(float(b))) ? H(NAN) : __hmax(a, b); } \
  static inline H __hmin_nan(H a, H b) { return (std::isnan(float(a)) || std::isnan(float(b))) ? H(NAN) : __hmin(a, b); } \
  static inline bool __heq(H a, H b) { return a == b; }                                          \
  static inline bool __hne(H a, H b) { return a != b; }                                          \
  static inline bool __hlt(H a, H b) { return a < b; }                                           \
  static inline bool __hle(H a, H b) { return a <= b; }                                          \
  static inline bool __hgt(H a, H b) { return a > b; }                                           \
  static inline bool __hge(H a, H b) { return a >= b; }                                          \
  static inline bool __hisnan(H a) { return std::isnan(float(a)); }                              \
  static inline int __hisinf(H a) { float f = float(a); return std::isinf(f) ? (f < 0 ? -1 : 1) : 0; } \
  static inline H hexp(H a) { return H(expf(float(a))); }                                        \
  static inline H hexp2(H a) { return H(exp2f(float(a))); }                                      \
  static inline H hexp10(H a) { return H(exp10f(float(a))); }                                    \
  static inline H hlog(H a) { return H(logf(float(a))); }                                        \
  static inline H hlog2(H a) { return H(log2f(float(a))); }                                      \
  static inline H hlog10(H a) { return H(log10f(float(a))); }                                    \
  static inline H hsqrt(H a) { return H(sqrtf(float(a))); }                                      \
  static inline H hrsqrt(H a) { return H(1.0f / sqrtf(float(a))); }                              \
  static inline H hrcp(H a) { return H(1.0f / float(a)); }                                       \
  static inline H hsin(H a) { return H(sinf(float(a))); }                                        \
  static inline H hcos(H a) { return H(cosf(float(a))); }                                        \
  static inline H htanh(H a) { return H(tanhf(float(a))); }                                      \
  static inline H hfloor(H a) { return H(floorf(float(a))); }                                    \
  static inline H hceil(H a) { return H(ceilf(float(a))); }                                      \
  static inline H htrunc(H a) { return H(truncf(float(a))); }                                    \
  static inline H hrint(H a) { return H(rintf(float(a))); }                                      \
  static inline H2 __hadd2(H2 a, H2 b) { return a + b; }                                         \
  static inline H2 __hsub2(H2 a, H2 b) { return a - b; }                                         \
  static inline H2 __hmul2(H2 a, H2 b) { return a * b; }                                         \
  static inline H2 __h2div(H2 a, H2 b) { return a / b; }                                         \
  static inline H2 __hfma2(H2 a, H2 b, H2 c) { return H2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  static inline H2 __hneg2(H2 a) { return -a; }                                                  \
  static inline H2 __habs2(H2 a) { return H2(__habs(a.x), __habs(a.y)); }                        \
  static inline H2 __hmax2(H2 a, H2 b) { return H2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }        \
  static inline H2 __hmin2(H2 a, H2 b) { return H2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }        \
  static inline bool __hbeq2(H2 a, H2 b) { return a.x == b.x && a.y == b.y; }                    \
  static inline H2 h2exp(H2 a) { return H2(hexp(a.x), hexp(a.y)); }                              \
  static inline H2 h2log(H2 a) { return H2(hlog(a.x), hlog(a.y)); }                              \
  static inline H2 h2sqrt(H2 a) { return H2(hsqrt(a.x), hsqrt(a.y)); }                           \
  static inline H2 h2rsqrt(H2 a) { return H2(hrsqrt(a.x), hrsqrt(a.y)); }                        \
  static inline H2 h2rcp(H2 a) { return H2(hrcp(a.x), hrcp(a.y)); }                              \
  static inline H atomicAdd(H* p, H v) {                                                          \
    return kxcpu::atomic_rmw<H, unsigned short>(p, [v](H x) { return x + v; });                 \
  }                                                                                               \
  static inline H2 atomicAdd(H2* p, H2 v) {                                                       \
    return kxcpu::atomic_rmw<H2, unsigned int>(p, [v](H2 x) { return x + v; });                 \
  }

KXCPU_HALF_MATH(__half, __half2)
KXCPU_HALF_MATH(__nv_bfloat16, __nv_bfloat162)
#undef KXCPU_HALF_MATH
