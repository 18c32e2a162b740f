/// The AVX2 unpacking of ggml's block layouts, shared by the lookup, the exact dot and the
/// quantized dot: codes32 gives the codes of 32 consecutive columns of any block type (one routine
/// per layout), and feed walks a block (or the columns of a plain type) 32 columns at a time into
/// a sink, with the scales the reference decoder applies to them.
// SPDX-License-Identifier: MIT
#pragma once

#include "ember/ggml/isa.hpp"

#if EMBER_DETAIL_GGML_AVX2
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/k_scales.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml::avx2 {

EMBER_ALWAYS_INLINE __m128i load16(const std::uint8_t* p) noexcept {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

EMBER_ALWAYS_INLINE __m256i load32(const std::uint8_t* p) noexcept {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

/// Each byte of v shifted right by `shift` (0..7), then masked.
EMBER_ALWAYS_INLINE __m256i bits_at(__m256i v, int shift, int mask) noexcept {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(static_cast<char>(mask)));
}

/// Each byte of v | (bits of it at `shift`, masked, moved up by `up`): a code's high bits.
EMBER_ALWAYS_INLINE __m256i with_high_bits(__m256i v, __m256i high, int shift, int mask,
                                           int up) noexcept {
  return _mm256_or_si256(v, _mm256_sll_epi16(bits_at(high, shift, mask), _mm_cvtsi32_si128(up)));
}

/// The codes of columns 32·piece .. 32·piece + 31 of block b of type B, byte i the code of column
/// 32·piece + i, as ggml/decode.hpp's block_codes gives them (Q8_0's bytes signed, every other
/// code unsigned). piece < B::elements / 32.
template <class B>
EMBER_ALWAYS_INLINE __m256i codes32(const std::uint8_t* b, int piece) noexcept {
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    static_cast<void>(piece);
    return load32(b + offsetof(B, qs));
  } else if constexpr (is_nibble_block<B>) {
    static_cast<void>(piece);
    const __m128i x = load16(b + offsetof(B, qs));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(x, low4)),
                                        _mm_and_si128(_mm_srli_epi16(x, 4), low4), 1);
    if constexpr (has_fifth_bit<B>) {
      // Byte e of `bits` is all ones when bit e of qh is set (ggml's bytes_from_bits_32).
      const __m256i spread = _mm256_shuffle_epi8(
          _mm256_set1_epi32(static_cast<int>(load_u32(b + offsetof(B, qh)))),
          _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
      const __m256i bits = _mm256_cmpeq_epi8(
          _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe)), _mm256_set1_epi64x(-1));
      q = _mm256_or_si256(q, _mm256_and_si256(bits, _mm256_set1_epi8(16)));
    }
    return q;
  } else if constexpr (std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K>) {
    // Half n = piece / 4 of 128 columns, quarter j = piece % 4: bits 2j of qs[32n .. 32n + 31]
    // (Q3_K: bit 4n + j of hmask as bit 2).
    const __m256i q = bits_at(load32(b + offsetof(B, qs) + 32 * (piece / 4)), 2 * (piece % 4), 3);
    if constexpr (std::is_same_v<B, BlockQ3_K>) {
      return with_high_bits(q, load32(b + offsetof(B, hmask)), piece, 1, 2);
    } else {
      return q;
    }
  } else if constexpr (std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K>) {
    // Sub-block `piece`: nibble piece % 2 of qs[32(piece / 2) .. + 31] (Q5_K: bit `piece` of qh
    // as bit 4).
    const __m256i q =
        bits_at(load32(b + offsetof(B, qs) + 32 * (piece / 2)), 4 * (piece % 2), 0x0F);
    if constexpr (std::is_same_v<B, BlockQ5_K>) {
      return with_high_bits(q, load32(b + offsetof(B, qh)), piece, 1, 4);
    } else {
      return q;
    }
  } else {
    static_assert(std::is_same_v<B, BlockQ6_K>);
    // Half n = piece / 4, quarter k = piece % 4: nibble k / 2 of ql[64n + 32(k % 2) .. + 31],
    // bits 2k of qh[32n .. + 31] as bits 4 and 5.
    const int n = piece / 4;
    const int k = piece % 4;
    const __m256i low =
        bits_at(load32(b + offsetof(B, ql) + 64 * n + 32 * (k % 2)), 4 * (k / 2), 0x0F);
    return with_high_bits(low, load32(b + offsetof(B, qh) + 32 * n), 2 * k, 3, 4);
  }
}

// feed hands a row to a sink 32 consecutive columns at a time (columns c .. c+31), as integer
// codes with their scales (sink.codes(c, Codes32)): column c + i stands for (q_i - k) · a + b with
// the (a, b) of its half (columns 0-15 or 16-31), the reference decoder's value when the product
// is rounded before b is added. The plain types hand over float values (sink.put32(c, y0, y1, y2,
// y3)), and the last d mod 32 of them one at a time (sink.put1(c, y)).

/// float(q) · a for 8 integer codes.
EMBER_ALWAYS_INLINE __m256 times(__m256i q, __m256 a) noexcept {
  return _mm256_mul_ps(_mm256_cvtepi32_ps(q), a);
}

/// float(q) · a + b for 8 integer codes, the product rounded before the add.
EMBER_ALWAYS_INLINE __m256 times_plus(__m256i q, __m256 a, __m256 b) noexcept {
  return _mm256_add_ps(rounded(times(q, a)), b);
}

