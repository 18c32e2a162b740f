/// Door checks shared by every table kind (owning, view, half/bfloat16, int8): the shapes of a
/// lookup, of the fused lookup + positions and of tied logits, the dispatch of any IdRange, the
/// lookup scale √d_model, and the checked lookup of a float/double table.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <span>
#include <string>

#include <Eigen/Core>

#include "ember/detail/gather.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/positional.hpp"
#include "ember/types.hpp"

namespace ember::detail {

/// The lookup scale of every table kind: √d_model computed in double, rounded once to T (so an
/// owner and a view of the same table scale bit-identically).
template <class T>
[[nodiscard]] T lookup_scale(Index d_model) noexcept {
  return static_cast<T>(std::sqrt(static_cast<double>(d_model)));
}

/// Calls f(span) with `ids` viewed as a span, or fails to compile with ember's id message.
template <class R, class F>
decltype(auto) with_ids(const R& ids, F&& f) {
  if constexpr (IdRange<R>) {
    return f(as_id_span(ids));
  } else {
    static_assert(always_false<R>, EMBER_ID_RANGE_MESSAGE);
  }
}

/// Throws ShapeError unless the output of an n-id lookup is n x d.
inline void check_lookup_out(const char* where, Index n, Index d, Index out_rows, Index out_cols) {
  check_extent(where, "out", 0, n, out_rows, "the number of ids");
  check_extent(where, "out", 1, d, out_cols, "d_model");
}

/// Throws ShapeError unless the grad_out of an n-id backward is n x d (checked before the
/// gradient's own checks, so a wrong width never binds an empty SparseRowGrad to it).
inline void check_backward_grad_out(const char* where, Index n, Index d, Index grad_rows,
                                    Index grad_cols) {
  check_extent(where, "grad_out", 0, n, grad_rows, "the number of ids");
  check_extent(where, "grad_out", 1, d, grad_cols, "d_model");
}

/// The shape checks of embed_with_positions: positions[max_len, d] in range for seq_len/offset,
/// out n x d, and n a multiple of seq_len.
inline void check_fused(const char* where, Index n, Index d, Index pos_rows, Index pos_cols,
                        Index out_rows, Index out_cols, Index seq_len, Index offset) {
  check_positions(where, seq_len, offset, pos_rows);
  check_extent(where, "positions", 1, d, pos_cols, "d_model");
  check_lookup_out(where, n, d, out_rows, out_cols);
  if (n % seq_len != 0) {
    throw ShapeError(std::string(where) + ": " + std::to_string(n) +
                         " ids are not a multiple of seq_len = " + std::to_string(seq_len),
                     0, (n / seq_len + 1) * seq_len, n);
  }
}

/// The shape checks of logits(hidden, out) over a V x d table (out may be absent: -1).
inline void check_logits(const char* where, Index v, Index d, Index hidden_rows, Index hidden_cols,
                         Index out_rows = -1, Index out_cols = -1) {
  check_extent(where, "hidden", 1, d, hidden_cols, "d_model");
  if (out_rows < 0) return;
  check_extent(where, "out", 0, hidden_rows, out_rows, "hidden's rows");
  check_extent(where, "out", 1, v, out_cols, "vocab_size");
}

/// forward(ids) of Embedding<T> and EmbeddingView<T>: ids checked against table.rows (IndexError
/// naming `where`), then out[i] = table.row(ids[i]) · scale, n x d.
template <class T, class Id>
[[nodiscard]] RowMatrix<T> scaled_lookup(const char* where, ConstTableRef<T> table, T scale,
                                         std::span<const Id> ids) {
  check_ids(ids, table.rows, where);
  RowMatrix<T> out(static_cast<Index>(ids.size()), table.cols);
  gather_scaled(table, ids, scale, mutable_table(out));
  return out;
}

/// forward(ids, out) of Embedding<T> and EmbeddingView<T>: out checked to be n x d and the ids
/// checked, then written as scaled_lookup(ids); out is untouched when it throws.
template <class T, class Id>
void scaled_lookup(const char* where, ConstTableRef<T> table, T scale, std::span<const Id> ids,
                   Eigen::Ref<RowMatrix<T>> out) {
  check_lookup_out(where, static_cast<Index>(ids.size()), table.cols, out.rows(), out.cols());
  check_ids(ids, table.rows, where);
  gather_scaled(table, ids, scale, mutable_table(out));
}

}  // namespace ember::detail
