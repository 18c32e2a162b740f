/// Tied-transpose output logits over an embedding table: logits = H · Wᵀ, and their backward.
// SPDX-License-Identifier: MIT
#pragma once

#include <type_traits>

#include "ember/detail/validate.hpp"
#include "ember/types.hpp"

namespace ember {

namespace detail {
/// The table argument of the tied-logits functions: any row-major Eigen object, viewed without a
/// copy.
template <class Derived>
[[nodiscard]] Eigen::Ref<const RowMatrix<typename Derived::Scalar>> table_ref(
    const Eigen::MatrixBase<Derived>& table) {
  static_assert(Scalar<typename Derived::Scalar>, "ember: tables must hold float or double");
  static_assert(static_cast<bool>(Derived::IsRowMajor),
                "ember: the table must be row-major (ember::RowMatrix); a column-major table "
                "would be copied on every call");
  return Eigen::Ref<const RowMatrix<typename Derived::Scalar>>(table.derived());
}
template <class Derived>
using scalar_of = typename Derived::Scalar;
}  // namespace detail

/// out = hidden · tableᵀ: the output projection of a model whose input and output embeddings are
/// tied. No √d scale is applied here: the scale belongs to the lookup only.
///
/// Shapes:  table[V, d], hidden[n, d] -> out[n, V].
/// Throws:  ShapeError if hidden has not d columns or out is not n x V; out is untouched then.
/// Precondition: out overlaps neither hidden nor table (the product is computed with noalias()).
/// Complexity: one GEMM, 2·n·V·d flops (Eigen's, or a BLAS when EIGEN_USE_BLAS is defined).
template <class Derived, class T = detail::scalar_of<Derived>>
void logits(const Eigen::MatrixBase<Derived>& table_in,
            const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& hidden,
            Eigen::Ref<RowMatrix<std::type_identity_t<T>>> out) {
  constexpr const char* where = "ember::logits";
  const auto table = detail::table_ref(table_in);
  detail::check_extent(where, "hidden", 1, table.cols(), hidden.cols(), "d_model");
  detail::check_extent(where, "out", 0, hidden.rows(), out.rows(), "hidden's rows");
  detail::check_extent(where, "out", 1, table.rows(), out.cols(), "vocab_size");
  out.noalias() = hidden * table.transpose();
}

/// Owning form of logits(table, hidden, out): returns the n x V logits.
template <class Derived, class T = detail::scalar_of<Derived>>
[[nodiscard]] RowMatrix<T> logits(
    const Eigen::MatrixBase<Derived>& table_in,
    const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& hidden) {
  const auto table = detail::table_ref(table_in);
  detail::check_extent("ember::logits", "hidden", 1, table.cols(), hidden.cols(), "d_model");
  RowMatrix<T> out(hidden.rows(), table.rows());
  out.noalias() = hidden * table.transpose();
  return out;
}

/// Backward of logits = hidden · tableᵀ:
///   grad_hidden  = grad_logits · table          (assigned)
///   grad_weight += grad_logitsᵀ · hidden        (accumulated, so a tied model can add the
///                                                input side's SparseRowGrad into the same matrix)
///
/// Shapes:  table[V, d], hidden[n, d], grad_logits[n, V] -> grad_hidden[n, d], grad_weight[V, d].
/// Throws:  ShapeError on any mismatch; nothing is written then.
/// Precondition: the outputs overlap neither each other nor the inputs.
/// Complexity: two GEMMs, 4·n·V·d flops.
template <class Derived, class T = detail::scalar_of<Derived>>
void logits_backward(const Eigen::MatrixBase<Derived>& table_in,
                     const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& hidden,
                     const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& grad_logits,
                     Eigen::Ref<RowMatrix<std::type_identity_t<T>>> grad_hidden,
                     Eigen::Ref<RowMatrix<std::type_identity_t<T>>> grad_weight) {
  constexpr const char* where = "ember::logits_backward";
  const auto table = detail::table_ref(table_in);
  const Index n = hidden.rows();
  detail::check_extent(where, "hidden", 1, table.cols(), hidden.cols(), "d_model");
  detail::check_extent(where, "grad_logits", 0, n, grad_logits.rows(), "hidden's rows");
  detail::check_extent(where, "grad_logits", 1, table.rows(), grad_logits.cols(), "vocab_size");
  detail::check_extent(where, "grad_hidden", 0, n, grad_hidden.rows(), "hidden's rows");
  detail::check_extent(where, "grad_hidden", 1, table.cols(), grad_hidden.cols(), "d_model");
  detail::check_extent(where, "grad_weight", 0, table.rows(), grad_weight.rows(), "vocab_size");
  detail::check_extent(where, "grad_weight", 1, table.cols(), grad_weight.cols(), "d_model");
  grad_hidden.noalias() = grad_logits * table;
  grad_weight.noalias() += grad_logits.transpose() * hidden;
}

}  // namespace ember
