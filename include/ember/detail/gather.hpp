/// Gather kernels: copy table rows selected by ids into an output, scaled, optionally adding a
/// positional row in the same pass. Inputs were validated by the public caller.
// SPDX-License-Identifier: MIT
#pragma once

#include <span>

#include "ember/config.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// How many rows ahead the gather kernels prefetch the table row of a later id. Rows are picked
/// at random, so the hardware prefetcher cannot guess the next one; a couple of rows of lead hides
/// most of a cold row's latency without flooding the fill buffers.
inline constexpr Index kGatherPrefetchRows = 2;

/// Plain reference of gather_scaled, kept beside the fast kernel and tested against it.
template <class T, class Id>
void gather_scaled_reference(ConstTableRef<T> table, std::span<const Id> ids, T scale,
                             TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    for (Index c = 0; c < table.cols; ++c) out.row(i)[c] = table.row(id)[c] * scale;
  }
}

/// ids[n], table[V, d] -> out[n, d]: out[i] = table[ids[i]] * scale.
/// Validated by Embedding::forward (ids in [0, V), out n x d).
/// Rows are independent, so any thread split gives the same bits; small n never enters OpenMP.
template <class T, class Id>
void gather_scaled(ConstTableRef<T> table, std::span<const Id> ids, T scale, TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  const Index d = table.cols;
  EMBER_ASSERT(out.rows == n && out.cols == d);
  const Id* id_data = ids.data();
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    for (Index i = begin; i < end; ++i) {
      if (i + kGatherPrefetchRows < end) {
        prefetch_row(table.row(static_cast<Index>(id_data[i + kGatherPrefetchRows])), d);
      }
      const auto id = static_cast<Index>(id_data[i]);
      EMBER_ASSERT(id >= 0 && id < table.rows);
      Eigen::Map<RowVector<T>>(out.row(i), d) =
          Eigen::Map<const RowVector<T>>(table.row(id), d) * scale;
    }
  });
}

/// Plain reference of gather_scaled_add, kept beside the fast kernel and tested against it.
template <class T, class Id>
void gather_scaled_add_reference(ConstTableRef<T> table, std::span<const Id> ids, T scale,
                                 ConstTableRef<T> pe, Index seq_len, Index offset,
                                 TableRef<T> out) {
  const auto n = static_cast<Index>(ids.size());
  for (Index i = 0; i < n; ++i) {
    const auto id = static_cast<Index>(ids[static_cast<std::size_t>(i)]);
    const Index p = offset + i % seq_len;
    for (Index c = 0; c < table.cols; ++c) {
      const T scaled = table.row(id)[c] * scale;  // rounded before the add, as in the fast kernel
      out.row(i)[c] = scaled + pe.row(p)[c];
    }
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
  const Id* id_data = ids.data();
  parallel_rows(n, n * d, [&](Index begin, Index end, int /*worker*/) {
    Index p = offset + begin % seq_len;  // position row of i, advanced without a division per row
    const Index p_end = offset + seq_len;
    for (Index i = begin; i < end; ++i) {
      if (i + kGatherPrefetchRows < end) {
        prefetch_row(table.row(static_cast<Index>(id_data[i + kGatherPrefetchRows])), d);
      }
      const auto id = static_cast<Index>(id_data[i]);
      EMBER_ASSERT(id >= 0 && id < table.rows);
      Eigen::Map<RowVector<T>>(out.row(i), d) =
          Eigen::Map<const RowVector<T>>(table.row(id), d) * scale +
          Eigen::Map<const RowVector<T>>(pe.row(p), d);
      if (++p == p_end) p = offset;
    }
  });
}

}  // namespace ember::detail
