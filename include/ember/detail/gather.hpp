/// Gather kernels: copy table rows selected by ids into an output, scaled, optionally adding a
/// positional row in the same pass. Inputs were validated by the public caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <span>

#include "ember/config.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// ids[n], table[V, d] -> out[n, d]: out[i] = table[ids[i]] * scale.
/// Validated by Embedding::forward (ids in [0, V), out n x d).
template <class T, class Id>
void gather_scaled(ConstTableRef<T> table, std::span<const Id> ids, T scale, TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d);
  EMBER_OMP_FOR(n)
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    EMBER_ASSERT(id >= 0 && id < table.rows);
    Eigen::Map<RowVector<T>>(out.row(i), d) =
        Eigen::Map<const RowVector<T>>(table.row(id), d) * scale;
  }
}

/// ids[n], table[V, d], pe[P, d] -> out[n, d]:
/// out[i] = table[ids[i]] * scale + pe[offset + i % seq_len]; one pass over each output row.
/// Validated by embed_with_positions (ids in range, seq_len > 0, n % seq_len == 0,
/// offset + seq_len <= P).
template <class T, class Id>
void gather_scaled_add(ConstTableRef<T> table, std::span<const Id> ids, T scale,
                       ConstTableRef<T> pe, Index seq_len, Index offset, TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d && pe.cols == d);
  EMBER_ASSERT(seq_len > 0 && offset >= 0 && offset + seq_len <= pe.rows);
  EMBER_OMP_FOR(n)
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    EMBER_ASSERT(id >= 0 && id < table.rows);
    const Index p = offset + i % seq_len;
    Eigen::Map<RowVector<T>>(out.row(i), d) =
        Eigen::Map<const RowVector<T>>(table.row(id), d) * scale +
        Eigen::Map<const RowVector<T>>(pe.row(p), d);
  }
}

}  // namespace ember::detail
