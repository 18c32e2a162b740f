// References for the 8-bit row-wise tables (quantized.hpp): the value FBGEMM's fused layout stands
// for, written out element by element, and the overlap of two nearest-neighbour lists.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include <ember/types.hpp>

namespace ember_test {

using ember::Index;

/// The value FBGEMM's fused 8-bit row-wise layout stands for at (r, c): row bytes are d codes,
/// then a float scale and a float bias.
inline float fused_value(std::span<const std::uint8_t> bytes, Index d, Index r, Index c) {
  const std::uint8_t* row = bytes.data() + r * (d + 8);
  float scale = 0, bias = 0;
  std::memcpy(&scale, row + d, 4);
  std::memcpy(&bias, row + d + 4, 4);
  return static_cast<float>(row[c]) * scale + bias;
}

/// Number of ids shared by two answer lists (the overlap of two top-k lists).
template <class A, class B>
std::size_t overlap(const A& a, const B& b) {
  std::size_t n = 0;
  for (const auto& x : a)
    for (const auto& y : b)
      if (x.id == y.id) ++n;
  return n;
}

}  // namespace ember_test
