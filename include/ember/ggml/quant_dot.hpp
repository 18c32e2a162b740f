/// Tied logits of ggml rows with quantized hidden rows, as ggml computes a matrix product: each
/// hidden row rounded once to the weight type's dot type (Q8_0, Q8_1, Q8_K, F16 or BF16, by
/// ggml's reference quantizers) and the products taken in integers (the block types) or in float
/// (F16, BF16), in the one order of detail/qdot.hpp whatever the instruction set. The AVX2 kernels
/// are in ggml/quant_dot_avx2.hpp, the AVX-512 VNNI ones in ggml/quant_dot_avx512vnni.hpp; the
/// portable ones are here.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/float_dots.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/qdot.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/decode.hpp"
#include "ember/ggml/hidden.hpp"
#include "ember/ggml/isa.hpp"
#include "ember/ggml/quant_dot_avx2.hpp"
#include "ember/ggml/quant_dot_avx512vnni.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

// ---- the hidden rows ----------------------------------------------------------------------------

/// Rounds hidden rows h[n, d] (row j at h + j · h_stride; finite) for dot products with rows of
/// `weight`: to its dot type by ggml's reference quantizers, in the layout the kernels read.
/// Precondition: decodes(weight), weight != F32, d a multiple of its block size.
inline QuantizedHidden quantize_hidden(GgmlType weight, const float* h, Index h_stride, Index n,
                                       Index d) {
  using Layout = QuantizedHidden::Layout;
  const GgmlType dot = dot_type(weight);
  QuantizedHidden q;
  if (dot == GgmlType::F16) return round_hidden(Fp16Element{}, h, h_stride, n, d);
  if (dot == GgmlType::BF16) return round_hidden(Bf16Element{}, h, h_stride, n, d);
  const Index bytes = row_bytes(dot, d);
  std::vector<std::uint8_t> blocks(static_cast<std::size_t>(bytes));
  if (dot == GgmlType::Q8_K) {
    using B = BlockQ8_K;
    q.reset(Layout::super_blocks, n, d, false);
    for (Index j = 0; j < n; ++j) {
      quantize_dot_type(dot, h + j * h_stride, d, blocks.data());
      for (Index s = 0; s < q.groups; ++s) {
        const std::uint8_t* b = blocks.data() + s * Index{sizeof(B)};
        std::memcpy(q.group_codes(j, s), b + offsetof(B, qs), B::elements);
        std::int32_t* bsum = q.group_isum(j, s);
        for (std::size_t l = 0; l < 16; ++l) {
          bsum[l] = static_cast<std::int16_t>(load_u16(b + offsetof(B, bsums) + 2 * l));
        }
        std::memcpy(q.super_scale(j, s), b + offsetof(B, d), sizeof(float));
      }
    }
    return q;
  }
  // Q8_0 and Q8_1: one unit per block.
  const bool with_sum = dot == GgmlType::Q8_1;
  q.reset(Layout::units, n, d, with_sum);
  const Index units = d / qdot_unit;
  for (Index j = 0; j < n; ++j) {
    quantize_dot_type(dot, h + j * h_stride, d, blocks.data());
    for (Index u = 0; u < units; ++u) {
      const std::uint8_t* b = blocks.data() + u * traits(dot).block_bytes;
      const std::uint8_t* qs = b + (with_sum ? offsetof(BlockQ8_1, qs) : offsetof(BlockQ8_0, qs));
      put_unit(q, j, u, qs, load_half(b));
      if (with_sum) {
        q.group_extra(j, u / qdot_lanes)[u % qdot_lanes] = load_half(b + offsetof(BlockQ8_1, s));
      }
    }
  }
  return q;
}

// ---- the portable kernels: one block type's units or super-blocks ----------------------------

/// Unit u of a row of 32-element blocks: codes, scale and offset.
template <class B>
inline void weight_unit(const std::uint8_t* row, Index u, WeightUnit& wu) noexcept {
  const std::uint8_t* b = row + u * Index{sizeof(B)};
  wu.dw = load_half(b + offsetof(B, d));
  wu.mw = 0.0f;
  block_codes<B>(b, wu.w);
  if constexpr (std::is_same_v<B, BlockQ8_0>) {
    for (std::uint8_t& code : wu.w) code = static_cast<std::uint8_t>(code ^ 0x80u);
  }
  if constexpr (has_offset_term<B>) wu.mw = load_half(b + offsetof(B, m));
}

/// Super-block s of a row of K-quants: codes, sub-block scales and mins, d and dmin.
template <class B>
inline void weight_super_block(const std::uint8_t* row, Index s, WeightSuperBlock& wb) noexcept {
  const std::uint8_t* b = row + s * Index{sizeof(B)};
  wb.d = load_half(b + offsetof(B, d));
  wb.dmin = 0.0f;
  if constexpr (has_mins<B>) wb.dmin = load_half(b + offsetof(B, dmin));
  block_codes<B>(b, wb.w);
  if constexpr (std::is_same_v<B, BlockQ2_K>) {
    for (std::size_t l = 0; l < 16; ++l) {
      wb.sc[l] = b[offsetof(B, scales) + l] & 0xF;
      wb.m[l] = b[offsetof(B, scales) + l] >> 4;
    }
  } else if constexpr (std::is_same_v<B, BlockQ3_K>) {
    int sc[16];
    q3_k_scales(b + offsetof(B, scales), sc);
    for (std::size_t l = 0; l < 16; ++l) wb.sc[l] = sc[l] - 32;
  } else if constexpr (std::is_same_v<B, BlockQ6_K>) {
    for (std::size_t l = 0; l < 16; ++l) {
      // The byte is an int8 scale: (u ^ 0x80) - 128 reads it as signed without a char type.
      wb.sc[l] = static_cast<std::int32_t>(b[offsetof(B, scales) + l] ^ 0x80u) - 128;
    }
  } else {
    for (int l = 0; l < 16; ++l) {
      int sc = 0;
      int m = 0;
      scale_min_k4(l / 2, b + offsetof(B, scales), sc, m);
      wb.sc[l] = sc;
      wb.m[l] = m;
    }
  }
}

