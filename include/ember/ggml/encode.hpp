/// ggml's block encoders, bit-identical to its reference C code (quantize_row_*_ref of
/// ggml-quants.c, no importance matrix), and a row encoder over every type ember encodes. Included
/// by the GGUF writer (and tests, benchmarks): tables and views never compile it.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/hidden.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

// Each encoder makes ggml's comparisons, conversions and float operations in ggml's order (each
// product rounded before it is added: rounded()). Integer narrowing is modular, as C's on ggml's
// platforms. Preconditions (validated by GgufWriter): `x` holds one block of finite floats, `b`
// room for one block.

inline constexpr float group_max_eps = 1e-15f;  // ggml's GROUP_MAX_EPS

inline std::uint8_t pack_nibbles(int lo, int hi) noexcept {
  return static_cast<std::uint8_t>((lo & 0xFF) | ((hi << 4) & 0xFF));
}

inline void encode_block(std::type_identity<BlockQ4_0>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ4_0;
  const float max = signed_absmax(x, B::elements).max;
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b + offsetof(B, d), fp32_to_fp16(d));
  for (int j = 0; j < B::elements / 2; ++j) {
    const float x0 = rounded(x[j] * id);
    const float x1 = rounded(x[B::elements / 2 + j] * id);
    const int xi0 = std::min(15, static_cast<int>(to_int8(x0 + 8.5f)));
    const int xi1 = std::min(15, static_cast<int>(to_int8(x1 + 8.5f)));
    b[offsetof(B, qs) + static_cast<std::size_t>(j)] = pack_nibbles(xi0, xi1);
  }
}

inline void encode_block(std::type_identity<BlockQ4_1>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ4_1;
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < B::elements; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b + offsetof(B, d), fp32_to_fp16(d));
  store_u16(b + offsetof(B, m), fp32_to_fp16(min));
  for (int j = 0; j < B::elements / 2; ++j) {
    const float x0 = rounded((x[j] - min) * id);
    const float x1 = rounded((x[B::elements / 2 + j] - min) * id);
    const int xi0 = std::min(15, static_cast<int>(to_int8(x0 + 0.5f)));
    const int xi1 = std::min(15, static_cast<int>(to_int8(x1 + 0.5f)));
    b[offsetof(B, qs) + static_cast<std::size_t>(j)] = pack_nibbles(xi0, xi1);
  }
}

inline void encode_block(std::type_identity<BlockQ5_0>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ5_0;
  const float max = signed_absmax(x, B::elements).max;
  const float d = max / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b + offsetof(B, d), fp32_to_fp16(d));
  std::uint32_t qh = 0;
  for (int j = 0; j < B::elements / 2; ++j) {
    const float x0 = rounded(x[j] * id);
    const float x1 = rounded(x[B::elements / 2 + j] * id);
    const auto xi0 = static_cast<std::uint8_t>(std::min(31, static_cast<int>(to_int8(x0 + 16.5f))));
    const auto xi1 = static_cast<std::uint8_t>(std::min(31, static_cast<int>(to_int8(x1 + 16.5f))));
    b[offsetof(B, qs) + static_cast<std::size_t>(j)] = pack_nibbles(xi0 & 0x0F, xi1 & 0x0F);
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + B::elements / 2);
  }
  store_u32(b + offsetof(B, qh), qh);
}

inline void encode_block(std::type_identity<BlockQ5_1>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ5_1;
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < B::elements; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b + offsetof(B, d), fp32_to_fp16(d));
  store_u16(b + offsetof(B, m), fp32_to_fp16(min));
  std::uint32_t qh = 0;
  for (int j = 0; j < B::elements / 2; ++j) {
    const float x0 = rounded((x[j] - min) * id);
    const float x1 = rounded((x[B::elements / 2 + j] - min) * id);
    const auto xi0 = static_cast<std::uint8_t>(truncate_to_int(x0 + 0.5f));
    const auto xi1 = static_cast<std::uint8_t>(truncate_to_int(x1 + 0.5f));
    b[offsetof(B, qs) + static_cast<std::size_t>(j)] = pack_nibbles(xi0 & 0x0F, xi1 & 0x0F);
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + B::elements / 2);
  }
  store_u32(b + offsetof(B, qh), qh);
}

// Q8_0 is also a dot type: its encoder is the hidden rows' quantizer.
inline void encode_block(std::type_identity<BlockQ8_0>, const float* x, std::uint8_t* b) noexcept {
  quantize_q8_block<false>(x, b);
}

