/// The AVX-512 sink of the exact dot (ggml/exact_dot_avx2.hpp's row loops at 16 lanes): codes
/// converted 16 at a time, and the K-quants' super-blocks taken whole with their scales as
/// vectors. The codes come from ggml/unpack_avx2.hpp's codes32, as for the other operations.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/ggml/isa.hpp"

#if EMBER_DETAIL_GGML_AVX512
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/exact_dot_avx2.hpp"
#include "ember/ggml/k_scales.hpp"
#include "ember/ggml/unpack_avx2.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml::avx512 {

using avx2::Codes32;
using avx2::codes32;

/// 16 byte codes as floats. Zero-masked forms with every lane kept: the same instructions as the
/// unmasked intrinsics, without their _mm512_undefined_*() start, which GCC 12 reports as
/// maybe-uninitialized once inlined (fatal under -Werror).
template <bool Signed>
EMBER_ALWAYS_INLINE __m512 code_floats(__m128i bytes) noexcept {
  constexpr __mmask16 all = 0xFFFF;
  const __m512i ints =
      Signed ? _mm512_maskz_cvtepi8_epi32(all, bytes) : _mm512_maskz_cvtepu8_epi32(all, bytes);
  return _mm512_maskz_cvtepi32_ps(all, ints);
}

/// -v, lane by lane (the sign flipped, as the scalar negation does: -(+0) is -0).
EMBER_ALWAYS_INLINE __m512 negated(__m512 v) noexcept {
  return _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
}

/// Lane g of v in every lane. (The intrinsics here are the zero-masked forms with every lane kept,
/// for the reason given at code_floats.)
EMBER_ALWAYS_INLINE __m512 lane_of(__m512 v, int g) noexcept {
  return _mm512_maskz_permutexvar_ps(__mmask16{0xFFFF}, _mm512_set1_epi32(g), v);
}

/// 16 bytes at p as 16 int32 lanes (zero-extended).
EMBER_ALWAYS_INLINE __m512i lanes16(const std::uint8_t* p) noexcept {
  return _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF},
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

/// Each lane's bits [shift, shift + width) as a value (lanes of bytes zero-extended).
EMBER_ALWAYS_INLINE __m512i lane_bits(__m512i v, int shift, int mask) noexcept {
  return _mm512_and_si512(_mm512_maskz_srl_epi32(__mmask16{0xFFFF}, v, _mm_cvtsi32_si128(shift)),
                          _mm512_set1_epi32(mask));
}

/// The scales of a super-block's 16 sub-blocks and their offset coefficients (lane g: sub-block
/// g): KScales of the K-quants with one scale per 16 columns (q2_K, q3_K, q6_K).
struct SubBlockScales {
  static constexpr bool same = false;
  __m512 a;     ///< d · sc
  __m512 coef;  ///< the offset coefficient: -dmin · m (q2_K), -k · a (q3_K, q6_K)
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512 scale(int g) const noexcept { return lane_of(a, g); }
};

/// SubBlockScales of the K-quants whose codes stand for code - k (q3_K, q6_K): signed scales sc
/// (int32 lanes) and the fp16 super-block scale at `d`.
EMBER_ALWAYS_INLINE SubBlockScales sub_block_scales(const std::uint8_t* d, __m512i sc,
                                                    float k) noexcept {
  const __m512 a = _mm512_mul_ps(_mm512_set1_ps(load_half_f16c(d)),
                                 _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, sc));
  return {a, _mm512_mul_ps(_mm512_set1_ps(-k), a)};
}

/// The scales of a K-quant super-block as Vec512::super_block reads them: scale(g) the scale a of
/// columns 16g .. 16g + 15 in every lane, coef lane g their offset coefficient (b, or -k · a),
/// each the value feed's Codes32 of the same columns holds (computed by the same float
/// operations). Same: one scale per 32 columns.
template <class B>
struct KScales;

template <>
struct KScales<BlockQ2_K> : SubBlockScales {
  using B = BlockQ2_K;
  explicit KScales(const std::uint8_t* b) noexcept {
    const __m512i s = lanes16(b + offsetof(B, scales));
    const __m512 sc = _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, lane_bits(s, 0, 0xF));
    const __m512 m = _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, lane_bits(s, 4, 0xF));
    a = _mm512_mul_ps(_mm512_set1_ps(load_half_f16c(b + offsetof(B, d))), sc);
    const __m512 ml = _mm512_mul_ps(_mm512_set1_ps(load_half_f16c(b + offsetof(B, dmin))), m);
    coef = negated(ml);
  }
};

template <>
struct KScales<BlockQ3_K> : SubBlockScales {
  using B = BlockQ3_K;
  explicit KScales(const std::uint8_t* b) noexcept
      : SubBlockScales(sub_block_scales(
            b + offsetof(B, d),
            _mm512_sub_epi32(_mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF},
                                                        q3k_scales_v(b + offsetof(B, scales))),
                             _mm512_set1_epi32(32)),
            4.0f)) {}
};

/// Q4_K and Q5_K: one scale per 32 columns (sub-block g / 2).
template <class B>
requires std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K>
struct KScales<B> {
  static constexpr bool same = true;
  __m512 dm;  // lanes 0-7: d · scale of sub-block s; lanes 8-15: dmin · min of sub-block s - 8
  __m512 coef;
  explicit KScales(const std::uint8_t* b) noexcept {
    const __m512 sm = _mm512_maskz_cvtepi32_ps(
        __mmask16{0xFFFF},
        _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF}, k4_scales_mins_v(b + offsetof(B, scales))));
    const __m512 factors =
        _mm512_mask_blend_ps(__mmask16{0xFF00}, _mm512_set1_ps(load_half_f16c(b + offsetof(B, d))),
                             _mm512_set1_ps(load_half_f16c(b + offsetof(B, dmin))));
    dm = _mm512_mul_ps(factors, sm);
    const __m512i mins =
        _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    coef = negated(_mm512_maskz_permutexvar_ps(__mmask16{0xFFFF}, mins, dm));
  }
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512 scale(int g) const noexcept {
    return lane_of(dm, g / 2);
  }
};