/// 32 columns as byte codes (codes32): byte i the code of column c + i (unsigned, or signed when
/// Signed); column c + i is (q_i - k) · a0 (+ b0) for i < 16 and (q_i - k) · a1 (+ b1) above.
/// Offset: b0 and b1 are added (k is 0 then); Same: a1 == a0 and b1 == b0 (one scale for the 32
/// columns).
template <bool Offset, bool Same, bool Signed = false>
struct Codes32 {
  __m256i bytes;
  int k;
  float a0, b0, a1, b1;
  /// The codes of columns c + 16h .. c + 16h + 15 as bytes.
  [[nodiscard]] EMBER_ALWAYS_INLINE __m128i half(int h) const noexcept {
    return h == 0 ? _mm256_castsi256_si128(bytes) : _mm256_extracti128_si256(bytes, 1);
  }
  /// The codes of columns c + 8i .. c + 8i + 7 as 32-bit integers.
  [[nodiscard]] EMBER_ALWAYS_INLINE __m256i codes8(int i) const noexcept {
    const __m128i v = i % 2 == 0 ? half(i / 2) : _mm_srli_si128(half(i / 2), 8);
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

/// Q4_0 ... Q5_1: one scale d for the 32 columns, offset k = code_offset or (Q4_1, Q5_1) m added.
template <class B, class Sink>
requires is_nibble_block<B> EMBER_ALWAYS_INLINE void feed(std::type_identity<B>,
                                                          const std::uint8_t* b, Index c,
                                                          Sink& sink) {
  const float d = load_half_f16c(b + offsetof(B, d));
  float m = 0.0f;
  if constexpr (has_offset_term<B>) m = load_half_f16c(b + offsetof(B, m));
  sink.codes(c, Codes32<has_offset_term<B>, true>{codes32<B>(b, 0), code_offset<B>, d, m, d, m});
}

template <class Sink>
EMBER_ALWAYS_INLINE void feed(std::type_identity<BlockQ8_0>, const std::uint8_t* b, Index c,
                              Sink& sink) {
  using B = BlockQ8_0;
  const float d = load_half_f16c(b + offsetof(B, d));
  sink.codes(c, Codes32<false, true, true>{codes32<B>(b, 0), 0, d, 0.0f, d, 0.0f});
}

/// Q2_K, Q3_K: 16 sub-blocks of 16, 32 columns (sub-blocks 2p, 2p + 1) at a time; Q2_K's scales
/// and mins the nibbles of scales[2p], Q3_K's codes minus 4.
template <class B, class Sink>
requires std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K> EMBER_ALWAYS_INLINE void feed(
    std::type_identity<B>, const std::uint8_t* b, Index c, Sink& sink) {
  constexpr bool q3 = std::is_same_v<B, BlockQ3_K>;
  const float d = load_half_f16c(b + offsetof(B, d));
  float min = 0.0f;
  int sc[16];
  if constexpr (q3) {
    q3_k_scales(b + offsetof(B, scales), sc);
  } else {
    min = load_half_f16c(b + offsetof(B, dmin));
  }
  EMBER_UNROLL for (int p = 0; p < 8; ++p) {
    const int is = 2 * p;
    const __m256i v = codes32<B>(b, p);
    if constexpr (q3) {
      sink.codes(c, Codes32<false, false>{v, 4, d * static_cast<float>(sc[is] - 32), 0.0f,
                                          d * static_cast<float>(sc[is + 1] - 32), 0.0f});
    } else {
      const std::uint8_t* s = b + offsetof(B, scales) + is;
      const float ml0 = min * static_cast<float>(s[0] >> 4);
      const float ml1 = min * static_cast<float>(s[1] >> 4);
      sink.codes(c, Codes32<true, false>{v, 0, d * static_cast<float>(s[0] & 0xF), -ml0,
                                         d * static_cast<float>(s[1] & 0xF), -ml1});
    }
    c += 32;
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

/// Q4_K, Q5_K: 8 sub-blocks of 32, each with its scale and min.
template <class B, class Sink>
requires std::is_same_v<B, BlockQ4_K> || std::is_same_v<B, BlockQ5_K> EMBER_ALWAYS_INLINE void feed(
    std::type_identity<B>, const std::uint8_t* b, Index c, Sink& sink) {
  const float d = load_half_f16c(b + offsetof(B, d));
  const float min = load_half_f16c(b + offsetof(B, dmin));
  EMBER_UNROLL for (int j = 0; j < 4; ++j) {
    float d1, m1, d2, m2;
    k4_pair(b + offsetof(B, scales), d, min, j, d1, m1, d2, m2);
    sink.codes(c, Codes32<true, true>{codes32<B>(b, 2 * j), 0, d1, -m1, d1, -m1});
    sink.codes(c + 32, Codes32<true, true>{codes32<B>(b, 2 * j + 1), 0, d2, -m2, d2, -m2});
    c += 64;
  }
}

/// Q6_K: 16 sub-blocks of 16 with int8 scales, codes minus 32.
template <class Sink>
EMBER_ALWAYS_INLINE void feed(std::type_identity<BlockQ6_K>, const std::uint8_t* b, Index c,
                              Sink& sink) {
  using B = BlockQ6_K;
  const float d = load_half_f16c(b + offsetof(B, d));
  const std::uint8_t* sc = b + offsetof(B, scales);
  EMBER_UNROLL for (int n = 0; n < 2; ++n) {
    float ds[8];
    EMBER_UNROLL for (int k = 0; k < 8; ++k) {
      ds[k] = d * static_cast<float>(static_cast<std::int8_t>(sc[8 * n + k]));
    }
    EMBER_UNROLL for (int k = 0; k < 4; ++k) {
      sink.codes(c, Codes32<false, false>{codes32<B>(b, 4 * n + k), 32, ds[2 * k], 0.0f,
                                          ds[2 * k + 1], 0.0f});
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

}  // namespace ember::inline EMBER_ISA::detail::ggml::avx2

#endif  // EMBER_DETAIL_GGML_AVX2
