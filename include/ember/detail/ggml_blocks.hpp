/// ggml's block formats (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K...Q6_K): block layouts,
/// decoding and encoding bit-identical to ggml's reference C code, and the fused row dot product
/// used for tied logits.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

#include "ember/config.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

// ggml's results are those of its C code evaluated operation by operation (ggml builds ggml-base,
// which holds the reference quantizers, without FMA flags on x86-64). A fused multiply-add rounds
// once where ggml rounds twice, so contraction is switched off for every function below: clang by
// a pragma inside each body, GCC (whose default is -ffp-contract=fast, in its ISO modes too, and
// which fuses across statements) by an optimize pragma around them. Products are also written as
// their own statements, for any other compiler.
#if defined(__clang__)
#define EMBER_DETAIL_GGML_NO_CONTRACT _Pragma("clang fp contract(off)")
#else
#define EMBER_DETAIL_GGML_NO_CONTRACT
#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

namespace ember::inline EMBER_ISA::detail::ggml {

// ---- scalar conversions (ggml-impl.h) ----------------------------------------------------------

/// Half -> float by the arithmetic of ggml_compute_fp16_to_fp32 (exact for every non-NaN value;
/// a NaN is quieted with its payload kept, as that arithmetic does).
[[nodiscard]] inline float fp16_to_fp32(std::uint16_t h) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
  const std::uint32_t sign = w & 0x80000000u;
  const std::uint32_t two_w = w + w;
  const std::uint32_t exp_offset = 0xE0u << 23;
  const float exp_scale = 0x1.0p-112f;
  const float normalized = std::bit_cast<float>((two_w >> 4) + exp_offset) * exp_scale;
  const std::uint32_t magic_mask = 126u << 23;
  const float denormalized = std::bit_cast<float>((two_w >> 17) | magic_mask) - 0.5f;
  const std::uint32_t denormalized_cutoff = 1u << 27;
  const std::uint32_t result =
      sign | (two_w < denormalized_cutoff ? std::bit_cast<std::uint32_t>(denormalized)
                                          : std::bit_cast<std::uint32_t>(normalized));
  return std::bit_cast<float>(result);
}

/// Float -> half, rounded to nearest even, by the arithmetic of ggml_compute_fp32_to_fp16
/// (GGML_FP32_TO_FP16): overflow gives infinity, every NaN gives 0x7E00 with the sign kept.
[[nodiscard]] inline std::uint16_t fp32_to_fp16(float f) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float scale_to_inf = 0x1.0p+112f;
  const float scale_to_zero = 0x1.0p-110f;
  const float scaled = std::fabs(f) * scale_to_inf;
  float base = scaled * scale_to_zero;
  const auto w = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t shl1_w = w + w;
  const std::uint32_t sign = w & 0x80000000u;
  std::uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const auto bits = std::bit_cast<std::uint32_t>(base);
  const std::uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
  const std::uint32_t mantissa_bits = bits & 0x00000FFFu;
  const std::uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<std::uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

/// bfloat16 -> float (exact: the 16 bits become the top of the float).
[[nodiscard]] inline float bf16_to_fp32(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// Float -> bfloat16 as ggml_compute_fp32_to_bf16: round to nearest even; a NaN keeps its top 16
/// bits with the quiet bit forced on.
[[nodiscard]] inline std::uint16_t fp32_to_bf16(float f) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 64u);
  return static_cast<std::uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

/// ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23. Exact for
/// |v| <= 4194303 (ggml asserts that range in debug builds); outside it, the same bits as ggml.
[[nodiscard]] inline int nearest_int(float v) noexcept {
  const float shifted = v + 12582912.f;
  const auto i = std::bit_cast<std::int32_t>(shifted);
  return (i & 0x007fffff) - 0x00400000;
}

/// C's float -> integer conversion (truncation) where it is defined; INT32_MIN where it is not
/// (NaN, out of range), the result of x86-64's cvttss2si, which is what ggml's `(int8_t)(x + 8.5f)`
/// compiles to. Only reached with finite inputs of subnormal or astronomically large magnitude.
[[nodiscard]] inline std::int32_t truncate_to_int(float v) noexcept {
  if (v > -2147483904.0f && v < 2147483648.0f) return static_cast<std::int32_t>(v);
  return INT32_MIN;
}

/// The low byte of truncate_to_int(v): ggml's `(int8_t)v` / `(uint8_t)v` on a float.
[[nodiscard]] inline std::int8_t to_int8(float v) noexcept {
  return static_cast<std::int8_t>(truncate_to_int(v));
}

