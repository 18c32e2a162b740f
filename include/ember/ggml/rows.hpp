/// Row kernels over ggml's block formats for lookups and tied logits: a row decoded and scaled
/// straight into its output (cached or streaming stores), and dot products of encoded rows with up
/// to eight float vectors at a time (max_pass_rows), reading each encoded row once per eight. AVX2
/// where the build has it, ggml's reference decoders (ggml/decode.hpp) otherwise; the decoded
/// values are those of the reference decoders bit for bit in every build.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/prefetch.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/decode.hpp"
#include "ember/ggml/k_scales.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define EMBER_DETAIL_GGML_AVX2 1
#else
#define EMBER_DETAIL_GGML_AVX2 0
#endif

namespace ember::inline EMBER_ISA::detail::ggml {

#if EMBER_DETAIL_GGML_AVX2
namespace avx2 {

// Each block decoder below hands a row to a sink 32 consecutive columns at a time (columns c ..
// c+31), as integer codes with their scales (sink.codes(c, Codes32)): column c + i stands for
// (q_i - k) · a + b with the (a, b) of its half (columns 0-15 or 16-31), the reference decoder's
// value when the product is rounded before b is added. The plain types hand over float values
// (sink.put32(c, y0, y1, y2, y3)), and the last d mod 32 of them one at a time (sink.put1(c, y)).

/// float(q) · a for 8 integer codes.
EMBER_ALWAYS_INLINE __m256 times(__m256i q, __m256 a) noexcept {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(q), a);
}

/// float(q) · a + b for 8 integer codes, the product rounded before the add.
EMBER_ALWAYS_INLINE __m256 times_plus(__m256i q, __m256 a, __m256 b) noexcept {
  return _mm256_add_ps(rounded(times(q, a)), b);
}

EMBER_ALWAYS_INLINE __m128i load16(const std::uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

EMBER_ALWAYS_INLINE __m256i load32(const std::uint8_t* p) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// Each byte of v shifted right by `shift` (0..7), then masked.
EMBER_ALWAYS_INLINE __m128i bits(__m128i v, int shift, int mask) noexcept {
  return _mm_and_si128(_mm_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                       _mm_set1_epi8(static_cast<char>(mask)));
}

/// 32 columns as byte codes: bytes[0] holds the codes of columns c..c+15, bytes[1] those of
/// c+16..c+31 (unsigned, or signed when Signed); column c + i is (q_i - k) · a0 (+ b0) for i < 16
/// and (q_i - k) · a1 (+ b1) above. Offset: b0 and b1 are added (k is 0 then); Same: a1 == a0 and
/// b1 == b0 (one scale for the 32 columns).
template <bool Offset, bool Same, bool Signed = false>
struct Codes32 {
  __m128i bytes[2];
  int k;
  float a0, b0, a1, b1;
  /// The codes of columns c + 8i .. c + 8i + 7 as 32-bit integers.
  [[nodiscard]] EMBER_ALWAYS_INLINE __m256i codes8(int i) const noexcept {
    const __m128i v = i % 2 == 0 ? bytes[i / 2] : _mm_srli_si128(bytes[i / 2], 8);
    return Signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
  }
  /// The reference value of columns c + 8i .. c + 8i + 7: (q - k) · a, rounded, (+ b).
  [[nodiscard]] EMBER_ALWAYS_INLINE __m256 value(int i) const noexcept {
    const __m256i q = codes8(i);
    const __m256i v = k != 0 ? _mm256_sub_epi32(q, _mm256_set1_epi32(k)) : q;
    const bool second = !Same && i >= 2;
    const __m256 a = _mm256_set1_ps(second ? a1 : a0);
    if constexpr (Offset) {
      return times_plus(v, a, _mm256_set1_ps(second ? b1 : b0));
    } else {
      return times(v, a);
    }
  }
};

/// Hands 32 columns given as bytes of codes (columns c..c+15 in `first`, c+16..c+31 in `second`)
/// to the sink.
template <bool Offset, bool Same, class Sink>
EMBER_ALWAYS_INLINE void put_bytes(Sink& sink, Index c, __m128i first, __m128i second, int k,
                                   float a0, float b0, float a1, float b1) {
  sink.codes(c, Codes32<Offset, Same>{{first, second}, k, a0, b0, a1, b1});
}

/// The fifth bits of Q5_0/Q5_1: bit e of qh for column e of the block, as 0 or 16 per byte
/// (columns 0-15 in `first`, 16-31 in `second`).
EMBER_ALWAYS_INLINE void fifth_bits(std::uint32_t qh, __m128i& first, __m128i& second) noexcept {
  const __m128i all = _mm_set1_epi32(static_cast<int>(qh));
  // Byte k of `first` is byte k / 8 of qh, of `second` byte 2 + k / 8; bit k mod 8 is selected.
  const __m128i spread0 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m128i spread1 = _mm_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m128i select = _mm_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m128i sixteen = _mm_set1_epi8(16);
  auto pick = [&](__m128i spread) {
    const __m128i bytes = _mm_and_si128(_mm_shuffle_epi8(all, spread), select);
    return _mm_and_si128(_mm_cmpeq_epi8(bytes, select), sixteen);
  };
  first = pick(spread0);
  second = pick(spread1);
}

/// Q4_0 ... Q5_1: one scale d for the 32 columns, offset k = code_offset or (Q4_1, Q5_1) m added.
template <class B, class Sink>
requires is_nibble_block<B> EMBER_ALWAYS_INLINE void feed(std::type_identity<B>,
                                                          const std::uint8_t* b, Index c,
                                                          Sink& sink) {
  const float d = load_half_f16c(b + offsetof(B, d));
  float m = 0.0f;
  if constexpr (has_offset_term<B>) m = load_half_f16c(b + offsetof(B, m));
  const __m128i qs = load16(b + offsetof(B, qs));
  __m128i low = bits(qs, 0, 0x0F);
  __m128i high = bits(qs, 4, 0x0F);
  if constexpr (has_fifth_bit<B>) {
    __m128i h0, h1;
    fifth_bits(load_u32(b + offsetof(B, qh)), h0, h1);
    low = _mm_or_si128(low, h0);
    high = _mm_or_si128(high, h1);
  }
  put_bytes<has_offset_term<B>, true>(sink, c, low, high, code_offset<B>, d, m, d, m);
}

template <class Sink>
EMBER_ALWAYS_INLINE void feed(std::type_identity<BlockQ8_0>, const std::uint8_t* b, Index c,
                              Sink& sink) {
  using B = BlockQ8_0;
  const float d = load_half_f16c(b + offsetof(B, d));
  const std::uint8_t* qs = b + offsetof(B, qs);
  sink.codes(c, Codes32<false, true, true>{{load16(qs), load16(qs + 16)}, 0, d, 0.0f, d, 0.0f});
}

/// Q2_K, Q3_K: 16 sub-blocks of 16 with 2-bit codes, 32 columns (sub-blocks is, is + 1) at a time;
/// Q2_K's scales and mins the nibbles of scales[is], Q3_K's codes with bit 4n + j of hmask.
template <class B, class Sink>
requires std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K> EMBER_ALWAYS_INLINE void feed(
    std::type_identity<B>, const std::uint8_t* b, Index c, Sink& sink) {
  constexpr bool q3 = std::is_same_v<B, BlockQ3_K>;
  const float d = load_half_f16c(b + offsetof(B, d));
  float min = 0.0f;
  int sc[16];
  __m128i h0 = _mm_setzero_si128();
  __m128i h1 = h0;
  if constexpr (q3) {
    q3_k_scales(b + offsetof(B, scales), sc);
    h0 = load16(b + offsetof(B, hmask));
    h1 = load16(b + offsetof(B, hmask) + 16);
  } else {
    min = load_half_f16c(b + offsetof(B, dmin));
  }
  EMBER_UNROLL for (int n = 0; n < 2; ++n) {
    const std::uint8_t* q = b + offsetof(B, qs) + 32 * n;
    const __m128i q0 = load16(q);
    const __m128i q1 = load16(q + 16);
    EMBER_UNROLL for (int j = 0; j < 4; ++j) {
      const int is = 8 * n + 2 * j;
      __m128i v0 = bits(q0, 2 * j, 3);
      __m128i v1 = bits(q1, 2 * j, 3);
      if constexpr (q3) {
        // q - (high bit ? 0 : 4) as (q | high bit << 2) - 4.
        v0 = _mm_or_si128(v0, _mm_slli_epi16(bits(h0, 4 * n + j, 1), 2));
        v1 = _mm_or_si128(v1, _mm_slli_epi16(bits(h1, 4 * n + j, 1), 2));
        put_bytes<false, false>(sink, c, v0, v1, 4, d * static_cast<float>(sc[is] - 32), 0.0f,
                                d * static_cast<float>(sc[is + 1] - 32), 0.0f);
      } else {
        const std::uint8_t* s = b + offsetof(B, scales) + is;
        const float ml0 = min * static_cast<float>(s[0] >> 4);
        const float ml1 = min * static_cast<float>(s[1] >> 4);
        put_bytes<true, false>(sink, c, v0, v1, 0, d * static_cast<float>(s[0] & 0xF), -ml0,
                               d * static_cast<float>(s[1] & 0xF), -ml1);
      }
      c += 32;
    }
  }
}

/// The scales and offsets of sub-blocks 2j and 2j + 1 of a Q4_K/Q5_K block (super-block scale d
/// and min scale `min`), as the reference computes them.
EMBER_ALWAYS_INLINE void k4_pair(const std::uint8_t* scales, float d, float min, int j, float& d1,
                                 float& m1, float& d2, float& m2) noexcept {
  int sc = 0;
  int m = 0;
  scale_min_k4(2 * j, scales, sc, m);
  d1 = d * static_cast<float>(sc);
  m1 = min * static_cast<float>(m);
  scale_min_k4(2 * j + 1, scales, sc, m);
  d2 = d * static_cast<float>(sc);
  m2 = min * static_cast<float>(m);
}

/// Q4_K, Q5_K: sub-blocks 2j and 2j + 1 the low and high nibbles of 32 bytes of qs (Q5_K: with
/// bits 2j and 2j + 1 of qh as bit 4).
template <class B, class Sink>
requires std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K> EMBER_ALWAYS_INLINE void feed(
    std::type_identity<B>, const std::uint8_t* b, Index c, Sink& sink) {
  __m128i h0 = _mm_setzero_si128();
  __m128i h1 = h0;
  if constexpr (std::is_same_v<B, BlockQ5_K>) {
    h0 = load16(b + offsetof(B, qh));
    h1 = load16(b + offsetof(B, qh) + 16);
  }
  const std::uint8_t* q = b + offsetof(B, qs);
  const float d = load_half_f16c(b + offsetof(B, d));
  const float min = load_half_f16c(b + offsetof(B, dmin));
  EMBER_UNROLL for (int j = 0; j < 4; ++j) {
    float d1, m1, d2, m2;
    k4_pair(b + offsetof(B, scales), d, min, j, d1, m1, d2, m2);
    const __m128i r0 = load16(q);
    const __m128i r1 = load16(q + 16);
    __m128i lo0 = bits(r0, 0, 0x0F);
    __m128i lo1 = bits(r1, 0, 0x0F);
    __m128i hi0 = bits(r0, 4, 0x0F);
    __m128i hi1 = bits(r1, 4, 0x0F);
    if constexpr (std::is_same_v<B, BlockQ5_K>) {
      lo0 = _mm_or_si128(lo0, _mm_slli_epi16(bits(h0, 2 * j, 1), 4));
      lo1 = _mm_or_si128(lo1, _mm_slli_epi16(bits(h1, 2 * j, 1), 4));
      hi0 = _mm_or_si128(hi0, _mm_slli_epi16(bits(h0, 2 * j + 1, 1), 4));
      hi1 = _mm_or_si128(hi1, _mm_slli_epi16(bits(h1, 2 * j + 1, 1), 4));
    }
    put_bytes<true, true>(sink, c, lo0, lo1, 0, d1, -m1, d1, -m1);
    put_bytes<true, true>(sink, c + 32, hi0, hi1, 0, d2, -m2, d2, -m2);
    q += 32;
    c += 64;
  }
}

template <class Sink>
EMBER_ALWAYS_INLINE void feed(std::type_identity<BlockQ6_K>, const std::uint8_t* b, Index c,
                              Sink& sink) {
  using B = BlockQ6_K;
  const float d = load_half_f16c(b + offsetof(B, d));
  EMBER_UNROLL for (int n = 0; n < 2; ++n) {
    const std::uint8_t* ql = b + offsetof(B, ql) + 64 * n;
    const std::uint8_t* qh = b + offsetof(B, qh) + 32 * n;
    const std::uint8_t* sc = b + offsetof(B, scales) + 8 * n;
    float ds[8];
    EMBER_UNROLL for (int k = 0; k < 8; ++k) {
      ds[k] = d * static_cast<float>(static_cast<std::int8_t>(sc[k]));
    }
    const __m128i l0 = load16(ql);
    const __m128i l1 = load16(ql + 16);
    const __m128i l2 = load16(ql + 32);
    const __m128i l3 = load16(ql + 48);
    const __m128i g0 = load16(qh);
    const __m128i g1 = load16(qh + 16);
    // Quarter k: columns 32k..32k+31, low nibbles of ql[0..31] (k = 0) or ql[32..63] (k = 1),
    // their high nibbles (k = 2, 3), with bits 2k, 2k+1 of qh as bits 4, 5; code - 32.
    EMBER_UNROLL for (int k = 0; k < 4; ++k) {
      const __m128i a = (k % 2 == 0) ? l0 : l2;
      const __m128i e = (k % 2 == 0) ? l1 : l3;
      const int shift = k < 2 ? 0 : 4;
      const __m128i v0 = _mm_or_si128(bits(a, shift, 0x0F), _mm_slli_epi16(bits(g0, 2 * k, 3), 4));
      const __m128i v1 = _mm_or_si128(bits(e, shift, 0x0F), _mm_slli_epi16(bits(g1, 2 * k, 3), 4));
      put_bytes<false, false>(sink, c, v0, v1, 32, ds[2 * k], 0.0f, ds[2 * k + 1], 0.0f);
      c += 32;
    }
  }
}

/// The plain types, columns [c0, c1) of a row of d: 32 values at a time through `load8` (8 values
/// from element k on), then, where c1 is d, the last d mod 32 one by one through `load1`.
template <class Sink, class Load8, class Load1>
EMBER_ALWAYS_INLINE void plain_row(Index d, Index c0, Index c1, Sink& sink, Load8 load8,
                                   Load1 load1) {
  const Index whole = d - d % 32;
  for (Index c = c0; c < std::min(c1, whole); c += 32) {
    sink.put32(c, load8(c), load8(c + 8), load8(c + 16), load8(c + 24));
  }
  if (c1 == d) {
    for (Index c = whole; c < d; ++c) sink.put1(c, load1(c));
  }
}

template <class Sink>
EMBER_ALWAYS_INLINE void f32_row(const std::uint8_t* row, Index d, Index c0, Index c1, Sink& sink) {
  plain_row(
      d, c0, c1, sink, [&](Index k) { return _mm256_castsi256_ps(load32(row + 4 * k)); },
      [&](Index k) { return std::bit_cast<float>(load_u32(row + 4 * k)); });
}

template <class Sink>
EMBER_ALWAYS_INLINE void f16_row(const std::uint8_t* row, Index d, Index c0, Index c1, Sink& sink) {
  plain_row(
      d, c0, c1, sink, [&](Index k) { return _mm256_cvtph_ps(load16(row + 2 * k)); },
      [&](Index k) { return fp16_to_fp32(load_u16(row + 2 * k)); });
}

template <class Sink>
EMBER_ALWAYS_INLINE void bf16_row(const std::uint8_t* row, Index d, Index c0, Index c1,
                                  Sink& sink) {
  plain_row(
      d, c0, c1, sink,
      [&](Index k) {
        const __m256i wide = _mm256_cvtepu16_epi32(load16(row + 2 * k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
      },
      [&](Index k) { return bf16_to_fp32(load_u16(row + 2 * k)); });
}

/// The columns of a plain type (F32, F16, BF16) as one unit of a row, for the kernels that take a
/// type's unit at compile time (a block type's unit is its block).
template <GgmlType Type>
struct PlainColumns {
  static_assert(Type == GgmlType::F32 || Type == GgmlType::F16 || Type == GgmlType::BF16);
  static constexpr GgmlType type = Type;
};

template <class Unit>
inline constexpr bool is_plain_columns = false;
template <GgmlType Type>
inline constexpr bool is_plain_columns<PlainColumns<Type>> = true;

/// Calls f(std::type_identity<Unit>{}) with Unit the block of `type` (visit_block) or, for F32,
/// F16 and BF16, PlainColumns<type>. Precondition: decodes(type).
template <class F>
EMBER_ALWAYS_INLINE void visit_unit(GgmlType type, F&& f) {
  if (visit_block(type, f)) return;
  switch (type) {
    case GgmlType::F32:
      f(std::type_identity<PlainColumns<GgmlType::F32>>{});
      break;
    case GgmlType::F16:
      f(std::type_identity<PlainColumns<GgmlType::F16>>{});
      break;
    default:  // BF16
      f(std::type_identity<PlainColumns<GgmlType::BF16>>{});
      break;
  }
}

/// The bytes of d columns of unit Unit (d whole blocks of a block type).
template <class Unit>
[[nodiscard]] constexpr Index unit_bytes(Index d) noexcept {
  if constexpr (is_plain_columns<Unit>) {
    return detail::ggml::row_bytes(Unit::type, d);
  } else {
    return d / Unit::elements * Index{sizeof(Unit)};
  }
}

/// Feeds columns [c0, c1) of a row of plain type Type (d values) to `sink`.
template <GgmlType Type, class Sink>
EMBER_ALWAYS_INLINE void feed_plain_range(const std::uint8_t* row, Index d, Index c0, Index c1,
                                          Sink& sink) {
  if constexpr (Type == GgmlType::F32) {
    f32_row(row, d, c0, c1, sink);
  } else if constexpr (Type == GgmlType::F16) {
    f16_row(row, d, c0, c1, sink);
  } else {
    bf16_row(row, d, c0, c1, sink);
  }
}

/// Feeds columns [c0, c1) of row `row` (d values of `type`; c0 and c1 whole blocks of it, or d)
/// to `sink`, block after block.
template <class Sink>
EMBER_ALWAYS_INLINE void feed_range(GgmlType type, const std::uint8_t* row, Index d, Index c0,
                                    Index c1, Sink& sink) {
  visit_unit(type, [&](auto unit) {
    using Unit = typename decltype(unit)::type;
    if constexpr (is_plain_columns<Unit>) {
      feed_plain_range<Unit::type>(row, d, c0, c1, sink);
    } else {
      for (Index i = c0 / Unit::elements; i < c1 / Unit::elements; ++i)
        feed(unit, row + i * Index{sizeof(Unit)}, i * Unit::elements, sink);
    }
  });
}

/// Feeds row `row` (d values of `type`) to `sink`, block after block.
template <class Sink>
EMBER_ALWAYS_INLINE void feed_row(GgmlType type, const std::uint8_t* row, Index d, Sink& sink) {
  feed_range(type, row, d, 0, d, sink);
}

/// Sink of a lookup: dst[c] = y · s, stored (or streamed: dst 32-byte aligned).
template <bool Stream>
struct ScaledStore {
  float* dst;
  float s;
  __m256 vs = _mm256_set1_ps(s);
  EMBER_ALWAYS_INLINE void store(Index c, __m256 y) const noexcept {
    if constexpr (Stream) {
      _mm256_stream_ps(dst + c, _mm256_mul_ps(y, vs));
    } else {
      _mm256_storeu_ps(dst + c, _mm256_mul_ps(y, vs));
    }
  }
  template <bool Offset, bool Same, bool Signed>
  EMBER_ALWAYS_INLINE void codes(Index c, const Codes32<Offset, Same, Signed>& g) const {
    EMBER_UNROLL for (int i = 0; i < 4; ++i) store(c + 8 * i, g.value(i));
  }
  EMBER_ALWAYS_INLINE void put32(Index c, __m256 y0, __m256 y1, __m256 y2, __m256 y3) const {
    store(c, y0);
    store(c + 8, y1);
    store(c + 16, y2);
    store(c + 24, y3);
  }
  EMBER_ALWAYS_INLINE void put1(Index c, float y) const noexcept { dst[c] = y * s; }
};

EMBER_ALWAYS_INLINE __m256 multiply_add(__m256 a, __m256 b, __m256 acc) noexcept {
#if defined(__FMA__)
  return _mm256_fmadd_ps(a, b, acc);
#else
  return _mm256_add_ps(_mm256_mul_ps(a, b), acc);
#endif
}

/// The sum of the 8 lanes of v, in pairs (through memory: with the shuffle intrinsics here, GCC 12
/// at -O2 lost the stores of the caller of a function inlining this).
EMBER_ALWAYS_INLINE float lane_sum(__m256 v) noexcept {
  alignas(32) float l[8];
  _mm256_store_ps(l, v);
  return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

#if defined(__AVX512F__)
/// The vector type of a dot product's accumulators: 16 lanes where the build has AVX-512F.
using DotVector = __m512;
EMBER_ALWAYS_INLINE __m512 dot_zero() noexcept { return _mm512_setzero_ps(); }
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
EMBER_ALWAYS_INLINE __m512 dot_load(const float* x) noexcept { return _mm512_loadu_ps(x); }
EMBER_ALWAYS_INLINE __m512 dot_mul(__m512 a, __m512 b) noexcept { return _mm512_mul_ps(a, b); }
EMBER_ALWAYS_INLINE __m512 dot_fma(__m512 a, __m512 b, __m512 c) noexcept {
  return _mm512_fmadd_ps(a, b, c);
}
EMBER_ALWAYS_INLINE __m512 dot_add(__m512 a, __m512 b) noexcept { return _mm512_add_ps(a, b); }
EMBER_ALWAYS_INLINE __m512 dot_set1(float a) noexcept { return _mm512_set1_ps(a); }
EMBER_ALWAYS_INLINE float dot_sum(__m512 v) noexcept {
  // Both halves by an AVX-512F instruction (extractf32x8 would need DQ), zero-masked with every
  // lane kept for the reason given at code_floats (GCC 12 builds _mm512_castps512_ps256 from the
  // unmasked extract too).
  const __m512d bits = _mm512_castps_pd(v);
  const __m256 low = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8{0xF}, bits, 0));
  const __m256 high = _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(__mmask8{0xF}, bits, 1));
  return lane_sum(_mm256_add_ps(low, high));
}
#else
using DotVector = __m256;
EMBER_ALWAYS_INLINE __m256 dot_zero() noexcept { return _mm256_setzero_ps(); }
EMBER_ALWAYS_INLINE __m256 dot_load(const float* x) noexcept { return _mm256_loadu_ps(x); }
EMBER_ALWAYS_INLINE __m256 dot_mul(__m256 a, __m256 b) noexcept { return _mm256_mul_ps(a, b); }
EMBER_ALWAYS_INLINE __m256 dot_fma(__m256 a, __m256 b, __m256 c) noexcept {
  return multiply_add(a, b, c);
}
EMBER_ALWAYS_INLINE __m256 dot_add(__m256 a, __m256 b) noexcept { return _mm256_add_ps(a, b); }
EMBER_ALWAYS_INLINE __m256 dot_set1(float a) noexcept { return _mm256_set1_ps(a); }
EMBER_ALWAYS_INLINE float dot_sum(__m256 v) noexcept { return lane_sum(v); }
#endif

#if defined(__AVX512F__)
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

/// The scales of a super-block's 16 sub-blocks and their offset coefficients (lane g: sub-block
/// g), for the K-quants whose codes stand for code - k (q3_K, q6_K).
struct SubBlockScales {
  __m512 a;     ///< d · sc
  __m512 coef;  ///< -k · a
};

/// SubBlockScales of signed scales sc (int32 lanes) and the fp16 super-block scale at `d`.
EMBER_ALWAYS_INLINE SubBlockScales sub_block_scales(const std::uint8_t* d, __m512i sc,
                                                    float k) noexcept {
  const __m512 a = _mm512_mul_ps(_mm512_set1_ps(load_half_f16c(d)),
                                 _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, sc));
  return {a, _mm512_mul_ps(_mm512_set1_ps(-k), a)};
}

/// A K-quant super-block as Dots::super_block reads it: codes(g) the 16 codes of columns 16g ..
/// 16g + 15 as int32 lanes (before the code offset), scale(g) their scale a in every lane, coef
/// lane g their offset coefficient (b, or -k · a), each the value feed's Codes32 of the same
/// columns holds (computed by the same float operations).
template <class B>
struct KSuper;

template <>
struct KSuper<BlockQ2_K> {
  using B = BlockQ2_K;
  static constexpr bool same = false;
  const std::uint8_t* qs;
  __m512 a;
  __m512 coef;
  explicit KSuper(const std::uint8_t* b) noexcept : qs(b + offsetof(B, qs)) {
    const __m512i s = lanes16(b + offsetof(B, scales));
    const __m512 sc = _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, lane_bits(s, 0, 0xF));
    const __m512 m = _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, lane_bits(s, 4, 0xF));
    a = _mm512_mul_ps(_mm512_set1_ps(load_half_f16c(b + offsetof(B, d))), sc);
    const __m512 ml = _mm512_mul_ps(_mm512_set1_ps(load_half_f16c(b + offsetof(B, dmin))), m);
    coef = negated(ml);
  }
  // Columns 128n + 32j + 16h + l: bits 2j of qs[32n + 16h + l].
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512i codes(int g) const noexcept {
    const int n = g / 8, j = (g % 8) / 2, h = g % 2;
    return lane_bits(lanes16(qs + 32 * n + 16 * h), 2 * j, 3);
  }
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512 scale(int g) const noexcept { return lane_of(a, g); }
};

