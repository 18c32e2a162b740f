/// EmbeddingBag<T>: pooled lookups (sum, weighted sum, mean, max) over bags of ids given as
/// PyTorch-style offsets or Caffe2/FBGEMM-style lengths, with the backward of each mode.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/config.hpp"
#include "ember/detail/bag_pool.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/scatter.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// The pooling of an EmbeddingBag: sum (optionally weighted per sample), mean or element-wise max.
enum class BagMode { sum, mean, max };

/// Per bag and column, the id whose row gave the max (-1 for a bag with no pooled id): what
/// EmbeddingBag's max-mode forward records and its backward needs (PyTorch's max_indices).
using BagArgmax = Eigen::Matrix<TokenId, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// The name of a pooling mode as PyTorch spells it ("sum", "mean", "max").
[[nodiscard]] constexpr const char* to_string(BagMode mode) noexcept {
  return mode == BagMode::sum ? "sum" : mode == BagMode::mean ? "mean" : "max";
}

/// The table an EmbeddingBag<X> pools over: Embedding<X> for a scalar X (float, double), else X
/// itself (any ember table: HalfEmbedding, QuantizedEmbedding, a view, ...).
template <class X>
using bag_table_t = typename std::conditional_t<Scalar<X>, std::type_identity<Embedding<X>>,
                                                std::type_identity<X>>::type;