[[nodiscard]] inline std::uint16_t load_u16(const std::uint8_t* p) noexcept {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline void store_u16(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
[[nodiscard]] inline float load_half(const std::uint8_t* p) noexcept {
  return fp16_to_fp32(load_u16(p));
}

// ---- type ids and traits ------------------------------------------------------------------

/// A ggml tensor element type by ggml's numeric id (`enum ggml_type` of ggml.h; io::GgmlType names
/// every id). The enumerators are the types these kernels encode and decode; any other id is a
/// value of the type too, and the traits below describe it.
enum class Type : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

/// ggml's type traits of one id: name, elements per block, bytes per block. Zero sizes and an
/// empty name mark an id that is not a type.
struct TypeRow {
  std::string_view name;
  std::uint32_t block_size;
  std::uint32_t type_size;
};

/// One row per id 0..42, as ggml.c's type_traits table (sizes are sizeof of ggml-common.h's
/// block structs; ggml 0.25.1, which ends at GGML_TYPE_COUNT = 43).
inline constexpr TypeRow type_rows[] = {
    {"f32", 1, 4},        {"f16", 1, 2},       {"q4_0", 32, 18},     {"q4_1", 32, 20},
    {"", 0, 0},           {"", 0, 0},          {"q5_0", 32, 22},     {"q5_1", 32, 24},
    {"q8_0", 32, 34},     {"q8_1", 32, 36},    {"q2_K", 256, 84},    {"q3_K", 256, 110},
    {"q4_K", 256, 144},   {"q5_K", 256, 176},  {"q6_K", 256, 210},   {"q8_K", 256, 292},
    {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},   {"iq3_s", 256, 110}, {"iq2_s", 256, 82},   {"iq4_xs", 256, 136},
    {"i8", 1, 1},         {"i16", 1, 2},       {"i32", 1, 4},        {"i64", 1, 8},
    {"f64", 1, 8},        {"iq1_m", 256, 56},  {"bf16", 1, 2},       {"", 0, 0},
    {"", 0, 0},           {"", 0, 0},          {"tq1_0", 256, 54},   {"tq2_0", 256, 66},
    {"", 0, 0},           {"", 0, 0},          {"", 0, 0},           {"mxfp4", 32, 17},
    {"nvfp4", 64, 36},    {"q1_0", 128, 18},   {"q2_0", 64, 18},
};

/// Number of ids ggml's table covers (GGML_TYPE_COUNT).
inline constexpr std::uint32_t type_count = 43;
static_assert(sizeof(type_rows) / sizeof(type_rows[0]) == type_count);

/// The traits of id `id`: a row of type_rows, or the empty row past its end.
[[nodiscard]] constexpr TypeRow type_row(std::uint32_t id) noexcept {
  return id < type_count ? type_rows[id] : TypeRow{"", 0, 0};
}

/// What ember knows of one ggml type.
struct Traits {
  Type type;
  std::string_view name;  ///< ggml's name ("q4_K"); "unknown" for an id that is not a type
  Index block_size;       ///< elements per block
  Index block_bytes;      ///< bytes per block
  bool decodes;           ///< ember encodes and decodes it
};

/// The types ember encodes and decodes, in ggml's id order.
inline constexpr Type codec_types[] = {Type::F32,  Type::F16,  Type::Q4_0, Type::Q4_1, Type::Q5_0,
                                       Type::Q5_1, Type::Q8_0, Type::Q2_K, Type::Q3_K, Type::Q4_K,
                                       Type::Q5_K, Type::Q6_K, Type::BF16};

/// True when ember encodes and decodes `type`.
[[nodiscard]] constexpr bool decodes(Type type) noexcept {
  for (const Type t : codec_types)
    if (t == type) return true;
  return false;
}

/// The traits of `type` (any id; one that is not a type has zero sizes and the name "unknown").
[[nodiscard]] constexpr Traits traits(Type type) noexcept {
  const TypeRow row = type_row(static_cast<std::uint32_t>(type));
  return {type, row.block_size != 0 ? row.name : std::string_view("unknown"), Index{row.block_size},
          Index{row.type_size}, decodes(type)};
}

// ---- block decoders: one block of ggml-common.h's layout -> floats
// ------------------------------- Each mirrors ggml's dequantize_row_* (ggml-quants.c) for one
// block: the same conversions and the same order of float operations. Preconditions (validated by
// GgufFile and GgufWriter): `b` holds one whole block, `y` room for its elements.

inline constexpr int qk = 32;     // elements per block of Q4_0 ... Q8_0
inline constexpr int qk_k = 256;  // elements per K-quant super-block

// Q4_0: fp16 d, 16 bytes of nibbles. x = (q - 8) * d.
inline void decode_q4_0(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < qk / 2; ++j) {
    const int x0 = (qs[j] & 0x0F) - 8;
    const int x1 = (qs[j] >> 4) - 8;
    y[j] = static_cast<float>(x0) * d;
    y[j + qk / 2] = static_cast<float>(x1) * d;
  }
}

// Q4_1: fp16 d, fp16 m, 16 bytes of nibbles. x = q * d + m.
inline void decode_q4_1(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const float m = load_half(b + 2);
  const std::uint8_t* qs = b + 4;
  for (int j = 0; j < qk / 2; ++j) {
    const float p0 = static_cast<float>(qs[j] & 0x0F) * d;
    const float p1 = static_cast<float>(qs[j] >> 4) * d;
    y[j] = p0 + m;
    y[j + qk / 2] = p1 + m;
  }
}

[[nodiscard]] inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

// Q5_0: fp16 d, 4 bytes of fifth bits, 16 bytes of nibbles. x = (q - 16) * d.
inline void decode_q5_0(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const std::uint32_t qh = load_u32(b + 2);
  const std::uint8_t* qs = b + 6;
  for (int j = 0; j < qk / 2; ++j) {
    const auto xh0 = static_cast<int>(((qh >> j) << 4) & 0x10u);
    const auto xh1 = static_cast<int>((qh >> (j + 12)) & 0x10u);
    const int x0 = ((qs[j] & 0x0F) | xh0) - 16;
    const int x1 = ((qs[j] >> 4) | xh1) - 16;
    y[j] = static_cast<float>(x0) * d;
    y[j + qk / 2] = static_cast<float>(x1) * d;
  }
}

// Q5_1: fp16 d, fp16 m, 4 bytes of fifth bits, 16 bytes of nibbles. x = q * d + m.
inline void decode_q5_1(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const float m = load_half(b + 2);
  const std::uint32_t qh = load_u32(b + 4);
  const std::uint8_t* qs = b + 8;
  for (int j = 0; j < qk / 2; ++j) {
    const auto xh0 = static_cast<int>(((qh >> j) << 4) & 0x10u);
    const auto xh1 = static_cast<int>((qh >> (j + 12)) & 0x10u);
    const float p0 = static_cast<float>((qs[j] & 0x0F) | xh0) * d;
    const float p1 = static_cast<float>((qs[j] >> 4) | xh1) * d;
    y[j] = p0 + m;
    y[j + qk / 2] = p1 + m;
  }
}

// Q8_0: fp16 d, 32 int8. x = q * d.
inline void decode_q8_0(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const std::uint8_t* qs = b + 2;
  for (int j = 0; j < qk; ++j) y[j] = static_cast<float>(static_cast<std::int8_t>(qs[j])) * d;
}

// Q2_K: 16 bytes of 4-bit scale|min pairs, 64 bytes of 2-bit quants, fp16 d, fp16 dmin.
// x = (d * scale) * q - (dmin * min).
inline void decode_q2_k(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const std::uint8_t* scales = b;
  const std::uint8_t* q = b + 16;
  const float d = load_half(b + 80);
  const float min = load_half(b + 82);
  int is = 0;
  for (int n = 0; n < qk_k; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const std::uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = min * static_cast<float>(sc >> 4);
        const std::uint8_t* qq = q + static_cast<std::ptrdiff_t>(16 * half);
        for (int l = 0; l < 16; ++l) {
          const float p = dl * static_cast<float>((qq[l] >> shift) & 3);
          y[l] = p - ml;
        }
        y += 16;
      }
      shift += 2;
    }
    q += 32;
  }
}

