/// The portable unpacking of ggml's block layouts (block_codes, one routine per layout), ggml's
/// block decoders built on it, bit-identical to its reference C code (dequantize_row_* of
/// ggml-quants.c), a row decoder over any type ember decodes, and the fused reference dot product
/// of an encoded row with a float vector (the portable exact dot of ggml/exact_dot.hpp).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

// Each decoder mirrors ggml's dequantize_row_* for one block: the same conversions and the same
// order of float operations, each product rounded before anything is added to it (rounded()).
// Preconditions (validated by GgufFile, GgufWriter and the tables): `b` holds one whole block,
// `y` room for its elements.

/// Adds `offset` to the N products in p (rounded first) and stores them in y.
template <std::size_t N>
EMBER_ALWAYS_INLINE void store_plus(float (&p)[N], float offset, float* y) noexcept {
  rounded(std::span<float>(p));
  for (std::size_t j = 0; j < N; ++j) y[j] = p[j] + offset;
}

/// The codes of block b of type B in column order, w[0, B::elements): the one portable unpacking of
/// each layout, which the decoders below and the portable quantized dot (ggml/quant_dot.hpp) read.
/// A code is the stored integer before its block's offset: Q4_0 ... Q5_1 the nibble (with bit
/// 4 from qh for Q5_0, Q5_1), Q8_0 the int8 byte as stored, Q2_K and Q3_K the 2 bits (Q3_K with
/// its hmask bit as bit 2), Q4_K and Q5_K the nibble (Q5_K with its qh bit as bit 4), Q6_K the 4
/// bits of ql with the 2 of qh as bits 4 and 5.
template <class B>
inline void block_codes(const std::uint8_t* b, std::uint8_t* w) noexcept {
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    for (int e = 0; e < 32; ++e) w[e] = b[offsetof(B, qs) + static_cast<std::size_t>(e)];
  } else if constexpr (is_nibble_block<B>) {
    // Element j the low nibble of qs[j], element j + 16 its high nibble; bit j of qh bit 4 of
    // element j.
    const std::uint8_t* qs = b + offsetof(B, qs);
    std::uint32_t qh = 0;
    if constexpr (has_fifth_bit<B>) qh = load_u32(b + offsetof(B, qh));
    for (int j = 0; j < 16; ++j) {
      w[j] = static_cast<std::uint8_t>((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10u));
      w[j + 16] = static_cast<std::uint8_t>((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10u));
    }
  } else {
    // Column e: 128-column half e / 128, 32-column quarter (e % 128) / 32 of it, byte e % 32.
    for (std::size_t e = 0; e < 256; ++e) {
      const std::size_t half = e / 128;
      const std::size_t i = e % 32;
      const std::size_t quarter = (e % 128) / 32;
      if constexpr (std::is_same_v<B, BlockQ2_K> || std::is_same_v<B, BlockQ3_K>) {
        int v = (b[offsetof(B, qs) + 32 * half + i] >> (2 * quarter)) & 3;
        if constexpr (std::is_same_v<B, BlockQ3_K>) {
          v |= ((b[offsetof(B, hmask) + i] >> (4 * half + quarter)) & 1) << 2;
        }
        w[e] = static_cast<std::uint8_t>(v);
      } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
        const int low =
            (b[offsetof(B, ql) + 64 * half + 32 * (quarter % 2) + i] >> (4 * (quarter / 2))) & 0xF;
        const int high = (b[offsetof(B, qh) + 32 * half + i] >> (2 * quarter)) & 3;
        w[e] = static_cast<std::uint8_t>(low | (high << 4));
      } else {  // Q4_K, Q5_K: sub-block e / 32 holds nibble (e / 32) % 2 of 32 bytes of qs
        const std::size_t sub = e / 32;
        int v = (b[offsetof(B, qs) + 32 * (sub / 2) + i] >> (4 * (sub % 2))) & 0xF;
        if constexpr (std::is_same_v<B, BlockQ5_K>) v |= ((b[offsetof(B, qh) + i] >> sub) & 1) << 4;
        w[e] = static_cast<std::uint8_t>(v);
      }
    }
  }
}

