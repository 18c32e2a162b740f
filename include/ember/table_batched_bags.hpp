/// TableBatchedBags<X>: the bags of many features over many tables in one call - one forward into
/// a B x (sum of widths) output and one backward, fused with the optimizers if asked, that runs
/// the tables in parallel (FBGEMM's table-batched embedding, TorchRec's EmbeddingBagCollection).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <exception>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/bag.hpp"
#include "ember/check.hpp"
#include "ember/config.hpp"
#include "ember/detail/bag_pool.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/parallel.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// One feature of a TableBatchedBags: the table its ids index and how its bags pool.
struct BagFeature {
  Index table = 0;              ///< index of the table in the collection
  BagMode mode = BagMode::sum;  ///< sum, mean or max
  bool weighted = false;        ///< sum only: each row times its per_sample_weights entry
};

/// A collection of tables (any vocabulary sizes and widths) and the features that look them up,
/// pooled in one call into out[B, W], W = the sum of the features' widths, feature f at columns
/// [column(f), column(f) + its table's d_model) in feature order. Several features may share a
/// table (a user id and a "viewed by" id over one table): their rows then accumulate into one
/// gradient, and a fused step updates each row once.
///
/// Input layout (FBGEMM's): `indices` holds every feature's ids, feature after feature;
/// `offsets[F·B + 1]` gives bag b of feature f as indices[offsets[f·B + b] .. offsets[f·B + b + 1])
/// (non-decreasing from 0 to n), or `lengths[F·B]` its number of ids. Each feature pools as
/// EmbeddingBag does in its mode (a table's padding row left out, empty bags give zeros), with
/// the same bits: a feature's columns equal EmbeddingBag<X>(table, mode).forward on its bags.
///
/// Backward: the gradient of each table (std::vector<SparseRowGrad>, one per table), or fused
/// with one optimizer per table (backward_step): each table's distinct rows are summed over all
/// the features that read it and stepped at once. Tables run in parallel when there are enough
/// of them, otherwise each one's rows do. A table's frequency scaling counts its ids over all its
/// features.
///
/// Tables: Embedding<T> for a scalar X, else any ember table (HalfEmbedding, QuantizedEmbedding,
/// views) for inference lookups; backward and backward_step need Embedding tables.
///
/// Example (two tables, three features; B = 2):
/// ```cpp
/// std::vector<ember::Embedding<float>> tables;
/// tables.emplace_back(1000, 16, 1);                      // users
/// tables.emplace_back(50, 8, 2);                         // categories
/// ember::TableBatchedBags<float> tbe(std::move(tables),
///     {{.table = 0}, {.table = 1, .mode = ember::BagMode::mean}, {.table = 0}});
/// // Bags: feature 0 {3}, {7}; feature 1 {1, 2}, {2}; feature 2 {9, 12}, {40}.
/// std::vector<int> indices{3, 7, 1, 2, 2, 9, 12, 40};
/// std::vector<int> offsets{0, 1, 2, 4, 5, 7, 8};
/// ember::RowMatrix<float> out = tbe.forward(indices, offsets);  // 2 x (16 + 8 + 16)
/// ```
template <class X = float>
class TableBatchedBags {
 public:
  /// The type of every table of the collection.
  using Table = bag_table_t<X>;
  static_assert(EmbeddingTable<Table>,
                "ember::TableBatchedBags<X>: X must be float, double or an ember table type");
  /// The value type of the pooled rows (float for every reduced or quantized table).
  using Scalar = typename Table::Value;

 private:
  using T = Scalar;

 public:
  /// The tables and the features over them.
  /// Throws:  ValueError if there is no table or no feature, or a weighted feature is not in sum
  ///          mode; IndexError if a feature names a table outside [0, tables.size()).
  TableBatchedBags(std::vector<Table> tables, std::vector<BagFeature> features)
      : tables_(std::move(tables)), features_(std::move(features)) {
    init();
  }

  /// One feature per table, table t read by feature t, all pooling in `mode`.
  /// Throws:  ValueError if there is no table.
  TableBatchedBags(std::vector<Table> tables, BagMode mode) : tables_(std::move(tables)) {
    for (std::size_t t = 0; t < tables_.size(); ++t)
      features_.push_back({static_cast<Index>(t), mode, false});
    init();
  }

