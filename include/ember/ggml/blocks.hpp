/// ggml's block layouts (ggml-common.h), each named once as a struct whose size is checked against
/// ggml's, and the scalar conversions of their fields (ggml-impl.h): the ground every ggml kernel
/// of ember (decoders, encoders, row and dot kernels) reads its bytes by.
// SPDX-License-Identifier: MIT
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#if defined(__F16C__) || defined(__AVX512VL__)
#include <immintrin.h>
#endif

#include "ember/config.hpp"
#include "ember/detail/half.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

/// ggml_half: the bits of an IEEE binary16 value.
using Half = std::uint16_t;

// Each struct is ggml-common.h's block_* with the same members in the same order; `elements` is
// its QK. Kernels read a field at `block + offsetof(Block, field)` byte by byte (a row may sit at
// any alignment), so these structs are never accessed through a pointer.

/// Q4_0: x = (q - 8) · d; element j is the low nibble of qs[j], element j + 16 its high nibble.
struct BlockQ4_0 {
  static constexpr int elements = 32;
  Half d;
  std::uint8_t qs[elements / 2];
};
/// Q4_1: x = q · d + m; nibbles as Q4_0.
struct BlockQ4_1 {
  static constexpr int elements = 32;
  Half d;
  Half m;
  std::uint8_t qs[elements / 2];
};
/// Q5_0: x = (q - 16) · d; the low 4 bits as Q4_0, bit j of qh the fifth bit of element j.
struct BlockQ5_0 {
  static constexpr int elements = 32;
  Half d;
  std::uint8_t qh[4];
  std::uint8_t qs[elements / 2];
};
/// Q5_1: x = q · d + m; bits as Q5_0.
struct BlockQ5_1 {
  static constexpr int elements = 32;
  Half d;
  Half m;
  std::uint8_t qh[4];
  std::uint8_t qs[elements / 2];
};
/// Q8_0: x = q · d.
struct BlockQ8_0 {
  static constexpr int elements = 32;
  Half d;
  std::int8_t qs[elements];
};
/// Q8_1: x = q · d, and s = d · Σ q (a dot-product type: ggml rounds hidden rows to it).
struct BlockQ8_1 {
  static constexpr int elements = 32;
  Half d;
  Half s;
  std::int8_t qs[elements];
};
/// Q2_K: 16 sub-blocks of 16; x = (d · scale) · q - (dmin · min), scale and min the low and high
/// nibble of scales[sub-block], q 2-bit.
struct BlockQ2_K {
  static constexpr int elements = 256;
  std::uint8_t scales[16];
  std::uint8_t qs[elements / 4];
  Half d;
  Half dmin;
};
/// Q3_K: 16 sub-blocks of 16; x = (d · (scale - 32)) · (q - (high bit ? 0 : 4)), 6-bit scales
/// (q3_k_scales), q 2-bit plus a high bit in hmask.
struct BlockQ3_K {
  static constexpr int elements = 256;
  std::uint8_t hmask[elements / 8];
  std::uint8_t qs[elements / 4];
  std::uint8_t scales[12];
  Half d;
};
/// Q4_K: 8 sub-blocks of 32; x = (d · scale) · q - (dmin · min), 6-bit scales and mins
/// (scale_min_k4), q 4-bit.
struct BlockQ4_K {
  static constexpr int elements = 256;
  Half d;
  Half dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[elements / 2];
};
/// Q5_K: as Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  static constexpr int elements = 256;
  Half d;
  Half dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[elements / 8];
  std::uint8_t qs[elements / 2];
};
/// Q6_K: 16 sub-blocks of 16; x = (d · scale) · (q - 32), int8 scales, q 6-bit (4 in ql, 2 in qh).
struct BlockQ6_K {
  static constexpr int elements = 256;
  std::uint8_t ql[elements / 2];
  std::uint8_t qh[elements / 4];
  std::int8_t scales[elements / 16];
  Half d;
};
/// Q8_K: x = q · d (d a float), bsums the sums of q over each 16 (a dot-product type).
struct BlockQ8_K {
  static constexpr int elements = 256;
  float d;
  std::int8_t qs[elements];
  std::int16_t bsums[elements / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
                  sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36,
              "ggml's 32-element blocks (ggml-common.h)");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292,
              "ggml's super-blocks (ggml-common.h)");