namespace detail {

/// The kernel pooling of a mode.
[[nodiscard]] constexpr Pool pool_of(BagMode mode) noexcept {
  return mode == BagMode::sum ? Pool::sum : mode == BagMode::mean ? Pool::mean : Pool::max;
}

/// The training options of a pooled table: an Embedding's padding row and frequency scaling, none
/// for other tables.
template <class Tab>
[[nodiscard]] AccumulateOptions bag_table_options(const Tab& table) noexcept {
  if constexpr (requires { table.accumulate_options(); }) {
    return table.accumulate_options();
  } else {
    return {};
  }
}

/// Checks what a max-mode bag backward over one table needs: the argmax its forward recorded
/// (StateError if null), a table that does not scale gradients by frequency (StateError), an
/// argmax of bags x d (`bags_what`, `d_what` name the expected sizes in messages) and every id in
/// [-1, vocab). `feature` >= 0 names the feature of a TableBatchedBags in the messages.
inline void check_max_backward(const BagArgmax* argmax, bool scale_grad_by_freq, Index bags,
                               Index d, Index vocab, Where where, const char* bags_what,
                               const char* d_what, Index feature = -1) {
  const auto who = [&](const char* then) {
    return text("feature ", feature, " pools with max", then);
  };
  if (argmax == nullptr) {
    throw StateError(message(where, feature >= 0 ? who(" and") : std::string("mode='max'"),
                             " needs the argmax recorded by forward(..., &argmax)"));
  }
  if (scale_grad_by_freq) {
    throw StateError(message(where, feature >= 0 ? who(", which") : std::string("max mode"),
                             " does not support scaling the gradient by the frequency"));
  }
  check_dims(where, "argmax", *argmax, bags, bags_what, d, d_what);
  for (Index k = 0; k < argmax->size(); ++k) {
    const TokenId a = argmax->data()[k];
    if (a < -1 || a >= vocab) [[unlikely]] {
      const std::string of = feature >= 0 ? text(" of feature ", feature) : std::string();
      throw IndexError(
          message(where, "argmax id ", a, of, " at position ", k, " is outside [-1, ", vocab, ")"),
          k, a, vocab);
    }
  }
}

/// Bag boundaries [B + 1] of the n ids of `ids` from PyTorch's offsets (any range of integers;
/// include_last_offset: offsets[B] is the end of the last bag, the CSR layout), with PyTorch's
/// checks and wording, the one check of offsets of every bag call: ValueError for an unsigned
/// offset above INT64_MAX; ShapeError if include_last_offset and there is no offset; ValueError if
/// offsets[0] != 0, offsets decrease, or ids lie after the last offset; IndexError if an offset
/// exceeds n.
template <class R, class O>
[[nodiscard]] std::vector<Index> bag_bounds(const R& ids, const O& offsets,
                                            bool include_last_offset, Where where) {
  const auto n = static_cast<Index>(std::size(ids));
  return with_ids(offsets, [&](auto off) {
    check_int64_range(off, where, "offsets");
    const auto m = static_cast<Index>(off.size());
    std::vector<Index> bounds;
    bounds.reserve(static_cast<std::size_t>(m) + 1);
    if (include_last_offset && m == 0) {
      throw ShapeError(
          message(where, "include_last_offset: number of offsets should be at least 1"), 0, 1, 0);
    }
    if (m > 0 && off[0] != 0) {
      throw ValueError(message(where,
                               "offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                               "has to start from position 0. However, got ",
                               static_cast<std::int64_t>(off[0])),
                       static_cast<double>(off[0]));
    }
    for (Index b = 0; b < m; ++b) {
      const auto v = static_cast<std::int64_t>(off[static_cast<std::size_t>(b)]);
      if (b > 0 && v < bounds.back()) {
        throw ValueError(message(where, "offsets must be non-decreasing, but offsets[", b,
                                 "] = ", v, " < offsets[", b - 1, "] = ", bounds.back()),
                         static_cast<double>(v));
      }
      if (v > n) {
        throw IndexError(message(where, "offsets[", b, "] = ", v,
                                 " can not be greater than input's length (", n, ")"),
                         b, v, n + 1);
      }
      bounds.push_back(static_cast<Index>(v));
    }
    if (!include_last_offset) bounds.push_back(n);
    if (bounds.empty() ? n > 0 : bounds.back() != n) {
      const Index last = bounds.empty() ? 0 : bounds.back();
      throw ValueError(message(where, "ids [", last, ", ", n,
                               ") lie after the last offset and would belong to no bag"),
                       static_cast<double>(last));
    }
    if (bounds.empty()) bounds.push_back(0);
    return bounds;
  });
}

/// Bag boundaries [B + 1] of the n ids of `ids` from Caffe2/FBGEMM lengths (any range of
/// integers; bag b has lengths[b] ids), the one check of lengths of every bag call: ValueError for
/// an unsigned length above INT64_MAX or a negative length, ShapeError if the lengths do not sum
/// to n.
template <class R, class L>
[[nodiscard]] std::vector<Index> bag_bounds_from_lengths(const R& ids, const L& lengths,
                                                         Where where) {
  const auto n = static_cast<Index>(std::size(ids));
  return with_ids(lengths, [&](auto len) {
    check_int64_range(len, where, "lengths");
    std::vector<Index> bounds{0};
    bounds.reserve(len.size() + 1);
    for (std::size_t b = 0; b < len.size(); ++b) {
      const auto v = static_cast<std::int64_t>(len[b]);
      if (v < 0) {
        throw ValueError(message(where, "lengths[", b, "] = ", v, " is negative"),
                         static_cast<double>(v));
      }
      bounds.push_back(bounds.back() + static_cast<Index>(v));
    }
    if (bounds.back() != n) {
      throw ShapeError(
          message(where, "lengths sum to ", bounds.back(), ", expected the number of ids = ", n), 0,
          n, bounds.back());
    }
    return bounds;
  });
}

}  // namespace detail

/// Options of one EmbeddingBag call.
template <class T>
struct BagOptions {
  /// Offsets form only: offsets has B + 1 entries, the last one the end of the last bag
  /// (PyTorch's include_last_offset=True, the CSR layout).
  bool include_last_offset = false;
  /// One weight per id, multiplying its row before the sum (sum mode only); empty = none.
  std::span<const T> per_sample_weights = {};
};

