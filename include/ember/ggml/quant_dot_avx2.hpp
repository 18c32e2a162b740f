/// The AVX2 kernels of ggml/quant_dot.hpp (vpmaddubsw / vpmaddwd): the order of detail/qdot.hpp,
/// the same bits as the portable kernels; the 16 lanes of the order are two 8-lane registers. The
/// codes come from ggml/unpack_avx2.hpp's codes32, as for the other operations.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/ggml/isa.hpp"

#if EMBER_DETAIL_GGML_AVX2
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/detail/qdot.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/k_scales.hpp"
#include "ember/ggml/unpack_avx2.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml::avx2 {

/// The tag of these kernels: ggml/quant_dot.hpp's simd_block_rows finds the AVX2 kernels by it.
struct Isa {};

/// Σ over pairs of u8 a · s8 b, then over pairs again: 8 sums of 4 products (a < 128 or b's
/// magnitude small enough that no pair saturates).
EMBER_ALWAYS_INLINE __m256i dot4(__m256i a, __m256i b) noexcept {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}

/// dot4 of signed a (|a| <= 128) and signed b (|b| <= 127), by the sign trick.
EMBER_ALWAYS_INLINE __m256i dot4_signed(__m256i a, __m256i b) noexcept {
  return dot4(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

/// The 8 x 8 transpose of dwords: out[k] lane i = in[i] lane k.
EMBER_ALWAYS_INLINE void transpose8(__m256i* v) noexcept {
  const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(v[2], v[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]);
  const __m256i t5 = _mm256_unpackhi_epi32(v[4], v[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]);
  const __m256i t7 = _mm256_unpackhi_epi32(v[6], v[7]);
  const __m256i s0 = _mm256_unpacklo_epi64(t0, t2);
  const __m256i s1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i s2 = _mm256_unpacklo_epi64(t1, t3);
  const __m256i s3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i s4 = _mm256_unpacklo_epi64(t4, t6);
  const __m256i s5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i s6 = _mm256_unpacklo_epi64(t5, t7);
  const __m256i s7 = _mm256_unpackhi_epi64(t5, t7);
  v[0] = _mm256_permute2x128_si256(s0, s4, 0x20);
  v[1] = _mm256_permute2x128_si256(s1, s5, 0x20);
  v[2] = _mm256_permute2x128_si256(s2, s6, 0x20);
  v[3] = _mm256_permute2x128_si256(s3, s7, 0x20);
  v[4] = _mm256_permute2x128_si256(s0, s4, 0x31);
  v[5] = _mm256_permute2x128_si256(s1, s5, 0x31);
  v[6] = _mm256_permute2x128_si256(s2, s6, 0x31);
  v[7] = _mm256_permute2x128_si256(s3, s7, 0x31);
}

/// The 8 halves at byte offset `offset` of blocks 0..7 (`active` of them; zero past) as floats.
template <class B>
EMBER_ALWAYS_INLINE __m256 block_halves(const std::uint8_t* first, Index active,
                                        std::size_t offset) noexcept {
  alignas(16) std::uint16_t h[8] = {};
  if (active == 8) {  // every group but a row's last: unrolled
    EMBER_UNROLL for (Index u = 0; u < 8; ++u) h[u] =
        load_u16(first + u * Index{sizeof(B)} + offset);
  } else {
    for (Index u = 0; u < active; ++u) h[u] = load_u16(first + u * Index{sizeof(B)} + offset);
  }
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}

/// -offset · sums (8 lanes), offset a power of two (or 0; negative: +|offset| · sums).
template <int Offset>
EMBER_ALWAYS_INLINE __m256i offset_init(const std::int32_t* sums) noexcept {
  if constexpr (Offset == 0) {
    return _mm256_setzero_si256();
  } else {
    constexpr int a = Offset < 0 ? -Offset : Offset;
    constexpr int shift = a == 4 ? 2 : a == 8 ? 3 : a == 16 ? 4 : a == 32 ? 5 : 7;
    const __m256i scaled =
        _mm256_slli_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(sums)), shift);
    return Offset < 0 ? scaled : _mm256_sub_epi32(_mm256_setzero_si256(), scaled);
  }
}

