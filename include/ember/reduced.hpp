/// ReducedEmbedding<S>: an embedding table stored as Eigen::half or Eigen::bfloat16 (half the
/// bytes of float), with lookup, positions and tied logits computed in float and a backward that
/// accumulates in float.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include <Eigen/Core>

#include "ember/detail/decoded_table.hpp"
#include "ember/detail/gather_convert.hpp"
#include "ember/detail/lookup.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/detail/validate.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember {

/// The 16-bit storage types of ReducedEmbedding: IEEE binary16 and bfloat16.
template <class S>
concept HalfStorage = std::same_as<S, Eigen::half> || std::same_as<S, Eigen::bfloat16>;

/// The name of a 16-bit storage type in messages ("half", "bfloat16").
template <HalfStorage S>
inline constexpr const char* storage_name = std::is_same_v<S, Eigen::half> ? "half" : "bfloat16";

}  // namespace ember

namespace ember::detail {

/// CRTP base of ReducedEmbedding<S> and ReducedEmbeddingView<S>: DecodedTableOps (which holds the
/// float master) plus the members whose bodies are the same for the owner and the view (scale,
/// to_float, the forward into S, backward, table() - the row decoder). Derived provides
/// vocab_size(), d_model(), weight() (a row-major Eigen object of S with direct access) and the
/// static names of DecodedTableOps plus backward_name and set_float_master_name.
template <class Derived, class S>
class ReducedTableOps : public DecodedTableOps<Derived> {
 public:
  /// The lookup scale √d_model, in float.
  [[nodiscard]] float scale() const noexcept { return lookup_scale<float>(self().d_model()); }
  /// The table converted to float (exact), V x d. O(V·d) memory: for small tables and checks.
  [[nodiscard]] RowMatrix<float> to_float() const { return self().weight().template cast<float>(); }

  // ---- lookup -------------------------------------------------------------------------------

  using DecodedTableOps<Derived>::forward;

  /// forward into a buffer of the storage type: the float result rounded to S (round to nearest
  /// even; a value beyond S's range becomes ±inf, as a cast would).
  /// Shapes:  ids[n] -> out[n, d] (S).
  /// Throws:  IndexError for an id out of range; ShapeError if out is not n x d. `out` is
  ///          untouched when it throws.
  template <class R>
  void forward(const R& ids, Eigen::Ref<RowMatrix<S>> out) const {
    this->template forward_as<S>(ids, out);
  }

  /// grad[t] += scale() · Σ_{i : ids[i] = t} grad_out[i] in float (documented on each class).
  template <class R>
  void backward(const R& ids, const Eigen::Ref<const RowMatrix<float>>& grad_out,
                SparseRowGrad<float>& grad) const {
    with_ids(ids, [&](auto span) {
      constexpr const char* where = Derived::backward_name;
      check_backward_grad_out(where, static_cast<Index>(span.size()), self().d_model(),
                              grad_out.rows(), grad_out.cols());
      grad.accumulate(span, grad_out, scale(), self().vocab_size(), {}, where);
    });
  }

  /// The table as the kernels take it: a row decoder to float (EmbeddingView::table()'s role).
  [[nodiscard]] CastRows<S> table() const noexcept { return {const_table(self().weight())}; }

 private:
  [[nodiscard]] const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
};

}  // namespace ember::detail

namespace ember {

/// An embedding table whose V x d values are stored as S (Eigen::half or Eigen::bfloat16) and
/// computed with in float.
///
/// Conventions:
/// - forward(ids) returns float: each row is converted (exactly: every half and bfloat16 value is
///   a float), multiplied by scale() = √d_model in float and written as float. forward into a
///   RowMatrix<S> buffer rounds that float result to S ("the storage type on request").
/// - backward accumulates into a SparseRowGrad<float>: the gradient is never rounded to S.
/// - logits use the float master copy when one is kept (keep_float_master / from_float(.., true)),
///   else the stored rows decoded to float 4096 at a time. ggml users found that quantizing the
///   tied output table hurts generation: keep a master when the output matters (docs/
///   reduced_precision.md has the measured logits error of each format).
/// - The master copy is the user's: it is not updated when weight() is changed.
///
/// Error bound of storage (round to nearest even): |x - S(x)| <= 2^-11 |x| for half within its
/// normal range [2^-14, 65504], <= 2^-8 |x| for bfloat16 (same exponent range as float).
///
/// Thread safety: const members may run concurrently.
///
/// Example:
/// ```cpp
/// auto half = ember::ReducedEmbedding<Eigen::half>::from_float(emb.weight());
/// ember::RowMatrix<float> x = half.forward(ids);   // float rows, · √d
/// ```
template <class S>
class ReducedEmbedding : public detail::ReducedTableOps<ReducedEmbedding<S>, S> {
  static_assert(HalfStorage<S>,
                "ember::ReducedEmbedding<S>: S must be Eigen::half or Eigen::bfloat16");
  using Base = detail::ReducedTableOps<ReducedEmbedding<S>, S>;

