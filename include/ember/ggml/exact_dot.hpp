/// The exact dot of encoded ggml rows with float vectors (tied logits, exact mode): each row read
/// once per pass of up to max_pass_rows vectors and never decoded whole. The AVX2 kernel is in
/// ggml/exact_dot_avx2.hpp, its 16-lane sink in ggml/exact_dot_avx512.hpp; the portable one is
/// ggml/decode.hpp's dot_row, row by row.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "ember/config.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/ggml/decode.hpp"
#include "ember/ggml/exact_dot_avx2.hpp"
#include "ember/ggml/exact_dot_avx512.hpp"
#include "ember/ggml/isa.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

namespace portable {

/// dot_rows's pass of g <= max_pass_rows vectors by the reference dot_row, a row at a time.
inline void dot_rows_pass(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count,
                          Index d, const float* h, Index h_stride, Index g, float* out,
                          Index out_stride) {
  for (Index r = 0; r < count; ++r) {
    for (Index j = 0; j < g; ++j) {
      out[j * out_stride + r] = dot_row(type, rows + r * row_stride, h + j * h_stride, d);
    }
  }
}

}  // namespace portable

#if EMBER_DETAIL_GGML_AVX2
#if EMBER_DETAIL_GGML_AVX512
/// The sink of the exact dot's row loops: 16 lanes where the build has AVX-512F.
namespace exact_isa = avx512;
#else
namespace exact_isa = avx2;
#endif

namespace avx2 {

/// dot_rows's pass of g <= max_pass_rows vectors: the row loops of this file's instruction set
/// over the sink of the build's widest one (exact_isa::Dots).
inline void dot_rows_pass(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count,
                          Index d, const float* h, Index h_stride, Index g, float* out,
                          Index out_stride) {
  visit_pass_rows(g, [&](auto n_rows) {
    constexpr auto N = static_cast<std::size_t>(decltype(n_rows)::value);
    dot_rows_n<exact_isa::Dots<N>>(type, rows, row_stride, count, d, h, h_stride, out, out_stride);
  });
}

}  // namespace avx2

namespace dot_rows_isa = avx2;
#else
namespace dot_rows_isa = portable;
#endif

/// out[j·out_stride + r] = Σ_c decoded(row r)[c] · h[j·h_stride + c] for the `count` encoded rows
/// starting at `rows` (row_stride bytes apart) and the n vectors of h, each row decoded once per
/// group of max_pass_rows vectors and never stored whole, in order. The kernel of
/// tied logits for a few hidden rows (exact mode).
///
/// The decoded values are decode_row's exactly; their products with h are summed in float in an
/// order fixed by the build (with AVX2: 8-lane vector accumulators, 16-lane with AVX-512F,
/// products fused into the adds where the build has FMA; else dot_row's order), the same for
/// every row, call and thread count. Against the dot product of the decoded row computed in
/// double the error is that of a float sum of d products: at most about d · 2⁻²⁴ · Σ_c
/// |decoded[c] · h[c]|.
/// Preconditions: as decode_row; h holds n rows of d floats, out n rows of `count`.
inline void dot_rows(GgmlType type, const std::uint8_t* rows, Index row_stride, Index count,
                     Index d, const float* h, Index h_stride, Index n, float* out,
                     Index out_stride) {
  EMBER_ASSERT(decodes(type) && d % traits(type).block_size == 0);
  for (Index j0 = 0; j0 < n; j0 += max_pass_rows) {
    dot_rows_isa::dot_rows_pass(type, rows, row_stride, count, d, h + j0 * h_stride, h_stride,
                                std::min(max_pass_rows, n - j0), out + j0 * out_stride, out_stride);
  }
}

}  // namespace ember::inline EMBER_ISA::detail::ggml