  /// Number of tables.
  [[nodiscard]] Index num_tables() const noexcept { return static_cast<Index>(tables_.size()); }
  /// Number of features F.
  [[nodiscard]] Index num_features() const noexcept { return static_cast<Index>(features_.size()); }
  /// Columns of the output: the sum of the features' widths.
  [[nodiscard]] Index width() const noexcept { return columns_.back(); }
  /// The first output column of feature f.
  /// Throws: IndexError if f is outside [0, num_features()).
  [[nodiscard]] Index column(Index f) const {
    detail::check_index({"TableBatchedBags", "column"}, "feature", f, num_features());
    return column_at(f);
  }
  /// Feature f. Throws: IndexError if f is outside [0, num_features()).
  [[nodiscard]] const BagFeature& feature(Index f) const {
    detail::check_index({"TableBatchedBags", "feature"}, "feature", f, num_features());
    return feature_at(f);
  }
  /// Table t (for its optimizer, padding row, I/O).
  /// Throws: IndexError if t is outside [0, num_tables()).
  [[nodiscard]] const Table& table(Index t) const {
    detail::check_index({"TableBatchedBags", "table"}, "table", t, num_tables());
    return table_at(t);
  }
  /// Table t, writable. Throws: as table(t) const.
  [[nodiscard]] Table& table(Index t) {
    detail::check_index({"TableBatchedBags", "table"}, "table", t, num_tables());
    return tables_[static_cast<std::size_t>(t)];
  }

  // ---- forward --------------------------------------------------------------------------------

  /// Pools every feature's bags. Returns B x width().
  ///
  /// Shapes:  indices[n], offsets[F·B + 1], per_sample_weights[n] (with a weighted feature;
  ///          only the weighted features' entries are read) -> out[B, W].
  /// Throws:  ShapeError if offsets' size is not F·B + 1 for some B >= 0 or per_sample_weights
  ///          has not n entries; ValueError if offsets[0] != 0, offsets decrease, the last is
  ///          below n, or per_sample_weights are given without a weighted feature; IndexError if
  ///          an offset exceeds n or an id is outside its feature's table (EmbeddingBag's checks
  ///          and wording). Nothing is written when it throws.
  /// Complexity: O(n·d + B·W); each feature's bags split across threads.
  template <class R, class O>
  [[nodiscard]] RowMatrix<T> forward(const R& indices, const O& offsets,
                                     std::span<const T> per_sample_weights = {}) const {
    const detail::Where where{name_, "forward"};
    const Layout layout = from_offsets(indices, offsets, where);
    RowMatrix<T> out(layout.batch, width());
    forward_impl(indices, layout, out, per_sample_weights, nullptr, where);
    return out;
  }

  /// forward into out (B x width(), may be a block); with a max feature, `argmax` (if given) is
  /// resized to F entries and entry f of a max feature to B x d, receiving the winning id of each
  /// element (-1 for an empty bag), as EmbeddingBag::forward records it for its backward.
  /// Throws:  as forward, and ShapeError if out is not B x width().
  template <class R, class O>
  void forward(const R& indices, const O& offsets, Eigen::Ref<RowMatrix<T>> out,
               std::span<const T> per_sample_weights = {},
               std::vector<BagArgmax>* argmax = nullptr) const {
    const detail::Where where{name_, "forward"};
    const Layout layout = from_offsets(indices, offsets, where);
    forward_impl(indices, layout, out, per_sample_weights, argmax, where);
  }

  /// forward with bag sizes: bag b of feature f has lengths[f·B + b] ids.
  /// Throws:  ShapeError if lengths' size is not a multiple of F or they do not sum to n;
  ///          ValueError for a negative length; otherwise as forward.
  template <class R, class L>
  [[nodiscard]] RowMatrix<T> forward_lengths(const R& indices, const L& lengths,
                                             std::span<const T> per_sample_weights = {}) const {
    const detail::Where where{name_, "forward_lengths"};
    const Layout layout = from_lengths(indices, lengths, where);
    RowMatrix<T> out(layout.batch, width());
    forward_impl(indices, layout, out, per_sample_weights, nullptr, where);
    return out;
  }