/// The weighted sums of ggml's make_qx_quants and make_q3_quants over the codes l_i =
/// nearest_int(iscale · x_i) clamped to [-nmax, nmax): sumlx = Σ w·x·l and suml2 = Σ w·l·l with
/// w = x², each product rounded before its add. L (unless null) receives l_i + offset.
inline void qx_sums(int n, int nmax, const float* x, float iscale, std::int8_t* L, int offset,
                    float& sumlx, float& suml2) noexcept {
  sumlx = 0;
  suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    if (L != nullptr) L[i] = static_cast<std::int8_t>(l + offset);
    const float w = x[i] * x[i];
    const auto fl = static_cast<float>(l);
    const float wx = w * x[i];
    const float wxl = rounded(wx * fl);
    sumlx += wxl;
    const float wl = w * fl;
    const float wll = rounded(wl * fl);
    suml2 += wll;
  }
}

/// ggml's make_qx_quants with rmse_type 1 and no importance weights (the Q6_K scale search).
inline float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L) noexcept {
  const auto [max, amax] = signed_absmax(x, n);
  if (amax < group_max_eps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  qx_sums(n, nmax, x, iscale, L, nmax, sumlx, suml2);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float step = rounded(0.1f * static_cast<float>(is));
    const float top = static_cast<float>(nmax) + step;
    iscale = -top / max;
    qx_sums(n, nmax, x, iscale, nullptr, 0, sumlx, suml2);
    const float lhs = sumlx * sumlx;
    const float rhs = best * suml2;
    if (suml2 > 0 && lhs > rhs) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

/// ggml's make_q3_quants with do_rmse (the Q3_K scale search).
inline float make_q3_quants(int n, int nmax, const float* x, std::int8_t* L) noexcept {
  const auto [max, amax] = signed_absmax(x, n);
  if (amax < group_max_eps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float sumlx = 0;
  float suml2 = 0;
  qx_sums(n, nmax, x, static_cast<float>(-nmax) / max, L, 0, sumlx, suml2);
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto fli = static_cast<float>(L[i]);
      const float wx = w * x[i];
      const float wxl = rounded(wx * fli);
      float slx = sumlx - wxl;
      if (slx > 0) {
        const float wl = w * fli;
        const float wll = rounded(wl * fli);
        float sl2 = suml2 - wll;
        const float num = x[i] * sl2;
        int new_l = nearest_int(num / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          const auto fnl = static_cast<float>(new_l);
          const float a = rounded(wx * fnl);
          slx += a;
          const float wn = w * fnl;
          const float wnn = rounded(wn * fnl);
          sl2 += wnn;
          const float slx2 = slx * slx;
          const float lhs = slx2 * suml2;
          const float sumlx2 = sumlx * sumlx;
          const float rhs = sumlx2 * sl2;
          if (sl2 > 0 && lhs > rhs) {
            L[i] = static_cast<std::int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/// ggml's make_qkx2_quants: a scale and a min for n values in [0, nmax], searched over nstep + 1
/// candidate scales with weighted least squares (the Q2_K, Q4_K and Q5_K search).
inline float make_qkx2_quants(int n, int nmax, const float* x, const float* weights,
                              std::uint8_t* L, float* the_min, std::uint8_t* Laux, float rmin,
                              float rdelta, int nstep, bool use_mad) noexcept {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = rounded(sum_w * x[0]);
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    const float wx = rounded(w * x[i]);
    sum_x += wx;
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    const float sl = rounded(scale * static_cast<float>(L[i]));
    const float slm = sl + min;
    float diff = slm - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    const float w = weights[i];
    const float wd = rounded(w * diff);
    best_error += wd;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    const float step = rounded(rdelta * static_cast<float>(is));
    const float top = rmin + step;
    const float num = top + static_cast<float>(nmax);
    iscale = num / (max - min);
    float sum_l = 0;
    float sum_l2 = 0;
    float sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      const auto fl = static_cast<float>(l);
      const float wl = rounded(w * fl);
      sum_l += wl;
      const float wll = rounded(wl * fl);
      sum_l2 += wll;
      const float wlx = rounded(wl * x[i]);
      sum_xl += wlx;
    }
    const float a = rounded(sum_w * sum_l2);
    const float c = rounded(sum_l * sum_l);
    const float D = a - c;
    if (D > 0) {
      const float s1 = rounded(sum_w * sum_xl);
      const float s2 = rounded(sum_x * sum_l);
      float this_scale = (s1 - s2) / D;
      const float m1 = rounded(sum_l2 * sum_x);
      const float m2 = rounded(sum_l * sum_xl);
      float this_min = (m1 - m2) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float sl = rounded(this_scale * static_cast<float>(Laux[i]));
        const float slm = sl + this_min;
        float diff = slm - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        const float w = weights[i];
        const float wd = rounded(w * diff);
        cur_error += wd;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

/// L[i] = clamp(nearest_int((x[i] (+ dm when Min)) / d), lo, hi) - lo for i in group j of n values
/// ([j·n, j·n + n) of the block's x and L): a group of codes re-quantized with its stored scale d
/// (and min dm), left alone when d is 0, as ggml does.
template <bool Min, class L8>
inline void requantize(const float* x, int n, int j, float d, float dm, int lo, int hi,
                       L8* L) noexcept {
  if (d == 0.0f) return;
  const std::ptrdiff_t first = static_cast<std::ptrdiff_t>(n) * j;
  x += first;
  L += first;
  for (int i = 0; i < n; ++i) {
    const float num = Min ? x[i] + dm : x[i];
    const int l = nearest_int(num / d);
    L[i] = static_cast<L8>(std::max(lo, std::min(hi, l)) - lo);
  }
}

/// Packs 2-bit values L[0, 256) as ggml's Q2_K/Q3_K do: byte j/4 + l of each 128-value half holds
/// L[j+l], L[j+l+32], L[j+l+64], L[j+l+96] from the low bits up.
template <class L8>
inline void pack_2bit(const L8* L, std::uint8_t* qs) noexcept {
  for (int j = 0; j < BlockQ4_K::elements; j += 128) {  // any K-quant: 256 values
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                                (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

inline void encode_block(std::type_identity<BlockQ2_K>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ2_K;
  std::uint8_t* scales = b + offsetof(B, scales);
  std::uint8_t L[B::elements];
  std::uint8_t Laux[16];
  float weights[16];
  float mins[B::elements / 16] = {};
  float sc[B::elements / 16] = {};
  const float q4scale = 15.f;
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < B::elements / 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    sc[j] = make_qkx2_quants(16, 3, x + static_cast<std::ptrdiff_t>(16 * j), weights,
                             L + static_cast<std::ptrdiff_t>(16 * j), &mins[j], Laux, -0.5f, 0.1f,
                             15, true);
    if (sc[j] > max_scale) max_scale = sc[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  std::uint16_t d16 = 0;
  std::uint16_t dmin16 = 0;
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < B::elements / 16; ++j)
      scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * sc[j]));
    d16 = fp32_to_fp16(max_scale / q4scale);
  } else {
    for (int j = 0; j < B::elements / 16; ++j) scales[j] = 0;
    d16 = fp32_to_fp16(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < B::elements / 16; ++j) {
      const int l = nearest_int(iscale * mins[j]);
      scales[j] = static_cast<std::uint8_t>(scales[j] | (l << 4));
    }
    dmin16 = fp32_to_fp16(max_min / q4scale);
  } else {
    dmin16 = fp32_to_fp16(0.f);
  }
  store_u16(b + offsetof(B, d), d16);
  store_u16(b + offsetof(B, dmin), dmin16);
  const float dall = fp16_to_fp32(d16);
  const float dmall = fp16_to_fp32(dmin16);
  for (int j = 0; j < B::elements / 16; ++j) {
    requantize<true>(x, 16, j, dall * static_cast<float>(scales[j] & 0xF),
                     rounded(dmall * static_cast<float>(scales[j] >> 4)), 0, 3, L);
  }
  pack_2bit(L, b + offsetof(B, qs));
}

inline void encode_block(std::type_identity<BlockQ3_K>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ3_K;
  std::uint8_t* hmask = b + offsetof(B, hmask);
  std::uint8_t* scales = b + offsetof(B, scales);
  std::int8_t L[B::elements];
  float sc[B::elements / 16] = {};
  float max_scale = 0;
  float amax = 0;
  for (int j = 0; j < B::elements / 16; ++j) {
    sc[j] = make_q3_quants(16, 4, x + static_cast<std::ptrdiff_t>(16 * j),
                           L + static_cast<std::ptrdiff_t>(16 * j));
    const float scale = std::fabs(sc[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = sc[j];
    }
  }
  std::memset(scales, 0, 12);
  std::uint16_t d16 = 0;
  if (max_scale != 0.0f) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < B::elements / 16; ++j) {
      auto l = static_cast<std::int8_t>(nearest_int(iscale * sc[j]));
      l = static_cast<std::int8_t>(std::max(-32, std::min(31, static_cast<int>(l))) + 32);
      if (j < 8) {
        scales[j] = static_cast<std::uint8_t>(l & 0xF);
      } else {
        scales[j - 8] = static_cast<std::uint8_t>(scales[j - 8] | ((l & 0xF) << 4));
      }
      l = static_cast<std::int8_t>(l >> 4);
      scales[j % 4 + 8] = static_cast<std::uint8_t>(scales[j % 4 + 8] | (l << (2 * (j / 4))));
    }
    d16 = fp32_to_fp16(1 / iscale);
  } else {
    d16 = fp32_to_fp16(0.f);
  }
  store_u16(b + offsetof(B, d), d16);
  const float dall = fp16_to_fp32(d16);
  int s6[16];
  q3_k_scales(scales, s6);
  for (int j = 0; j < B::elements / 16; ++j) {
    requantize<false>(x, 16, j, dall * static_cast<float>(s6[j] - 32), 0.0f, -4, 3, L);
  }
  std::memset(hmask, 0, B::elements / 8);
  int m = 0;
  unsigned hm = 1;
  for (std::int8_t& l : L) {
    if (l > 3) {
      hmask[m] = static_cast<std::uint8_t>(hmask[m] | hm);
      l = static_cast<std::int8_t>(l - 4);
    }
    if (++m == B::elements / 8) {
      m = 0;
      hm <<= 1;
    }
  }
  pack_2bit(L, b + offsetof(B, qs));
}

/// The sub-block scale search shared by Q4_K and Q5_K: 8 groups of 32, weights av_x + |x|.
inline void k4_scales(const float* x, int nmax, float rmin, int nstep, std::uint8_t* L,
                      float* scales, float* mins, float& max_scale, float& max_min) noexcept {
  std::uint8_t Laux[32];
  float weights[32];
  max_scale = 0;
  max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) {
      const float sq = rounded(x[32 * j + l] * x[32 * j + l]);
      sum_x2 += sq;
    }
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + static_cast<std::ptrdiff_t>(32 * j), weights,
                                 L + static_cast<std::ptrdiff_t>(32 * j), &mins[j], Laux, rmin,
                                 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
}

/// Stores the 6-bit scales and mins of a Q4_K/Q5_K block (12 bytes) and its fp16 d and dmin.
template <class B>
inline void k4_store_scales(const float* scales, const float* mins, float max_scale, float max_min,
                            std::uint8_t* b) noexcept {
  std::uint8_t* s = b + offsetof(B, scales);
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    auto ls = static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]));
    auto lm = static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]));
    ls = std::min<std::uint8_t>(63, ls);
    lm = std::min<std::uint8_t>(63, lm);
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      s[j - 4] = static_cast<std::uint8_t>(s[j - 4] | ((ls >> 4) << 6));
      s[j - 0] = static_cast<std::uint8_t>(s[j - 0] | ((lm >> 4) << 6));
    }
  }
  store_u16(b + offsetof(B, d), fp32_to_fp16(max_scale / 63.f));
  store_u16(b + offsetof(B, dmin), fp32_to_fp16(max_min / 63.f));
}