/// True for Q5_0 and Q5_1, whose codes take their bit 4 from qh.
template <class B>
inline constexpr bool has_fifth_bit = std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>;
/// True for Q4_0 ... Q5_1: 32 codes whose low 4 bits are the nibbles of qs.
template <class B>
inline constexpr bool is_nibble_block =
    std::is_same_v<B, BlockQ4_0> || std::is_same_v<B, BlockQ4_1> || has_fifth_bit<B>;
/// The code offset of a block type in the integer kernels (its codes w stand for w - offset).
template <class B>
inline constexpr int code_offset = std::is_same_v<B, BlockQ4_0>   ? 8
                                   : std::is_same_v<B, BlockQ5_0> ? 16
                                   : std::is_same_v<B, BlockQ8_0> ? 128
                                   : std::is_same_v<B, BlockQ3_K> ? 4
                                   : std::is_same_v<B, BlockQ6_K> ? 32
                                                                  : 0;
/// True for the 32-element types with an offset m (Q4_1, Q5_1).
template <class B>
inline constexpr bool has_offset_term =
    std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>;
/// True for the super-block types with mins (Q2_K, Q4_K, Q5_K).
template <class B>
inline constexpr bool has_mins =
    std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K>;

// ---- fields: little-endian loads and stores at any alignment ------------------------------------

using detail::load_u16;
inline void store_u16(std::uint8_t* p, std::uint16_t v) noexcept {
  p[0] = static_cast<std::uint8_t>(v);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
[[nodiscard]] inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) noexcept {
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

// ---- scalar conversions: detail/half.hpp, named here for the kernels in this namespace ----

using detail::bf16_to_fp32;
using detail::fp16_to_fp32;
using detail::fp32_to_bf16;
using detail::fp32_to_fp16;

[[nodiscard]] inline float load_half(const std::uint8_t* p) noexcept {
  return fp16_to_fp32(load_u16(p));
}

#if defined(__AVX512VL__)
/// load_half by the conversion instruction (the same value, NaNs quieted alike) without its
/// branches: for the vector kernels' block scales (AVX-512 VL's masked form here, F16C's below).
[[nodiscard]] EMBER_ALWAYS_INLINE float load_half_f16c(const std::uint8_t* p) noexcept {
  const __m128i h = _mm_cvtsi32_si128(load_u16(p));
  return _mm_cvtss_f32(_mm_maskz_cvtph_ps(__mmask8{1}, h));
}
#elif defined(__F16C__)
[[nodiscard]] EMBER_ALWAYS_INLINE float load_half_f16c(const std::uint8_t* p) noexcept {
  return _cvtsh_ss(load_u16(p));
}
#endif

/// ggml's nearest_int: round to nearest, ties to even, by adding 1.5 * 2^23. Exact for
/// |v| <= 4194303 (ggml asserts that range in debug builds); outside it, the same bits as ggml.
/// A product passed as v is rounded before the add, as in ggml's C.
[[nodiscard]] inline int nearest_int(float v) noexcept {
  const float shifted = rounded(v) + 12582912.f;
  const auto i = std::bit_cast<std::int32_t>(shifted);
  return (i & 0x007fffff) - 0x00400000;
}

/// The value of largest magnitude among x[0, n) (the first of equal magnitudes; 0 when all are
/// zero) and that magnitude, found as ggml's quantizers find them (a strict comparison).
struct SignedAbsmax {
  float max = 0.0f;
  float amax = 0.0f;
};
[[nodiscard]] inline SignedAbsmax signed_absmax(const float* x, int n) noexcept {
  SignedAbsmax m;
  for (int j = 0; j < n; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > m.amax) {
      m.amax = ax;
      m.max = x[j];
    }
  }
  return m;
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

/// ggml's get_scale_min_k4: the j-th 6-bit scale and min of a Q4_K/Q5_K block's 12 scale bytes.
inline void scale_min_k4(int j, const std::uint8_t* q, int& d, int& m) noexcept {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
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

}  // namespace ember::inline EMBER_ISA::detail::ggml