  /// forward_lengths into out, with the optional argmax of max features.
  template <class R, class L>
  void forward_lengths(const R& indices, const L& lengths, Eigen::Ref<RowMatrix<T>> out,
                       std::span<const T> per_sample_weights = {},
                       std::vector<BagArgmax>* argmax = nullptr) const {
    const detail::Where where{name_, "forward_lengths"};
    const Layout layout = from_lengths(indices, lengths, where);
    forward_impl(indices, layout, out, per_sample_weights, argmax, where);
  }

  // ---- backward -------------------------------------------------------------------------------

  /// Accumulates each table's gradient of forward(indices, offsets) into grads[t] (resized to
  /// num_tables() if empty): each feature's bags contribute as in EmbeddingBag::backward, all
  /// features of a table summed into one gradient row per distinct id (in feature, then position
  /// order). With a table read by one feature only, grads[t] equals that EmbeddingBag's backward
  /// bit for bit.
  ///
  /// Shapes:  as forward; grad_out[B, W]; argmax as recorded by forward (max features).
  /// Throws:  as forward; ShapeError if grad_out is not B x W, grads has neither 0 nor
  ///          num_tables() entries, a gradient is bound to another shape than its table, or an
  ///          argmax entry is not B x d; StateError if a max feature has no argmax or its table
  ///          scales gradients by frequency; IndexError for an argmax id outside [-1, V).
  ///          Nothing changes when it throws.
  /// Complexity: O(n + u log u + n·d) over all tables for u distinct (table, id) pairs.
  template <class R, class O>
  requires std::same_as<Table, Embedding<T>>
  void backward(const R& indices, const O& offsets, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                std::vector<SparseRowGrad<T>>& grads, std::span<const T> per_sample_weights = {},
                const std::vector<BagArgmax>* argmax = nullptr) {
    const detail::Where where{name_, "backward"};
    const Layout layout = from_offsets(indices, offsets, where);
    backward_impl(indices, layout, grad_out, per_sample_weights, argmax, where,
                  AccumulateSink{this, &grads, where});
  }

  /// backward of forward_lengths(indices, lengths). Throws: as backward and forward_lengths.
  template <class R, class L>
  requires std::same_as<Table, Embedding<T>>
  void backward_lengths(const R& indices, const L& lengths,
                        const Eigen::Ref<const RowMatrix<T>>& grad_out,
                        std::vector<SparseRowGrad<T>>& grads,
                        std::span<const T> per_sample_weights = {},
                        const std::vector<BagArgmax>* argmax = nullptr) {
    const detail::Where where{name_, "backward_lengths"};
    const Layout layout = from_lengths(indices, lengths, where);
    backward_impl(indices, layout, grad_out, per_sample_weights, argmax, where,
                  AccumulateSink{this, &grads, where});
  }

  /// The backward fused with a step of optimizers[t] on each table t (any ember::optim
  /// optimizer type, one object per table: their state is per table). Bit-identical to
  /// `backward(indices, offsets, grad_out, grads, ...)` with empty grads followed by
  /// `optimizers[t].step(table(t), grads[t])` for every t, for any thread count (with `fused`
  /// at its defaults). Every optimizer counts a step, also one whose table got no ids.
  ///
  /// Shapes:  as backward; optimizers[num_tables()].
  /// Throws:  as backward; ShapeError if optimizers has not num_tables() entries; StateError if
  ///          a table is frozen; ValueError for a bad `fused` option (or, with an optimizer's
  ///          check_finite, a non-finite grad_out element). Nothing changes when it throws.
  /// Complexity: as backward, plus the update of the distinct rows.
  template <class R, class O, class Opt>
  requires std::same_as<Table, Embedding<T>>
  void backward_step(const R& indices, const O& offsets,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out, std::span<Opt> optimizers,
                     std::span<const T> per_sample_weights = {},
                     const std::vector<BagArgmax>* argmax = nullptr,
                     const optim::FusedStepOptions& fused = {}) {
    const detail::Where where{name_, "backward_step"};
    const Layout layout = from_offsets(indices, offsets, where);
    backward_impl(indices, layout, grad_out, per_sample_weights, argmax, where,
                  StepSink<Opt>{this, optimizers, &grad_out, &fused, where});
  }

