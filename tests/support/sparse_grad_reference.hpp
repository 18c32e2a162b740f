// Plain references for the sparse backward (sparse_grad.hpp, detail/scatter.hpp): a std::sort
// grouping of (id, position) pairs instead of the slot map, and a sparse gradient kept in a
// std::map, accumulated one row group at a time.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include <ember/detail/checks.hpp>
#include <ember/sparse_grad.hpp>
#include <ember/types.hpp>

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

/// SparseRowGradAccess::accumulate_validated after the checks a caller that has not validated
/// anything makes first (the gradient's shape, then the ids), as ember's doors do. Throws:
/// ShapeError if (vocab_size, d) differs from the bound shape; IndexError for an id outside
/// [0, vocab_size). Nothing changes when it throws.
template <class T, class Id, class Rows>
void accumulate_rows_of(ember::SparseRowGrad<T>& grad, std::span<const Id> ids, const Rows& rows,
                        Index d, T scale, Index vocab_size, ember::AccumulateOptions options,
                        ember::detail::Where where, bool needs_scratch = true) {
  using Access = ember::detail::SparseRowGradAccess;
  Access::check_shape(grad, where, vocab_size, d);
  ember::detail::check_ids(ids, vocab_size, where);
  Access::accumulate_validated(grad, ids, rows, d, scale, vocab_size, options, needs_scratch);
}

/// Distinct ids (ascending, skip_row excluded) and the ascending positions of each.
inline std::vector<std::pair<TokenId, std::vector<Index>>> sorted_groups(
    std::span<const TokenId> ids, TokenId skip_row = -1) {
  std::vector<std::pair<TokenId, Index>> order;
  for (std::size_t i = 0; i < ids.size(); ++i) order.emplace_back(ids[i], static_cast<Index>(i));
  std::sort(order.begin(), order.end());
  std::vector<std::pair<TokenId, std::vector<Index>>> groups;
  for (const auto& [id, pos] : order) {
    if (id == skip_row) continue;
    if (groups.empty() || groups.back().first != id) groups.push_back({id, {}});
    groups.back().second.push_back(pos);
  }
  return groups;
}

/// A sparse gradient as (sorted rows, values), accumulated the plain way: per call, each row's
/// positions summed in order, then scaled and added.
template <class T>
struct ReferenceSparseGrad {
  std::map<TokenId, ember::RowVector<T>> rows;

  void accumulate(std::span<const TokenId> ids, const RowMatrix<T>& grad_rows, T scale,
                  bool scale_grad_by_freq = false, TokenId skip_row = -1) {
    for (const auto& [id, positions] : sorted_groups(ids, skip_row)) {
      ember::RowVector<T> sum = grad_rows.row(positions[0]);
      for (std::size_t p = 1; p < positions.size(); ++p) sum += grad_rows.row(positions[p]);
      const T row_scale = scale_grad_by_freq ? scale / static_cast<T>(positions.size()) : scale;
      auto [it, inserted] = rows.try_emplace(id, ember::RowVector<T>::Zero(grad_rows.cols()));
      it->second += row_scale * sum;
    }
  }
};

}  // namespace ember_test
