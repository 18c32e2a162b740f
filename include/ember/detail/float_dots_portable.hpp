/// The stored-row element types of the float dot kernels (half, bfloat16, float), the sum of
/// their 32 lanes, and the portable kernel: the reference the instruction-set kernels
/// (float_dots_avx2.hpp, float_dots_avx512.hpp) are tested against.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstdint>
#include <cstring>

#include "ember/config.hpp"
#include "ember/detail/half.hpp"
#include "ember/detail/pass_rows.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

inline constexpr int dots_lanes = 32;

/// A stored row of IEEE half bits (little-endian) as floats.
struct Fp16Element {
  [[nodiscard]] static float at(const std::uint8_t* row, Index c) noexcept {
    return fp16_to_fp32(load_u16(row + 2 * c));  // exact: every half is a float
  }
  static constexpr Index bytes = 2;
};

/// A stored row of bfloat16 bits (little-endian) as floats.
struct Bf16Element {
  [[nodiscard]] static float at(const std::uint8_t* row, Index c) noexcept {
    return bf16_to_fp32(load_u16(row + 2 * c));
  }
  static constexpr Index bytes = 2;
};

/// A stored row of floats.
struct F32Element {
  [[nodiscard]] static float at(const std::uint8_t* row, Index c) noexcept {
    float v;
    std::memcpy(&v, row + 4 * c, sizeof v);
    return v;
  }
  static constexpr Index bytes = 4;
};

/// The sum of 32 lanes: t16[i] = a[i] + a[i + 16], then the tree of detail/qdot.hpp over t16.
[[nodiscard]] inline float tree32(const float* a) noexcept {
  float t16[16];
  for (int i = 0; i < 16; ++i) t16[i] = a[i] + a[i + 16];
  float t8[8];
  for (int i = 0; i < 8; ++i) t8[i] = t16[i] + t16[i + 8];
  float t4[4];
  for (int i = 0; i < 4; ++i) t4[i] = t8[i] + t8[i + 4];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

namespace portable {

/// float_row_dots in plain loops: lane c mod 32 accumulates w · v in increasing c (fused or not,
/// as the build contracts), then tree32.
template <class E>
void float_row_dots(E /*e*/, const std::uint8_t* rows, Index row_stride, Index count, Index d,
                    const float* v, Index v_stride, Index nj, float* out, Index out_stride) {
  EMBER_ASSERT(nj >= 1 && nj <= max_pass_rows);
  for (Index r = 0; r < count; ++r) {
    const std::uint8_t* row = rows + r * row_stride;
    for (Index j = 0; j < nj; ++j) {
      float lanes[dots_lanes] = {};
      const float* x = v + j * v_stride;
      for (Index c = 0; c < d; ++c) lanes[c % dots_lanes] += E::at(row, c) * x[c];
      out[j * out_stride + r] = tree32(lanes);
    }
  }
}

}  // namespace portable

}  // namespace ember::inline EMBER_ISA::detail