  /// backward_step of forward_lengths(indices, lengths). Throws: as backward_step and
  /// forward_lengths.
  template <class R, class L, class Opt>
  requires std::same_as<Table, Embedding<T>>
  void backward_step_lengths(const R& indices, const L& lengths,
                             const Eigen::Ref<const RowMatrix<T>>& grad_out,
                             std::span<Opt> optimizers, std::span<const T> per_sample_weights = {},
                             const std::vector<BagArgmax>* argmax = nullptr,
                             const optim::FusedStepOptions& fused = {}) {
    const detail::Where where{name_, "backward_step_lengths"};
    const Layout layout = from_lengths(indices, lengths, where);
    backward_impl(indices, layout, grad_out, per_sample_weights, argmax, where,
                  StepSink<Opt>{this, optimizers, &grad_out, &fused, where});
  }

 private:
  // column(f), feature(f), table(t) without the check, for indices the class itself made valid
  // (f < num_features(), t a feature's table or < num_tables()).
  [[nodiscard]] Index column_at(Index f) const noexcept {
    return columns_[static_cast<std::size_t>(f)];
  }
  [[nodiscard]] const BagFeature& feature_at(Index f) const noexcept {
    return features_[static_cast<std::size_t>(f)];
  }
  [[nodiscard]] const Table& table_at(Index t) const noexcept {
    return tables_[static_cast<std::size_t>(t)];
  }
  [[nodiscard]] Table& table_at(Index t) noexcept { return tables_[static_cast<std::size_t>(t)]; }

  /// The validated shape of a call: B and the absolute bag bounds, bounds[f·B + b] the first
  /// position of bag b of feature f (F·B + 1 entries, the last n).
  struct Layout {
    Index batch = 0;
    std::vector<Index> bounds;
  };

  /// What one table's backward accumulates: its positions over all its features.
  using TableRows = detail::BagGradPositions<T>;

  void init() {
    constexpr const char* where = "TableBatchedBags";
    if (tables_.empty() || features_.empty()) {
      throw ValueError(
          detail::message(where, "needs at least one table and one feature, got ", tables_.size(),
                          " tables and ", features_.size(), " features"),
          0.0);
    }
    Index column = 0;
    for (std::size_t f = 0; f < features_.size(); ++f) {
      const BagFeature& feat = features_[f];
      const auto nt = static_cast<Index>(tables_.size());
      if (feat.table < 0 || feat.table >= nt) {
        throw IndexError(detail::message(where, "feature ", f, " names table ", feat.table,
                                         ", outside [0, ", nt, ")"),
                         static_cast<Index>(f), feat.table, nt);
      }
      if (feat.weighted && feat.mode != BagMode::sum) {
        throw ValueError(detail::message(where, "feature ", f,
                                         " is weighted, which needs mode='sum' (got mode='",
                                         to_string(feat.mode), "')"),
                         static_cast<double>(f));
      }
      columns_.push_back(column);
      column += table_at(feat.table).d_model();
    }
    columns_.push_back(column);
  }

  /// B from the number of offsets (F·B + 1, extra = 1) or lengths (F·B, extra = 0) of a call.
  /// Throws ShapeError naming both counts around `entries` that would do, expected() the nearer.
  [[nodiscard]] Index batch_of(Index entries, Index extra, const char* name,
                               detail::Where where) const {
    const Index f = num_features();
    const Index m = entries - extra;
    if (m >= 0 && m % f == 0) return m / f;
    const Index b = m < 0 ? 0 : m / f;  // the counts of B = b and b + 1 surround `entries`
    const Index below = b * f + extra;
    const Index above = below + f;
    const char* layout = extra == 1 ? "F·B + 1" : "F·B";
    if (m < 0) {  // fewer entries than B = 0 needs
      throw ShapeError(
          detail::message(where, name, " has ", entries, detail::entries(entries), ", expected ",
                          layout, " for the ", f, " features: ", below, " (B = 0)"),
          0, below, entries);
    }
    const Index nearer = entries - below <= above - entries ? below : above;
    throw ShapeError(detail::message(where, name, " has ", entries, detail::entries(entries),
                                     ", expected ", layout, " for the ", f, " features: ", below,
                                     " (B = ", b, ") or ", above, " (B = ", b + 1, ")"),
                     0, nearer, entries);
  }