template <>
struct KScales<BlockQ6_K> : SubBlockScales {
  using B = BlockQ6_K;
  explicit KScales(const std::uint8_t* b) noexcept
      : SubBlockScales(sub_block_scales(
            b + offsetof(B, d),
            _mm512_maskz_cvtepi8_epi32(
                __mmask16{0xFFFF},
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales)))),
            32.0f)) {}
};

/// The K-quants Vec512::super_block takes.
template <class B>
inline constexpr bool is_k_super =
    std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K> || std::is_same_v<B, BlockQ4_K> ||
    std::is_same_v<B, BlockQ5_K> || std::is_same_v<B, BlockQ6_K>;

/// The vector operations of avx2::DotsOf's accumulators at 16 lanes, how the codes of 32 columns
/// go into them (16 at a time as floats), and the K-quants' super-blocks taken whole.
struct Vec512 {
  using Vector = __m512;
  template <class B>
  static constexpr bool takes_super = is_k_super<B>;
  EMBER_ALWAYS_INLINE static __m512 zero() noexcept { return _mm512_setzero_ps(); }
  EMBER_ALWAYS_INLINE static __m512 load(const float* x) noexcept { return _mm512_loadu_ps(x); }
  EMBER_ALWAYS_INLINE static __m512 mul(__m512 a, __m512 b) noexcept { return _mm512_mul_ps(a, b); }
  EMBER_ALWAYS_INLINE static __m512 fma(__m512 a, __m512 b, __m512 c) noexcept {
    return _mm512_fmadd_ps(a, b, c);
  }
  EMBER_ALWAYS_INLINE static __m512 add(__m512 a, __m512 b) noexcept { return _mm512_add_ps(a, b); }
  EMBER_ALWAYS_INLINE static __m512 set1(float a) noexcept { return _mm512_set1_ps(a); }
  EMBER_ALWAYS_INLINE static float sum(__m512 v) noexcept {
    // Both halves by an AVX-512F instruction (extractf32x8 would need DQ), zero-masked with every
    // lane kept for the reason given at code_floats (GCC 12 builds _mm512_castps512_ps256 from the
    // unmasked extract too).
    const __m512d bits = _mm512_castps_pd(v);
    const __m256 low = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8{0xF}, bits, 0));
    const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8{0xF}, bits, 1));
    return avx2::lane_sum(_mm256_add_ps(low, high));
  }

  /// Σ q · h of 32 columns into each vector's accumulators (DotsOf::codes).
  template <class Sink, bool Offset, bool Same, bool Signed>
  EMBER_ALWAYS_INLINE static void codes(Sink& dots, Index c,
                                        const Codes32<Offset, Same, Signed>& g) noexcept {
    const __m512 v0 = code_floats<Signed>(g.half(0));
    const __m512 v1 = code_floats<Signed>(g.half(1));
    dots.each([&](auto j) EMBER_INLINE_LAMBDA {
      const __m512 p0 = mul(v0, load(dots.x(j, c)));
      if constexpr (Same) {
        dots.add(j, fma(v1, load(dots.x(j, c + 16)), p0), g.a0);
      } else {
        dots.add(j, p0, g.a0);
        dots.add(j, mul(v1, load(dots.x(j, c + 16))), g.a1);
      }
    });
  }

  /// Super-block b of K-quant type B at columns c .. c + 255, taken as feed's Codes32 calls of
  /// its eight 32-column pieces would take it (the same coefficients, products and accumulator
  /// order, so the same bits), with its scales as vectors (KScales): no scalar scale arithmetic.
  template <class B, class Sink>
  EMBER_ALWAYS_INLINE static void super_block(Sink& dots, const std::uint8_t* b, Index c) noexcept {
    const KScales<B> k(b);
    _mm512_storeu_ps(dots.coef + c / 16, k.coef);
    unrolled<8>([&](auto piece) EMBER_INLINE_LAMBDA {
      constexpr int i = static_cast<int>(piece);
      const __m256i q = codes32<B>(b, i);
      const __m512 v0 = code_floats<false>(_mm256_castsi256_si128(q));
      const __m512 v1 = code_floats<false>(_mm256_extracti128_si256(q, 1));
      const __m512 a0 = k.scale(2 * i);
      const Index ci = c + 32 * i;
      if constexpr (KScales<B>::same) {
        dots.each([&](auto j) EMBER_INLINE_LAMBDA {
          const __m512 p0 = mul(v0, load(dots.x(j, ci)));
          dots.add(j, fma(v1, load(dots.x(j, ci + 16)), p0), a0);
        });
      } else {
        const __m512 a1 = k.scale(2 * i + 1);
        dots.each([&](auto j) EMBER_INLINE_LAMBDA {
          dots.add(j, mul(v0, load(dots.x(j, ci))), a0);
          dots.add(j, mul(v1, load(dots.x(j, ci + 16))), a1);
        });
      }
    });
  }
};

/// The sink of N vectors at 16 lanes.
template <std::size_t N>
using Dots = avx2::DotsOf<N, Vec512>;

}  // namespace ember::inline EMBER_ISA::detail::ggml::avx512

#endif  // EMBER_DETAIL_GGML_AVX512
