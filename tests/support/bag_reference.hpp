// Plain references for EmbeddingBag (bag.hpp). Forward: each bag a loop over one-row lookups.
// Backward: the plain backwards EmbeddingBag used before it built rows inside the accumulation
// (SparseRowGrad::accumulate_indirect for sum/mean, accumulate_rows_of with masked rows for max):
// materialise one gradient row per pooled id or per (bag, winning id), then
// SparseRowGrad::accumulate. Tests compare the direct paths against them bit for bit. Also a
// random bag batch and the bitwise comparison of two bag gradients.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include <ember/bag.hpp>
#include <ember/sparse_grad.hpp>
#include <ember/types.hpp>

#include <catch2/catch.hpp>

#include "support/matrix_compare.hpp"

namespace ember_test {

using ember::Index;
using ember::RowMatrix;
using ember::RowVector;
using ember::TokenId;

// ---- forward ------------------------------------------------------------------------------------

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

// ---- backward -----------------------------------------------------------------------------------

/// The gradient rows of a sum/mean bag backward: for each pooled position i of bag b (ids equal
/// to skip_row left out), rows_out gets grad_out[b] · coefficient (the sample weight if weights
/// are given, else 1 / pooled count in mean mode, else 1) and ids_out gets ids[i].
template <class T>
void bag_grad_rows_reference(std::span<const ember::TokenId> ids,
                             std::span<const ember::Index> bounds, ember::BagMode mode,
                             std::span<const T> weights, ember::TokenId skip_row,
                             const ember::RowMatrix<T>& grad_out,
                             std::vector<ember::TokenId>& ids_out, ember::RowMatrix<T>& rows_out) {
  using ember::Index;
  const auto bags = static_cast<Index>(bounds.size()) - 1;
  ids_out.clear();
  for (const ember::TokenId id : ids)
    if (id != skip_row) ids_out.push_back(id);
  rows_out.resize(static_cast<Index>(ids_out.size()), grad_out.cols());
  Index k = 0;
  for (Index b = 0; b < bags; ++b) {
    const Index begin = bounds[static_cast<std::size_t>(b)];
    const Index end = bounds[static_cast<std::size_t>(b + 1)];
    Index count = 0;
    for (Index i = begin; i < end; ++i)
      if (ids[static_cast<std::size_t>(i)] != skip_row) ++count;
    for (Index i = begin; i < end; ++i) {
      if (ids[static_cast<std::size_t>(i)] == skip_row) continue;
      T coef = T(1);
      if (mode == ember::BagMode::mean) coef = T(1) / static_cast<T>(count);
      if (!weights.empty()) coef = weights[static_cast<std::size_t>(i)];
      rows_out.row(k++) = coef * grad_out.row(b);
    }
  }
}

/// EmbeddingBag::backward for sum and mean the plain way: bag_grad_rows_reference, then accumulate
/// with the table's scale_grad_by_freq.
template <class T>
void bag_backward_reference(const ember::EmbeddingBag<T>& bag, std::span<const ember::TokenId> ids,
                            std::span<const ember::Index> bounds,
                            const ember::RowMatrix<T>& grad_out, ember::SparseRowGrad<T>& grad,
                            std::span<const T> weights = {}) {
  const auto& emb = bag.embedding();
  const ember::TokenId skip =
      emb.padding_idx() ? static_cast<ember::TokenId>(*emb.padding_idx()) : ember::TokenId{-1};
  std::vector<ember::TokenId> rows;
  ember::RowMatrix<T> values;
  bag_grad_rows_reference(ids, bounds, bag.mode(), weights, skip, grad_out, rows, values);
  typename ember::SparseRowGrad<T>::AccumulateOptions acc;
  acc.scale_grad_by_freq = emb.scale_grad_by_freq();
  grad.accumulate(rows, values, T(1), bag.vocab_size(), acc);
}

/// The plain max bag backward that EmbeddingBag used before it masked rows inside the accumulation:
/// the gradient rows, one per (bag, winning id), holding grad_out[b, c] in the columns that id won
/// and zeros elsewhere.
template <class T>
void bag_max_grad_rows_reference(const ember::BagArgmax& argmax,
                                 const ember::RowMatrix<T>& grad_out,
                                 std::vector<ember::TokenId>& ids_out,
                                 ember::RowMatrix<T>& rows_out) {
  using ember::Index;
  const Index bags = grad_out.rows();
  const Index d = grad_out.cols();
  std::vector<std::pair<ember::TokenId, Index>> winners;                    // (id, column)
  std::vector<std::pair<ember::TokenId, std::pair<Index, Index>>> entries;  // (k, (bag, column))
  ids_out.clear();
  for (Index b = 0; b < bags; ++b) {
    winners.clear();
    for (Index c = 0; c < d; ++c)
      if (argmax(b, c) >= 0) winners.emplace_back(argmax(b, c), c);
    std::sort(winners.begin(), winners.end());
    for (std::size_t w = 0; w < winners.size(); ++w) {
      if (w == 0 || winners[w].first != winners[w - 1].first) ids_out.push_back(winners[w].first);
      entries.push_back({static_cast<ember::TokenId>(ids_out.size() - 1), {b, winners[w].second}});
    }
  }
  rows_out = ember::RowMatrix<T>::Zero(static_cast<Index>(ids_out.size()), d);
  for (const auto& [k, bc] : entries) rows_out(k, bc.second) = grad_out(bc.first, bc.second);
}

/// EmbeddingBag::backward for max the plain way: bag_max_grad_rows_reference, then accumulate.
template <class T>
void bag_max_backward_reference(const ember::EmbeddingBag<T>& bag, const ember::BagArgmax& argmax,
                                const ember::RowMatrix<T>& grad_out,
                                ember::SparseRowGrad<T>& grad) {
  std::vector<ember::TokenId> rows;
  ember::RowMatrix<T> values;
  bag_max_grad_rows_reference(argmax, grad_out, rows, values);
  grad.accumulate(rows, values, T(1), bag.vocab_size());
}

/// A random bag batch for backward comparisons: `bags` bags of 0..2·mean_len ids (some empty),
/// ids drawn from a small vocabulary so rows repeat within and across bags, the padding id
/// `padding` (if >= 0) planted in several bags and one bag made of padding only.
template <class T>
struct BagGradCase {
  std::vector<ember::TokenId> ids;
  std::vector<ember::Index> bounds;     // [B + 1]
  std::vector<ember::TokenId> offsets;  // [B], PyTorch layout
  std::vector<int> lengths;             // [B], FBGEMM layout
  std::vector<T> weights;               // [n]
  ember::RowMatrix<T> grad_out;         // [B, d]
};

template <class T>
BagGradCase<T> make_bag_grad_case(ember::Index bags, ember::Index mean_len, ember::Index vocab,
                                  ember::Index d, ember::TokenId padding, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<ember::Index> len(0, 2 * mean_len);
  std::uniform_int_distribution<ember::TokenId> pick(0, static_cast<ember::TokenId>(vocab) - 1);
  std::uniform_real_distribution<T> value(T(-2), T(2));
  BagGradCase<T> c;
  c.bounds.push_back(0);
  for (ember::Index b = 0; b < bags; ++b) {
    ember::Index m = b % 7 == 3 ? 0 : len(rng);  // every 7th bag empty
    if (b == 5) m = std::max<ember::Index>(m, 3);
    c.offsets.push_back(static_cast<ember::TokenId>(c.bounds.back()));
    c.lengths.push_back(static_cast<int>(m));
    for (ember::Index i = 0; i < m; ++i) {
      ember::TokenId id = pick(rng);
      if (padding >= 0 && (b == 5 || i % 5 == 2)) id = padding;  // bag 5: padding only
      c.ids.push_back(id);
    }
    c.bounds.push_back(c.bounds.back() + m);
  }
  for (std::size_t i = 0; i < c.ids.size(); ++i) c.weights.push_back(value(rng));
  c.grad_out.resize(bags, d);
  for (ember::Index k = 0; k < c.grad_out.size(); ++k) c.grad_out.data()[k] = value(rng);
  return c;
}

/// Checks that `actual` holds the same rows, in the same order, with the same bits as `expected`.
template <class T>
void check_same_gradient(const ember::SparseRowGrad<T>& actual,
                         const ember::SparseRowGrad<T>& expected) {
  CHECK(std::vector<ember::TokenId>(actual.rows().begin(), actual.rows().end()) ==
        std::vector<ember::TokenId>(expected.rows().begin(), expected.rows().end()));
  CHECK(ember_test::same_bits(actual.values(), expected.values()));
}

}  // namespace ember_test