namespace portable {

/// The portable kernel of one block type (the reference of the vector kernels).
template <class B>
void qdot_block_rows(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                     const QuantizedHidden& h, Index j0, Index nj, float* out, Index out_stride) {
  if constexpr (B::elements == 32) {
    qdot_units_portable<code_offset<B>, has_offset_term<B>>(
        [](const std::uint8_t* row, Index u, WeightUnit& wu) { weight_unit<B>(row, u, wu); }, rows,
        row_stride, count, d / 32, h, j0, nj, out, out_stride);
  } else {
    qdot_super_portable<code_offset<B>, has_mins<B>>(
        [](const std::uint8_t* row, Index s, WeightSuperBlock& wb) {
          weight_super_block<B>(row, s, wb);
        },
        rows, row_stride, count, d / 256, h, j0, nj, out, out_stride);
  }
}

}  // namespace portable

/// The vector kernels of block type B for nj <= max_pass_rows hidden rows (arguments as qdot_rows),
/// of the instruction set whose tag is `isa` (avx512vnni::Isa, avx2::Isa: found by its namespace).
template <class B, class Isa>
void simd_block_rows(Isa isa, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                     const QuantizedHidden& h, Index j0, Index nj, float* out, Index out_stride,
                     Index parts = default_row_parts()) {
  constexpr bool extra = has_offset_term<B> || has_mins<B>;
  visit_pass_rows(nj, [&](auto n) {
    constexpr Index N = decltype(n)::value;
    if constexpr (B::elements == 32) {
      block_units_rows<B, code_offset<B>, extra, N>(isa, rows, row_stride, count, d, h, j0, out,
                                                    out_stride, parts);
    } else {
      super_rows<B, code_offset<B>, extra, N>(isa, rows, row_stride, count, d, h, j0, out,
                                              out_stride, parts);
    }
  });
}

#if EMBER_DETAIL_GGML_AVX512VNNI
/// The kernel of block type B for nj <= max_pass_rows hidden rows (arguments as qdot_rows): the
/// build's widest instruction set's.
template <class B>
void qdot_block_rows(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                     const QuantizedHidden& h, Index j0, Index nj, float* out, Index out_stride,
                     Index parts) {
  simd_block_rows<B>(avx512vnni::Isa{}, rows, row_stride, count, d, h, j0, nj, out, out_stride,
                     parts);
}
#elif EMBER_DETAIL_GGML_AVX2
template <class B>
void qdot_block_rows(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                     const QuantizedHidden& h, Index j0, Index nj, float* out, Index out_stride,
                     Index parts) {
  simd_block_rows<B>(avx2::Isa{}, rows, row_stride, count, d, h, j0, nj, out, out_stride, parts);
}
#else
/// The portable kernel (its rows in order: it takes no parts).
template <class B>
void qdot_block_rows(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                     const QuantizedHidden& h, Index j0, Index nj, float* out, Index out_stride,
                     Index /*parts*/) {
  portable::qdot_block_rows<B>(rows, row_stride, count, d, h, j0, nj, out, out_stride);
}
#endif

/// out[(j - j0)·out_stride + r] = the dot product of encoded row r (of the `count` rows at `rows`,
/// row_stride bytes apart) with hidden row j of `h` (quantized for `type` by quantize_hidden),
/// for j in [j0, j0 + nj), nj <= max_pass_rows, in the order of detail/qdot.hpp (F16, BF16:
/// float_dots' exact-product order): the same bits from every kernel, whatever `parts` (the
/// contiguous parts the vector kernels take the rows in, a row of each in turn:
/// detail::for_rows_in_parts). Preconditions: as quantize_hidden; parts >= 1.
inline void qdot_rows(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count,
                      Index d, const QuantizedHidden& h, Index j0, Index nj, float* out,
                      Index out_stride, Index parts = default_row_parts()) {
  EMBER_ASSERT(decodes(type) && type != GgmlType::F32 && d % traits(type).block_size == 0);
  EMBER_ASSERT(nj >= 1 && nj <= max_pass_rows && j0 + nj <= h.rows);
  if (type == GgmlType::F16 || type == GgmlType::BF16) {
    if (type == GgmlType::F16) {
      rounded_row_dots(Fp16Element{}, rows, row_stride, count, d, h, j0, nj, out, out_stride);
    } else {
      rounded_row_dots(Bf16Element{}, rows, row_stride, count, d, h, j0, nj, out, out_stride);
    }
    return;
  }
  visit_block(type, [&](auto block) {
    using B = typename decltype(block)::type;
    qdot_block_rows<B>(rows, row_stride, count, d, h, j0, nj, out, out_stride, parts);
  });
}

}  // namespace ember::inline EMBER_ISA::detail::ggml
