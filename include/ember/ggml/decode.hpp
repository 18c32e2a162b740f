/// ggml's block decoders, bit-identical to its reference C code (dequantize_row_* of
/// ggml-quants.c), a row decoder over any type ember decodes, and the fused reference dot product
/// of an encoded row with a float vector.
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

/// The 32 codes of a Q4_0/Q4_1/Q5_0/Q5_1 block: element j the low nibble of qs[j], element j + 16
/// its high nibble, with bit j of qh as bit 4 of element j (Q5_0, Q5_1).
template <class B>
inline void nibble_codes(const std::uint8_t* b, int* q) noexcept {
  const std::uint8_t* qs = b + offsetof(B, qs);
  std::uint32_t qh = 0;
  if constexpr (has_fifth_bit<B>) qh = load_u32(b + offsetof(B, qh));
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10u);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10u);
  }
}

/// Q4_0 ... Q5_1: x = (q - code_offset) · d, or q · d + m (Q4_1, Q5_1).
template <class B>
requires is_nibble_block<B>
inline void decode_block(std::type_identity<B>, const std::uint8_t* b, float* y) noexcept {
  const float d = load_half(b + offsetof(B, d));
  int q[B::elements];
  nibble_codes<B>(b, q);
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
  const std::uint8_t* qs = b + offsetof(B, qs);
  for (int j = 0; j < B::elements; ++j)
    y[j] = static_cast<float>(static_cast<std::int8_t>(qs[j])) * d;
}

inline void decode_block(std::type_identity<BlockQ2_K>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ2_K;
  const std::uint8_t* scales = b + offsetof(B, scales);
  const std::uint8_t* q = b + offsetof(B, qs);
  const float d = load_half(b + offsetof(B, d));
  const float min = load_half(b + offsetof(B, dmin));
  int is = 0;
  for (int n = 0; n < B::elements; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const std::uint8_t sc = scales[is++];
        const float dl = d * static_cast<float>(sc & 0xF);
        const float ml = min * static_cast<float>(sc >> 4);
        const std::uint8_t* qq = q + static_cast<std::ptrdiff_t>(16 * half);
        float p[16];
        for (int l = 0; l < 16; ++l) p[l] = dl * static_cast<float>((qq[l] >> shift) & 3);
        store_plus(p, -ml, y);
        y += 16;
      }
    }
    q += 32;
  }
}

inline void decode_block(std::type_identity<BlockQ3_K>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ3_K;
  const std::uint8_t* hm = b + offsetof(B, hmask);
  const std::uint8_t* q = b + offsetof(B, qs);
  const float d_all = load_half(b + offsetof(B, d));
  int sc[16];
  q3_k_scales(b + offsetof(B, scales), sc);
  int is = 0;
  int bit = 0;  // ggml's mask m = 1 << bit
  for (int n = 0; n < B::elements; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
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
      ++bit;
    }
    q += 32;
  }
}

/// Q4_K and Q5_K: sub-blocks 2j and 2j + 1 hold the low and high nibbles of 32 bytes of qs (Q5_K:
/// plus bits 2j and 2j + 1 of qh as bit 4); x = (d · scale) · q - (dmin · min).
template <class B>
inline void decode_k4(const std::uint8_t* b, float* y) noexcept {
  const float d = load_half(b + offsetof(B, d));
  const float min = load_half(b + offsetof(B, dmin));
  const std::uint8_t* scales = b + offsetof(B, scales);
  const std::uint8_t* q = b + offsetof(B, qs);
  for (int j = 0; j < 8; ++j) {
    int sc = 0;
    int m = 0;
    scale_min_k4(j, scales, sc, m);
    const float dl = d * static_cast<float>(sc);
    const float ml = min * static_cast<float>(m);
    const int shift = 4 * (j % 2);
    float p[32];
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0xF;
      if constexpr (std::is_same_v<B, BlockQ5_K>)
        v += ((b[offsetof(B, qh) + static_cast<std::size_t>(l)] >> j) & 1) << 4;
      p[l] = dl * static_cast<float>(v);
    }
    store_plus(p, -ml, y);
    y += 32;
    if (j % 2 == 1) q += 32;
  }
}

inline void decode_block(std::type_identity<BlockQ4_K>, const std::uint8_t* b, float* y) noexcept {
  decode_k4<BlockQ4_K>(b, y);
}

inline void decode_block(std::type_identity<BlockQ5_K>, const std::uint8_t* b, float* y) noexcept {
  decode_k4<BlockQ5_K>(b, y);
}

inline void decode_block(std::type_identity<BlockQ6_K>, const std::uint8_t* b, float* y) noexcept {
  using B = BlockQ6_K;
  const std::uint8_t* ql = b + offsetof(B, ql);
  const std::uint8_t* qh = b + offsetof(B, qh);
  const std::uint8_t* sc = b + offsetof(B, scales);
  const float d = load_half(b + offsetof(B, d));
  for (int n = 0; n < B::elements; n += 128) {
    float ds[8];
    for (int k = 0; k < 8; ++k) ds[k] = d * static_cast<float>(static_cast<std::int8_t>(sc[k]));
    for (int half = 0; half < 2; ++half) {
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = ds[half] * static_cast<float>(q1);
        y[l + 32] = ds[half + 2] * static_cast<float>(q2);
        y[l + 64] = ds[half + 4] * static_cast<float>(q3);
        y[l + 96] = ds[half + 6] * static_cast<float>(q4);
      }
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
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
