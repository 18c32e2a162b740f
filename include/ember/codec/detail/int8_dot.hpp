/// LogitsMode::quantized_hidden for FBGEMM's 8-bit rows (codec::Int8Rowwise): the hidden rows
/// rounded in blocks of 32 as ggml's Q8_1 rounds them, and integer dot products of the row codes
/// with them, in the units order of detail/qdot.hpp (the same bits on every instruction set).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/qdot.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/ggml/hidden.hpp"
#include "ember/ggml/isa.hpp"
#include "ember/ggml/quant_dot.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// Hidden rows h[n, d] (finite) for dot products with int8 rows of width d: each block of 32
/// values (the last zero-padded) gets ggml's Q8_1 codes and scale (quantize_row_q8_1_ref's
/// qs and d), and the offset term y = float(Σ q) · d of the block in float (Q8_1 stores it in
/// fp16: an int8 row's bias multiplies it, and its rounding would be the largest error).
[[nodiscard]] inline QuantizedHidden int8_rows_hidden(const float* h, Index h_stride, Index n,
                                                      Index d) {
  const Index units = (d + qdot_unit - 1) / qdot_unit;
  QuantizedHidden q;
  q.reset(QuantizedHidden::Layout::units, n, units * qdot_unit, true);
  q.d = d;
  for (Index j = 0; j < n; ++j) {
    const float* x = h + j * h_stride;
    for (Index u = 0; u < units; ++u) {
      float block[qdot_unit] = {};
      const Index len = std::min(qdot_unit, d - u * qdot_unit);
      std::copy_n(x + u * qdot_unit, len, block);
      std::uint8_t b[sizeof(ggml::BlockQ8_1)];
      ggml::quantize_q8_block<true>(block, b);
      const float scale = ggml::load_half(b + offsetof(ggml::BlockQ8_1, d));
      const std::int32_t sum = put_unit(q, j, u, b + offsetof(ggml::BlockQ8_1, qs), scale);
      q.group_extra(j, u / qdot_lanes)[u % qdot_lanes] = static_cast<float>(sum) * scale;
    }
  }
  return q;
}

/// Bytes after the d codes of a stored int8 row: its float scale, then its float bias.
inline constexpr Index int8_row_overhead = 2 * Index{sizeof(float)};

/// The scale and bias of a stored int8 row of d codes.
inline void int8_row_params(const std::uint8_t* row, Index d, float& scale, float& bias) noexcept {
  std::memcpy(&scale, row + d, sizeof scale);
  std::memcpy(&bias, row + d + Index{sizeof(float)}, sizeof bias);
}

// int8_rows_qdot's kernels, one per instruction set: units of 32 codes, dw = the row's scale, mw =
// its bias (arguments as int8_rows_qdot).

namespace portable {

inline void int8_rows_qdot(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                           const QuantizedHidden& q, Index j0, Index nj, float* out,
                           Index out_stride, Index /*parts*/) {
  qdot_units_portable<0, true>(
      [d](const std::uint8_t* row, Index u, WeightUnit& wu) {
        const Index begin = u * qdot_unit;
        for (Index e = 0; e < qdot_unit; ++e) wu.w[e] = begin + e < d ? row[begin + e] : 0;
        int8_row_params(row, d, wu.dw, wu.mw);
      },
      rows, row_stride, count, (d + qdot_unit - 1) / qdot_unit, q, j0, nj, out, out_stride);
}

}  // namespace portable

#if EMBER_DETAIL_GGML_AVX2
namespace avx2 {

inline void int8_rows_qdot(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                           const QuantizedHidden& q, Index j0, Index nj, float* out,
                           Index out_stride, Index parts) {
  const Index units = (d + qdot_unit - 1) / qdot_unit;
  visit_pass_rows(nj, [&](auto rows_in_pass) {
    constexpr Index N = decltype(rows_in_pass)::value;
    // Codes minus 128 through the sign trick, corrected by +128 · Σ hidden codes.
    ggml::avx2::units_rows<-128, true, true, N>(
        [d](const std::uint8_t* row, Index first, Index active, ggml::avx2::Units& t) {
          const Index begin = first * qdot_unit;
          ggml::avx2::load_contiguous_units(row + begin, std::min(d - begin, 8 * qdot_unit), t.w);
          float scale = 0;
          float bias = 0;
          int8_row_params(row, d, scale, bias);
          t.dw = _mm256_set1_ps(scale);
          t.mw = _mm256_set1_ps(bias);
          static_cast<void>(active);
        },
        rows, row_stride, d + int8_row_overhead, count, units, q, j0, out, out_stride, parts);
  });
}

}  // namespace avx2
#endif

#if EMBER_DETAIL_GGML_AVX512VNNI
namespace avx512vnni {

inline void int8_rows_qdot(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                           const QuantizedHidden& q, Index j0, Index nj, float* out,
                           Index out_stride, Index parts) {
  const Index units = (d + qdot_unit - 1) / qdot_unit;
  visit_pass_rows(nj, [&](auto rows_in_pass) {
    constexpr Index N = decltype(rows_in_pass)::value;
    ggml::avx512vnni::units_rows<0, true, N>(
        [d](const std::uint8_t* row, Index g, Index active, ggml::avx512vnni::Units& t) {
          ggml::avx512vnni::load_contiguous_units(row + g * qdot_group,
                                                  std::min(d - g * qdot_group, qdot_group), t.w);
          float scale = 0;
          float bias = 0;
          int8_row_params(row, d, scale, bias);
          t.dw = _mm512_set1_ps(scale);
          t.mw = _mm512_set1_ps(bias);
          static_cast<void>(active);
        },
        rows, row_stride, d + int8_row_overhead, count, units, q, j0, out, out_stride, parts);
  });
}

}  // namespace avx512vnni
namespace int8_dot_isa = avx512vnni;
#elif EMBER_DETAIL_GGML_AVX2
namespace int8_dot_isa = avx2;
#else
namespace int8_dot_isa = portable;
#endif

/// out[(j - j0)·out_stride + r] = the dot product of int8 row r of the `count` at `rows`
/// (row_stride bytes apart, d codes + scale + bias each) with hidden row j of q
/// (int8_rows_hidden), nj <= max_pass_rows, in the units order of detail/qdot.hpp: the build's
/// widest kernel, the same bits from each, whatever `parts` (detail::for_rows_in_parts).
inline void int8_rows_qdot(const std::uint8_t* rows, Index row_stride, Index count, Index d,
                           const QuantizedHidden& q, Index j0, Index nj, float* out,
                           Index out_stride, Index parts = default_row_parts()) {
  EMBER_ASSERT(nj >= 1 && nj <= max_pass_rows && j0 + nj <= q.rows);
  int8_dot_isa::int8_rows_qdot(rows, row_stride, count, d, q, j0, nj, out, out_stride, parts);
}

}  // namespace ember::inline EMBER_ISA::detail
