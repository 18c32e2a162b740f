/// Tied-transpose output logits over any row-major table: logits = H · Wᵀ, and their backward
/// (the same kernels as the tables' own logits).
// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>

#include <Eigen/Core>

#include "ember/codec/concepts.hpp"
#include "ember/codec/plain.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/logits.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/logits_mode.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The scalar type of a table argument of the free tied-logits functions: any row-major Eigen
/// object of float or double, viewed without a copy (a column-major one does not compile).
template <class Derived>
requires(Scalar<typename Derived::Scalar>&& static_cast<bool>(
    Derived::IsRowMajor)) using table_scalar_t = typename Derived::Scalar;

namespace detail {
/// The tied logits' W over a plain row-major table `ref`, read as stored (no float master).
template <class T>
[[nodiscard]] auto plain_logits_table(const Eigen::Ref<const RowMatrix<T>>& ref) noexcept {
  const auto t = const_table(ref);
  return LogitsTable<codec::Plain<T>, codec::logits_kind_v<codec::Plain<T>>>{
      {{}, t.data, t.rows, t.cols, t.stride}};
}
}  // namespace detail

/// out = hidden · tableᵀ: the output projection of a model whose input and output embeddings are
/// tied (no lookup scale). A plain table computes LogitsMode::quantized_hidden as exact.
/// Shapes:  table[V, d], hidden[n, d] -> out[n, V].
/// Throws:  ShapeError if hidden has not d columns or out is not n x V; ValueError if mode is not
///          a LogitsMode; OverlapError if out shares memory with hidden or table; out is
///          untouched then.
/// Complexity: 2·n·V·d flops: a float table and up to 8 hidden rows stream the table once (a
///          fixed float order per build, identical for any thread count: docs/lm_head.md), else
///          one GEMM (Eigen's, or a BLAS when EIGEN_USE_BLAS is defined).
template <class Derived, class T = table_scalar_t<Derived>>
void logits(const Eigen::MatrixBase<Derived>& table,
            const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& hidden,
            Eigen::Ref<RowMatrix<std::type_identity_t<T>>> out,
            LogitsMode mode = LogitsMode::exact) {
  constexpr const char* where = "ember::logits";
  detail::check_logits(where, table.rows(), table.cols(), hidden.rows(), hidden.cols(), out.rows(),
                       out.cols());
  detail::check_logits_mode(detail::Where(where), mode);
  // A Ref views a matrix, block or Map without a copy (and evaluates an expression once).
  const Eigen::Ref<const RowMatrix<T>> ref(table.derived());
  detail::check_logits_apart(where, hidden, out, "table", detail::MemoryRange::of_matrix(ref));
  detail::logits(detail::plain_logits_table(ref), hidden, out);
}

/// Owning form of logits(table, hidden, out, mode): returns the n x V logits.
template <class Derived, class T = table_scalar_t<Derived>>
[[nodiscard]] RowMatrix<T> logits(
    const Eigen::MatrixBase<Derived>& table,
    const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& hidden,
    LogitsMode mode = LogitsMode::exact) {
  RowMatrix<T> out(hidden.rows(), table.rows());
  logits(table, hidden, out, mode);
  return out;
}

/// Backward of logits = hidden · tableᵀ: grad_hidden = grad_logits · table (assigned) and
/// grad_weight += grad_logitsᵀ · hidden (accumulated: a tied model adds the input side's gradient).
/// Shapes:  table[V, d], hidden[n, d], grad_logits[n, V] -> grad_hidden[n, d], grad_weight[V, d].
/// Throws:  ShapeError on any mismatch; OverlapError if grad_hidden or grad_weight shares memory
///          with the other, hidden, grad_logits or table; nothing is written then.
/// Complexity: two GEMMs, 4·n·V·d flops.
template <class Derived, class T = table_scalar_t<Derived>>
void logits_backward(const Eigen::MatrixBase<Derived>& table,
                     const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& hidden,
                     const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& grad_logits,
                     Eigen::Ref<RowMatrix<std::type_identity_t<T>>> grad_hidden,
                     Eigen::Ref<RowMatrix<std::type_identity_t<T>>> grad_weight) {
  detail::check_logits_backward("ember::logits_backward", table.rows(), table.cols(), hidden,
                                grad_logits, grad_hidden, grad_weight);
  const Eigen::Ref<const RowMatrix<T>> ref(table.derived());
  detail::check_logits_backward_apart("ember::logits_backward", hidden, grad_logits, grad_hidden,
                                      grad_weight, "table", detail::MemoryRange::of_matrix(ref));
  detail::logits_backward(detail::plain_logits_table(ref), hidden, grad_logits, grad_hidden,
                          grad_weight);
}

}  // namespace ember::inline EMBER_ISA
