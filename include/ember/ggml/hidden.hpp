/// ggml's dot-product types: which type ggml rounds the hidden rows of a product with a weight
/// type to (ggml-cpu's vec_dot_type), and ggml's reference quantizers of Q8_0, Q8_1 and Q8_K
/// (quantize_row_q8_0_ref, quantize_row_q8_1_ref, quantize_row_q8_K_ref), bit for bit.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ember/config.hpp"
#include "ember/ggml/blocks.hpp"
#include "ember/ggml/type.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail::ggml {

/// The type ggml-cpu rounds a hidden row to before its dot products with rows of `weight`
/// (type_traits_cpu[weight].vec_dot_type): Q8_0 for Q4_0, Q5_0 and Q8_0, Q8_1 for Q4_1 and Q5_1,
/// Q8_K for Q2_K ... Q6_K; F16, BF16 and F32 for themselves.
/// Precondition: decodes(weight).
[[nodiscard]] constexpr GgmlType dot_type(GgmlType weight) noexcept {
  switch (weight) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return GgmlType::Q8_K;
    default:
      return weight;
  }
}

/// quantize_row_q8_0_ref (with_sum false) and quantize_row_q8_1_ref (with_sum true) of one block
/// of 32 floats: d = amax / 127 stored as fp16, q = roundf(x / d) with the unrounded d (ties away
/// from zero); Q8_1 also stores s = fp16(d · Σ q). Precondition: finite x.
template <bool WithSum>
inline void quantize_q8_block(const float* x, std::uint8_t* b) noexcept {
  using B = std::conditional_t<WithSum, BlockQ8_1, BlockQ8_0>;
  float amax = 0.0f;
  for (int j = 0; j < B::elements; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(b + offsetof(B, d), fp32_to_fp16(d));
  int sum = 0;
  for (int j = 0; j < B::elements; ++j) {
    const std::int8_t q = to_int8(std::round(x[j] * id));
    b[offsetof(B, qs) + static_cast<std::size_t>(j)] = static_cast<std::uint8_t>(q);
    sum += q;
  }
  if constexpr (WithSum) store_u16(b + offsetof(B, s), fp32_to_fp16(static_cast<float>(sum) * d));
}

/// quantize_row_q8_K_ref of one super-block of 256 floats: iscale = -127 / max (max the value of
/// largest magnitude), q = min(127, nearest_int(iscale · x)), d = 1 / iscale (a float), bsums the
/// sums of q over each 16. An all-zero block gives d = 0 and zero codes and sums (ggml leaves its
/// sums as they were). Precondition: finite x.
inline void quantize_q8_k_block(const float* x, std::uint8_t* b) noexcept {
  using B = BlockQ8_K;
  const auto [max, amax] = signed_absmax(x, B::elements);
  std::memset(b, 0, sizeof(B));
  if (amax == 0.0f) return;
  const float iscale = -127.f / max;
  std::int8_t q[B::elements] = {};
  for (int j = 0; j < B::elements; ++j)
    q[j] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * x[j])));
  std::memcpy(b + offsetof(B, qs), q, sizeof q);
  for (int s = 0; s < B::elements / 16; ++s) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += q[16 * s + l];
    const auto v = static_cast<std::uint16_t>(static_cast<std::int16_t>(sum));
    store_u16(b + offsetof(B, bsums) + 2 * static_cast<std::size_t>(s), v);
  }
  const float d = 1 / iscale;
  std::memcpy(b + offsetof(B, d), &d, sizeof d);
}

/// Rounds n floats (a multiple of the block) to `type` (Q8_0, Q8_1 or Q8_K) as ggml's reference
/// quantizers do, into ggml's block bytes (row_bytes(type, n) of them).
/// Preconditions: finite x; `type` one of the three.
inline void quantize_dot_type(GgmlType type, const float* x, Index n, std::uint8_t* out) {
  const Index block = traits(type).block_size;
  const Index bytes = traits(type).block_bytes;
  EMBER_ASSERT(block > 1 && n % block == 0);
  for (Index i = 0; i < n / block; ++i) {
    const float* xi = x + i * block;
    std::uint8_t* bi = out + i * bytes;
    switch (type) {
      case GgmlType::Q8_0:
        quantize_q8_block<false>(xi, bi);
        break;
      case GgmlType::Q8_1:
        quantize_q8_block<true>(xi, bi);
        break;
      default:
        EMBER_ASSERT(type == GgmlType::Q8_K);
        quantize_q8_k_block(xi, bi);
        break;
    }
  }
}

}  // namespace ember::inline EMBER_ISA::detail::ggml