template <>
struct KSuper<BlockQ3_K> {
  using B = BlockQ3_K;
  static constexpr bool same = false;
  const std::uint8_t* qs;
  const std::uint8_t* hmask;
  __m512 a;
  __m512 coef;
  explicit KSuper(const std::uint8_t* b) noexcept
      : qs(b + offsetof(B, qs)), hmask(b + offsetof(B, hmask)) {
    const __m512i sc = _mm512_sub_epi32(
        _mm512_maskz_cvtepu8_epi32(__mmask16{0xFFFF}, q3k_scales_v(b + offsetof(B, scales))),
        _mm512_set1_epi32(32));
    const SubBlockScales s = sub_block_scales(b + offsetof(B, d), sc, 4.0f);
    a = s.a;
    coef = s.coef;
  }
  // Columns 128n + 32j + 16h + l: bits 2j of qs[32n + 16h + l], bit 4n + j of hmask[16h + l] as
  // bit 2.
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512i codes(int g) const noexcept {
    const int n = g / 8, j = (g % 8) / 2, h = g % 2;
    const __m512i low = lane_bits(lanes16(qs + 32 * n + 16 * h), 2 * j, 3);
    const __m512i high = lane_bits(lanes16(hmask + 16 * h), 4 * n + j, 1);
    return _mm512_or_si512(low, _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, high, 2));
  }
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512 scale(int g) const noexcept { return lane_of(a, g); }
};

