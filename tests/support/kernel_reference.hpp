// Plain reference versions of ember's hot kernels, for tests that compare the fast kernels
// against them: a std::sort grouping of (id, position) pairs instead of the slot map.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include <ember/codec/plain.hpp>
#include <ember/config.hpp>
#include <ember/detail/table_ref.hpp>
#include <ember/types.hpp>

#include "support/reference.hpp"

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

/// A plain float/double matrix as the kernels take a stored table.
template <class T>
ember::detail::CodecRows<ember::codec::Plain<T>> plain_rows(const RowMatrix<T>& table) {
  return {{}, table.data(), table.rows(), table.cols(), table.cols()};
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

/// Sets OpenMP's thread count for the next parallel regions (a no-op in builds without OpenMP).
inline void set_threads(int threads) {
#if EMBER_HAS_OPENMP
  omp_set_num_threads(threads);
#else
  static_cast<void>(threads);
#endif
}

/// Sets the OpenMP thread count for its lifetime and restores the previous one after.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads) {
#if EMBER_HAS_OPENMP
    saved_ = omp_get_max_threads();
#endif
    set_threads(threads);
  }
  ~ScopedThreads() { set_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_ = 1;
};

}  // namespace ember_test