/// Pooled embedding lookups, as torch.nn.EmbeddingBag and FBGEMM's pooled lookups:
/// out[b] = pool over the ids of bag b of row(id), over any table: EmbeddingBag<float> and
/// EmbeddingBag<double> pool a trainable Embedding; EmbeddingBag<HalfEmbedding>,
/// EmbeddingBag<QuantizedEmbedding>, EmbeddingBag<EmbeddingView<float>>, ... pool the rows of that
/// table, decoded to float (each row decoded once, then pooled exactly as a float table holding
/// the decoded values would be).
///
/// Bags: `offsets` (PyTorch): bag b is ids[offsets[b] .. offsets[b+1]) and the last bag runs to the
/// end of ids (or to offsets[B] with include_last_offset); `lengths` (Caffe2 / FBGEMM): bag b has
/// lengths[b] consecutive ids. Empty bags give a zero row.
///
/// Modes: sum (optionally × per_sample_weights), mean (over the pooled ids), max (element-wise;
/// the first maximum wins ties; forward can record the argmax ids, which the backward needs).
/// Ids equal to a trainable table's padding row (Embedding::set_padding_idx) are left out of the
/// pooling and of the mean's count, as PyTorch's padding_idx; a bag of only padding gives zeros.
///
/// Scale: no √d_model here. Bags pool the unscaled rows, as torch.nn.EmbeddingBag (the √d scale
/// is a convention of transformer inputs, which use Embedding::forward).
///
/// The table is embedding(): for an Embedding its optimizers, padding row, freezing and I/O all
/// apply. Ids, offsets and lengths are any contiguous ranges of integers.
///
/// Thread safety: const members may run concurrently. With OpenMP, bags are split across threads;
/// results are bit-identical for any thread count.
///
/// Example:
/// ```cpp
/// ember::EmbeddingBag<float> bag(1000, 64, ember::BagMode::mean);
/// std::vector<int> ids{4, 8, 15, 16, 23, 42}, offsets{0, 2, 2};   // bags {4, 8}, {}, {15 .. 42}
/// ember::RowMatrix<float> pooled = bag.forward(ids, offsets);     // 3 x 64, row 1 is zeros
/// ```
namespace detail {
struct BagAccess;
}  // namespace detail

template <class X>
class EmbeddingBag {
 public:
  /// The table pooled over.
  using Table = bag_table_t<X>;
  static_assert(EmbeddingTable<Table>,
                "ember::EmbeddingBag<X>: X must be float, double or an ember table type");
  /// The value type of the pooled rows (float for every reduced or quantized table).
  using Scalar = typename Table::Value;

 private:
  using T = Scalar;

 public:
  /// A vocab_size x d_model table initialised as the table type's seeded constructor does
  /// (Embedding's default: N(0, 1/d_model)).
  /// Throws: ShapeError if a size is not positive.
  EmbeddingBag(Index vocab_size, Index d_model, BagMode mode, std::uint64_t seed = 0) requires
      std::constructible_from<Table, Index, Index, std::uint64_t> : emb_(vocab_size, d_model, seed),
                                                                    mode_(mode) {}

  /// Pools over an existing table (moved in; an Embedding keeps its padding row and flags).
  EmbeddingBag(Table table, BagMode mode) : emb_(std::move(table)), mode_(mode) {}

  /// The pooling mode.
  [[nodiscard]] BagMode mode() const noexcept { return mode_; }
  /// The underlying table (for optimizers, padding row, I/O).
  [[nodiscard]] const Table& embedding() const noexcept { return emb_; }
  /// The underlying table, writable.
  [[nodiscard]] Table& embedding() noexcept { return emb_; }
  /// Number of rows V.
  [[nodiscard]] Index vocab_size() const noexcept { return emb_.vocab_size(); }
  /// Row width d_model.
  [[nodiscard]] Index d_model() const noexcept { return emb_.d_model(); }

  // ---- forward --------------------------------------------------------------------------------