/// Q4_K and Q5_K: one scale per 32 columns (sub-block g / 2).
template <class B>
requires std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K>
struct KSuper<B> {
  static constexpr bool same = true;
  const std::uint8_t* qs;
  const std::uint8_t* qh;
  __m512 dm;  // lanes 0-7: d · scale of sub-block s; lanes 8-15: dmin · min of sub-block s - 8
  __m512 coef;
  explicit KSuper(const std::uint8_t* b) noexcept : qs(b + offsetof(B, qs)), qh(nullptr) {
    if constexpr (std::is_same_v<B, BlockQ5_K>) qh = b + offsetof(B, qh);
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
  // Columns 32s + 16h + l (sub-block s = g / 2): nibble s % 2 of qs[32(s / 2) + 16h + l] (Q5_K:
  // bit s of qh[16h + l] as bit 4).
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512i codes(int g) const noexcept {
    const int s = g / 2, h = g % 2;
    __m512i q = lane_bits(lanes16(qs + 32 * (s / 2) + 16 * h), 4 * (s % 2), 0xF);
    if constexpr (std::is_same_v<B, BlockQ5_K>) {
      q = _mm512_or_si512(
          q, _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, lane_bits(lanes16(qh + 16 * h), s, 1), 4));
    }
    return q;
  }
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512 scale(int g) const noexcept {
    return lane_of(dm, g / 2);
  }
};

