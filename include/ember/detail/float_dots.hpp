/// Float dot products of stored rows with up to 8 hidden rows, each stored row read once: the
/// small-n tied logits of plain float tables (stream_dots) and of half / bfloat16 rows with hidden
/// rows rounded to the same type (exact_product_dots, whose products are exact, so every build
/// gives the same bits). The kernel of this build's instruction set is picked here, once.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <type_traits>

#include "ember/config.hpp"
#include "ember/detail/float_dots_avx2.hpp"
#include "ember/detail/float_dots_avx512.hpp"
#include "ember/detail/float_dots_portable.hpp"
#include "ember/detail/half.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/detail/quantized_hidden.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// out[j·out_stride + r] = Σ_c w_rc · v_jc for the `count` stored rows at `rows` (row_stride
/// bytes apart, elements read through E) and nj <= 8 float rows v (v_stride apart), each stored
/// row read once: lane c mod 32 accumulates w · v in increasing c, fused or not, and the lanes
/// are summed by tree32. Where every product w · v is exact in float (half or bfloat16 values
/// times values of the same type) the result is the same bits in every build; otherwise the
/// build's FMA makes the difference (within d · 2⁻²⁴ · Σ |w · v| of the exact sum either way).
/// Signature: float_row_dots(E e, const std::uint8_t* rows, Index row_stride, Index count,
/// Index d, const float* v, Index v_stride, Index nj, float* out, Index out_stride).
#if EMBER_DETAIL_FLOAT_DOTS_AVX2
#if EMBER_DETAIL_FLOAT_DOTS_AVX512
namespace float_dots_isa = avx512;
#else
namespace float_dots_isa = avx2;
#endif
template <class E>
void float_row_dots(E e, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                    const float* v, Index v_stride, Index nj, float* out, Index out_stride) {
  EMBER_ASSERT(nj >= 1 && nj <= max_pass_rows);
  visit_pass_rows(nj, [&](auto n) {
    float_dots_isa::dots_n<decltype(n)::value>(e, rows, row_stride, count, d, v, v_stride, out,
                                               out_stride);
  });
}
#else
using portable::float_row_dots;
#endif

/// Hidden rows h[n, d] (row j at h + j · h_stride) rounded to half (E = Fp16Element) or bfloat16
/// (Bf16Element) to nearest even, as ggml rounds the hidden rows of an F16 or BF16 product, kept
/// as floats for float_row_dots.
template <class E>
[[nodiscard]] QuantizedHidden round_hidden(E, const float* h, Index h_stride, Index n, Index d) {
  static_assert(std::is_same_v<E, Fp16Element> || std::is_same_v<E, Bf16Element>);
  QuantizedHidden q;
  q.reset(QuantizedHidden::Layout::values, n, d, false);
  for (Index j = 0; j < n; ++j) {
    const float* x = h + j * h_stride;
    float* v = q.row_values(j);
    for (Index c = 0; c < d; ++c) {
      v[c] = std::is_same_v<E, Fp16Element> ? fp16_to_fp32(fp32_to_fp16(x[c]))
                                            : bf16_to_fp32(fp32_to_bf16(x[c]));
    }
  }
  return q;
}

/// float_row_dots of rows of E with rounded hidden rows j0 .. j0 + nj of q.
template <class E>
void rounded_row_dots(E e, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                      const QuantizedHidden& q, Index j0, Index nj, float* out, Index out_stride) {
  float_row_dots(e, rows, row_stride, count, d, q.row_values(j0), q.d, nj, out, out_stride);
}

}  // namespace ember::inline EMBER_ISA::detail
