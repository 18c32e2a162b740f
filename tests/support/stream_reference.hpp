// Reference for the fused gather's store paths (detail::gather_scaled_add_rows with ordinary and
// non-temporal stores): the unfused two-pass computation.
// SPDX-License-Identifier: MIT
#pragma once

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

}  // namespace ember_test
