/// The AVX-512 VNNI kernels of ggml/quant_dot.hpp (vpdpbusd, with VBMI's byte permutes to gather
/// the codes of 16 blocks into the lanes of one register): the order of detail/qdot.hpp, the same
/// bits as the portable kernels. Built where the build has AVX-512 F, BW, VL, VNNI, VBMI and
/// BITALG.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/ggml/isa.hpp"

#if EMBER_DETAIL_GGML_AVX512VNNI
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
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml::avx512vnni {

/// The tag of these kernels: ggml/quant_dot.hpp's simd_block_rows finds the AVX-512 VNNI kernels by
/// it.
struct Isa {};

// ---- gathering the codes of 16 blocks -----------------------------------------------------------

/// How gather_dwords reads 16 dwords at byte Stride·u + Offset (u = 0..15) of a region loaded as
/// 64-byte registers: each lane from the 128 bytes of registers start and start + 1 that hold it,
/// the lanes of one such pair taken by one two-source byte permute.
struct GatherPlan {
  int pairs = 0;
  int start[8] = {};
  std::uint64_t bytes[8] = {};  // the byte mask of the lanes of each pair
  std::uint8_t idx[8][64] = {};
};

[[nodiscard]] constexpr GatherPlan gather_plan(int stride, int offset) {
  GatherPlan p;
  int u = 0;
  while (u < 16) {
    const int first = stride * u + offset;
    const int start = first / 64;
    int& i = p.pairs;
    p.start[i] = start;
    while (u < 16 && stride * u + offset + 4 <= 64 * start + 128) {
      for (int e = 0; e < 4; ++e) {
        p.idx[i][4 * u + e] = static_cast<std::uint8_t>(stride * u + offset + e - 64 * start);
        p.bytes[i] |= std::uint64_t{1} << (4 * u + e);
      }
      ++u;
    }
    ++i;
  }
  return p;
}

template <int Stride, int Offset>
inline constexpr GatherPlan plan_of = gather_plan(Stride, Offset);

/// Lane u = the 4 bytes at Stride·u + Offset of the region whose bytes [64i, 64i + 64) are r[i].
template <int Stride, int Offset>
EMBER_ALWAYS_INLINE __m512i gather_dwords(const __m512i* r) noexcept {
  constexpr const GatherPlan& p = plan_of<Stride, Offset>;
  __m512i z = _mm512_setzero_si512();
  EMBER_UNROLL for (int i = 0; i < p.pairs; ++i) {
    const __m512i idx = _mm512_loadu_si512(p.idx[i]);
    const __m512i part =
        _mm512_maskz_permutex2var_epi8(p.bytes[i], r[p.start[i]], idx, r[p.start[i] + 1]);
    z = i == 0 ? part : _mm512_or_si512(z, part);
  }
  return z;
}

/// Loads `count` bytes at p as ceil(count / 64) + 1 registers (bytes past count read as zero and
/// never touched in memory: masked loads).
template <std::size_t Registers>
EMBER_ALWAYS_INLINE void load_region(const std::uint8_t* p, Index count, __m512i* r) noexcept {
  EMBER_UNROLL for (Index i = 0; i < static_cast<Index>(Registers); ++i) {
    const Index left = count - 64 * i;
    const __mmask64 m = left >= 64  ? ~__mmask64{0}
                        : left <= 0 ? __mmask64{0}
                                    : (__mmask64{1} << left) - 1;
    r[i] = _mm512_maskz_loadu_epi8(m, p + 64 * i);
  }
}

/// The 16 halves at bytes Stride·u + Offset as floats.
template <int Stride, int Offset>
EMBER_ALWAYS_INLINE __m512 gather_halves(const __m512i* r) noexcept {
  const __m512i dw = gather_dwords<Stride, Offset>(r);
  return _mm512_maskz_cvtph_ps(__mmask16{0xFFFF},
                               _mm512_maskz_cvtepi32_epi16(__mmask16{0xFFFF}, dw));
}

// ---- units: 32-element blocks
// ---------------------------------------------------------------------

/// Byte b of fifth_bits[k]: the bit of qh (lane b / 4, within its 64-bit pair) that is the fifth
/// bit of element 4k + b mod 4 of lane b / 4's block.
struct FifthBits {
  alignas(64) std::uint8_t sel[8][64];
};
[[nodiscard]] constexpr FifthBits fifth_bit_selectors() {
  FifthBits f{};
  for (int k = 0; k < 8; ++k)
    for (int b = 0; b < 64; ++b)
      f.sel[k][b] = static_cast<std::uint8_t>(32 * ((b / 4) % 2) + 4 * k + b % 4);
  return f;
}
inline constexpr FifthBits fifth_bit_table = fifth_bit_selectors();
inline constexpr const auto& fifth_bits = fifth_bit_table.sel;

/// w[k] lane u = bytes 4k .. 4k + 3 of unit(u) (32 bytes, u = 0 .. 15): a 16 x 8 dword transpose.
template <class Unit>
EMBER_ALWAYS_INLINE void transpose_units(const Unit& unit, __m512i* w) noexcept {
  __m512i r[8];
  EMBER_UNROLL for (Index i = 0; i < 8; ++i) {
    r[i] =
        _mm512_maskz_inserti64x4(__mmask8{0xFF}, _mm512_castsi256_si512(unit(i)), unit(i + 8), 1);
  }
  __m512i t[8];
  EMBER_UNROLL for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_maskz_unpacklo_epi32(__mmask16{0xFFFF}, r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_maskz_unpackhi_epi32(__mmask16{0xFFFF}, r[2 * i], r[2 * i + 1]);
  }
  __m512i v[8];
  EMBER_UNROLL for (int i = 0; i < 2; ++i) {
    v[4 * i + 0] = _mm512_maskz_unpacklo_epi64(__mmask8{0xFF}, t[4 * i + 0], t[4 * i + 2]);
    v[4 * i + 1] = _mm512_maskz_unpackhi_epi64(__mmask8{0xFF}, t[4 * i + 0], t[4 * i + 2]);
    v[4 * i + 2] = _mm512_maskz_unpacklo_epi64(__mmask8{0xFF}, t[4 * i + 1], t[4 * i + 3]);
    v[4 * i + 3] = _mm512_maskz_unpackhi_epi64(__mmask8{0xFF}, t[4 * i + 1], t[4 * i + 3]);
  }
  const __m512i low = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i high = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  EMBER_UNROLL for (int k = 0; k < 4; ++k) {
    w[k] = _mm512_permutex2var_epi64(v[k], low, v[k + 4]);
    w[k + 4] = _mm512_permutex2var_epi64(v[k], high, v[k + 4]);
  }
}

/// w[k] lane u = bytes 32u + 4k .. 32u + 4k + 3 of the `bytes` bytes at p (16 units of 32 codes,
/// each contiguous; bytes past `bytes` read as zero, never touched).
EMBER_ALWAYS_INLINE void load_contiguous_units(const std::uint8_t* p, Index bytes,
                                               __m512i* w) noexcept {
  transpose_units(
      [&](Index u) {
        const Index left = std::clamp<Index>(bytes - 32 * u, 0, 32);
        const auto m = static_cast<__mmask32>(left == 32 ? ~0u : (1u << left) - 1);
        return _mm256_maskz_loadu_epi8(m, p + 32 * u);
      },
      w);
}

/// The 16 units of a group as the kernel reads them: w[k] lane u = codes 4k .. 4k + 3 of unit u.
struct Units {
  __m512i w[8];
  __m512 dw;
  __m512 mw;
};

/// Group g of a row of 32-element blocks B, `active` of its 16 blocks present (the others read
/// as zero codes and scales).
template <class B>
EMBER_ALWAYS_INLINE void load_units(const std::uint8_t* group, Index active, Units& t) noexcept {
  constexpr int S = sizeof(B);
  constexpr std::size_t R = (16 * sizeof(B) + 63) / 64 + 1;
  __m512i r[R];
  load_region<R>(group, active * S, r);
  t.dw = gather_halves<S, offsetof(B, d)>(r);
  t.mw = _mm512_setzero_ps();
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    // 32 codes per block: 16 loads and a dword transpose (fewer shuffles than 8 byte gathers).
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    transpose_units(
        [&](Index u) {
          return u < active ? _mm256_loadu_si256(
                                  reinterpret_cast<const __m256i*>(group + u * S + offsetof(B, qs)))
                            : _mm256_setzero_si256();
        },
        t.w);
    EMBER_UNROLL for (int k = 0; k < 8; ++k) t.w[k] = _mm512_xor_si512(t.w[k], flip);
    // Lanes without a block hold 0x80 codes against zero hidden codes: no contribution.
  } else {
    constexpr int Q = offsetof(B, qs);
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    const __m512i z[4] = {gather_dwords<S, Q + 0>(r), gather_dwords<S, Q + 4>(r),
                          gather_dwords<S, Q + 8>(r), gather_dwords<S, Q + 12>(r)};
    EMBER_UNROLL for (int k = 0; k < 4; ++k) {
      t.w[k] = _mm512_and_si512(z[k], low4);
      t.w[k + 4] = _mm512_and_si512(_mm512_srli_epi16(z[k], 4), low4);
    }
    if constexpr (std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>) {
      // The fifth bit of element 4k + e is bit 4k + e of qh: bit-shuffled into a byte mask.
      const __m512i qh = gather_dwords<S, offsetof(B, qh)>(r);
      const __m512i sixteen = _mm512_set1_epi8(16);
      EMBER_UNROLL for (int k = 0; k < 8; ++k) {
        const __mmask64 m = _mm512_bitshuffle_epi64_mask(qh, _mm512_load_si512(fifth_bits[k]));
        t.w[k] = _mm512_mask_add_epi8(t.w[k], m, t.w[k], sixteen);
      }
    }
    if constexpr (std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>) {
      t.mw = gather_halves<S, offsetof(B, m)>(r);
    }
  }
}