template <>
struct KSuper<BlockQ6_K> {
  using B = BlockQ6_K;
  static constexpr bool same = false;
  const std::uint8_t* ql;
  const std::uint8_t* qh;
  __m512 a;
  __m512 coef;
  explicit KSuper(const std::uint8_t* b) noexcept
      : ql(b + offsetof(B, ql)), qh(b + offsetof(B, qh)) {
    const __m512i sc = _mm512_maskz_cvtepi8_epi32(
        __mmask16{0xFFFF},
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(B, scales))));
    const SubBlockScales s = sub_block_scales(b + offsetof(B, d), sc, 32.0f);
    a = s.a;
    coef = s.coef;
  }
  // Columns 128n + 32k + 16h + l: nibble k / 2 of ql[64n + 32(k % 2) + 16h + l], bits 2k of
  // qh[32n + 16h + l] as bits 4 and 5.
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512i codes(int g) const noexcept {
    const int n = g / 8, k = (g % 8) / 2, h = g % 2;
    const __m512i low = lane_bits(lanes16(ql + 64 * n + 32 * (k % 2) + 16 * h), 4 * (k / 2), 0xF);
    const __m512i high = lane_bits(lanes16(qh + 32 * n + 16 * h), 2 * k, 3);
    return _mm512_or_si512(low, _mm512_maskz_slli_epi32(__mmask16{0xFFFF}, high, 4));
  }
  [[nodiscard]] EMBER_ALWAYS_INLINE __m512 scale(int g) const noexcept { return lane_of(a, g); }
};

