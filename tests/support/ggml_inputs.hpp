/// The inputs of the ggml golden data (tests/data/ggml/): rows regenerated from a seed with
/// ember::Random, so only ggml's outputs are stored. The golden files were produced by feeding
/// exactly these rows to ggml's reference quantizers (see tests/data/ggml/README.md); change
/// nothing here without regenerating them.
// SPDX-License-Identifier: MIT
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "ember/random.hpp"

namespace ember_test {

/// Elements per input row: one K-quant super-block, eight 32-element blocks.
inline constexpr std::size_t ggml_row_len = 256;
/// Seed of every input row.
inline constexpr std::uint64_t ggml_seed = 20261201;
/// Seed of the random block bytes fed to the decoders.
inline constexpr std::uint64_t ggml_bytes_seed = 4242;
/// Blocks of random bytes per type.
inline constexpr std::size_t ggml_random_blocks = 64;

/// The 16 rows every type is quantized from, concatenated (16 x 256 floats). Each row is named in
/// the comment that builds it: they cover ordinary data, the edges of the fp16 range and the
/// special cases of ggml's quantizers (all-zero groups, constant groups, a maximum of negative
/// sign, exact rounding ties where roundf and nearest_int differ).
inline std::vector<float> ggml_common_rows() {
  ember::Random rng(ggml_seed);
  std::vector<float> x;
  x.reserve(16 * ggml_row_len);
  auto n01 = [&] { return static_cast<float>(rng.normal()); };
  // 0, 1: N(0, 1).
  for (std::size_t i = 0; i < 2 * ggml_row_len; ++i) x.push_back(n01());
  // 2: large, N(0, 1000^2).
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(1000.0f * n01());
  // 3: small, N(0, 1e-10): block scales become fp16 subnormals.
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(1e-5f * n01());
  // 4: constant 0.5.
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(0.5f);
  // 5: all zeros.
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(0.0f);
  // 6: runs of 8 zeros alternating with runs of 8 N(0, 1) values.
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back((i / 8) % 2 == 0 ? 0.0f : n01());
  // 7: negative only.
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(-std::fabs(n01()) - 0.1f);
  // 8: positive only.
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(std::fabs(n01()) + 0.1f);
  // 9: constant within each 16-element sub-block, a different N(0, 1) value per sub-block.
  for (std::size_t s = 0; s < ggml_row_len / 16; ++s) {
    const float v = n01();
    for (std::size_t i = 0; i < 16; ++i) x.push_back(v);
  }
  // 10: N(0, 1) with the largest magnitude of every 32-block at a negative value.
  for (std::size_t i = 0; i < ggml_row_len; ++i) {
    const float v = n01();
    x.push_back(i % 32 == 5 ? -4.0f - std::fabs(v) : v);
  }
  // 11: sparse: zero except every 37th element, N(0, 100).
  for (std::size_t i = 0; i < ggml_row_len; ++i) {
    const float v = n01();
    x.push_back(i % 37 == 3 ? 10.0f * v : 0.0f);
  }
  // 12: uniform in [-1, 1) with one outlier 1e4 at position 100.
  for (std::size_t i = 0; i < ggml_row_len; ++i) {
    const auto u = static_cast<float>(rng.uniform(-1.0, 1.0));
    x.push_back(i == 100 ? 1e4f : u);
  }
  // 13: tiny, N(0, 1e-60): every group is below ggml's "all zero" threshold (1e-15).
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(1e-30f * n01());
  // 14: exact ties: (i mod 9 - 4) / 2, so x / d lands on halves.
  for (std::size_t i = 0; i < ggml_row_len; ++i)
    x.push_back(static_cast<float>(static_cast<int>(i % 9) - 4) * 0.5f);
  // 15: near the top of the fp16 range, N(0, 2e4^2).
  for (std::size_t i = 0; i < ggml_row_len; ++i) x.push_back(2e4f * n01());
  return x;
}

/// One more row for F16 and BF16 only: IEEE special values and rounding edges, then random bit
/// patterns (NaNs with payloads included).
inline std::vector<float> ggml_special_row() {
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {
      std::numeric_limits<float>::quiet_NaN(),
      -std::numeric_limits<float>::quiet_NaN(),
      std::bit_cast<float>(std::uint32_t{0x7f800001}),  // signalling NaN
      std::bit_cast<float>(std::uint32_t{0xffa5a5a5}),  // NaN with a payload
      inf,
      -inf,
      0.0f,
      -0.0f,
      65504.0f,               // largest half
      65519.99f,              // rounds down to 65504
      65520.0f,               // tie: rounds to infinity in half
      -70000.0f,              // overflows half
      5.9604645e-8f,          // smallest half subnormal
      2.9802322e-8f,          // half of it: a tie, rounds to 0
      4.4703484e-8f,          // 1.5 x the smallest subnormal
      6.1035156e-5f,          // smallest normal half
      6.0975552e-5f,          // largest subnormal half
      1.0f + 0x1.0p-11f,      // half tie, rounds to even (1.0)
      1.0f + 3 * 0x1.0p-11f,  // half tie, rounds to even (up)
      1.0f + 0x1.0p-8f,       // bfloat16 tie, rounds to even (1.0)
      1.0f + 3 * 0x1.0p-8f,   // bfloat16 tie, rounds up
      std::numeric_limits<float>::max(),
      -std::numeric_limits<float>::max(),
      3.3961775e38f,  // rounds to infinity in bfloat16
      std::numeric_limits<float>::denorm_min(),
      1e-40f,  // float subnormal
      -1e-45f,
      1.0f,
      -2.5f,
      0.1f,
      1.0f / 3.0f,
      1e10f,
  };
  ember::Random rng(ggml_seed + 1);
  while (x.size() < ggml_row_len) {
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng.next_u64() >> 32)));
  }
  return x;
}

/// FNV-1a (64-bit) of the bit patterns of n floats: how the golden files record decoded rows.
inline std::uint64_t ggml_fnv1a(const float* v, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    const auto bits = std::bit_cast<std::uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) {
      h ^= (bits >> (8 * b)) & 0xffu;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

/// `blocks` blocks of random bytes for a type of `block_bytes` bytes per block. The 16-bit scale
/// fields at the byte offsets `half_fields` are kept finite (an all-ones exponent loses its top
/// bit), so decoding never meets two NaN operands, whose propagation compilers may reorder.
inline std::vector<std::uint8_t> ggml_random_block_bytes(
    std::size_t blocks, std::size_t block_bytes, const std::vector<std::size_t>& half_fields) {
  ember::Random rng(ggml_bytes_seed + block_bytes);
  std::vector<std::uint8_t> b(blocks * block_bytes);
  for (auto& v : b) v = static_cast<std::uint8_t>(rng.next_u64() >> 56);
  for (std::size_t k = 0; k < blocks; ++k) {
    for (const std::size_t off : half_fields) {
      std::uint8_t& hi = b[k * block_bytes + off + 1];
      if ((hi & 0x7c) == 0x7c) hi = static_cast<std::uint8_t>(hi & ~0x40);
    }
  }
  return b;
}

}  // namespace ember_test
