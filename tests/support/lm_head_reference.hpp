// The reference of LogitsMode::quantized_hidden: the hidden row rounded as ggml rounds it (its
// Q8_0 / Q8_1 / Q8_K bytes, or half / bfloat16 values), the weight blocks read back into their
// integer codes and scales as ggml's dequantize_row_* loops read them, and the dot product of
// the two in exact integers per block, scaled in long double: what the kernels compute but for
// float rounding and summation order, which the bound covers.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ember/ggml/blocks.hpp"
#include "ember/ggml/hidden.hpp"
#include "ember/ggml/type.hpp"

namespace ember_test {

/// A reference dot product: its value, Σ |parts| (the scale of the float error) and how many
/// float terms each of the kernel's lanes sums.
struct QuantizedDot {
  long double value = 0;
  long double magnitude = 0;
  long terms_per_lane = 0;
  /// The largest difference a kernel may show: (terms per lane + 8) · 2⁻²³ · magnitude.
  [[nodiscard]] double bound() const {
    return static_cast<double>((static_cast<long double>(terms_per_lane) + 8) * 0x1p-23L *
                               magnitude);
  }
};

namespace lm_ref {

namespace gg = ember::detail::ggml;
using ember::GgmlType;
using ember::Index;

inline long double half(const std::uint8_t* p) { return gg::load_half(p); }
inline std::int16_t i16(const std::uint8_t* p) {
  return static_cast<std::int16_t>(p[0] | (p[1] << 8));
}

/// The weight of one 32-element block as integers: value_c = a · q_c + b.
struct Block32 {
  int q[32];
  long double a;
  long double b;
};

inline Block32 block32(GgmlType t, const std::uint8_t* x) {
  Block32 r{};
  r.a = half(x);
  switch (t) {
    case GgmlType::Q4_0:  // dequantize_row_q4_0: (qs & 0xF) - 8, (qs >> 4) - 8
      for (int j = 0; j < 16; ++j) {
        r.q[j] = (x[2 + j] & 0x0F) - 8;
        r.q[j + 16] = (x[2 + j] >> 4) - 8;
      }
      break;
    case GgmlType::Q4_1:  // q · d + m
      for (int j = 0; j < 16; ++j) {
        r.q[j] = x[4 + j] & 0x0F;
        r.q[j + 16] = x[4 + j] >> 4;
      }
      r.b = half(x + 2);
      break;
    case GgmlType::Q5_0:
    case GgmlType::Q5_1: {
      const bool one = t == GgmlType::Q5_1;
      std::uint32_t qh;
      std::memcpy(&qh, x + (one ? 4 : 2), 4);
      const std::uint8_t* qs = x + (one ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
        const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
        r.q[j] = ((qs[j] & 0x0F) | xh0) - (one ? 0 : 16);
        r.q[j + 16] = ((qs[j] >> 4) | xh1) - (one ? 0 : 16);
      }
      if (one) r.b = half(x + 2);
      break;
    }
    default:  // Q8_0
      for (int j = 0; j < 32; ++j) r.q[j] = static_cast<std::int8_t>(x[2 + j]);
      break;
  }
  return r;
}

/// The weight of one super-block as integers: value_c = d · sc(c / 16) · q_c - dmin · m(c / 16).
struct Super {
  int q[256];
  int sc[16];
  int m[16];
  long double d;
  long double dmin;
};

inline Super super_block(GgmlType t, const std::uint8_t* x) {
  Super r{};
  if (t == GgmlType::Q2_K) {  // dequantize_row_q2_K
    r.d = half(x + 80);
    r.dmin = half(x + 82);
    int is = 0;
    int e = 0;
    for (int n = 0; n < 256; n += 128) {
      const std::uint8_t* q = x + 16 + n / 4;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int l = 0; l < 32; ++l) r.q[e++] = (q[l] >> shift) & 3;
        r.sc[is] = x[is] & 0xF;
        r.m[is] = x[is] >> 4;
        ++is;
        r.sc[is] = x[is] & 0xF;
        r.m[is] = x[is] >> 4;
        ++is;
      }
    }
  } else if (t == GgmlType::Q3_K) {  // dequantize_row_q3_K
    r.d = half(x + 108);
    int sc[16];
    gg::q3_k_scales(x + 96, sc);
    for (int s = 0; s < 16; ++s) r.sc[s] = sc[s] - 32;
    int e = 0;
    int bit = 0;
    for (int n = 0; n < 256; n += 128) {
      const std::uint8_t* q = x + 32 + n / 4;
      for (int shift = 0; shift < 8; shift += 2, ++bit) {
        for (int l = 0; l < 32; ++l) {
          r.q[e++] = ((q[l] >> shift) & 3) - (((x[l] >> bit) & 1) != 0 ? 0 : 4);
        }
      }
    }
  } else if (t == GgmlType::Q6_K) {  // dequantize_row_q6_K
    r.d = half(x + 208);
    for (int s = 0; s < 16; ++s) r.sc[s] = static_cast<std::int8_t>(x[192 + s]);
    for (int n = 0; n < 2; ++n) {
      const std::uint8_t* ql = x + 64 * n;
      const std::uint8_t* qh = x + 128 + 32 * n;
      for (int l = 0; l < 32; ++l) {
        r.q[128 * n + l] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        r.q[128 * n + l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        r.q[128 * n + l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        r.q[128 * n + l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      }
    }
  } else {  // Q4_K, Q5_K: dequantize_row_q4_K / q5_K
    const bool five = t == GgmlType::Q5_K;
    r.d = half(x);
    r.dmin = half(x + 2);
    const std::uint8_t* ql = x + (five ? 48 : 16);
    for (int j = 0; j < 8; ++j) {
      int sc = 0;
      int m = 0;
      gg::scale_min_k4(j, x + 4, sc, m);
      r.sc[2 * j] = r.sc[2 * j + 1] = sc;
      r.m[2 * j] = r.m[2 * j + 1] = m;
      for (int l = 0; l < 32; ++l) {
        int v = (ql[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
        if (five) v += ((x[16 + l] >> j) & 1) << 4;
        r.q[32 * j + l] = v;
      }
    }
  }
  return r;
}

}  // namespace lm_ref

/// The reference dot product of a weight row of `type` (d elements) with a hidden row given as
/// floats x[d], rounded here as ggml rounds it (the library's quantizers, tested against ggml's
/// bytes in test_ggml_dot.cpp).
inline QuantizedDot quantized_dot_reference(ember::GgmlType type, const std::uint8_t* row,
                                            const float* x, ember::Index d) {
  namespace gg = ember::detail::ggml;
  using ember::GgmlType;
  QuantizedDot r;
  const GgmlType dot = gg::dot_type(type);
  if (dot == GgmlType::F16 || dot == GgmlType::BF16) {
    for (ember::Index c = 0; c < d; ++c) {
      const std::uint16_t bits = static_cast<std::uint16_t>(row[2 * c] | (row[2 * c + 1] << 8));
      const long double w = dot == GgmlType::F16 ? gg::fp16_to_fp32(bits) : gg::bf16_to_fp32(bits);
      const long double h = dot == GgmlType::F16 ? gg::fp16_to_fp32(gg::fp32_to_fp16(x[c]))
                                                 : gg::bf16_to_fp32(gg::fp32_to_bf16(x[c]));
      r.value += w * h;
      r.magnitude += std::fabs(w * h);
    }
    r.terms_per_lane = (d + 31) / 32;
    return r;
  }
  std::vector<std::uint8_t> hq(static_cast<std::size_t>(ember::ggml_row_size(dot, d)));
  gg::quantize_dot_type(dot, x, d, hq.data());
  if (dot == GgmlType::Q8_K) {
    const ember::Index supers = d / 256;
    for (ember::Index s = 0; s < supers; ++s) {
      const lm_ref::Super w = lm_ref::super_block(type, row + s * ember::ggml_type_size(type));
      const std::uint8_t* y = hq.data() + s * 292;
      float dh_f;
      std::memcpy(&dh_f, y, 4);
      const long double dh = dh_f;
      const auto* qh = reinterpret_cast<const std::int8_t*>(y + 4);
      for (int sub = 0; sub < 16; ++sub) {
        long long isum = 0;
        long long amag = 0;
        long long hsum = 0;
        for (int l = 0; l < 16; ++l) {
          isum += static_cast<long long>(w.q[16 * sub + l]) * qh[16 * sub + l];
          amag += std::llabs(static_cast<long long>(w.q[16 * sub + l]) * qh[16 * sub + l]);
          hsum += std::llabs(static_cast<long long>(qh[16 * sub + l]));
        }
        const long double bsum = lm_ref::i16(y + 260 + 2 * sub);
        r.value += w.d * dh * w.sc[sub] * isum - w.dmin * dh * w.m[sub] * bsum;
        r.magnitude +=
            std::fabs(w.d * dh * w.sc[sub]) * amag + std::fabs(w.dmin * dh * w.m[sub]) * hsum;
      }
    }
    r.terms_per_lane = supers;
    return r;
  }
  const bool with_sum = dot == GgmlType::Q8_1;
  const ember::Index blocks = d / 32;
  for (ember::Index b = 0; b < blocks; ++b) {
    const lm_ref::Block32 w = lm_ref::block32(type, row + b * ember::ggml_type_size(type));
    const std::uint8_t* y = hq.data() + b * (with_sum ? 36 : 34);
    const long double dh = lm_ref::half(y);
    const auto* qh = reinterpret_cast<const std::int8_t*>(y + (with_sum ? 4 : 2));
    long long isum = 0;
    long long amag = 0;
    long long hsum = 0;
    for (int l = 0; l < 32; ++l) {
      isum += static_cast<long long>(w.q[l]) * qh[l];
      amag += std::llabs(static_cast<long long>(w.q[l]) * qh[l]);
      hsum += std::llabs(static_cast<long long>(qh[l]));
    }
    r.value += w.a * dh * isum;
    r.magnitude += std::fabs(w.a * dh) * amag;
    if (with_sum) {  // ggml's m · s, s = fp16(d · Σ q) of the Q8_1 block
      const long double s = lm_ref::half(y + 2);
      r.value += w.b * s;
      r.magnitude += std::fabs(w.b) * (std::fabs(s) + dh * hsum);
    }
  }
  r.terms_per_lane = (blocks + 15) / 16;
  return r;
}

/// The reference for an int8 row (d codes, float scale, float bias) and a hidden row x[d]:
/// blocks of 32 (zero-padded) rounded as ggml's Q8_1 (codes and d), y = float(Σ q) · d rounded
/// to float, and Σ_b scale · d · Σ q · q_h + bias · y.
inline QuantizedDot int8_dot_reference(const std::uint8_t* row, const float* x, ember::Index d) {
  namespace gg = ember::detail::ggml;
  QuantizedDot r;
  float scale;
  float bias;
  std::memcpy(&scale, row + d, 4);
  std::memcpy(&bias, row + d + 4, 4);
  const ember::Index blocks = (d + 31) / 32;
  for (ember::Index b = 0; b < blocks; ++b) {
    float xb[32] = {};
    for (ember::Index e = 0; e < 32 && 32 * b + e < d; ++e) xb[e] = x[32 * b + e];
    std::uint8_t y[36];
    gg::quantize_q8_block<true>(xb, y);
    const long double dh = lm_ref::half(y);
    const auto* qh = reinterpret_cast<const std::int8_t*>(y + 4);
    long long isum = 0;
    long long qsum = 0;
    long long amag = 0;
    for (ember::Index e = 0; e < 32; ++e) {
      const int w = 32 * b + e < d ? row[32 * b + e] : 0;
      isum += static_cast<long long>(w) * qh[e];
      amag += std::llabs(static_cast<long long>(w) * qh[e]);
      qsum += qh[e];
    }
    const float yb = static_cast<float>(qsum) * static_cast<float>(dh);
    r.value += static_cast<long double>(scale) * dh * isum + static_cast<long double>(bias) * yb;
    r.magnitude += std::fabs(static_cast<long double>(scale) * dh) * amag +
                   std::fabs(static_cast<long double>(bias) * yb);
  }
  r.terms_per_lane = (blocks + 15) / 16;
  return r;
}

}  // namespace ember_test