/// The sum of the 16 lanes in the order of detail/qdot.hpp's lane_tree.
EMBER_ALWAYS_INLINE float lane_tree(__m512 x) noexcept {
  const __m512d bits = _mm512_castps_pd(x);
  const __m256 lo = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8{0xF}, bits, 0));
  const __m256 hi = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8{0xF}, bits, 1));
  const __m256 t8 = _mm256_add_ps(lo, hi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
}

/// -offset · sums, offset a power of two (or 0).
template <int Offset>
EMBER_ALWAYS_INLINE __m512i offset_init(const std::int32_t* sums) noexcept {
  if constexpr (Offset == 0) {
    return _mm512_setzero_si512();
  } else {
    static_assert((Offset & (Offset - 1)) == 0);
    constexpr int shift = Offset == 4    ? 2
                          : Offset == 8  ? 3
                          : Offset == 16 ? 4
                          : Offset == 32 ? 5
                                         : 7;
    return _mm512_sub_epi32(
        _mm512_setzero_si512(),
        _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, _mm512_load_si512(sums), shift));
  }
}

/// The units kernel for N hidden rows: see detail::qdot_units_portable. `load(row, g, active,
/// Units&)` gives group g of a row; row_bytes: the bytes of a row it reads.
template <int Offset, bool Extra, Index N, class Load>
void units_rows(const Load& load, const std::uint8_t* rows, Index row_stride, Index row_bytes,
                Index count, Index units, const QuantizedHidden& h, Index j0, float* out,
                Index out_stride, Index parts) {
  const Index groups = (units + qdot_lanes - 1) / qdot_lanes;
  // The bytes of a row asked for per group: one division per call, none per row.
  const Index slice = (row_bytes + groups - 1) / std::max<Index>(groups, 1);
  each_row<__m512, lane_tree, Extra, N>(
      rows, row_stride, count, parts, out, out_stride,
      [&](const std::uint8_t* row, const std::uint8_t* ahead, __m512* f,
          __m512* gx) EMBER_INLINE_LAMBDA {
        for (Index g = 0; g < groups; ++g) {
          prefetch_slice(ahead, g * slice, std::min(row_bytes, (g + 1) * slice));
          Units t;
          load(row, g, std::min<Index>(qdot_lanes, units - g * qdot_lanes), t);
          unrolled<N>([&](auto jc) EMBER_INLINE_LAMBDA {
            constexpr Index j = jc;
            const std::int8_t* hq = h.group_codes(j0 + j, g);
            __m512i acc = offset_init<Offset>(h.group_isum(j0 + j, g));
            EMBER_UNROLL for (int k = 0; k < 8; ++k) acc =
                _mm512_dpbusd_epi32(acc, t.w[k], _mm512_load_si512(hq + 64 * k));
            const __m512 s = _mm512_mul_ps(t.dw, _mm512_load_ps(h.unit_scales(j0 + j, g)));
            f[j] = _mm512_add_ps(
                f[j], rounded(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, acc), s)));
            if constexpr (Extra) {
              gx[j] = _mm512_add_ps(
                  gx[j], rounded(_mm512_mul_ps(t.mw, _mm512_load_ps(h.group_extra(j0 + j, g)))));
            }
          });
        }
      });
}