  template <class R, class O>
  Layout from_offsets(const R& indices, const O& offsets, detail::Where where) const {
    return {batch_of(static_cast<Index>(std::ranges::size(offsets)), 1, "offsets", where),
            detail::bag_bounds(indices, offsets, /*include_last_offset=*/true, where)};
  }

  template <class R, class L>
  Layout from_lengths(const R& indices, const L& lengths, detail::Where where) const {
    return {batch_of(static_cast<Index>(std::ranges::size(lengths)), 0, "lengths", where),
            detail::bag_bounds_from_lengths(indices, lengths, where)};
  }

  /// Positions [begin, end) of feature f in the flat indices.
  [[nodiscard]] std::pair<Index, Index> span_of(const Layout& layout, Index f) const noexcept {
    const auto k = static_cast<std::size_t>(f * layout.batch);
    return {layout.bounds[k], layout.bounds[k + static_cast<std::size_t>(layout.batch)]};
  }

  /// Bag bounds of feature f relative to its first position (B + 1 entries).
  [[nodiscard]] std::vector<Index> bounds_of(const Layout& layout, Index f) const {
    const auto k = static_cast<std::ptrdiff_t>(f * layout.batch);
    std::vector<Index> rel(
        layout.bounds.begin() + k,
        layout.bounds.begin() + k + static_cast<std::ptrdiff_t>(layout.batch) + 1);
    const Index first = rel.front();
    for (Index& b : rel) b -= first;
    return rel;
  }

  /// Checks every id against its feature's table and the per-sample weights against n.
  template <class Id>
  void check_inputs(std::span<const Id> ids, const Layout& layout, std::span<const T> weights,
                    detail::Where where) const {
    bool any_weighted = false;
    for (Index f = 0; f < num_features(); ++f) {
      const BagFeature& feat = feature_at(f);
      any_weighted = any_weighted || feat.weighted;
      const auto [begin, end] = span_of(layout, f);
      detail::check_ids(
          ids.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
          table_at(feat.table).vocab_size(), where, {begin, f, feat.table});
    }
    if (weights.empty()) return;
    if (!any_weighted) {
      throw ValueError(
          detail::message(where, "per_sample_weights given, but no feature is weighted"), 0.0);
    }
    detail::check_entries(where, "per_sample_weights", static_cast<Index>(ids.size()),
                          static_cast<Index>(weights.size()), "the number of ids");
  }

  template <class R>
  void forward_impl(const R& indices, const Layout& layout, Eigen::Ref<RowMatrix<T>> out,
                    std::span<const T> weights, std::vector<BagArgmax>* argmax,
                    detail::Where where) const {
    detail::with_ids(indices, [&](auto ids) {
      check_inputs(ids, layout, weights, where);
      detail::check_dims(where, "out", out, layout.batch, "the batch size", width(), "width()");
      if (argmax != nullptr) argmax->assign(static_cast<std::size_t>(num_features()), {});
      for (Index f = 0; f < num_features(); ++f) {
        const BagFeature& feat = feature_at(f);
        const Table& tab = table_at(feat.table);
        const auto [begin, end] = span_of(layout, f);
        const std::vector<Index> bounds = bounds_of(layout, f);
        TokenId* am = nullptr;
        if (argmax != nullptr && feat.mode == BagMode::max) {
          (*argmax)[static_cast<std::size_t>(f)].resize(layout.batch, tab.d_model());
          am = (*argmax)[static_cast<std::size_t>(f)].data();
        }
        const T* w = feat.weighted && !weights.empty() ? weights.data() + begin : nullptr;
        const detail::TableRef<T> block{out.data() + column_at(f), layout.batch, tab.d_model(),
                                        out.outerStride()};
        detail::bag_pool(
            detail::rows_of(tab),
            ids.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
            std::span<const Index>(bounds), detail::pool_of(feat.mode), w,
            detail::bag_table_options(tab).skip_row, block, am);
      }
    });
  }