  /// Pools the bags given by `offsets` (PyTorch's layout). Returns B x d.
  ///
  /// Shapes:  ids[n], offsets[B] (or [B + 1] with include_last_offset),
  ///          per_sample_weights[n] -> out[B, d].
  /// Throws:  ValueError if offsets[0] != 0, offsets decrease, ids lie after the last offset, or
  ///          per_sample_weights are given outside sum mode; IndexError if an offset exceeds n or
  ///          an id is outside [0, vocab_size()); ShapeError if per_sample_weights has not n
  ///          entries or out is not B x d. Nothing is written when it throws.
  /// Complexity: O(n·d + B·d).
  template <class R, class O>
  [[nodiscard]] RowMatrix<T> forward(const R& ids, const O& offsets,
                                     const BagOptions<T>& options = {}) const {
    const detail::Where where{name_, "forward"};
    const std::vector<Index> bounds =
        detail::bag_bounds(ids, offsets, options.include_last_offset, where);
    RowMatrix<T> out(static_cast<Index>(bounds.size()) - 1, d_model());
    forward_impl(ids, bounds, out, options, nullptr, where);
    return out;
  }

  /// forward into out (B x d, may be a block); in max mode, `argmax` (if given) is resized to
  /// B x d and receives the winning id of each element (-1 for an empty bag).
  /// Throws:  as forward; ValueError if argmax is given outside max mode.
  template <class R, class O>
  void forward(const R& ids, const O& offsets, Eigen::Ref<RowMatrix<T>> out,
               const BagOptions<T>& options = {}, BagArgmax* argmax = nullptr) const {
    const detail::Where where{name_, "forward"};
    const std::vector<Index> bounds =
        detail::bag_bounds(ids, offsets, options.include_last_offset, where);
    forward_impl(ids, bounds, out, options, argmax, where);
  }

  /// Pools the bags given by `lengths` (Caffe2 / FBGEMM layout): bag b has lengths[b] ids.
  /// Shapes:  ids[n], lengths[B] with Σ lengths = n -> out[B, d].
  /// Throws:  ValueError for a negative length or include_last_offset set; ShapeError if the
  ///          lengths do not sum to n; otherwise as forward.
  template <class R, class L>
  [[nodiscard]] RowMatrix<T> forward_lengths(const R& ids, const L& lengths,
                                             const BagOptions<T>& options = {}) const {
    const detail::Where where{name_, "forward_lengths"};
    const std::vector<Index> bounds = bounds_from_lengths(ids, lengths, options, where);
    RowMatrix<T> out(static_cast<Index>(bounds.size()) - 1, d_model());
    forward_impl(ids, bounds, out, options, nullptr, where);
    return out;
  }

  /// forward_lengths into out, with the optional argmax of max mode.
  template <class R, class L>
  void forward_lengths(const R& ids, const L& lengths, Eigen::Ref<RowMatrix<T>> out,
                       const BagOptions<T>& options = {}, BagArgmax* argmax = nullptr) const {
    const detail::Where where{name_, "forward_lengths"};
    const std::vector<Index> bounds = bounds_from_lengths(ids, lengths, options, where);
    forward_impl(ids, bounds, out, options, argmax, where);
  }

  // ---- backward -------------------------------------------------------------------------------

  /// Accumulates the table gradient of forward(ids, offsets) into grad: for sum,
  /// grad[ids[i]] += w_i · grad_out[b(i)]; for mean, grad_out[b] / (pooled count of b); for max,
  /// grad_out[b, c] goes to row argmax(b, c) only. The padding row gets nothing. If
  /// grad_per_sample_weights is non-empty (sum mode with weights), it receives
  /// dL/dw_i = grad_out[b(i)] · weight().row(ids[i]) (0 for padding ids).
  ///
  /// Shapes:  ids[n], offsets as forward, grad_out[B, d], argmax[B, d] (max mode),
  ///          grad_per_sample_weights[n].
  /// Throws:  everything forward throws for the same input (ids are validated here too, which
  ///          PyTorch leaves to the forward); ShapeError if grad_out is not B x d, argmax is not
  ///          B x d or grad_per_sample_weights has not n entries; StateError if max mode has no
  ///          argmax or the table scales gradients by frequency (unsupported with max, as in
  ///          PyTorch); IndexError for an argmax entry outside [-1, vocab_size()). grad is
  ///          unchanged when it throws.
  /// Complexity: O(n + u log u + n·d) for u distinct ids; sum and mean gather grad_out rows
  /// straight into the gradient (O(n) extra memory, no n x d intermediate). Max: O(B·d·min(w, 64)
  /// + k·d) for at most w distinct winners per bag and k (bag, winning id) pairs (a bag with more
  /// than 64 winners is sorted instead, O(d log d)), each pair masking its bag's grad_out row
  /// inside the accumulation (O(k + d) extra memory, no k x d intermediate).
  template <class R, class O>
  void backward(const R& ids, const O& offsets, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad, const BagOptions<T>& options = {},
                const BagArgmax* argmax = nullptr,
                std::span<T> grad_per_sample_weights = {}) const {
    const detail::Where where{name_, "backward"};
    const std::vector<Index> bounds =
        detail::bag_bounds(ids, offsets, options.include_last_offset, where);
    backward_impl(ids, bounds, grad_out, options, argmax, grad_per_sample_weights, where,
                  accumulate_into(grad, where));
  }