/// The K-quants Dots::super_block takes.
template <class B>
inline constexpr bool is_k_super =
    std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K> || std::is_same_v<B, BlockQ4_K> ||
    std::is_same_v<B, BlockQ5_K> || std::is_same_v<B, BlockQ6_K>;
#endif

/// Sink of the dot products of a row with N vectors h_j (vector j at h + j · h_stride).
///
/// Codes are never turned into the decoded values: over each half of 32 columns (one scale a, one
/// offset b), Σ_c ((q_c - k) · a + b) · h_c is computed as a · Σ_c q_c · h_c + (b - k · a) · Σ_c
/// h_c, the sums of h over each 16 columns computed once per call (hsum) and the coefficients b - k
/// · a of the row collected (coef) and applied when the row ends. The Σ q · h go into vector
/// accumulators, two per vector h alternating (so consecutive multiply-adds do not wait on each
/// other) for the vectors of a quarter (0-3, 4-7) of at most 2 vectors, one per vector otherwise
/// (the order of passes of 4, which dot_rows has always had). The plain types' values go into the
/// same accumulators (8 at a time), the tail of their last 31 columns into a scalar sum.
template <std::size_t N>
struct Dots {
  /// True when vector j alternates between two accumulators.
  [[nodiscard]] static constexpr bool two(std::size_t j) noexcept {
    return (j < 4 ? std::min<std::size_t>(N, 4) : N - 4) <= 2;
  }
  /// Calls f(std::integral_constant<std::size_t, j>) for j = 0 .. N - 1, unrolled.
  template <class F>
  EMBER_ALWAYS_INLINE static void each(F&& f) {
    each_of(f, std::make_index_sequence<N>{});
  }
  template <class F, std::size_t... J>
  EMBER_ALWAYS_INLINE static void each_of(F& f, std::index_sequence<J...>) {
    (f(std::integral_constant<std::size_t, J>{}), ...);
  }
  const float* h;
  Index h_stride;
  const float* hsum;  // hsum[j · groups + g] = Σ of h_j over columns 16g .. 16g + 15
  Index groups;
  float* coef;  // coef[g]: the row's b - k · a of columns 16g .. 16g + 15
  DotVector acc[N][2] = {};
  __m256 acc8[N] = {};
  float tail[N] = {};

  /// A row's accumulators as dot_tiles keeps them between the row's column tiles.
  struct Kept {
    DotVector acc[N][2];
    __m256 acc8[N];
    float tail[N];
  };
  /// Takes the accumulators kept in k that a row of Coded (block) or plain type uses: acc, or acc8
  /// and tail.
  template <bool Coded>
  EMBER_ALWAYS_INLINE void take(const Kept& k) noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA {
      if constexpr (Coded) {
        acc[j][0] = k.acc[j][0];
        if constexpr (two(j)) acc[j][1] = k.acc[j][1];
      } else {
        acc8[j] = k.acc8[j];
        tail[j] = k.tail[j];
      }
    });
  }
  /// Keeps in k the accumulators take<Coded> takes: a few vector stores at a tile's end, not a
  /// copy of the whole sink.
  template <bool Coded>
  EMBER_ALWAYS_INLINE void keep(Kept& k) const noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA {
      if constexpr (Coded) {
        k.acc[j][0] = acc[j][0];
        if constexpr (two(j)) k.acc[j][1] = acc[j][1];
      } else {
        k.acc8[j] = acc8[j];
        k.tail[j] = tail[j];
      }
    });
  }

  [[nodiscard]] EMBER_ALWAYS_INLINE const float* x(std::size_t j, Index c) const noexcept {
    return h + static_cast<Index>(j) * h_stride + c;
  }
  /// Adds a · p into vector j's accumulators, alternating between its two while it has two.
  template <std::size_t J>
  EMBER_ALWAYS_INLINE void add(std::integral_constant<std::size_t, J>, DotVector p,
                               float a) noexcept {
    acc[J][0] = dot_fma(p, dot_set1(a), acc[J][0]);
    if constexpr (two(J)) std::swap(acc[J][0], acc[J][1]);
  }