/// The sum of the 16 lanes v[0] (0..7) and v[1] (8..15) in the order of detail/qdot.hpp's
/// lane_tree.
EMBER_ALWAYS_INLINE float lane_tree(const __m256 (&v)[2]) noexcept {
  const __m256 t8 = _mm256_add_ps(v[0], v[1]);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

/// w[k] lane u = bytes 32u + 4k .. + 3 of the `bytes` bytes at p (8 units of 32 codes, each
/// contiguous), minus 128 (signed, for the sign trick); dwords past `bytes` read as zero.
EMBER_ALWAYS_INLINE void load_contiguous_units(const std::uint8_t* p, Index bytes,
                                               __m256i* w) noexcept {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  EMBER_UNROLL for (Index u = 0; u < 8; ++u) {
    const auto dwords = static_cast<int>(std::clamp<Index>((bytes - 32 * u + 3) / 4, 0, 8));
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(dwords), lane);
    const __m256i q = _mm256_maskload_epi32(reinterpret_cast<const int*>(p + 32 * u), m);
    w[u] = _mm256_xor_si256(q, flip);
  }
  transpose8(w);
}

/// The 8 units of half h of a group of a row, as the kernel reads them.
struct Units {
  __m256i w[8];
  __m256 dw;
  __m256 mw;
};

template <class B>
EMBER_ALWAYS_INLINE void load_units(const std::uint8_t* first, Index active, Units& t) noexcept {
  EMBER_UNROLL for (Index u = 0; u < 8; ++u) {
    t.w[u] = u < active ? codes32<B>(first + u * Index{sizeof(B)}, 0) : _mm256_setzero_si256();
  }
  transpose8(t.w);
  t.dw = block_halves<B>(first, active, offsetof(B, d));
  t.mw = _mm256_setzero_ps();
  if constexpr (std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>) {
    t.mw = block_halves<B>(first, active, offsetof(B, m));
  }
}

/// The units kernel for N hidden rows: see detail::qdot_units_portable. `load(row, first,
/// active, Units&)` gives units first .. first + 7 of a row (`active` of them present); Signed:
/// its codes are signed (the sign trick; Offset then corrects codes stored minus 128);
/// row_bytes: the bytes of a row it reads.
template <int Offset, bool Signed, bool Extra, Index N, class Load>
void units_rows(const Load& load, const std::uint8_t* rows, Index row_stride, Index row_bytes,
                Index count, Index units, const QuantizedHidden& h, Index j0, float* out,
                Index out_stride, Index parts) {
  const Index groups = (units + qdot_lanes - 1) / qdot_lanes;
  // The bytes of a row asked for per group: one division per call, none per row.
  const Index slice = (row_bytes + groups - 1) / std::max<Index>(groups, 1);
  // Accumulators in pairs: lanes 0..7, 8..15.
  each_row<__m256[2], lane_tree, Extra, N>(
      rows, row_stride, count, parts, out, out_stride,
      [&](const std::uint8_t* row, const std::uint8_t* ahead, __m256(*f)[2],
          __m256(*gx)[2]) EMBER_INLINE_LAMBDA {
        for (Index g = 0; g < groups; ++g) {
          prefetch_slice(ahead, g * slice, std::min(row_bytes, (g + 1) * slice));
          EMBER_UNROLL for (int half = 0; half < 2; ++half) {
            const Index first = g * qdot_lanes + 8 * half;
            const Index active = std::clamp<Index>(units - first, 0, 8);
            if (active == 0) continue;
            Units t;
            load(row, first, active, t);
            unrolled<N>([&](auto jc) EMBER_INLINE_LAMBDA {
              constexpr Index j = jc;
              const std::int8_t* hq = h.group_codes(j0 + j, g) + 32 * half;
              __m256i acc = offset_init<Offset>(h.group_isum(j0 + j, g) + 8 * half);
              EMBER_UNROLL for (int k = 0; k < 8; ++k) {
                const __m256i hk = _mm256_load_si256(reinterpret_cast<const __m256i*>(hq + 64 * k));
                acc = _mm256_add_epi32(acc, Signed ? dot4_signed(t.w[k], hk) : dot4(t.w[k], hk));
              }
              const __m256 s =
                  _mm256_mul_ps(t.dw, _mm256_load_ps(h.unit_scales(j0 + j, g) + 8 * half));
              f[j][half] =
                  _mm256_add_ps(f[j][half], rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(acc), s)));
              if constexpr (Extra) {
                const __m256 y = _mm256_load_ps(h.group_extra(j0 + j, g) + 8 * half);
                gx[j][half] = _mm256_add_ps(gx[j][half], rounded(_mm256_mul_ps(t.mw, y)));
              }
            });
          }
        }
      });
}