/// The 16 six-bit scales of a Q3_K block (0..63, stored minus 32), as ggml's kmask shuffle.
inline void q3_k_scales(const std::uint8_t* s, int* out) noexcept {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = low | (high << 4);
  }
}

// Q3_K: 32 bytes of high bits, 64 bytes of 2-bit quants, 12 bytes of 6-bit scales, fp16 d.
// x = (d * (scale - 32)) * (q - (high bit ? 0 : 4)).
inline void decode_q3_k(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const std::uint8_t* hm = b;
  const std::uint8_t* q = b + 32;
  const float d_all = load_half(b + 108);
  int sc[16];
  q3_k_scales(b + 96, sc);
  int is = 0;
  int bit = 0;  // ggml's mask m = 1 << bit
  for (int n = 0; n < qk_k; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * static_cast<float>(sc[is++] - 32);
        const std::uint8_t* qq = q + static_cast<std::ptrdiff_t>(16 * half);
        const std::uint8_t* hh = hm + static_cast<std::ptrdiff_t>(16 * half);
        for (int l = 0; l < 16; ++l) {
          // q - (high bit ? 0 : 4), without a branch.
          const int v = ((qq[l] >> shift) & 3) + (((hh[l] >> bit) & 1) << 2) - 4;
          y[l] = dl * static_cast<float>(v);
        }
        y += 16;
      }
      shift += 2;
      ++bit;
    }
    q += 32;
  }
}

/// ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K/Q5_K block.
inline void scale_min_k4(int j, const std::uint8_t* q, int& d, int& m) noexcept {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q4_K: fp16 d, fp16 dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles.
// x = (d * scale) * q - (dmin * min).
inline void decode_q4_k(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const float min = load_half(b + 2);
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < qk_k; j += 64) {
    int sc = 0;
    int m = 0;
    scale_min_k4(is, scales, sc, m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = min * static_cast<float>(m);
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const float p = d1 * static_cast<float>(q[l] & 0xF);
      y[l] = p - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const float p = d2 * static_cast<float>(q[l] >> 4);
      y[32 + l] = p - m2;
    }
    y += 64;
    q += 32;
    is += 2;
  }
}