#if defined(__AVX512F__)
  /// add() with the scale already in every lane of `a` (the same products, so the same bits).
  template <std::size_t J>
  EMBER_ALWAYS_INLINE void add(std::integral_constant<std::size_t, J>, DotVector p,
                               __m512 a) noexcept {
    acc[J][0] = dot_fma(p, a, acc[J][0]);
    if constexpr (two(J)) std::swap(acc[J][0], acc[J][1]);
  }

  /// Super-block b of K-quant type B at columns c .. c + 255, taken as feed's Codes32 calls of
  /// its eight 32-column pieces would take it (the same coefficients, products and accumulator
  /// order, so the same bits), from its 16 groups of 16 codes as 32-bit lanes and its scales as
  /// vectors (KSuper): no scalar scale arithmetic and no byte-to-lane widening through 128-bit
  /// registers per piece.
  template <class B>
  EMBER_ALWAYS_INLINE void super_block(const std::uint8_t* b, Index c) noexcept {
    const KSuper<B> k(b);
    _mm512_storeu_ps(coef + c / 16, k.coef);
    unrolled<8>([&](auto piece) EMBER_INLINE_LAMBDA {
      constexpr int i = static_cast<int>(piece);
      const __m512 v0 = _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, k.codes(2 * i));
      const __m512 v1 = _mm512_maskz_cvtepi32_ps(__mmask16{0xFFFF}, k.codes(2 * i + 1));
      const __m512 a0 = k.scale(2 * i);
      const Index ci = c + 32 * i;
      if constexpr (KSuper<B>::same) {
        each([&](auto j) EMBER_INLINE_LAMBDA {
          const __m512 p0 = dot_mul(v0, dot_load(x(j, ci)));
          add(j, dot_fma(v1, dot_load(x(j, ci + 16)), p0), a0);
        });
      } else {
        const __m512 a1 = k.scale(2 * i + 1);
        each([&](auto j) EMBER_INLINE_LAMBDA {
          add(j, dot_mul(v0, dot_load(x(j, ci))), a0);
          add(j, dot_mul(v1, dot_load(x(j, ci + 16))), a1);
        });
      }
    });
  }
#endif

  template <bool Offset, bool Same, bool Signed>
  EMBER_ALWAYS_INLINE void codes(Index c, const Codes32<Offset, Same, Signed>& g) noexcept {
    const Index group = c / 16;
    coef[group] = Offset ? g.b0 : -static_cast<float>(g.k) * g.a0;
    coef[group + 1] = Offset ? g.b1 : -static_cast<float>(g.k) * g.a1;
#if defined(__AVX512F__)
    const __m512 v0 = code_floats<Signed>(g.bytes[0]);
    const __m512 v1 = code_floats<Signed>(g.bytes[1]);
    each([&](auto j) EMBER_INLINE_LAMBDA {
      const __m512 p0 = dot_mul(v0, dot_load(x(j, c)));
      if constexpr (Same) {
        add(j, dot_fma(v1, dot_load(x(j, c + 16)), p0), g.a0);
      } else {
        add(j, p0, g.a0);
        add(j, dot_mul(v1, dot_load(x(j, c + 16))), g.a1);
      }
    });
#else
    __m256 v[4];
    EMBER_UNROLL for (int i = 0; i < 4; ++i) v[i] = _mm256_cvtepi32_ps(g.codes8(i));
    each([&](auto j) EMBER_INLINE_LAMBDA {
      const __m256 p0 = dot_fma(v[1], dot_load(x(j, c + 8)), dot_mul(v[0], dot_load(x(j, c))));
      const __m256 p1 =
          dot_fma(v[3], dot_load(x(j, c + 24)), dot_mul(v[2], dot_load(x(j, c + 16))));
      if constexpr (Same) {
        add(j, dot_add(p0, p1), g.a0);
      } else {
        add(j, p0, g.a0);
        add(j, p1, g.a1);
      }
    });
#endif
  }
  EMBER_ALWAYS_INLINE void put32(Index c, __m256 y0, __m256 y1, __m256 y2, __m256 y3) noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA {
      const __m256 p0 = multiply_add(y1, _mm256_loadu_ps(x(j, c + 8)),
                                     _mm256_mul_ps(y0, _mm256_loadu_ps(x(j, c))));
      const __m256 p1 = multiply_add(y3, _mm256_loadu_ps(x(j, c + 24)),
                                     _mm256_mul_ps(y2, _mm256_loadu_ps(x(j, c + 16))));
      acc8[j] = _mm256_add_ps(acc8[j], _mm256_add_ps(p0, p1));
    });
  }
  EMBER_ALWAYS_INLINE void put1(Index c, float y) noexcept {
    each([&](auto j) EMBER_INLINE_LAMBDA { tail[j] += rounded(y * *x(j, c)); });
  }
  /// The dot product with vector j, its offsets' 8-lane sum over the whole groups of 8 given in
  /// o: its accumulators, then the offsets' Σ coef · hsum (codes), then the tail (plain types).
  [[nodiscard]] EMBER_ALWAYS_INLINE float finish(std::size_t j, bool coded,
                                                 __m256 o) const noexcept {
    DotVector v = acc[j][0];
    if (two(j)) v = dot_add(v, acc[j][1]);
    float r = dot_sum(v) + lane_sum(acc8[j]);
    if (coded) {
      const float* hs = hsum + static_cast<Index>(j) * groups;
      float rest = 0.0f;
      for (Index g = groups - groups % 8; g < groups; ++g) rest += rounded(coef[g] * hs[g]);
      r += lane_sum(o) + rest;
    }
    return r + tail[j];
  }
  /// The dot product with each vector j, written to out[j · out_stride] (finish), the offsets of
  /// all N vectors taken in one pass over the coefficients, each in its own lanes, so that their
  /// chains of multiply-adds overlap (taken one vector after another, each chain waited for the
  /// last: about a sixth of the exact N = 8 time with the table in cache). The same operations per
  /// vector, so the same bits.
  EMBER_ALWAYS_INLINE void results(bool coded, float* out, Index out_stride) const noexcept {
    __m256 o[N];
    each([&](auto j) EMBER_INLINE_LAMBDA { o[j] = _mm256_setzero_ps(); });
    for (Index g = 0; coded && g + 8 <= groups; g += 8) {
      const __m256 c = _mm256_loadu_ps(coef + g);
      each([&](auto j) EMBER_INLINE_LAMBDA {
        o[j] = multiply_add(c, _mm256_loadu_ps(hsum + static_cast<Index>(j) * groups + g), o[j]);
      });
    }
    each([&](auto j) EMBER_INLINE_LAMBDA {
      out[static_cast<Index>(j) * out_stride] = finish(j, coded, o[j]);
    });
  }
};