// ---- super-blocks -------------------------------------------------------------------------------

/// One super-block as the kernel reads it: w[c] = codes 64c .. 64c + 63 in order; sc, m the
/// 16 sub-block scales and mins; scv[c] lane l = sc(4c + l / 4) as an int16 pair.
///
/// The scales and mins ride as 16-bit values in the low half of each 32-bit lane (the high half
/// zero), so vpdpwssd / vpmaddwd multiply them by a 32-bit lane whose value fits 16 bits (a
/// chunk's partial sums, |.| <= 4 · 63 · 127, and the hidden's sub-block sums, |.| <= 16 · 127)
/// exactly: noff = -Offset · sc (|.| <= 32 · 128), m >= 0.
struct Super {
  __m512i w[4];
  __m512i sc;
  __m512i m;
  __m512i scv[4];
  __m512i noff;
  float d;
  float dmin;
};

/// scv[c] from sc: lane l of chunk c takes sub-block 4c + l/4, in the low 16 bits; noff from sc.
template <int Offset>
EMBER_ALWAYS_INLINE void chunk_scales(Super& t) noexcept {
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  const __m512i sc16 = _mm512_and_si512(t.sc, low16);
  EMBER_UNROLL for (int c = 0; c < 4; ++c) {
    const __m512i idx = _mm512_setr_epi32(4 * c, 4 * c, 4 * c, 4 * c, 4 * c + 1, 4 * c + 1,
                                          4 * c + 1, 4 * c + 1, 4 * c + 2, 4 * c + 2, 4 * c + 2,
                                          4 * c + 2, 4 * c + 3, 4 * c + 3, 4 * c + 3, 4 * c + 3);
    t.scv[c] = _mm512_maskz_permutexvar_epi32(__mmask16{0xFFFF}, idx, sc16);
  }
  t.noff = _mm512_setzero_si512();
  if constexpr (Offset != 0) {
    constexpr int shift = Offset == 4 ? 2 : 5;
    static_assert(Offset == 1 << shift);
    t.noff =
        _mm512_and_si512(_mm512_sub_epi32(_mm512_setzero_si512(),
                                          _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, t.sc, shift)),
                         low16);
  }
}

