// Slow references for the 16-bit tables and views (reduced.hpp, reduced_view.hpp): a lookup
// written element by element from the stored bits (decoded without Eigen's conversion), and the
// byte range a pointer must lie in to be a zero-copy view of a mapped file.
// SPDX-License-Identifier: MIT
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include <ember/types.hpp>

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::RowVector;
using ember::TokenId;

/// The float value of a 16-bit storage element, decoded from its bits by the IEEE rules (half)
/// or as the top half of a float (bfloat16): independent of the kernels' conversion.
template <class S>
float decode_16(S x) {
  std::uint16_t bits = 0;
  std::memcpy(&bits, &x, 2);
  if constexpr (std::is_same_v<S, Eigen::bfloat16>) {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  } else {
    const int sign = (bits >> 15) != 0 ? -1 : 1;
    const int exponent = (bits >> 10) & 0x1F;
    const int mantissa = bits & 0x3FF;
    if (exponent == 0) return static_cast<float>(sign * std::ldexp(mantissa, -24));
    if (exponent == 31) return mantissa != 0 ? NAN : sign < 0 ? -INFINITY : INFINITY;
    return static_cast<float>(sign * std::ldexp(1024 + mantissa, exponent - 25));
  }
}

/// out[i, c] = decode(table[ids[i], c]) · √d (+ pe[offset + i % seq_len, c] when pe is given),
/// one element at a time in float.
template <class Table, class Id>
RowMatrix<float> reduced_lookup_reference(const Table& table, const std::vector<Id>& ids,
                                          const RowMatrix<float>* pe = nullptr, Index seq_len = 1,
                                          Index offset = 0) {
  const Index d = table.cols();
  const auto s = static_cast<float>(std::sqrt(static_cast<double>(d)));
  RowMatrix<float> out(static_cast<Index>(ids.size()), d);
  for (Index i = 0; i < out.rows(); ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    for (Index c = 0; c < d; ++c) {
      float v = decode_16(table(id, c)) * s;
      if (pe != nullptr) v += (*pe)(offset + i % seq_len, c);
      out(i, c) = v;
    }
  }
  return out;
}

/// True when [p, p + bytes) lies inside [base, base + size).
inline bool lies_within(const void* p, std::size_t bytes, const void* base, std::size_t size) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  return a >= b && a + bytes <= b + size;
}

}  // namespace ember_test
