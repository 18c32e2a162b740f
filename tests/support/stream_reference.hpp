// Reference and helpers for the fused gather's store paths (detail::gather_scaled_add_rows with
// ordinary and non-temporal stores): the unfused two-pass computation and a bit comparison.
// SPDX-License-Identifier: MIT
#pragma once

#include <cstring>
#include <span>

#include <ember/types.hpp>

namespace ember_test {

/// out[i] = table[ids[i]] * scale, stored (so rounded), then += pe[offset + i % seq_len] in a
/// second loop: what forward followed by add_to computes. Two separate loops cannot be
/// contracted into FMAs, so this is the exact target of every fused path on x86.
template <class T>
ember::RowMatrix<T> unfused_reference(const ember::RowMatrix<T>& table,
                                      std::span<const ember::TokenId> ids, T scale,
                                      const ember::RowMatrix<T>& pe, ember::Index seq_len,
                                      ember::Index offset) {
  const auto n = static_cast<ember::Index>(ids.size());
  const ember::Index d = table.cols();
  ember::RowMatrix<T> out(n, d);
  for (ember::Index i = 0; i < n; ++i) {
    const ember::Index id = ids[static_cast<std::size_t>(i)];
    for (ember::Index c = 0; c < d; ++c) out(i, c) = table(id, c) * scale;
  }
  for (ember::Index i = 0; i < n; ++i) {
    for (ember::Index c = 0; c < d; ++c) out(i, c) += pe(offset + i % seq_len, c);
  }
  return out;
}

/// True when two n x d blocks hold the same bits (NaN payloads and signed zeros included).
template <class A, class B>
bool same_block_bits(const A& a, const B& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  using T = typename A::Scalar;
  for (ember::Index r = 0; r < a.rows(); ++r) {
    for (ember::Index c = 0; c < a.cols(); ++c) {
      const T x = a(r, c);
      const T y = b(r, c);
      if (std::memcmp(&x, &y, sizeof(T)) != 0) return false;
    }
  }
  return true;
}

}  // namespace ember_test
