/// ember::top_k: the k largest entries of each row of a matrix (logits, scores) with their column
/// indices, best first: what a decoding loop takes from its logits (greedy, top-k sampling, beams).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <type_traits>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/top_k.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

namespace detail {
/// Throws ShapeError unless 0 <= k <= v (the columns of the scores).
inline void check_top_k(Where where, Index k, Index v) {
  if (k < 0 || k > v) [[unlikely]] {
    throw ShapeError(message(where, "k = ", k, " is outside [0, ", v, "], the columns of scores"),
                     -1, v, k);
  }
}
}  // namespace detail

/// What top_k returns: for each row i of the input, values(i, j) is its j-th best entry and
/// indices(i, j) the column of that entry (a token id when the input is logits), j in [0, k).
template <class T>
struct TopK {
  RowMatrix<T> values;         ///< values[n, k], each row in descending order
  RowMatrix<TokenId> indices;  ///< indices[n, k], the columns of values
};

/// The k best entries of each row of `scores` and their columns, into caller buffers.
///
/// Order: descending value, as torch.topk(scores, k, dim=-1, largest=True, sorted=True), whose
/// values these are bit for bit. NaN ranks above every number, +inf included (torch.topk's rule,
/// taken from numpy's sort order). Entries that compare equal (-0 and +0 too, and NaNs among
/// themselves) come in ascending column order: the lower index first, the order of a stable
/// descending sort (torch.sort(stable=True, descending=True), numpy's argsort(-x, kind='stable')),
/// where torch.topk leaves it unspecified. So ties at the k-th place keep the lower columns, and
/// the result is the same for any thread count.
///
/// Shapes:  scores[n, V] -> values[n, k], indices[n, k], 0 <= k <= V.
/// Throws:  ShapeError if k is negative or larger than V, or values or indices is not n x k;
///          nothing is written then.
/// Complexity: one pass over each row, O(V + m·log k) for m entries that beat the k-th best so
///          far (about k·ln(V/k) for a random row; at most V). Rows run on OpenMP threads when the
///          including program compiles with OpenMP and n·V is at least 2^18; fewer rows than
///          threads (a single long row) are split into column chunks, merged in a fixed order.
///          A column-major `scores` is copied into a row-major temporary first.
template <class Derived, class T = typename Derived::Scalar>
requires Scalar<T>
void top_k(const Eigen::MatrixBase<Derived>& scores, Index k,
           Eigen::Ref<RowMatrix<std::type_identity_t<T>>> values,
           Eigen::Ref<RowMatrix<TokenId>> indices) {
  constexpr const char* where = "ember::top_k";
  const Index n = scores.rows();
  const Index v = scores.cols();
  detail::check_top_k(where, k, v);
  detail::check_dims(where, "values", values, n, "scores' rows", k, "k");
  detail::check_dims(where, "indices", indices, n, "scores' rows", k, "k");
  if (n == 0 || k == 0) return;

  // A Ref views a row-major matrix, block or Map without a copy (and evaluates anything else).
  const Eigen::Ref<const RowMatrix<T>> s(scores.derived());
  // An entry costs a compare, about an eighth of what an element of a lookup costs: threads start
  // at 8x the kernels' serial threshold (2^18 entries), so decoding shapes stay on this thread.
  const Index work = n * v / 8;
  const int threads = detail::kernel_threads(work);
  if (n >= threads) {
    detail::parallel_rows(n, work, [&](Index begin, Index end, int /*worker*/) {
      std::vector<detail::Ranked<T>> heap;
      heap.reserve(static_cast<std::size_t>(k));
      for (Index i = begin; i < end; ++i) {
        detail::top_k_heap(s.row(i).data(), v, 0, k, heap);
        detail::top_k_write(std::span(heap), values.row(i).data(), indices.row(i).data());
      }
    });
    return;
  }
  // Fewer rows than threads (a few long rows): each row in column chunks of at least k.
  const Index chunks = std::max<Index>(1, std::min<Index>(threads, v / std::max<Index>(k, 1024)));
  std::vector<std::vector<detail::Ranked<T>>> best(static_cast<std::size_t>(chunks));
  std::vector<detail::Ranked<T>> scratch;
  for (Index i = 0; i < n; ++i) {
    const T* row = s.row(i).data();
    detail::parallel_rows(chunks, work, [&](Index begin, Index end, int /*worker*/) {
      for (Index c = begin; c < end; ++c) {
        const Index lo = v * c / chunks;
        const Index hi = v * (c + 1) / chunks;
        auto& heap = best[static_cast<std::size_t>(c)];
        detail::top_k_heap(row + lo, hi - lo, lo, std::min(k, hi - lo), heap);
      }
    });
    detail::top_k_merge_write(std::span<const std::vector<detail::Ranked<T>>>(best), k, scratch,
                              values.row(i).data(), indices.row(i).data());
  }
}

/// Owning form of top_k(scores, k, values, indices): returns values[n, k] and indices[n, k].
///
/// Example (greedy decoding):
/// ```cpp
/// ember::RowMatrix<float> logits = emb.logits(h);                 // n x V
/// ember::TokenId next = ember::top_k(logits, 1).indices(0, 0);    // the argmax of row 0
/// ember::TopK<float> best = ember::top_k(logits.bottomRows(1), 40);  // top-40 of the last row
/// ```
/// Throws: as the form above.
template <class Derived, class T = typename Derived::Scalar>
requires Scalar<T>
[[nodiscard]] TopK<T> top_k(const Eigen::MatrixBase<Derived>& scores, Index k) {
  detail::check_top_k("ember::top_k", k, scores.cols());
  TopK<T> out{RowMatrix<T>(scores.rows(), k), RowMatrix<TokenId>(scores.rows(), k)};
  top_k(scores, k, out.values, out.indices);
  return out;
}

}  // namespace ember::inline EMBER_ISA
