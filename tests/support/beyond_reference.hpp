/// Slow references for the "beyond the layer" features: a bag is a loop over single-row lookups,
/// a dequantized row is codes · scale + bias written out element by element, and nearest
/// neighbours are compared as lists.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include <Eigen/Core>

#include "ember/types.hpp"

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::RowVector;
using ember::TokenId;

/// Bag b is positions [bounds[b], bounds[b+1]). mode 0 = sum, 1 = mean, 2 = max. Each row is
/// fetched with a one-id lookup loop (table.row(id)), padding ids skipped, empty bags zero.
template <class T>
RowMatrix<T> bag_reference(const RowMatrix<T>& table, const std::vector<TokenId>& ids,
                           const std::vector<Index>& bounds, int mode,
                           const std::vector<T>& weights = {}, TokenId padding = -1) {
  const auto bags = static_cast<Index>(bounds.size()) - 1;
  RowMatrix<T> out = RowMatrix<T>::Zero(bags, table.cols());
  for (Index b = 0; b < bags; ++b) {
    std::vector<RowVector<T>> rows;
    std::vector<T> w;
    for (Index i = bounds[static_cast<std::size_t>(b)]; i < bounds[static_cast<std::size_t>(b + 1)];
         ++i) {
      const TokenId id = ids[static_cast<std::size_t>(i)];
      if (id == padding) continue;
      rows.push_back(table.row(static_cast<Index>(id)));
      w.push_back(weights.empty() ? T(1) : weights[static_cast<std::size_t>(i)]);
    }
    if (rows.empty()) continue;
    for (Index c = 0; c < table.cols(); ++c) {
      if (mode == 2) {
        T m = -std::numeric_limits<T>::infinity();
        for (const auto& r : rows) m = std::max(m, r[c]);
        out(b, c) = m;
      } else {
        T s = 0;
        for (std::size_t k = 0; k < rows.size(); ++k) s += w[k] * rows[k][c];
        out(b, c) = mode == 1 ? s / static_cast<T>(rows.size()) : s;
      }
    }
  }
  return out;
}

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