/// Columns per tile of dot_rows_n for N hidden rows of d of `type`: the whole row for N <= 2; 512
/// bytes of each table row for the plain types (F32, F16, BF16: measured 1.1-1.6x faster than 16 KB
/// of hidden rows at N = 4 and 8, cold); about 16 KB of hidden rows in whole blocks of 256 for the
/// block types, whose decoding costs more than a tile's bookkeeping (128-column tiles
/// measured 1.05-1.2x slower on them).
[[nodiscard]] inline Index dot_tile_columns(std::size_t n, Index d, GgmlType type) noexcept {
  if (n <= 2) return d;
  const Traits t = traits(type);
  if (t.block_size == 1) return Index{512} / t.block_bytes;
  return std::max<Index>(256, Index{4096} / static_cast<Index>(n) / 256 * 256);
}

/// hsum[j · groups + g] = Σ of hidden row j (of n, h_stride apart) over columns 16g .. 16g + 15,
/// summed in column order: Dots's hsum.
[[nodiscard]] inline std::vector<float> hidden_group_sums(const float* h, Index h_stride,
                                                          std::size_t n, Index groups) {
  std::vector<float> hsum(static_cast<std::size_t>(groups) * n);
  for (std::size_t j = 0; j < n; ++j) {
    for (Index g = 0; g < groups; ++g) {
      const float* x = h + static_cast<Index>(j) * h_stride + 16 * g;
      float s = 0.0f;
      for (int i = 0; i < 16; ++i) s += x[i];
      hsum[j * static_cast<std::size_t>(groups) + static_cast<std::size_t>(g)] = s;
    }
  }
  return hsum;
}

/// Columns of a row fed at a time by the whole-row path of dot_rows_n, each with one prefetch of
/// the same columns of the next row: a multiple of every block size (32, 256). Measured cold,
/// V = 32000, d = 4096, N = 1 against whole rows: 1.1-3x faster on an Intel Xeon (q4_0 40.0 ->
/// 13.2 ms), 256 as fast as or faster than 1024.
inline constexpr Index kRowSliceColumns = 256;

/// Rows shorter than this are fed whole by dot_rows_n's whole-row path and left to the hardware's
/// prefetchers: on an AMD EPYC, cold, V = 50257, d = 768, asking for the next row's slices made
/// q8_0, q4_K and f16 1.1-1.15x slower at N = 1 and 2.
inline constexpr Index kRowAskAheadMinBytes = 2048;

/// Block b of type B at column c fed to dots: a K-quant super-block whole where the build has
/// AVX-512 (Dots::super_block, the bits of its 32-column feed), else as feed_range feeds it.
template <class B, std::size_t N>
EMBER_ALWAYS_INLINE void feed_block(const std::uint8_t* b, Index c, Dots<N>& dots) {
#if defined(__AVX512F__)
  if constexpr (is_k_super<B>) {
    dots.template super_block<B>(b, c);
    return;
  }
#endif
  feed(std::type_identity<B>{}, b, c, dots);
}

/// Columns [c0, c1) of row `row` (d of them) fed to dots, Unit a block type (c0, c1 whole blocks:
/// feed_block) or PlainColumns (feed_plain_range): feed_range's calls in its order.
template <class Unit, std::size_t N>
EMBER_ALWAYS_INLINE void feed_tile(const std::uint8_t* row, Index d, Index c0, Index c1,
                                   Dots<N>& dots) {
  if constexpr (is_plain_columns<Unit>) {
    feed_plain_range<Unit::type>(row, d, c0, c1, dots);
  } else {
    for (Index i = c0 / Unit::elements; i < c1 / Unit::elements; ++i)
      feed_block<Unit>(row + i * Index{sizeof(Unit)}, i * Unit::elements, dots);
  }
}

/// Groups of 16 columns whose hidden sums Dots takes for a row of d of unit Unit: d / 16 for the
/// block types (which add an offset per group), none for the plain types.
template <class Unit>
[[nodiscard]] constexpr Index dot_groups(Index d) noexcept {
  return is_plain_columns<Unit> ? 0 : d / 16;
}

/// The whole-row path of dot_rows_n for one type (Unit: its block, or PlainColumns): out[j ·
/// out_stride + r] = the dot product of row r of the `count` at `rows` with hidden row j of h,
/// rows in order, each fed kRowSliceColumns at a time. With ask_ahead the same slice of the next
/// row is asked for first, so that its read overlaps the decoding of this one (left to the
/// hardware's prefetchers, the cold time of long rows was about the sum of the two). A function
/// per type, so that the accumulators stay in registers: with every type's loop in one function,
/// GCC at -O2 kept them on the stack (the exact N = 1 logits over the 32-element types 2.3x slower
/// with the table in cache). The slices are whole blocks and multiples of 32 columns, so the sink
/// sees the calls of a row fed whole: the same bits.
template <class Unit, std::size_t N>
[[gnu::noinline]] void dot_whole_rows(const std::uint8_t* rows, Index row_stride, Index count,
                                      Index d, const float* h, Index h_stride, bool ask_ahead,
                                      float* out, Index out_stride) {
  constexpr bool coded = !is_plain_columns<Unit>;
  const Index groups = dot_groups<Unit>(d);
  const std::vector<float> hsum = hidden_group_sums(h, h_stride, N, groups);
  std::vector<float> coef(static_cast<std::size_t>(groups));
  const Index row_bytes = unit_bytes<Unit>(d);
  constexpr Index slice_bytes = unit_bytes<Unit>(kRowSliceColumns);
  for (Index r = 0; r < count; ++r) {
    Dots<N> dots{h, h_stride, hsum.data(), groups, coef.data()};
    const std::uint8_t* row = rows + r * row_stride;
    const std::uint8_t* ahead = r + 1 < count ? row + row_stride : row;
#if defined(__AVX512F__)
    if constexpr (is_k_super<Unit>) {
      // A super-block is a slice: taken block by block, each with one fixed prefetch (the general
      // slice loop below measured 0.39-0.46x of the read cold at N = 1 on q4_K and q5_K against
      // 0.42-0.53x for this one).
      for (Index s = 0; s < d / Unit::elements; ++s) {
        if (ask_ahead) prefetch_block<sizeof(Unit)>(ahead + s * Index{sizeof(Unit)});
        dots.template super_block<Unit>(row + s * Index{sizeof(Unit)}, s * Unit::elements);
      }
    } else
#endif
    {
      for (Index c0 = 0, b0 = 0; c0 < d; c0 += kRowSliceColumns, b0 += slice_bytes) {
        if (ask_ahead) prefetch_slice(ahead, b0, std::min(row_bytes, b0 + slice_bytes));
        feed_tile<Unit>(row, d, c0, std::min(d, c0 + kRowSliceColumns), dots);
      }
    }
    dots.results(coded, out + r, out_stride);
  }
}