/// 32 bytes at p in both halves of a register.
EMBER_ALWAYS_INLINE __m512i both_halves(const std::uint8_t* p) noexcept {
  return _mm512_maskz_broadcast_i64x4(__mmask8{0xFF},
                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

/// Each byte's bits [shift_lo, +width) (low half) and [shift_hi, +width) (high half) as values.
EMBER_ALWAYS_INLINE __m512i bits_of(__m512i v, int shift_lo, int shift_hi, int mask) noexcept {
  const __m512i counts =
      _mm512_maskz_inserti64x4(__mmask8{0xFF}, _mm512_set1_epi16(static_cast<short>(shift_lo)),
                               _mm256_set1_epi16(static_cast<short>(shift_hi)), 1);
  return _mm512_and_si512(_mm512_srlv_epi16(v, counts), _mm512_set1_epi8(static_cast<char>(mask)));
}

/// Super-block b (its bytes) of type B, code offset Offset.
template <class B, int Offset>
EMBER_ALWAYS_INLINE void load_super(const std::uint8_t* b, Super& t) noexcept {
  t.d = load_half_f16c(b + offsetof(B, d));
  t.dmin = 0.0f;
  t.m = _mm512_setzero_si512();
  if constexpr (std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K>) {
    EMBER_UNROLL for (int c = 0; c < 4; ++c) {
      const __m512i q = both_halves(b + offsetof(B, qs) + 32 * (c / 2));
      t.w[c] = bits_of(q, 4 * (c % 2), 4 * (c % 2) + 2, 3);
      if constexpr (std::is_same_v<B, BlockQ3_K>) {
        const __m512i hm = both_halves(b + offsetof(B, hmask));
        const int bit = 4 * (c / 2) + 2 * (c % 2);
        t.w[c] = _mm512_or_si512(t.w[c], _mm512_slli_epi16(bits_of(hm, bit, bit + 1, 1), 2));
      }
    }
    if constexpr (std::is_same_v<B, BlockQ2_K>) {
      const __m512i s = _mm512_maskz_cvtepu8_epi32(
          __mmask16{0xFFFF},
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales))));
      t.sc = _mm512_and_si512(s, _mm512_set1_epi32(0xF));
      t.m = _mm512_maskz_srli_epi32(__mmask16{0xFFFF}, s, 4);
      t.dmin = load_half_f16c(b + offsetof(B, dmin));
    } else {
      t.sc = _mm512_sub_epi32(
          _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF}, q3k_scales_v(b + offsetof(B, scales))),
          _mm512_set1_epi32(32));
    }
  } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
    EMBER_UNROLL for (int c = 0; c < 4; ++c) {
      const __m512i ql = _mm512_loadu_si512(b + offsetof(B, ql) + 64 * (c / 2));
      const __m512i low =
          _mm512_and_si512(c % 2 == 0 ? ql : _mm512_srli_epi16(ql, 4), _mm512_set1_epi8(0x0F));
      const __m512i qh = both_halves(b + offsetof(B, qh) + 32 * (c / 2));
      const __m512i high = bits_of(qh, 4 * (c % 2), 4 * (c % 2) + 2, 3);
      t.w[c] = _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
    }
    t.sc = _mm512_maskz_cvtepi8_epi32(
        __mmask16{0xFFFF},
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales))));
  } else {  // Q4_K, Q5_K
    // Chunk c: the low nibbles of qs[32c .. 32c + 31], then their high nibbles; two chunks per
    // 64 bytes of qs.
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    EMBER_UNROLL for (int c = 0; c < 4; c += 2) {
      const __m512i q = _mm512_loadu_si512(b + offsetof(B, qs) + 32 * c);
      const __m512i lo = _mm512_and_si512(q, low4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
      t.w[c] = _mm512_maskz_shuffle_i64x2(__mmask8{0xFF}, lo, hi, 0x44);
      t.w[c + 1] = _mm512_maskz_shuffle_i64x2(__mmask8{0xFF}, lo, hi, 0xEE);
    }
    EMBER_UNROLL for (int c = 0; c < 4; ++c) {
      if constexpr (std::is_same_v<B, BlockQ5_K>) {
        const __m512i qh = both_halves(b + offsetof(B, qh));
        t.w[c] = _mm512_or_si512(t.w[c], _mm512_slli_epi16(bits_of(qh, 2 * c, 2 * c + 1, 1), 4));
      }
    }
    // 8 scales and 8 mins, each for two 16-element sub-blocks.
    const __m128i sm = k4_scales_mins_v(b + offsetof(B, scales));
    const __m128i pairs = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    t.sc = _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF}, _mm_shuffle_epi8(sm, pairs));
    t.m = _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF},
                                     _mm_shuffle_epi8(_mm_srli_si128(sm, 8), pairs));
    t.dmin = load_half_f16c(b + offsetof(B, dmin));
  }
  chunk_scales<Offset>(t);
}