/// Re-quantizes each group of 32 with the stored (rounded) scale and min: L in [0, nmax].
template <class B>
inline void k4_requantize(const float* x, const std::uint8_t* b, int nmax,
                          std::uint8_t* L) noexcept {
  const float dall = load_half(b + offsetof(B, d));
  const float dmall = load_half(b + offsetof(B, dmin));
  for (int j = 0; j < 8; ++j) {
    int sc = 0;
    int m = 0;
    scale_min_k4(j, b + offsetof(B, scales), sc, m);
    requantize<true>(x, 32, j, dall * static_cast<float>(sc),
                     rounded(dmall * static_cast<float>(m)), 0, nmax, L);
  }
}

inline void encode_block(std::type_identity<BlockQ4_K>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ4_K;
  std::uint8_t L[B::elements];
  float scales[B::elements / 32];
  float mins[B::elements / 32];
  float max_scale = 0;
  float max_min = 0;
  k4_scales(x, 15, -1.f, 20, L, scales, mins, max_scale, max_min);
  k4_store_scales<B>(scales, mins, max_scale, max_min, b);
  k4_requantize<B>(x, b, 15, L);
  std::uint8_t* q = b + offsetof(B, qs);
  for (int j = 0; j < B::elements; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = pack_nibbles(L[j + l], L[j + l + 32]);
    q += 32;
  }
}