/// dot_rows_n in column tiles (from 3 hidden rows), for one type (Unit as dot_whole_rows): the tile
/// of the hidden rows stays in L1 while a chunk of 8 rows passes over it, each row's accumulators
/// kept between its tiles (Dots::Kept). A fresh sink per row and tile takes the kept accumulators,
/// so that they stay in registers while the tile is fed (a copy of the whole sink per tile cost
/// about as much as the decoding at N = 8). Each row asks for every line of its next tile while
/// it feeds this one: a lead of a chunk of row tiles (a lead of one row tile, or only a tile's
/// head, left the tiles partly read on demand: docs/lm_head.md). The same feed calls in the same
/// order as a row fed whole: the same bits.
template <class Unit, std::size_t N>
[[gnu::noinline]] void dot_tiles(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                                 Index tile, const float* h, Index h_stride, float* out,
                                 Index out_stride) {
  constexpr bool coded = !is_plain_columns<Unit>;
  using Kept = typename Dots<N>::Kept;
  const Index groups = dot_groups<Unit>(d);
  const std::vector<float> hsum = hidden_group_sums(h, h_stride, N, groups);
  const Index row_bytes = unit_bytes<Unit>(d);
  constexpr Index chunk = 8;
  std::vector<float> coefs(static_cast<std::size_t>(chunk * groups));
  std::vector<Kept> kept(chunk);
  auto sink = [&](Index r) EMBER_INLINE_LAMBDA {
    return Dots<N>{h, h_stride, hsum.data(), groups, coefs.data() + r * groups};
  };
  for (Index r0 = 0; r0 < count; r0 += chunk) {
    const Index len = std::min(chunk, count - r0);
    for (Index r = 0; r < len; ++r) sink(r).template keep<coded>(kept[static_cast<std::size_t>(r)]);
    for (Index c0 = 0; c0 < d; c0 += tile) {
      const Index c1 = std::min(d, c0 + tile);
      // The tile each row asks for while it feeds this one: its own next tile, or from the last
      // tile the first tile of the row `chunk` rows on.
      const bool last = c1 == d;
      const Index ask_c0 = last ? 0 : c1;
      const Index ask0 = row_bytes * ask_c0 / d;
      const Index ask1 = row_bytes * std::min(d, ask_c0 + tile) / d;
      const Index ask_rows = last ? chunk : 0;
      for (Index r = 0; r < len; ++r) {
        const std::uint8_t* row = rows + (r0 + r) * row_stride;
        const Index ask_row = r0 + r + ask_rows;
        if (ask_row < count) prefetch_slice(rows + ask_row * row_stride, ask0, ask1);
        Dots<N> dots = sink(r);
        dots.template take<coded>(kept[static_cast<std::size_t>(r)]);
        feed_tile<Unit>(row, d, c0, c1, dots);
        dots.template keep<coded>(kept[static_cast<std::size_t>(r)]);
      }
    }
    for (Index r = 0; r < len; ++r) {
      Dots<N> dots = sink(r);
      dots.template take<coded>(kept[static_cast<std::size_t>(r)]);
      dots.results(coded, out + r0 + r, out_stride);
    }
  }
}

/// dot_rows's pass of N hidden rows: the type's whole-row kernel, or its column tiles from 3 hidden
/// rows (dot_tile_columns), each in a function of the type's own.
template <std::size_t N>
void dot_rows_n(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                const float* h, Index h_stride, float* out, Index out_stride) {
  const Index tile = dot_tile_columns(N, d, type);
  const bool ask_ahead = detail::ggml::row_bytes(type, d) >= kRowAskAheadMinBytes;
  visit_unit(type, [&](auto unit) {
    using Unit = typename decltype(unit)::type;
    if (tile < d) {
      dot_tiles<Unit, N>(rows, row_stride, count, d, tile, h, h_stride, out, out_stride);
    } else {
      dot_whole_rows<Unit, N>(rows, row_stride, count, d, h, h_stride, ask_ahead, out, out_stride);
    }
  });
}

}  // namespace avx2
#endif

/// dst[c] = decoded(row)[c] · s for c in [0, d): decode_row's value (ggml's dequantization, bit for
/// bit) times s, rounded once. Stream: the stores are non-temporal where the build has AVX2 (dst
/// must then be 32-byte aligned, and the caller orders them with an sfence before the output is
/// published), ordinary otherwise.
/// Preconditions: as decode_row.
template <bool Stream = false>
void decode_row_scaled(GgmlType type, const std::uint8_t* row, Index d, float s, float* dst) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
#if EMBER_DETAIL_GGML_AVX2
  EMBER_ASSERT(!Stream || reinterpret_cast<std::uintptr_t>(dst) % 32 == 0);
  avx2::ScaledStore<Stream> sink{dst, s};
  avx2::feed_row(type, row, d, sink);
#else
  decode_row(type, row, d, dst);
  for (Index c = 0; c < d; ++c) dst[c] = dst[c] * s;
#endif
}

/// out[j·out_stride + r] = Σ_c decoded(row r)[c] · h[j·h_stride + c] for the `count` encoded rows
/// starting at `rows` (row_stride bytes apart) and the n vectors of h, each row decoded once per
/// group of max_pass_rows vectors and never stored whole, in order. The kernel of
/// tied logits for a few hidden rows (exact mode).
///
/// The decoded values are decode_row's exactly; their products with h are summed in float in an
/// order fixed by the build (with AVX2: 8-lane vector accumulators, products fused into the adds
/// where the build has FMA; else dot_row's order), the same for every row, call and thread count.
/// Against the dot product of the decoded row computed in double the error is that of a float sum
/// of d products: at most about d · 2⁻²⁴ · Σ_c |decoded[c] · h[c]|.
/// Preconditions: as decode_row; h holds n rows of d floats, out n rows of `count`.
inline void dot_rows(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count,
                     Index d, const float* h, Index h_stride, Index n, float* out,
                     Index out_stride) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  for (Index j0 = 0; j0 < n; j0 += max_pass_rows) {
    const Index g = std::min(max_pass_rows, n - j0);
    const float* hj = h + j0 * h_stride;
    float* oj = out + j0 * out_stride;
#if EMBER_DETAIL_GGML_AVX2
    visit_pass_rows(g, [&](auto n_rows) {
      constexpr auto N = static_cast<std::size_t>(decltype(n_rows)::value);
      avx2::dot_rows_n<N>(type, rows, row_stride, count, d, hj, h_stride, oj, out_stride);
    });
#else
    for (Index r = 0; r < count; ++r) {
      for (Index j = 0; j < g; ++j) {
        oj[j * out_stride + r] = dot_row(type, rows + r * row_stride, hj + j * h_stride, d);
      }
    }
#endif
  }
}

}  // namespace ember::inline EMBER_ISA::detail::ggml