// Q5_K: fp16 d, fp16 dmin, 12 bytes of scales and mins, 32 bytes of fifth bits, 128 of nibbles.
inline void decode_q5_k(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float d = load_half(b);
  const float min = load_half(b + 2);
  const std::uint8_t* scales = b + 4;
  const std::uint8_t* qh = b + 16;
  const std::uint8_t* ql = b + 48;
  int is = 0;
  int b1 = 0;  // ggml's masks u1 = 1 << b1, u2 = 2 << b1
  for (int j = 0; j < qk_k; j += 64) {
    int sc = 0;
    int m = 0;
    scale_min_k4(is, scales, sc, m);
    const float d1 = d * static_cast<float>(sc);
    const float m1 = min * static_cast<float>(m);
    scale_min_k4(is + 1, scales, sc, m);
    const float d2 = d * static_cast<float>(sc);
    const float m2 = min * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int v = (ql[l] & 0xF) + (((qh[l] >> b1) & 1) << 4);
      const float p = d1 * static_cast<float>(v);
      y[l] = p - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int v = (ql[l] >> 4) + (((qh[l] >> (b1 + 1)) & 1) << 4);
      const float p = d2 * static_cast<float>(v);
      y[32 + l] = p - m2;
    }
    y += 64;
    ql += 32;
    is += 2;
    b1 += 2;
  }
}

// Q6_K: 128 bytes of low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales, fp16 d.
// x = (d * scale) * (q - 32).
inline void decode_q6_k(const std::uint8_t* b, float* y) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::uint8_t* sc = b + 192;
  const float d = load_half(b + 208);
  for (int n = 0; n < qk_k; n += 128) {
    float ds[8];
    for (int k = 0; k < 8; ++k) ds[k] = d * static_cast<float>(static_cast<std::int8_t>(sc[k]));
    for (int half = 0; half < 2; ++half) {
      const float d0 = ds[half];
      const float d2 = ds[half + 2];
      const float d4 = ds[half + 4];
      const float d6 = ds[half + 6];
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d0 * static_cast<float>(q1);
        y[l + 32] = d2 * static_cast<float>(q2);
        y[l + 64] = d4 * static_cast<float>(q3);
        y[l + 96] = d6 * static_cast<float>(q4);
      }
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// ---- block encoders: ggml's quantize_row_*_ref for one block
// ------------------------------------- Same comparisons, conversions and float operation order as
// ggml-quants.c (no importance matrix). Integer narrowing is modular, as C's on ggml's platforms.
// Preconditions (validated by GgufWriter): `x` holds one block of finite floats, `b` room for one
// block.

inline constexpr float group_max_eps = 1e-15f;  // ggml's GROUP_MAX_EPS

inline std::uint8_t pack_nibbles(int lo, int hi) noexcept {
  return static_cast<std::uint8_t>((lo & 0xFF) | ((hi << 4) & 0xFF));
}

inline void encode_q4_0(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < qk; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b, fp32_to_fp16(d));
  for (int j = 0; j < qk / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[qk / 2 + j] * id;
    const int xi0 = std::min(15, static_cast<int>(to_int8(x0 + 8.5f)));
    const int xi1 = std::min(15, static_cast<int>(to_int8(x1 + 8.5f)));
    b[2 + j] = pack_nibbles(xi0, xi1);
  }
}

inline void encode_q4_1(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < qk; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b, fp32_to_fp16(d));
  store_u16(b + 2, fp32_to_fp16(min));
  for (int j = 0; j < qk / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[qk / 2 + j] - min) * id;
    const int xi0 = std::min(15, static_cast<int>(to_int8(x0 + 0.5f)));
    const int xi1 = std::min(15, static_cast<int>(to_int8(x1 + 0.5f)));
    b[4 + j] = pack_nibbles(xi0, xi1);
  }
}

inline void store_u32(std::uint8_t* p, std::uint32_t v) noexcept {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

inline void encode_q5_0(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < qk; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b, fp32_to_fp16(d));
  std::uint32_t qh = 0;
  for (int j = 0; j < qk / 2; ++j) {
    const float x0 = x[j] * id;
    const float x1 = x[qk / 2 + j] * id;
    const auto xi0 = static_cast<std::uint8_t>(std::min(31, static_cast<int>(to_int8(x0 + 16.5f))));
    const auto xi1 = static_cast<std::uint8_t>(std::min(31, static_cast<int>(to_int8(x1 + 16.5f))));
    b[6 + j] = pack_nibbles(xi0 & 0x0F, xi1 & 0x0F);
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
  }
  store_u32(b + 2, qh);
}