  /// detail::check_max_backward of every max feature, over its table.
  void check_argmax(const std::vector<BagArgmax>* argmax, Index batch, detail::Where where) const {
    for (Index f = 0; f < num_features(); ++f) {
      if (feature_at(f).mode != BagMode::max) continue;
      const Table& tab = table_at(feature_at(f).table);
      const bool recorded =
          argmax != nullptr && static_cast<Index>(argmax->size()) == num_features();
      detail::check_max_backward(recorded ? &(*argmax)[static_cast<std::size_t>(f)] : nullptr,
                                 tab.scale_grad_by_freq(), batch, tab.d_model(), tab.vocab_size(),
                                 where, "the batch size", "the table's d_model", f);
    }
  }

  /// The positions each table's backward accumulates (see TableRows), grad_out's rows `stride`
  /// values apart.
  template <class Id>
  std::vector<TableRows> table_rows(std::span<const Id> ids, const Layout& layout,
                                    std::span<const T> weights,
                                    const std::vector<BagArgmax>* argmax, Index stride) const {
    std::vector<TableRows> all(tables_.size());
    std::vector<std::uint8_t> needs_coef(tables_.size(), 0);  // 0 or 1 per table
    std::vector<std::uint8_t> has_max(tables_.size(), 0);
    for (const BagFeature& feat : features_) {
      const auto t = static_cast<std::size_t>(feat.table);
      if (feat.mode == BagMode::mean || feat.weighted) needs_coef[t] = 1;
      if (feat.mode == BagMode::max) has_max[t] = 1;
    }
    for (Index f = 0; f < num_features(); ++f) {
      const BagFeature& feat = feature_at(f);
      const auto t = static_cast<std::size_t>(feat.table);
      const Table& tab = table_at(feat.table);
      const auto [begin, end] = span_of(layout, f);
      const std::vector<Index> bounds = bounds_of(layout, f);
      // As the forward: a weighted feature without weights pools unweighted.
      const T* w = feat.weighted && !weights.empty() ? weights.data() + begin : nullptr;
      const TokenId* am =
          feat.mode == BagMode::max ? (*argmax)[static_cast<std::size_t>(f)].data() : nullptr;
      detail::append_bag_positions(
          all[t],
          ids.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin)),
          std::span<const Index>(bounds), detail::pool_of(feat.mode), w, am, tab.d_model(), stride,
          column_at(f), detail::bag_table_options(tab).skip_row, needs_coef[t] != 0,
          has_max[t] != 0);
    }
    return all;
  }

  /// Where a table's rows go: sink.check(t) validates (throws, changes nothing) and
  /// sink.run(t, ids, rows, needs_scratch) accumulates or steps (throws nothing but bad_alloc).
  struct AccumulateSink {
    TableBatchedBags* self;
    std::vector<SparseRowGrad<T>>* grads;
    detail::Where where;
    void check_all() const {
      if (grads->empty()) return;
      detail::check_entries(where, "grads", self->num_tables(), static_cast<Index>(grads->size()),
                            "num_tables()");
      for (Index t = 0; t < self->num_tables(); ++t) {
        const Embedding<T>& tab = self->table_at(t);
        detail::SparseRowGradAccess::check_shape((*grads)[static_cast<std::size_t>(t)], where,
                                                 tab.vocab_size(), tab.d_model(), "table", t);
      }
    }
    void prepare() const { grads->resize(static_cast<std::size_t>(self->num_tables())); }
    template <class Rows>
    void run(Index t, std::span<const TokenId> ids, const Rows& rows, bool needs_scratch) const {
      const Embedding<T>& tab = self->table_at(t);
      detail::SparseRowGradAccess::accumulate_validated((*grads)[static_cast<std::size_t>(t)], ids,
                                                        rows, tab.d_model(), T(1), tab.vocab_size(),
                                                        tab.accumulate_options(), needs_scratch);
    }
  };
  template <class Opt>
  struct StepSink {
    TableBatchedBags* self;
    std::span<Opt> optimizers;
    const Eigen::Ref<const RowMatrix<T>>* grad_out;
    const optim::FusedStepOptions* fused;
    detail::Where where;
    // grad_out is scanned once below, whichever optimizers ask for it.
    [[nodiscard]] detail::FusedStepChecks<T> checks() const {
      return {nullptr, nullptr, fused, where};
    }
    void check_all() const {
      detail::check_entries(where, "optimizers", self->num_tables(),
                            static_cast<Index>(optimizers.size()), "num_tables()");
      bool scan = false;
      for (Index t = 0; t < self->num_tables(); ++t) {
        Opt& opt = optimizers[static_cast<std::size_t>(t)];
        detail::FusedStepAccess::check(opt, self->table_at(t), checks());
        scan = scan || opt.options().check_finite;
      }
      if (scan) detail::check_finite(*grad_out, where, "grad_out");
    }
    void prepare() const {}
    template <class Rows>
    void run(Index t, std::span<const TokenId> ids, const Rows& rows, bool needs_scratch) const {
      Embedding<T>& tab = self->table_at(t);
      detail::FusedStepAccess::apply(
          optimizers[static_cast<std::size_t>(t)], tab,
          detail::fused_rows(ids, rows, needs_scratch, T(1), tab.accumulate_options()), checks());
    }
  };

  template <class R, class Sink>
  void backward_impl(const R& indices, const Layout& layout,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out, std::span<const T> weights,
                     const std::vector<BagArgmax>* argmax, detail::Where where, const Sink& sink) {
    detail::with_ids(indices, [&](auto ids) {
      check_inputs(ids, layout, weights, where);
      detail::check_dims(where, "grad_out", grad_out, layout.batch, "the batch size", width(),
                         "width()");
      check_argmax(argmax, layout.batch, where);
      sink.check_all();
      // Everything validated: from here on nothing throws but std::bad_alloc.
      sink.prepare();
      const std::vector<TableRows> all =
          table_rows(ids, layout, weights, argmax, grad_out.outerStride());
      const auto run = [&](Index t) {
        const TableRows& r = all[static_cast<std::size_t>(t)];
        sink.run(t, std::span<const TokenId>(r.ids), r.rows(grad_out.data(), table_at(t).d_model()),
                 r.needs_scratch());
      };
      run_tables(all, run);
    });
  }

  /// Runs run(t) for every table: tables in parallel (largest first, each one's rows then on
  /// one thread) when there are at least two per thread, else one after the other with each
  /// table's rows split across threads.
  template <class Run>
  void run_tables(const std::vector<TableRows>& all, const Run& run) const {
    const auto work_of = [&](Index t) {  // positions x width: the elements table t reads
      return static_cast<Index>(all[static_cast<std::size_t>(t)].ids.size()) *
             table_at(t).d_model();
    };
    Index work = 0;
    std::vector<Index> order(tables_.size());
    std::iota(order.begin(), order.end(), Index{0});
    for (Index t = 0; t < num_tables(); ++t) work += work_of(t);
    const int threads = detail::kernel_threads(work);
    if (threads == 1 || num_tables() < 2 * threads) {
      for (const Index t : order) run(t);
      return;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](Index a, Index b) { return work_of(a) > work_of(b); });
    std::exception_ptr error;
    detail::parallel_rows(num_tables(), work, [&](Index begin, Index end, int) {
      for (Index k = begin; k < end; ++k) {
        try {
          run(order[static_cast<std::size_t>(k)]);
        } catch (...) {  // std::bad_alloc: kept for the calling thread
#if EMBER_HAS_OPENMP
#pragma omp critical(ember_table_batched_bags_error)
#endif
          if (!error) error = std::current_exception();
        }
      }
    });
    if (error) std::rethrow_exception(error);
  }

  friend struct detail::BagAccess;

  std::vector<Table> tables_;
  std::vector<BagFeature> features_;
  std::vector<Index> columns_;  // F + 1 entries: feature f's first output column, then width()
  /// The name errors give the calls: "TableBatchedBags", or the layer over it
  /// (detail::BagAccess).
  const char* name_ = "TableBatchedBags";
};

}  // namespace ember::inline EMBER_ISA
