// Small helpers for plugins written against plugin_abi.h: element access through strides in every
// ABI dtype (float16 and bfloat16 converted by hand, round to nearest even) and error messages.
// Header-only, no dependency beyond the C++ standard library.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kvconform/plugin_abi.h"

namespace kvc_util {

inline size_t element_size(kvc_dtype d) { return d == KVC_FLOAT64 ? 8 : d == KVC_FLOAT32 ? 4 : 2; }

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    man |= 0x800000;
    const int shift = 14 - exp;
    uint32_t h = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: still right
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN stays NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// Element [i0, i1, i2, i3] of a tensor through its strides.
inline const void* at(const kvc_tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t off = i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2] + i3 * t.stride[3];
  return static_cast<const char*>(t.data) + off * static_cast<int64_t>(element_size(t.dtype));
}
inline void* at_mut(kvc_tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return const_cast<void*>(at(t, i0, i1, i2, i3));
}

inline double load(const kvc_tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const void* p = at(t, i0, i1, i2, i3);
  switch (t.dtype) {
    case KVC_FLOAT32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case KVC_FLOAT64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case KVC_FLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_to_float(h);
    }
    case KVC_BFLOAT16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_float(h);
    }
  }
  return 0;
}

inline void store(kvc_tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, double v) {
  void* p = at_mut(t, i0, i1, i2, i3);
  switch (t.dtype) {
    case KVC_FLOAT32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case KVC_FLOAT64: std::memcpy(p, &v, 8); break;
    case KVC_FLOAT16: {
      const uint16_t h = float_to_half(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
    case KVC_BFLOAT16: {
      const uint16_t h = float_to_bf16(static_cast<float>(v));
      std::memcpy(p, &h, 2);
      break;
    }
  }
}

// printf into the caller's message buffer; returns `status` for `return fail(...)`.
inline kvc_status fail(kvc_status status, char* err, size_t err_len, const char* fmt, ...) {
  if (err && err_len) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
  }
  return status;
}

}  // namespace kvc_util