/// The super-block kernel of block type B for N hidden rows: see detail::qdot_super_portable.
template <class B, int Offset, bool Mins, Index N>
void super_rows(Isa /*kernels*/, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                const QuantizedHidden& h, Index j0, float* out, Index out_stride, Index parts) {
  const Index supers = d / 256;
  each_row<__m512, lane_tree, Mins, N>(
      rows, row_stride, count, parts, out, out_stride,
      [&](const std::uint8_t* row, const std::uint8_t* ahead, __m512* f,
          __m512* gx) EMBER_INLINE_LAMBDA {
        for (Index s = 0; s < supers; ++s) {
          prefetch_block<sizeof(B)>(ahead + s * Index{sizeof(B)});
          Super t;
          load_super<B, Offset>(row + s * Index{sizeof(B)}, t);
          unrolled<N>([&](auto jc) EMBER_INLINE_LAMBDA {
            constexpr Index j = jc;
            const std::int8_t* hq = h.group_codes(j0 + j, s);
            const __m512i bsum = _mm512_load_si512(h.group_isum(j0 + j, s));
            const float dh = *h.super_scale(j0 + j, s);
            // -Offset · sc · bsum, then the chunks' Σ w · h times their sub-blocks' scales.
            __m512i v = Offset != 0 ? _mm512_madd_epi16(t.noff, bsum) : _mm512_setzero_si512();
            EMBER_UNROLL for (int c = 0; c < 4; ++c) {
              const __m512i part = _mm512_dpbusd_epi32(_mm512_setzero_si512(), t.w[c],
                                                       _mm512_load_si512(hq + 64 * c));
              v = _mm512_dpwssd_epi32(v, part, t.scv[c]);
            }
            const __m512 sd = _mm512_set1_ps(t.d * dh);
            f[j] = _mm512_add_ps(
                f[j], rounded(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, v), sd)));
            if constexpr (Mins) {
              const __m512 mins =
                  _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, _mm512_madd_epi16(t.m, bsum));
              gx[j] =
                  _mm512_add_ps(gx[j], rounded(_mm512_mul_ps(mins, _mm512_set1_ps(-t.dmin * dh))));
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
  units_rows<Offset, Extra, N>(
      [](const std::uint8_t* row, Index g, Index active, Units& t) {
        load_units<B>(row + g * 16 * Index{sizeof(B)}, active, t);
      },
      rows, row_stride, d / 32 * Index{sizeof(B)}, count, d / 32, h, j0, out, out_stride, parts);
}

}  // namespace ember::inline EMBER_ISA::detail::ggml::avx512vnni

#endif  // EMBER_DETAIL_GGML_AVX512VNNI