  /// backward of forward_lengths(ids, lengths). Throws: as backward and forward_lengths.
  template <class R, class L>
  void backward_lengths(const R& ids, const L& lengths,
                        const Eigen::Ref<const RowMatrix<T>>& grad_out, SparseRowGrad<T>& grad,
                        const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                        std::span<T> grad_per_sample_weights = {}) const {
    const detail::Where where{name_, "backward_lengths"};
    const std::vector<Index> bounds = bounds_from_lengths(ids, lengths, options, where);
    backward_impl(ids, bounds, grad_out, options, argmax, grad_per_sample_weights, where,
                  accumulate_into(grad, where));
  }

  /// The backward of forward(ids, offsets) fused with a step of `opt` (any ember::optim
  /// optimizer) on the table: each distinct row's gradient is summed and the row updated at
  /// once, with no SparseRowGrad written. Bit-identical to `backward(ids, offsets, grad_out, g,
  /// options, argmax, w)` with an empty g followed by `opt.step(embedding(), g)`, in every mode,
  /// for any thread count, padding row and scale_grad_by_freq (with `fused` at its defaults).
  /// grad_per_sample_weights, if given, is computed from the rows before the update.
  ///
  /// Shapes:  as backward.
  /// Throws:  as backward; StateError if the table is frozen; ValueError for a bad `fused`
  ///          option (or, with the optimizer's check_finite, a non-finite grad_out element).
  ///          Nothing changes when it throws.
  /// Complexity: as backward, plus the update of the u distinct rows, O(u·d).
  template <class R, class O, class Opt>
  requires std::same_as<Table, Embedding<T>>
  void backward_step(const R& ids, const O& offsets, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     Opt& opt, const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                     const optim::FusedStepOptions& fused = {},
                     std::span<T> grad_per_sample_weights = {}) {
    const detail::Where where{name_, "backward_step"};
    const std::vector<Index> bounds =
        detail::bag_bounds(ids, offsets, options.include_last_offset, where);
    backward_impl(ids, bounds, grad_out, options, argmax, grad_per_sample_weights, where,
                  step_with(opt, grad_out, fused, where));
  }

  /// backward_step of forward_lengths(ids, lengths). Throws: as backward_step and
  /// forward_lengths.
  template <class R, class L, class Opt>
  requires std::same_as<Table, Embedding<T>>
  void backward_step_lengths(const R& ids, const L& lengths,
                             const Eigen::Ref<const RowMatrix<T>>& grad_out, Opt& opt,
                             const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                             const optim::FusedStepOptions& fused = {},
                             std::span<T> grad_per_sample_weights = {}) {
    const detail::Where where{name_, "backward_step_lengths"};
    const std::vector<Index> bounds = bounds_from_lengths(ids, lengths, options, where);
    backward_impl(ids, bounds, grad_out, options, argmax, grad_per_sample_weights, where,
                  step_with(opt, grad_out, fused, where));
  }