// ---- super-blocks -------------------------------------------------------------------------------

/// One super-block: w[c][half] = codes 64c + 32·half .. + 31; sc, m the 16 sub-block scales and
/// mins (lanes 0..7, 8..15); scv[c][half] lane l = sc(4c + (8·half + l) / 4) as an int16 pair.
struct Super {
  __m256i w[4][2];
  __m256i sc[2];
  __m256i m[2];
  __m256i scv[4][2];
  float d;
  float dmin;
};

/// 16 bytes as 16 int32 in two registers (zero- or sign-extended).
template <bool Signed>
EMBER_ALWAYS_INLINE void widen16(__m128i bytes, __m256i* out) noexcept {
  out[0] = Signed ? _mm256_cvtepi8_epi32(bytes) : _mm256_cvtepu8_epi32(bytes);
  const __m128i high = _mm_srli_si128(bytes, 8);
  out[1] = Signed ? _mm256_cvtepi8_epi32(high) : _mm256_cvtepu8_epi32(high);
}

template <class B>
EMBER_ALWAYS_INLINE void load_super(const std::uint8_t* b, Super& t) noexcept {
  t.d = load_half_f16c(b + offsetof(B, d));
  t.dmin = 0.0f;
  t.m[0] = t.m[1] = _mm256_setzero_si256();
  // Codes: w[c][half] the 32 columns of piece 2c + half.
  EMBER_UNROLL for (int c = 0; c < 4; ++c) {
    EMBER_UNROLL for (int half = 0; half < 2; ++half) t.w[c][half] = codes32<B>(b, 2 * c + half);
  }
  if constexpr (std::is_same_v<B, BlockQ2_K>) {
    __m256i s[2];
    widen16<false>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales))), s);
    EMBER_UNROLL for (int half = 0; half < 2; ++half) {
      t.sc[half] = _mm256_and_si256(s[half], _mm256_set1_epi32(0xF));
      t.m[half] = _mm256_srli_epi32(s[half], 4);
    }
    t.dmin = load_half_f16c(b + offsetof(B, dmin));
  } else if constexpr (std::is_same_v<B, BlockQ3_K>) {
    widen16<false>(q3k_scales_v(b + offsetof(B, scales)), t.sc);
    EMBER_UNROLL for (auto& s : t.sc) s = _mm256_sub_epi32(s, _mm256_set1_epi32(32));
  } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
    widen16<true>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales))), t.sc);
  } else {  // Q4_K, Q5_K
    const __m128i sm = k4_scales_mins_v(b + offsetof(B, scales));
    const __m128i pairs = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    widen16<false>(_mm_shuffle_epi8(sm, pairs), t.sc);
    widen16<false>(_mm_shuffle_epi8(_mm_srli_si128(sm, 8), pairs), t.m);
    t.dmin = load_half_f16c(b + offsetof(B, dmin));
  }
  // scv[c][half] lane l: sub-block 4c + 2·half + l / 4, low 16 bits.
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  EMBER_UNROLL for (int c = 0; c < 4; ++c) {
    EMBER_UNROLL for (int half = 0; half < 2; ++half) {
      const int s0 = 4 * c + 2 * half;
      const __m256i src = t.sc[s0 / 8];
      const int i = s0 % 8;
      const __m256i idx = _mm256_setr_epi32(i, i, i, i, i + 1, i + 1, i + 1, i + 1);
      t.scv[c][half] = _mm256_and_si256(_mm256_permutevar8x32_epi32(src, idx), low16);
    }
  }
}