inline void encode_q5_1(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float min = std::numeric_limits<float>::max();
  float max = -std::numeric_limits<float>::max();
  for (int j = 0; j < qk; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  const float d = (max - min) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b, fp32_to_fp16(d));
  store_u16(b + 2, fp32_to_fp16(min));
  std::uint32_t qh = 0;
  for (int j = 0; j < qk / 2; ++j) {
    const float x0 = (x[j] - min) * id;
    const float x1 = (x[qk / 2 + j] - min) * id;
    const auto xi0 = static_cast<std::uint8_t>(truncate_to_int(x0 + 0.5f));
    const auto xi1 = static_cast<std::uint8_t>(truncate_to_int(x1 + 0.5f));
    b[8 + j] = pack_nibbles(xi0 & 0x0F, xi1 & 0x0F);
    qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
    qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
  }
  store_u32(b + 4, qh);
}

inline void encode_q8_0(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float amax = 0.0f;
  for (int j = 0; j < qk; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b, fp32_to_fp16(d));
  for (int j = 0; j < qk; ++j) {
    const float x0 = x[j] * id;
    b[2 + j] = static_cast<std::uint8_t>(to_int8(std::round(x0)));
  }
}

/// ggml's make_qx_quants with rmse_type 1 and no importance weights (the Q6_K scale search).
inline float make_qx_quants(int n, int nmax, const float* x, std::int8_t* L) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < group_max_eps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const auto fl = static_cast<float>(l);
    const float wx = w * x[i];
    const float wxl = wx * fl;
    sumlx += wxl;
    const float wl = w * fl;
    const float wll = wl * fl;
    suml2 += wll;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float step = 0.1f * static_cast<float>(is);
    const float top = static_cast<float>(nmax) + step;
    iscale = -top / max;
    sumlx = 0;
    suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      const auto fl = static_cast<float>(l);
      const float wx = w * x[i];
      const float wxl = wx * fl;
      sumlx += wxl;
      const float wl = w * fl;
      const float wll = wl * fl;
      suml2 += wll;
    }
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
  EMBER_DETAIL_GGML_NO_CONTRACT
  float max = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < group_max_eps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l);
    const float w = x[i] * x[i];
    const auto fl = static_cast<float>(l);
    const float wx = w * x[i];
    const float wxl = wx * fl;
    sumlx += wxl;
    const float wl = w * fl;
    const float wll = wl * fl;
    suml2 += wll;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const auto fli = static_cast<float>(L[i]);
      const float wx = w * x[i];
      const float wxl = wx * fli;
      float slx = sumlx - wxl;
      if (slx > 0) {
        const float wl = w * fli;
        const float wll = wl * fli;
        float sl2 = suml2 - wll;
        const float num = x[i] * sl2;
        int new_l = nearest_int(num / slx);
        new_l = std::max(-nmax, std::min(nmax - 1, new_l));
        if (new_l != L[i]) {
          const auto fnl = static_cast<float>(new_l);
          const float a = wx * fnl;
          slx += a;
          const float wn = w * fnl;
          const float wnn = wn * fnl;
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
  EMBER_DETAIL_GGML_NO_CONTRACT
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    const float wx = w * x[i];
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
    const float sl = scale * static_cast<float>(L[i]);
    const float slm = sl + min;
    float diff = slm - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    const float w = weights[i];
    const float wd = w * diff;
    best_error += wd;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    const float step = rdelta * static_cast<float>(is);
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
      const float wl = w * fl;
      sum_l += wl;
      const float wll = wl * fl;
      sum_l2 += wll;
      const float wlx = wl * x[i];
      sum_xl += wlx;
    }
    const float a = sum_w * sum_l2;
    const float c = sum_l * sum_l;
    const float D = a - c;
    if (D > 0) {
      const float s1 = sum_w * sum_xl;
      const float s2 = sum_x * sum_l;
      float this_scale = (s1 - s2) / D;
      const float m1 = sum_l2 * sum_x;
      const float m2 = sum_l * sum_xl;
      float this_min = (m1 - m2) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        const float sl = this_scale * static_cast<float>(Laux[i]);
        const float slm = sl + this_min;
        float diff = slm - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        const float w = weights[i];
        const float wd = w * diff;
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

/// Packs 2-bit values L[0, 256) as ggml's Q2_K/Q3_K do: byte j/4 + l of each 128-value half holds
/// L[j+l], L[j+l+32], L[j+l+64], L[j+l+96] from the low bits up.
template <class L8>
inline void pack_2bit(const L8* L, std::uint8_t* qs) noexcept {
  for (int j = 0; j < qk_k; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                                (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

inline void encode_q2_k(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  std::uint8_t* scales = b;
  std::uint8_t L[qk_k];
  std::uint8_t Laux[16];
  float weights[16];
  float mins[qk_k / 16] = {};
  float sc[qk_k / 16] = {};
  const float q4scale = 15.f;
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < qk_k / 16; ++j) {
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
    for (int j = 0; j < qk_k / 16; ++j)
      scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * sc[j]));
    d16 = fp32_to_fp16(max_scale / q4scale);
  } else {
    for (int j = 0; j < qk_k / 16; ++j) scales[j] = 0;
    d16 = fp32_to_fp16(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < qk_k / 16; ++j) {
      const int l = nearest_int(iscale * mins[j]);
      scales[j] = static_cast<std::uint8_t>(scales[j] | (l << 4));
    }
    dmin16 = fp32_to_fp16(max_min / q4scale);
  } else {
    dmin16 = fp32_to_fp16(0.f);
  }
  store_u16(b + 80, d16);
  store_u16(b + 82, dmin16);
  const float dall = fp16_to_fp32(d16);
  const float dmall = fp16_to_fp32(dmin16);
  for (int j = 0; j < qk_k / 16; ++j) {
    const float d = dall * static_cast<float>(scales[j] & 0xF);
    if (d == 0.0f) continue;
    const float dm = dmall * static_cast<float>(scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      const float num = x[16 * j + ii] + dm;
      int l = nearest_int(num / d);
      l = std::max(0, std::min(3, l));
      L[16 * j + ii] = static_cast<std::uint8_t>(l);
    }
  }
  pack_2bit(L, b + 16);
}

inline void encode_q3_k(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  std::uint8_t* hmask = b;
  std::uint8_t* scales = b + 96;
  std::int8_t L[qk_k];
  float sc[qk_k / 16] = {};
  float max_scale = 0;
  float amax = 0;
  for (int j = 0; j < qk_k / 16; ++j) {
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
    for (int j = 0; j < qk_k / 16; ++j) {
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
  store_u16(b + 108, d16);
  const float dall = fp16_to_fp32(d16);
  int s6[16];
  q3_k_scales(scales, s6);
  for (int j = 0; j < qk_k / 16; ++j) {
    const float d = dall * static_cast<float>(s6[j] - 32);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int(x[16 * j + ii] / d);
      l = std::max(-4, std::min(3, l));
      L[16 * j + ii] = static_cast<std::int8_t>(l + 4);
    }
  }
  std::memset(hmask, 0, qk_k / 8);
  int m = 0;
  unsigned hm = 1;
  for (std::int8_t& l : L) {
    if (l > 3) {
      hmask[m] = static_cast<std::uint8_t>(hmask[m] | hm);
      l = static_cast<std::int8_t>(l - 4);
    }
    if (++m == qk_k / 8) {
      m = 0;
      hm <<= 1;
    }
  }
  pack_2bit(L, b + 32);
}

/// The sub-block scale search shared by Q4_K and Q5_K: 8 groups of 32, weights av_x + |x|.
inline void k4_scales(const float* x, int nmax, float rmin, int nstep, std::uint8_t* L,
                      float* scales, float* mins, float& max_scale, float& max_min) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  std::uint8_t Laux[32];
  float weights[32];
  max_scale = 0;
  max_min = 0;
  for (int j = 0; j < qk_k / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) {
      const float sq = x[32 * j + l] * x[32 * j + l];
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
inline void k4_store_scales(const float* scales, const float* mins, float max_scale, float max_min,
                            std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  std::uint8_t* s = b + 4;
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < qk_k / 32; ++j) {
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
  store_u16(b, fp32_to_fp16(max_scale / 63.f));
  store_u16(b + 2, fp32_to_fp16(max_min / 63.f));
}

/// Re-quantizes each group of 32 with the stored (rounded) scale and min: L in [0, nmax].
inline void k4_requantize(const float* x, const std::uint8_t* b, int nmax,
                          std::uint8_t* L) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const float dall = load_half(b);
  const float dmall = load_half(b + 2);
  for (int j = 0; j < qk_k / 32; ++j) {
    int sc = 0;
    int m = 0;
    scale_min_k4(j, b + 4, sc, m);
    const float d = dall * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = dmall * static_cast<float>(m);
    for (int ii = 0; ii < 32; ++ii) {
      const float num = x[32 * j + ii] + dm;
      int l = nearest_int(num / d);
      l = std::max(0, std::min(nmax, l));
      L[32 * j + ii] = static_cast<std::uint8_t>(l);
    }
  }
}

inline void encode_q4_k(const float* x, std::uint8_t* b) noexcept {
  std::uint8_t L[qk_k];
  float scales[qk_k / 32];
  float mins[qk_k / 32];
  float max_scale = 0;
  float max_min = 0;
  k4_scales(x, 15, -1.f, 20, L, scales, mins, max_scale, max_min);
  k4_store_scales(scales, mins, max_scale, max_min, b);
  k4_requantize(x, b, 15, L);
  std::uint8_t* q = b + 16;
  for (int j = 0; j < qk_k; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = pack_nibbles(L[j + l], L[j + l + 32]);
    q += 32;
  }
}

inline void encode_q5_k(const float* x, std::uint8_t* b) noexcept {
  std::uint8_t L[qk_k];
  float scales[qk_k / 32];
  float mins[qk_k / 32];
  float max_scale = 0;
  float max_min = 0;
  k4_scales(x, 31, -0.5f, 15, L, scales, mins, max_scale, max_min);
  k4_store_scales(scales, mins, max_scale, max_min, b);
  k4_requantize(x, b, 31, L);
  std::uint8_t* qh = b + 16;
  std::uint8_t* ql = b + 48;
  std::memset(qh, 0, qk_k / 8);
  unsigned m1 = 1;
  unsigned m2 = 2;
  for (int n = 0; n < qk_k; n += 64) {
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

inline void encode_q6_k(const float* x, std::uint8_t* b) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  std::int8_t L[qk_k];
  float scales[qk_k / 16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < qk_k / 16; ++ib) {
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
    std::memset(b, 0, 210);
    store_u16(b + 208, fp32_to_fp16(0.f));
    return;
  }
  auto* sc = reinterpret_cast<std::int8_t*>(b + 192);
  const float iscale = -128.f / max_scale;
  const std::uint16_t d16 = fp32_to_fp16(1 / iscale);
  store_u16(b + 208, d16);
  for (int ib = 0; ib < qk_k / 16; ++ib)
    sc[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
  const float dall = fp16_to_fp32(d16);
  for (int j = 0; j < qk_k / 16; ++j) {
    const float d = dall * static_cast<float>(sc[j]);
    if (d == 0.0f) continue;
    for (int ii = 0; ii < 16; ++ii) {
      int l = nearest_int(x[16 * j + ii] / d);
      l = std::max(-32, std::min(31, l));
      L[16 * j + ii] = static_cast<std::int8_t>(l + 32);
    }
  }
  std::uint8_t* ql = b;
  std::uint8_t* qh = b + 128;
  for (int j = 0; j < qk_k; j += 128) {
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

// ---- rows ------------------------------------------------------------------------------------

/// Bytes of a row of d elements of `type` (d a multiple of its block size).
[[nodiscard]] constexpr Index row_bytes(Type type, Index d) noexcept {
  const TypeRow row = type_row(static_cast<std::uint32_t>(type));
  return d / Index{row.block_size} * Index{row.type_size};
}

/// A block kernel as a type, so the generic code below inlines it (a function pointer would be an
/// indirect call per block).
template <auto K>
struct Kernel {
  template <class... A>
  void operator()(A... a) const noexcept {
    K(a...);
  }
};

/// Calls f(block_decoder, block_encoder, block_size, block_bytes) for a block type, the sizes read
/// from type_rows; returns false for a plain type (F32, F16, BF16) or one ember does not decode.
/// The one switch from a type to its kernels: decode_row, dot_row and quantize go through it.
template <class F>
bool with_block_kernels(Type type, F&& f) {
  const TypeRow r = type_row(static_cast<std::uint32_t>(type));
  const auto call = [&](auto decode, auto encode) {
    f(decode, encode, Index{r.block_size}, Index{r.type_size});
  };
  switch (type) {
    case Type::Q4_0:
      call(Kernel<decode_q4_0>{}, Kernel<encode_q4_0>{});
      return true;
    case Type::Q4_1:
      call(Kernel<decode_q4_1>{}, Kernel<encode_q4_1>{});
      return true;
    case Type::Q5_0:
      call(Kernel<decode_q5_0>{}, Kernel<encode_q5_0>{});
      return true;
    case Type::Q5_1:
      call(Kernel<decode_q5_1>{}, Kernel<encode_q5_1>{});
      return true;
    case Type::Q8_0:
      call(Kernel<decode_q8_0>{}, Kernel<encode_q8_0>{});
      return true;
    case Type::Q2_K:
      call(Kernel<decode_q2_k>{}, Kernel<encode_q2_k>{});
      return true;
    case Type::Q3_K:
      call(Kernel<decode_q3_k>{}, Kernel<encode_q3_k>{});
      return true;
    case Type::Q4_K:
      call(Kernel<decode_q4_k>{}, Kernel<encode_q4_k>{});
      return true;
    case Type::Q5_K:
      call(Kernel<decode_q5_k>{}, Kernel<encode_q5_k>{});
      return true;
    case Type::Q6_K:
      call(Kernel<decode_q6_k>{}, Kernel<encode_q6_k>{});
      return true;
    default:
      return false;
  }
}

/// Decodes n elements of the plain types: little-endian F32, F16 or BF16 bits to float.
inline void decode_plain(Type type, const std::uint8_t* src, Index n, float* dst) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  switch (type) {
    case Type::F32:
      for (Index i = 0; i < n; ++i) {
        const std::uint8_t* p = src + 4 * i;
        dst[i] = std::bit_cast<float>(load_u32(p));
      }
      break;
    case Type::F16:
      for (Index i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
      break;
    default:  // BF16
      for (Index i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
      break;
  }
}

/// Decodes one row of d elements of `type` into dst[0, d): ggml's dequantize_row_* bit for bit.
/// The switch runs once per row; each block is decoded by a plain, vectorisable loop.
/// Preconditions (checked by GgufFile / GgufWriter): decodes(type), d a multiple of the block
/// size, `row` holds row_bytes(type, d) bytes, `dst` room for d floats.
inline void decode_row(Type type, const std::uint8_t* row, Index d, float* dst) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  const bool blocks = with_block_kernels(type, [&](auto decode, auto, Index bs, Index bytes) {
    const Index nb = d / bs;
    for (Index i = 0; i < nb; ++i) decode(row + i * bytes, dst + i * bs);
  });
  if (!blocks) decode_plain(type, row, d, dst);
}

/// Encodes n floats (a multiple of the block size; finite for the block types) as `type`, bit for
/// bit as ggml's quantize_row_*_ref (F16: ggml_fp32_to_fp16_row, BF16: ggml_fp32_to_bf16_row_ref,
/// F32: a copy). Preconditions: decodes(type), `dst` holds row_bytes(type, n) bytes.
inline void quantize(Type type, const float* src, Index n, std::uint8_t* dst) {
  EMBER_ASSERT(decodes(type) && n % traits(type).block_size == 0);
  const bool blocks = with_block_kernels(type, [&](auto, auto encode, Index bs, Index bytes) {
    for (Index i = 0; i < n / bs; ++i) encode(src + i * bs, dst + i * bytes);
  });
  if (blocks) return;
  switch (type) {
    case Type::F32:
      for (Index i = 0; i < n; ++i) store_u32(dst + 4 * i, std::bit_cast<std::uint32_t>(src[i]));
      break;
    case Type::F16:
      for (Index i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
      break;
    default:  // BF16
      for (Index i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_bf16(src[i]));
      break;
  }
}

// ---- fused dot product -------------------------------------------------------------------------

/// Lanes of dot_row's accumulator.
inline constexpr int dot_lanes = 8;

/// Adds v[c] * x[c] for c in [0, n) into acc[c mod 8], c increasing, each product rounded to
/// float before its addition; n is a multiple of 8. The lanes live in a local array the compiler
/// keeps in one vector register.
inline void dot_accumulate8(const float* v, const float* x, Index n, float* acc) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  float a[dot_lanes];
  for (int k = 0; k < dot_lanes; ++k) a[k] = acc[k];
  for (Index c = 0; c < n; c += dot_lanes) {
    for (int k = 0; k < dot_lanes; ++k) {
      const float p = v[c + k] * x[c + k];
      a[k] += p;
    }
  }
  for (int k = 0; k < dot_lanes; ++k) acc[k] = a[k];
}

/// As dot_accumulate8 for any n, starting at column c0 (a multiple of 8): the last n mod 8
/// products go to lanes 0, 1, ...
inline void dot_accumulate(const float* v, const float* x, Index n, float* acc) noexcept {
  EMBER_DETAIL_GGML_NO_CONTRACT
  const Index whole = n - n % dot_lanes;
  dot_accumulate8(v, x, whole, acc);
  for (Index c = whole; c < n; ++c) {
    const float p = v[c] * x[c];
    acc[c - whole] += p;
  }
}

/// Σ_c decoded[c] · x[c] over one row of d elements of `type`, decoding block by block into a
/// stack buffer (the row is never decoded whole) — the kernel of tied logits at N = 1.
///
/// Summation order, fixed so results do not depend on the compiler or the target: decoded[c] is
/// exactly decode_row's value; each product decoded[c] · x[c] is rounded to float; lane
/// k = c mod 8 accumulates the products of its columns in increasing c, in float, starting from
/// +0; the lanes are combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
/// Preconditions: as decode_row, and x holds d floats.
[[nodiscard]] inline float dot_row(Type type, const std::uint8_t* row, const float* x, Index d) {
  EMBER_DETAIL_GGML_NO_CONTRACT
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  float acc[dot_lanes] = {};
  alignas(64) float buf[qk_k];
  const bool blocks = with_block_kernels(type, [&](auto decode, auto, Index bs, Index bytes) {
    const Index nb = d / bs;
    for (Index i = 0; i < nb; ++i) {
      decode(row + i * bytes, buf);
      dot_accumulate8(buf, x + i * bs, bs, acc);
    }
  });
  if (!blocks) {
    const Index item = traits(type).block_bytes;
    for (Index c = 0; c < d; c += qk_k) {
      const Index n = std::min<Index>(qk_k, d - c);
      decode_plain(type, row + c * item, n, buf);
      dot_accumulate(buf, x + c, n, acc);
    }
  }
  const float a = acc[0] + acc[1];
  const float b = acc[2] + acc[3];
  const float e = acc[4] + acc[5];
  const float f = acc[6] + acc[7];
  const float ab = a + b;
  const float ef = e + f;
  return ab + ef;
}

}  // namespace ember::inline EMBER_ISA::detail::ggml

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