 public:
  using Storage = S;
  static constexpr const char* forward_name = "ReducedEmbedding::forward";
  static constexpr const char* logits_name = "ReducedEmbedding::logits";
  static constexpr const char* logits_backward_name = "ReducedEmbedding::logits_backward";
  static constexpr const char* backward_name = "ReducedEmbedding::backward";
  static constexpr const char* set_float_master_name = "ReducedEmbedding::set_float_master";

  /// Adopts a table already in S (e.g. from SafetensorsFile::load_half): no conversion.
  /// Throws: ShapeError if it has no rows or columns.
  explicit ReducedEmbedding(RowMatrix<S> table) : table_(std::move(table)) {
    detail::check_positive_size("ReducedEmbedding", "vocab_size (table rows)", table_.rows());
    detail::check_positive_size("ReducedEmbedding", "d_model (table columns)", table_.cols());
  }

  /// A vocab_size x d_model table drawn N(0, 1/d_model) in float from `seed` (as Embedding's
  /// default) and rounded to S.
  /// Throws: ShapeError if a size is not positive.
  ReducedEmbedding(Index vocab_size, Index d_model, std::uint64_t seed = 0)
      : ReducedEmbedding(initial(vocab_size, d_model, seed)) {}

  /// Rounds a float or double table to S (round to nearest even), optionally keeping a float copy
  /// as the master for logits.
  /// Throws:  ShapeError if the table is empty; ValueError naming the row, column and value of a
  ///          non-finite entry or of one whose magnitude overflows S (> 65504 for half).
  /// Complexity: O(V·d).
  template <class Derived>
  [[nodiscard]] static ReducedEmbedding from_float(const Eigen::MatrixBase<Derived>& table,
                                                   bool keep_float_master = false) {
    constexpr const char* where = "ReducedEmbedding::from_float";
    detail::check_positive_size(where, "vocab_size (table rows)", table.rows());
    detail::check_positive_size(where, "d_model (table columns)", table.cols());
    const auto limit = static_cast<double>(std::numeric_limits<S>::max());
    for (Index r = 0; r < table.rows(); ++r) {
      for (Index c = 0; c < table.cols(); ++c) {
        const auto x = static_cast<double>(table(r, c));
        // Values that round down to the largest finite S are fine; anything rounding to inf is not.
        // Beyond float's range the double -> float cast itself would be undefined: test first.
        const bool fits = std::isfinite(x) &&
                          std::abs(x) <= static_cast<double>(std::numeric_limits<float>::max()) &&
                          std::isfinite(static_cast<float>(S(static_cast<float>(x))));
        if (!fits) {
          throw ValueError(std::string(where) + ": value " + std::to_string(x) + " at row " +
                               std::to_string(r) + ", column " + std::to_string(c) +
                               (std::isfinite(x) ? " overflows " : " is not finite in ") +
                               storage_name<S> + " (largest " + std::to_string(limit) + ")",
                           x);
        }
      }
    }
    RowMatrix<float> f = table.template cast<float>();
    ReducedEmbedding out(f.template cast<S>().eval());
    if (keep_float_master) out.set_float_master(std::move(f));
    return out;
  }

  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return table_.rows(); }
  /// Row width d_model.
  [[nodiscard]] Index d_model() const noexcept { return table_.cols(); }
  /// The stored table, V x d_model, unscaled.
  [[nodiscard]] const RowMatrix<S>& weight() const noexcept { return table_; }
  /// The stored table for in-place updates. If its shape changes while a float master is kept,
  /// logits and logits_backward throw StateError until the master is set again or cleared.
  [[nodiscard]] RowMatrix<S>& weight() noexcept { return table_; }
  /// Bytes of stored table values: V · d · 2.
  [[nodiscard]] std::size_t storage_bytes() const noexcept {
    return static_cast<std::size_t>(table_.size()) * sizeof(S);
  }

  // scale(), to_float(), forward and table() come from detail::ReducedTableOps, and the float
  // master (set_float_master, clear_float_master, float_master) from detail::DecodedTableOps.

  /// Accumulates the table gradient of forward in float: grad[t] += scale() · Σ_{i : ids[i] = t}
  /// grad_out[i] (as Embedding::backward).
  /// Shapes:  ids[n], grad_out[n, d] (float) -> grad (V x d, row-sparse, float).
  /// Throws:  IndexError, ShapeError as Embedding::backward; grad is unchanged when it throws.
  using Base::backward;

 private:
  static RowMatrix<S> initial(Index vocab_size, Index d_model, std::uint64_t seed) {
    detail::check_positive_size("ReducedEmbedding", "vocab_size", vocab_size);
    detail::check_positive_size("ReducedEmbedding", "d_model", d_model);
    RowMatrix<float> t(vocab_size, d_model);
    Init::normal().fill(t, seed);
    return t.cast<S>();
  }

  RowMatrix<S> table_;
};

/// An fp16 table (IEEE binary16: 5 exponent bits, 10 mantissa bits).
using HalfEmbedding = ReducedEmbedding<Eigen::half>;
/// A bfloat16 table (8 exponent bits, 7 mantissa bits: float's range, less precision).
using BFloat16Embedding = ReducedEmbedding<Eigen::bfloat16>;

}  // namespace ember