 private:
  /// Bag boundaries [B + 1] from Caffe2/FBGEMM lengths (detail::bag_bounds_from_lengths).
  template <class R, class L>
  static std::vector<Index> bounds_from_lengths(const R& ids, const L& lengths,
                                                const BagOptions<T>& options, detail::Where where) {
    if (options.include_last_offset) {
      throw ValueError(
          detail::message(where, "include_last_offset applies to offsets, not lengths"), 1.0);
    }
    return detail::bag_bounds_from_lengths(ids, lengths, where);
  }

  /// Throws ValueError "<what> (got mode='<mode>')" unless the bag pools in `mode`.
  void check_mode(BagMode mode, const char* what, detail::Where where) const {
    if (mode_ != mode) {
      throw ValueError(detail::message(where, what, " (got mode='", to_string(mode_), "')"),
                       static_cast<double>(static_cast<int>(mode_)));
    }
  }

  /// Checks the per-sample weights against the mode and n.
  void check_weights(const BagOptions<T>& options, Index n, detail::Where where) const {
    if (options.per_sample_weights.empty()) return;
    check_mode(BagMode::sum, "per_sample_weights is only supported for mode='sum'", where);
    detail::check_entries(where, "per_sample_weights", n,
                          static_cast<Index>(options.per_sample_weights.size()),
                          "the number of ids");
  }

  /// detail::bag_table_options of the table.
  [[nodiscard]] AccumulateOptions table_options() const noexcept {
    return detail::bag_table_options(emb_);
  }
  [[nodiscard]] TokenId skip_row() const noexcept { return table_options().skip_row; }
  [[nodiscard]] detail::Pool pool() const noexcept { return detail::pool_of(mode_); }

  template <class R>
  void forward_impl(const R& ids, const std::vector<Index>& bounds, Eigen::Ref<RowMatrix<T>> out,
                    const BagOptions<T>& options, BagArgmax* argmax, detail::Where where) const {
    detail::with_ids(ids, [&](auto span) {
      const auto n = static_cast<Index>(span.size());
      const auto bags = static_cast<Index>(bounds.size()) - 1;
      check_weights(options, n, where);
      detail::check_dims(where, "out", out, bags, "the number of bags", d_model(), "d_model");
      if (argmax != nullptr)
        check_mode(BagMode::max, "argmax is recorded in mode='max' only", where);
      detail::check_ids(span, vocab_size(), where);
      if (argmax != nullptr) argmax->resize(bags, d_model());
      detail::bag_pool(detail::rows_of(emb_), span, std::span<const Index>(bounds), pool(),
                       weights_ptr(options), skip_row(), detail::mutable_table(out),
                       argmax != nullptr ? argmax->data() : nullptr);
    });
  }

  /// Where a backward's rows go: sink(ids, rows, needs_scratch, options) receives the positions
  /// of the accumulation (a row policy of detail/scatter.hpp over validated input) and either
  /// accumulates them into a SparseRowGrad or hands them to an optimizer's fused step.
  [[nodiscard]] auto accumulate_into(SparseRowGrad<T>& grad, detail::Where where) const {
    return [&grad, where, this](auto ids, const auto& rows, bool needs_scratch,
                                AccumulateOptions acc) {
      // The ids were checked at the door; this throws (before any change) only if grad is bound
      // to another table shape.
      detail::SparseRowGradAccess::check_shape(grad, where, vocab_size(), d_model());
      detail::SparseRowGradAccess::accumulate_validated(grad, ids, rows, d_model(), T(1),
                                                        vocab_size(), acc, needs_scratch);
    };
  }
  template <class Opt>
  [[nodiscard]] auto step_with(Opt& opt, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                               const optim::FusedStepOptions& fused, detail::Where where) {
    return [&opt, &grad_out, &fused, where, this](auto ids, const auto& rows, bool needs_scratch,
                                                  AccumulateOptions acc) {
      detail::FusedStepAccess::run(opt, emb_,
                                   detail::fused_rows(ids, rows, needs_scratch, T(1), acc),
                                   detail::FusedStepChecks<T>{&grad_out, nullptr, &fused, where});
    };
  }