/// The super-block kernel of block type B for N hidden rows: see detail::qdot_super_portable.
template <class B, int Offset, bool Mins, Index N>
void super_rows(Isa /*kernels*/, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                const QuantizedHidden& h, Index j0, float* out, Index out_stride, Index parts) {
  const Index supers = d / 256;
  each_row<__m256[2], lane_tree, Mins, N>(
      rows, row_stride, count, parts, out, out_stride,
      [&](const std::uint8_t* row, const std::uint8_t* ahead, __m256(*f)[2],
          __m256(*gx)[2]) EMBER_INLINE_LAMBDA {
        for (Index s = 0; s < supers; ++s) {
          prefetch_slice(ahead, s * Index{sizeof(B)}, (s + 1) * Index{sizeof(B)});
          Super t;
          load_super<B>(row + s * Index{sizeof(B)}, t);
          unrolled<N>([&](auto jc) EMBER_INLINE_LAMBDA {
            constexpr Index j = jc;
            const std::int8_t* hq = h.group_codes(j0 + j, s);
            const std::int32_t* bs = h.group_isum(j0 + j, s);
            const float dh = *h.super_scale(j0 + j, s);
            const __m256 sd = _mm256_set1_ps(t.d * dh);
            const __m256 sm = _mm256_set1_ps(-t.dmin * dh);
            EMBER_UNROLL for (int half = 0; half < 2; ++half) {
              __m256i v = _mm256_setzero_si256();
              EMBER_UNROLL for (int c = 0; c < 4; ++c) {
                const __m256i hc =
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(hq + 64 * c + 32 * half));
                v = _mm256_add_epi32(v, _mm256_madd_epi16(dot4(t.w[c][half], hc), t.scv[c][half]));
              }
              const __m256i bsum =
                  _mm256_load_si256(reinterpret_cast<const __m256i*>(bs + 8 * half));
              if constexpr (Offset != 0) {
                constexpr int shift = Offset == 4 ? 2 : 5;
                v = _mm256_sub_epi32(
                    v, _mm256_slli_epi32(_mm256_mullo_epi32(t.sc[half], bsum), shift));
              }
              f[j][half] =
                  _mm256_add_ps(f[j][half], rounded(_mm256_mul_ps(_mm256_cvtepi32_ps(v), sd)));
              if constexpr (Mins) {
                const __m256 mins = _mm256_cvtepi32_ps(_mm256_mullo_epi32(t.m[half], bsum));
                gx[j][half] = _mm256_add_ps(gx[j][half], rounded(_mm256_mul_ps(mins, sm)));
              }
            }
          });
        }
      });
}

/// The units kernel of 32-element block type B for N hidden rows (ggml/quant_dot.hpp: qdot_rows).
template <class B, int Offset, bool Extra, Index N>
void block_units_rows(Isa /*kernels*/, const std::uint8_t* rows, Index row_stride, Index count,
                      Index d, const QuantizedHidden& h, Index j0, float* out, Index out_stride,
                      Index parts) {
  // Q8_0's codes are signed here (the sign trick): no offset to correct.
  constexpr bool is_signed = std::is_same_v<B, BlockQ8_0>;
  units_rows<is_signed ? 0 : Offset, is_signed, Extra, N>(
      [](const std::uint8_t* row, Index first, Index active, Units& t) {
        load_units<B>(row + first * Index{sizeof(B)}, active, t);
      },
      rows, row_stride, d / 32 * Index{sizeof(B)}, count, d / 32, h, j0, out, out_stride, parts);
}

}  // namespace ember::inline EMBER_ISA::detail::ggml::avx2

#endif  // EMBER_DETAIL_GGML_AVX2