/// Q4_0 ... Q5_1: x = (q - code_offset) · d, or q · d + m (Q4_1, Q5_1).
template <class B>
requires is_nibble_block<B>
inline void decode_block(std::type_identity<B>, const std::uint8_t* b, float* y) noexcept {
  const float d = load_half(b + offsetof(B, d));
  std::uint8_t q[B::elements];
  block_codes<B>(b, q);
  if constexpr (has_offset_term<B>) {
    float p[B::elements];
    for (int j = 0; j < B::elements; ++j) p[j] = static_cast<float>(q[j]) * d;
    store_plus(p, load_half(b + offsetof(B, m)), y);
  } else {
    for (int j = 0; j < B::elements; ++j) y[j] = static_cast<float>(q[j] - code_offset<B>) * d;
  }
}

inline void decode_block(std::type_identity<BlockQ8_0>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ8_0;
  const float d = load_half(b + offsetof(B, d));
  std::uint8_t q[B::elements];
  block_codes<B>(b, q);
  for (int j = 0; j < B::elements; ++j)
    y[j] = static_cast<float>(static_cast<std::int8_t>(q[j])) * d;
}

/// Q2_K: sub-block s of 16 is (d · scale) · q - (dmin · min), scale and min the nibbles of
/// scales[s].
inline void decode_block(std::type_identity<BlockQ2_K>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ2_K;
  std::uint8_t q[B::elements];
  block_codes<B>(b, q);
  const std::uint8_t* scales = b + offsetof(B, scales);
  const float d = load_half(b + offsetof(B, d));
  const float min = load_half(b + offsetof(B, dmin));
  for (int s = 0; s < 16; ++s) {
    const float dl = d * static_cast<float>(scales[s] & 0xF);
    const float ml = min * static_cast<float>(scales[s] >> 4);
    float p[16];
    for (int l = 0; l < 16; ++l) p[l] = dl * static_cast<float>(q[16 * s + l]);
    store_plus(p, -ml, y + std::ptrdiff_t{16} * s);
  }
}

/// Q3_K: sub-block s of 16 is (d · (scale - 32)) · (q - 4), q with its high bit as bit 2.
inline void decode_block(std::type_identity<BlockQ3_K>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ3_K;
  std::uint8_t q[B::elements];
  block_codes<B>(b, q);
  const float d_all = load_half(b + offsetof(B, d));
  int sc[16];
  q3_k_scales(b + offsetof(B, scales), sc);
  for (int s = 0; s < 16; ++s) {
    const float dl = d_all * static_cast<float>(sc[s] - 32);
    for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * static_cast<float>(q[16 * s + l] - 4);
  }
}

/// Q4_K and Q5_K: sub-block j of 32 is (d · scale) · q - (dmin · min).
template <class B>
inline void decode_k4(const std::uint8_t* b, float* y) noexcept {
  std::uint8_t q[B::elements];
  block_codes<B>(b, q);
  const float d = load_half(b + offsetof(B, d));
  const float min = load_half(b + offsetof(B, dmin));
  const std::uint8_t* scales = b + offsetof(B, scales);
  for (int j = 0; j < 8; ++j) {
    int sc = 0;
    int m = 0;
    scale_min_k4(j, scales, sc, m);
    const float dl = d * static_cast<float>(sc);
    const float ml = min * static_cast<float>(m);
    float p[32];
    for (int l = 0; l < 32; ++l) p[l] = dl * static_cast<float>(q[32 * j + l]);
    store_plus(p, -ml, y + std::ptrdiff_t{32} * j);
  }
}

inline void decode_block(std::type_identity<BlockQ4_K>, const std::uint8_t* b, float* y) noexcept {
  decode_k4<BlockQ4_K>(b, y);
}

inline void decode_block(std::type_identity<BlockQ5_K>, const std::uint8_t* b, float* y) noexcept {
  decode_k4<BlockQ5_K>(b, y);
}