  template <class R, class Sink>
  void backward_impl(const R& ids, const std::vector<Index>& bounds,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out, const BagOptions<T>& options,
                     const BagArgmax* argmax, std::span<T> grad_weights, detail::Where where,
                     Sink&& sink) const {
    detail::with_ids(ids, [&](auto span) {
      const auto n = static_cast<Index>(span.size());
      const auto bags = static_cast<Index>(bounds.size()) - 1;
      const Index d = d_model();
      check_weights(options, n, where);
      detail::check_dims(where, "grad_out", grad_out, bags, "the number of bags", d, "d_model");
      detail::check_ids(span, vocab_size(), where);
      if (!grad_weights.empty()) {
        detail::check_entries(where, "grad_per_sample_weights", n,
                              static_cast<Index>(grad_weights.size()), "the number of ids");
      }
      if (mode_ == BagMode::max) {
        detail::check_max_backward(argmax, table_options().scale_grad_by_freq, bags, d,
                                   vocab_size(), where, "the number of bags", "d_model");
      }
      // dL/dw from the rows as the forward saw them: before a fused step moves them, and kept
      // aside until the sink (which may throw) has run.
      std::vector<T> weight_grads;
      if (!grad_weights.empty()) fill_weight_grads(span, bounds, grad_out, weight_grads);
      // Position i contributes coef_i · grad_out[bag of i] (a max bag: one position per (bag,
      // winning id), grad_out[bag] masked to the columns that id won), gathered by the
      // accumulation itself (no positions x d matrix): the same rows, summed in the same order.
      // The forward never records the padding row, but an argmax recorded before
      // set_padding_idx (or built by hand) may name it: it still gets nothing.
      detail::BagGradPositions<T> positions;
      detail::append_bag_positions(
          positions, span, std::span<const Index>(bounds), pool(), weights_ptr(options),
          mode_ == BagMode::max ? argmax->data() : nullptr, d, grad_out.outerStride(), 0,
          skip_row(), mode_ == BagMode::mean || weights_ptr(options) != nullptr,
          mode_ == BagMode::max);
      sink(std::span<const TokenId>(positions.ids), positions.rows(grad_out.data(), d),
           positions.needs_scratch(), table_options());
      std::copy(weight_grads.begin(), weight_grads.end(), grad_weights.begin());
    });
  }

  template <class Id>
  void fill_weight_grads(std::span<const Id> ids, const std::vector<Index>& bounds,
                         const Eigen::Ref<const RowMatrix<T>>& grad_out,
                         std::vector<T>& out) const {
    out.resize(ids.size());
    const auto rows = detail::rows_of(emb_);
    RowVector<T> row(d_model());
    for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
      for (Index i = bounds[b]; i < bounds[b + 1]; ++i) {
        const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
        if (id == skip_row()) {
          out[static_cast<std::size_t>(i)] = T(0);
          continue;
        }
        rows.decode(static_cast<Index>(id), T(1), row.data());
        out[static_cast<std::size_t>(i)] = grad_out.row(static_cast<Index>(b)).dot(row);
      }
    }
  }

  static const T* weights_ptr(const BagOptions<T>& options) noexcept {
    return options.per_sample_weights.empty() ? nullptr : options.per_sample_weights.data();
  }

  friend struct detail::BagAccess;

  Table emb_;
  BagMode mode_;
  /// The name errors give the calls: "EmbeddingBag", or the layer over it (detail::BagAccess).
  const char* name_ = "EmbeddingBag";
};

namespace detail {
/// The door of a layer that hands its input to a bag (EmbeddingBag, TableBatchedBags) and checks
/// none of it itself: the bag's checks then run once, and their errors name that layer.
struct BagAccess {
  template <class Bag>
  static void name_calls(Bag& bag, const char* layer_name) noexcept {
    bag.name_ = layer_name;
  }
};
}  // namespace detail

}  // namespace ember::inline EMBER_ISA