inline void encode_block(std::type_identity<BlockQ5_K>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ5_K;
  std::uint8_t L[B::elements];
  float scales[B::elements / 32];
  float mins[B::elements / 32];
  float max_scale = 0;
  float max_min = 0;
  k4_scales(x, 31, -0.5f, 15, L, scales, mins, max_scale, max_min);
  k4_store_scales<B>(scales, mins, max_scale, max_min, b);
  k4_requantize<B>(x, b, 31, L);
  std::uint8_t* qh = b + offsetof(B, qh);
  std::uint8_t* ql = b + offsetof(B, qs);
  std::memset(qh, 0, B::elements / 8);
  unsigned m1 = 1;
  unsigned m2 = 2;
  for (int n = 0; n < B::elements; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        qh[j] = static_cast<std::uint8_t>(qh[j] | m1);
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        qh[j] = static_cast<std::uint8_t>(qh[j] | m2);
      }
      ql[j] = pack_nibbles(l1, l2);
    }
    m1 <<= 2;
    m2 <<= 2;
    ql += 32;
  }
}

inline void encode_block(std::type_identity<BlockQ6_K>, const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ6_K;
  std::int8_t L[B::elements];
  float scales[B::elements / 16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < B::elements / 16; ++ib) {
    const float scale = make_qx_quants(16, 32, x + static_cast<std::ptrdiff_t>(16 * ib),
                                       L + static_cast<std::ptrdiff_t>(16 * ib));
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < group_max_eps) {
    std::memset(b, 0, sizeof(B));
    store_u16(b + offsetof(B, d), fp32_to_fp16(0.f));
    return;
  }
  auto* sc = reinterpret_cast<std::int8_t*>(b + offsetof(B, scales));
  const float iscale = -128.f / max_scale;
  const std::uint16_t d16 = fp32_to_fp16(1 / iscale);
  store_u16(b + offsetof(B, d), d16);
  for (int ib = 0; ib < B::elements / 16; ++ib)
    sc[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  const float dall = fp16_to_fp32(d16);
  for (int j = 0; j < B::elements / 16; ++j) {
    requantize<false>(x, 16, j, dall * static_cast<float>(sc[j]), 0.0f, -32, 31, L);
  }
  std::uint8_t* ql = b + offsetof(B, ql);
  std::uint8_t* qh = b + offsetof(B, qh);
  for (int j = 0; j < B::elements; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l + 0] & 0xF;
      const int q2 = L[j + l + 32] & 0xF;
      const int q3 = L[j + l + 64] & 0xF;
      const int q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = pack_nibbles(q1, q3);
      ql[l + 32] = pack_nibbles(q2, q4);
      qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
}

/// Encodes n floats (a multiple of the block size; finite for the block types) as `type`, bit for
/// bit as ggml's quantize_row_*_ref (F16: ggml_fp32_to_fp16_row, BF16: ggml_fp32_to_bf16_row_ref,
/// F32: a copy). Preconditions: decodes(type), `dst` holds row_bytes(type, n) bytes.
inline void quantize(GgmlType type, const float* src, Index n, std::uint8_t* dst) {
  EMBER_ASSERT(decodes(type) && n % traits(type).block_size == 0);
  const bool blocks = visit_block(type, [&](auto block) {
    using B = typename decltype(block)::type;
    for (Index i = 0; i < n / B::elements; ++i)
      encode_block(block, src + i * B::elements, dst + i * Index{sizeof(B)});
  });
  if (blocks) return;
  switch (type) {
    case GgmlType::F32:
      for (Index i = 0; i < n; ++i) store_u32(dst + 4 * i, std::bit_cast<std::uint32_t>(src[i]));
      break;
    case GgmlType::F16:
      for (Index i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
      break;
    default:  // BF16
      for (Index i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_bf16(src[i]));
      break;
  }
}

}  // namespace ember::inline EMBER_ISA::detail::ggml