/// Q6_K: sub-block s of 16 is (d · scales[s]) · (q - 32).
inline void decode_block(std::type_identity<BlockQ6_K>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ6_K;
  std::uint8_t q[B::elements];
  block_codes<B>(b, q);
  const std::uint8_t* sc = b + offsetof(B, scales);
  const float d = load_half(b + offsetof(B, d));
  for (int s = 0; s < 16; ++s) {
    const float ds = d * static_cast<float>(static_cast<std::int8_t>(sc[s]));
    for (int l = 0; l < 16; ++l) y[16 * s + l] = ds * static_cast<float>(q[16 * s + l] - 32);
  }
}

// ---- rows -------------------------------------------------------------------------------------

/// Decodes n elements of the plain types: little-endian F32, F16 or BF16 bits to float.
inline void decode_plain(GgmlType type, const std::uint8_t* src, Index n, float* dst) noexcept {
  switch (type) {
    case GgmlType::F32:
      for (Index i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(load_u32(src + 4 * i));
      break;
    case GgmlType::F16:
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
inline void decode_row(GgmlType type, const std::uint8_t* row, Index d, float* dst) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  const bool blocks = visit_block(type, [&](auto block) {
    using B = typename decltype(block)::type;
    for (Index i = 0; i < d / B::elements; ++i)
      decode_block(block, row + i * Index{sizeof(B)}, dst + i * B::elements);
  });
  if (!blocks) decode_plain(type, row, d, dst);
}

// ---- fused dot product -------------------------------------------------------------------------

/// Lanes of dot_row's accumulator.
inline constexpr int dot_lanes = 8;

/// Adds v[c] * x[c] for c in [0, n) into acc[c mod 8], c increasing, each product rounded to
/// float before its addition; n is a multiple of 8. The lanes live in a local array the compiler
/// keeps in one vector register.
inline void dot_accumulate8(const float* v, const float* x, Index n, float* acc) noexcept {
  float a[dot_lanes];
  for (int k = 0; k < dot_lanes; ++k) a[k] = acc[k];
  for (Index c = 0; c < n; c += dot_lanes) {
    float p[dot_lanes];
    for (int k = 0; k < dot_lanes; ++k) p[k] = v[c + k] * x[c + k];
    rounded(std::span<float>(p));
    for (int k = 0; k < dot_lanes; ++k) a[k] += p[k];
  }
  for (int k = 0; k < dot_lanes; ++k) acc[k] = a[k];
}

/// As dot_accumulate8 for any n: the last n mod 8 products go to lanes 0, 1, ...
inline void dot_accumulate(const float* v, const float* x, Index n, float* acc) noexcept {
  const Index whole = n - n % dot_lanes;
  dot_accumulate8(v, x, whole, acc);
  for (Index c = whole; c < n; ++c) acc[c - whole] += rounded(v[c] * x[c]);
}

/// Σ_c decoded[c] · x[c] over one row of d elements of `type`, decoding block by block into a
/// stack buffer (the row is never decoded whole) — the kernel of tied logits at N = 1.
///
/// Summation order, fixed so results do not depend on the compiler or the target: decoded[c] is
/// exactly decode_row's value; each product decoded[c] · x[c] is rounded to float; lane
/// k = c mod 8 accumulates the products of its columns in increasing c, in float, starting from
/// +0; the lanes are combined as ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
/// Preconditions: as decode_row, and x holds d floats.
[[nodiscard]] inline float dot_row(GgmlType type, const std::uint8_t* row, const float* x,
                                   Index d) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  float acc[dot_lanes] = {};
  alignas(64) float buf[BlockQ4_K::elements];
  const bool blocks = visit_block(type, [&](auto block) {
    using B = typename decltype(block)::type;
    for (Index i = 0; i < d / B::elements; ++i) {
      decode_block(block, row + i * Index{sizeof(B)}, buf);
      dot_accumulate8(buf, x + i * B::elements, B::elements, acc);
    }
  });
  if (!blocks) {
    const Index item = traits(type).block_bytes;
    for (Index c = 0; c < d; c += BlockQ4_K::elements) {
      const Index n = std::min<Index>(BlockQ4_K::elements, d - c);
      decode_plain(type, row + c * item, n, buf);
      dot_accumulate(buf, x + c, n, acc);
    }
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace ember::inline EMBER_ISA::detail::ggml
