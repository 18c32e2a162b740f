/// Keyed bags: KeyedEmbeddingBag<T> (an EmbeddingBag over a keyed table) and
/// KeyedTableBatchedBags<T> (a TableBatchedBags whose tables are keyed): pooled lookups, backward
/// and fused steps from raw 64-bit keys.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/bag.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/keys/key_index.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table_batched_bags.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

/// EmbeddingBag over a keyed table: bags of raw 64-bit keys (offsets or lengths, as
/// EmbeddingBag), pooled in any BagMode. Keys without a row read the fallback: with
/// KeyFallback::zeros they are left out of the pooling (and of the mean's count), as a padding id
/// is; with a shared row they pool it. The lookup never scales (as EmbeddingBag).
///
/// Inference: forward(keys, offsets) never inserts. Training: map(keys, step) (as
/// KeyedEmbedding::map), then forward / backward + step / backward_step on the batch, every mode
/// and option of EmbeddingBag, the state of reused rows reset before each step (step: as
/// KeyedEmbedding::step). Offsets, lengths, weights and gradients are checked once, by the bag
/// under this layer's name ("KeyedEmbeddingBag::forward: ...").
///
/// Example:
/// ```cpp
/// ember::KeyedEmbeddingBag<float> bag(1 << 16, 32, ember::BagMode::mean);
/// std::vector<std::uint64_t> keys{11, 12, 13};
/// std::vector<int> offsets{0, 2};                       // bags {11, 12}, {13}
/// ember::KeyedBatch batch = bag.map(keys, /*step=*/0);
/// ember::RowMatrix<float> pooled = bag.forward(batch, offsets);   // 2 x 32
/// ```
template <class T>
class KeyedEmbeddingBag : public detail::KeyedCommon<KeyedEmbeddingBag<T>, T> {
  using Base = detail::KeyedCommon<KeyedEmbeddingBag<T>, T>;
  friend Base;
  using Base::state_;

 public:
  /// The layer's name in messages.
  static constexpr const char* name = "KeyedEmbeddingBag";

  /// A bag over `keys` keys (its capacity) of `width` values (its d_model()), pooling in `mode`.
  /// Throws: as KeyedEmbedding's constructor.
  KeyedEmbeddingBag(Index keys, Index width, BagMode mode, KeyedOptions options = {})
      : Base(keys, width, options), bag_(state_.make_table(LookupScale::none()), mode) {
    detail::BagAccess::name_calls(bag_, name);  // the bag's checks report as this layer's
  }

  /// The pooling mode.
  [[nodiscard]] BagMode mode() const noexcept { return bag_.mode(); }

  // ---- inference (never inserts) --------------------------------------------------------------

  /// EmbeddingBag::forward over the rows of `keys` (the fallback for keys without one).
  /// Throws: as EmbeddingBag::forward.
  template <class O>
  [[nodiscard]] RowMatrix<T> forward(std::span<const std::uint64_t> keys, const O& offsets,
                                     const BagOptions<T>& options = {}) const {
    return bag_.forward(this->find(keys), offsets, options);
  }
  /// EmbeddingBag::forward_lengths over the rows of `keys`.
  template <class L>
  [[nodiscard]] RowMatrix<T> forward_lengths(std::span<const std::uint64_t> keys, const L& lengths,
                                             const BagOptions<T>& options = {}) const {
    return bag_.forward_lengths(this->find(keys), lengths, options);
  }

  // ---- training -------------------------------------------------------------------------------

  /// EmbeddingBag::forward over a mapped batch (into out, with the argmax of max mode).
  /// Throws: StateError for a stale batch; as EmbeddingBag::forward.
  template <class O>
  void forward(const KeyedBatch& batch, const O& offsets, Eigen::Ref<RowMatrix<T>> out,
               const BagOptions<T>& options = {}, BagArgmax* argmax = nullptr) const {
    this->check_batch(batch, "forward");
    bag_.forward(batch.rows(), offsets, out, options, argmax);
  }
  /// Owning form.
  template <class O>
  [[nodiscard]] RowMatrix<T> forward(const KeyedBatch& batch, const O& offsets,
                                     const BagOptions<T>& options = {}) const {
    this->check_batch(batch, "forward");
    return bag_.forward(batch.rows(), offsets, options);
  }
  /// EmbeddingBag::forward_lengths over a mapped batch.
  template <class L>
  void forward_lengths(const KeyedBatch& batch, const L& lengths, Eigen::Ref<RowMatrix<T>> out,
                       const BagOptions<T>& options = {}, BagArgmax* argmax = nullptr) const {
    this->check_batch(batch, "forward_lengths");
    bag_.forward_lengths(batch.rows(), lengths, out, options, argmax);
  }

  /// EmbeddingBag::backward of forward(batch, offsets) into grad (rows of table()).
  /// Throws: StateError for a stale batch; as EmbeddingBag::backward.
  template <class O>
  void backward(const KeyedBatch& batch, const O& offsets,
                const Eigen::Ref<const RowMatrix<T>>& grad_out, SparseRowGrad<T>& grad,
                const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                std::span<T> grad_per_sample_weights = {}) const {
    this->check_batch(batch, "backward");
    bag_.backward(batch.rows(), offsets, grad_out, grad, options, argmax, grad_per_sample_weights);
  }
  /// EmbeddingBag::backward_lengths over a mapped batch.
  template <class L>
  void backward_lengths(const KeyedBatch& batch, const L& lengths,
                        const Eigen::Ref<const RowMatrix<T>>& grad_out, SparseRowGrad<T>& grad,
                        const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                        std::span<T> grad_per_sample_weights = {}) const {
    this->check_batch(batch, "backward_lengths");
    bag_.backward_lengths(batch.rows(), lengths, grad_out, grad, options, argmax,
                          grad_per_sample_weights);
  }

  /// EmbeddingBag::backward_step over a mapped batch, the state of rows new keys got reset
  /// once every input is checked, before the update.
  /// Throws: StateError for a stale batch; as EmbeddingBag::backward_step. Nothing changes when
  ///         it throws.
  template <class O, class Opt>
  void backward_step(const KeyedBatch& batch, const O& offsets,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out, Opt& opt,
                     const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                     const optim::FusedStepOptions& fused = {},
                     std::span<T> grad_per_sample_weights = {}) {
    this->check_batch(batch, "backward_step");
    detail::ResetOnApply<T, Opt> resetting(opt, state_);
    bag_.backward_step(batch.rows(), offsets, grad_out, resetting, options, argmax, fused,
                       grad_per_sample_weights);
  }
  /// EmbeddingBag::backward_step_lengths over a mapped batch.
  template <class L, class Opt>
  void backward_step_lengths(const KeyedBatch& batch, const L& lengths,
                             const Eigen::Ref<const RowMatrix<T>>& grad_out, Opt& opt,
                             const BagOptions<T>& options = {}, const BagArgmax* argmax = nullptr,
                             const optim::FusedStepOptions& fused = {},
                             std::span<T> grad_per_sample_weights = {}) {
    this->check_batch(batch, "backward_step_lengths");
    detail::ResetOnApply<T, Opt> resetting(opt, state_);
    bag_.backward_step_lengths(batch.rows(), lengths, grad_out, resetting, options, argmax, fused,
                               grad_per_sample_weights);
  }

 private:
  [[nodiscard]] Embedding<T>& keyed_table() noexcept { return bag_.embedding(); }
  [[nodiscard]] const Embedding<T>& keyed_table() const noexcept { return bag_.embedding(); }
  friend struct detail::KeyedAccess;

  EmbeddingBag<T> bag_;
};

/// One keyed table of a KeyedTableBatchedBags.
struct KeyedTableConfig {
  Index capacity = 0;         ///< keys it can hold
  Index d_model = 0;          ///< values per row
  KeyedOptions options = {};  ///< its index, fallback, init
};

/// TableBatchedBags over keyed tables (TorchRec's EmbeddingBagCollection with managed
/// collisions): `indices` holds raw 64-bit keys, feature after feature, in TableBatchedBags'
/// layout (offsets[F·B + 1] or lengths[F·B]); each feature's keys index its table's KeyIndex.
///
/// map(keys, offsets, step) maps each table's keys once per batch (the keys of all its features,
/// in feature then position order, so a batch never evicts its own keys from a shared table),
/// checking first that every table can take its keys (CapacityError, nothing mapped otherwise).
/// forward / backward / backward_step then run TableBatchedBags on the rows, one optimizer per
/// table, the state of reused rows reset before each step.
///
/// Thread safety: const members may run concurrently; map and the steps may not.
template <class T>
class KeyedTableBatchedBags {
  static_assert(Scalar<T>, "ember::KeyedTableBatchedBags<T>: T must be float or double");

 public:
  using Scalar = T;

  /// Keyed tables and the features over them (BagFeature::table indexes `tables`).
  /// Throws: as KeyedEmbedding's constructor for a table; as TableBatchedBags' for the features.
  KeyedTableBatchedBags(const std::vector<KeyedTableConfig>& tables,
                        std::vector<BagFeature> features)
      : states_(make_states(tables)),
        bags_(make_tables(states_), std::move(features)),
        scratch_(states_.size()) {
    detail::BagAccess::name_calls(bags_, "KeyedTableBatchedBags");  // its checks report as ours
    for (Index t = 0; t < num_tables(); ++t) table_features_.push_back(features_of(t));
  }

  /// Number of tables.
  [[nodiscard]] Index num_tables() const noexcept { return bags_.num_tables(); }
  /// Number of features F.
  [[nodiscard]] Index num_features() const noexcept { return bags_.num_features(); }
  /// Output columns.
  [[nodiscard]] Index width() const noexcept { return bags_.width(); }
  /// Feature f.
  /// Throws: IndexError unless 0 <= f < num_features().
  [[nodiscard]] const BagFeature& feature(Index f) const { return bags_.feature(f); }
  /// The index of table t.
  /// Throws: IndexError unless 0 <= t < num_tables() (so do every per-table call below).
  [[nodiscard]] const KeyIndex& index(Index t) const { return checked(t, "index").index(); }
  /// Table t (capacity + 1 rows, the last its fallback row; read-only).
  [[nodiscard]] const Embedding<T>& table(Index t) const { return bags_.table(t); }
  /// The fallback row of table t: its capacity.
  [[nodiscard]] TokenId fallback_row(Index t) const {
    return checked(t, "fallback_row").fallback_row();
  }
  /// The bags over the tables (read-only); errors of their calls name KeyedTableBatchedBags.
  [[nodiscard]] const TableBatchedBags<T>& bags() const noexcept { return bags_; }

  // ---- inference (never inserts) --------------------------------------------------------------

  /// TableBatchedBags::forward over the rows of `keys` (the fallback for keys without one).
  /// Throws: as TableBatchedBags::forward; ShapeError or ValueError for bad offsets.
  template <class O>
  [[nodiscard]] RowMatrix<T> forward(std::span<const std::uint64_t> keys, const O& offsets,
                                     std::span<const T> per_sample_weights = {}) const {
    const std::vector<Index> starts = feature_starts(keys.size(), offsets, false, "forward");
    return bags_.forward(find_rows(keys, starts), offsets, per_sample_weights);
  }

  /// TableBatchedBags::forward_lengths over the rows of `keys`.
  template <class L>
  [[nodiscard]] RowMatrix<T> forward_lengths(std::span<const std::uint64_t> keys, const L& lengths,
                                             std::span<const T> per_sample_weights = {}) const {
    const std::vector<Index> starts = feature_starts(keys.size(), lengths, true, "forward_lengths");
    return bags_.forward_lengths(find_rows(keys, starts), lengths, per_sample_weights);
  }

  // ---- training -------------------------------------------------------------------------------

  /// Maps a training batch at `step`: every table's keys (all its features') at once.
  /// Shapes:  keys[n], offsets[F·B + 1]; scores[n] when some table scores (EvictionPolicy::score;
  ///          only those tables' entries are read), else empty.
  /// Throws:  ShapeError or ValueError for bad offsets or scores; as KeyIndex::find_or_insert
  ///          for a table (CapacityError included). Nothing changes when it throws.
  template <class O>
  [[nodiscard]] KeyedBatch map(std::span<const std::uint64_t> keys, const O& offsets,
                               std::int64_t step, std::span<const double> scores = {}) {
    KeyedBatch batch;
    map_impl(keys, feature_starts(keys.size(), offsets, false, "map"), step, scores, batch);
    return batch;
  }
  /// map into `batch`, reusing its storage (a training loop that keeps one batch allocates
  /// nothing per step for it). Throws: as map; the tables are unchanged then, and `batch` is
  /// either unchanged or stale (forward and the steps refuse it).
  template <class O>
  void map(std::span<const std::uint64_t> keys, const O& offsets, std::int64_t step,
           KeyedBatch& batch, std::span<const double> scores = {}) {
    map_impl(keys, feature_starts(keys.size(), offsets, false, "map"), step, scores, batch);
  }
  /// map with bag sizes (TableBatchedBags' lengths layout).
  template <class L>
  [[nodiscard]] KeyedBatch map_lengths(std::span<const std::uint64_t> keys, const L& lengths,
                                       std::int64_t step, std::span<const double> scores = {}) {
    KeyedBatch batch;
    map_impl(keys, feature_starts(keys.size(), lengths, true, "map_lengths"), step, scores, batch);
    return batch;
  }
  /// map_lengths into `batch`, reusing its storage (as map).
  template <class L>
  void map_lengths(std::span<const std::uint64_t> keys, const L& lengths, std::int64_t step,
                   KeyedBatch& batch, std::span<const double> scores = {}) {
    map_impl(keys, feature_starts(keys.size(), lengths, true, "map_lengths"), step, scores, batch);
  }

  /// TableBatchedBags::forward over a mapped batch.
  /// Throws: StateError for a stale batch; as TableBatchedBags::forward.
  template <class O>
  void forward(const KeyedBatch& batch, const O& offsets, Eigen::Ref<RowMatrix<T>> out,
               std::span<const T> per_sample_weights = {},
               std::vector<BagArgmax>* argmax = nullptr) const {
    check_batch(batch, "forward");
    bags_.forward(batch.rows(), offsets, out, per_sample_weights, argmax);
  }
  /// Owning form.
  template <class O>
  [[nodiscard]] RowMatrix<T> forward(const KeyedBatch& batch, const O& offsets,
                                     std::span<const T> per_sample_weights = {}) const {
    check_batch(batch, "forward");
    return bags_.forward(batch.rows(), offsets, per_sample_weights);
  }
  /// TableBatchedBags::forward_lengths over a mapped batch.
  template <class L>
  void forward_lengths(const KeyedBatch& batch, const L& lengths, Eigen::Ref<RowMatrix<T>> out,
                       std::span<const T> per_sample_weights = {},
                       std::vector<BagArgmax>* argmax = nullptr) const {
    check_batch(batch, "forward_lengths");
    bags_.forward_lengths(batch.rows(), lengths, out, per_sample_weights, argmax);
  }

  /// TableBatchedBags::backward over a mapped batch (grads[t] over table t's rows).
  template <class O>
  void backward(const KeyedBatch& batch, const O& offsets,
                const Eigen::Ref<const RowMatrix<T>>& grad_out,
                std::vector<SparseRowGrad<T>>& grads, std::span<const T> per_sample_weights = {},
                const std::vector<BagArgmax>* argmax = nullptr) {
    check_batch(batch, "backward");
    bags_.backward(batch.rows(), offsets, grad_out, grads, per_sample_weights, argmax);
  }

  /// TableBatchedBags::backward_lengths over a mapped batch.
  template <class L>
  void backward_lengths(const KeyedBatch& batch, const L& lengths,
                        const Eigen::Ref<const RowMatrix<T>>& grad_out,
                        std::vector<SparseRowGrad<T>>& grads,
                        std::span<const T> per_sample_weights = {},
                        const std::vector<BagArgmax>* argmax = nullptr) {
    check_batch(batch, "backward_lengths");
    bags_.backward_lengths(batch.rows(), lengths, grad_out, grads, per_sample_weights, argmax);
  }

  /// Resets the state of rows new keys got in each table, then optimizers[t].step(table t,
  /// grads[t]).
  /// Throws: ShapeError unless optimizers and grads have num_tables() entries, or if a grads[t]
  ///         is bound to another shape than table t or an optimizer's state to another width;
  ///         as opt.step. Every table is checked before any reset (as KeyedEmbedding::step).
  template <class Opt>
  void step(std::span<Opt> optimizers, const std::vector<SparseRowGrad<T>>& grads) {
    constexpr detail::Where where{"KeyedTableBatchedBags", "step"};
    detail::check_extent(where, "optimizers", 0, num_tables(),
                         static_cast<Index>(optimizers.size()), "num_tables()");
    detail::check_extent(where, "grads", 0, num_tables(), static_cast<Index>(grads.size()),
                         "num_tables()");
    for (std::size_t t = 0; t < states_.size(); ++t)
      states_[t].check_step(optimizers[t], grads[t], where, static_cast<Index>(t));
    reset_all(optimizers);
    for (Index t = 0; t < num_tables(); ++t)
      optimizers[static_cast<std::size_t>(t)].step(bags_.table(t),
                                                   grads[static_cast<std::size_t>(t)]);
  }

  /// TableBatchedBags::backward_step over a mapped batch, the state of rows new keys got reset
  /// once every input is checked, before the update.
  /// Throws: StateError for a stale batch; as TableBatchedBags::backward_step. Nothing changes
  ///         when it throws.
  template <class O, class Opt>
  void backward_step(const KeyedBatch& batch, const O& offsets,
                     const Eigen::Ref<const RowMatrix<T>>& grad_out, std::span<Opt> optimizers,
                     std::span<const T> per_sample_weights = {},
                     const std::vector<BagArgmax>* argmax = nullptr,
                     const optim::FusedStepOptions& fused = {}) {
    check_batch(batch, "backward_step");
    detail::check_extent("KeyedTableBatchedBags::backward_step", "optimizers", 0, num_tables(),
                         static_cast<Index>(optimizers.size()), "num_tables()");
    std::vector<detail::ResetOnApply<T, Opt>> resetting = resetting_all(optimizers);
    bags_.backward_step(batch.rows(), offsets, grad_out,
                        std::span<detail::ResetOnApply<T, Opt>>(resetting), per_sample_weights,
                        argmax, fused);
  }

  /// TableBatchedBags::backward_step_lengths over a mapped batch, as backward_step.
  template <class L, class Opt>
  void backward_step_lengths(const KeyedBatch& batch, const L& lengths,
                             const Eigen::Ref<const RowMatrix<T>>& grad_out,
                             std::span<Opt> optimizers, std::span<const T> per_sample_weights = {},
                             const std::vector<BagArgmax>* argmax = nullptr,
                             const optim::FusedStepOptions& fused = {}) {
    check_batch(batch, "backward_step_lengths");
    detail::check_extent("KeyedTableBatchedBags::backward_step_lengths", "optimizers", 0,
                         num_tables(), static_cast<Index>(optimizers.size()), "num_tables()");
    std::vector<detail::ResetOnApply<T, Opt>> resetting = resetting_all(optimizers);
    bags_.backward_step_lengths(batch.rows(), lengths, grad_out,
                                std::span<detail::ResetOnApply<T, Opt>>(resetting),
                                per_sample_weights, argmax, fused);
  }

  // ---- per table: deltas, erasing, the log ------------------------------------------------------

  /// export_delta of table t (KeyedEmbedding::export_delta).
  [[nodiscard]] KeyedDelta<T> export_delta(Index t, std::int64_t since_step) const {
    return checked(t, "export_delta").export_delta(since_step, bags_.table(t));
  }
  /// apply_delta on table t (KeyedEmbedding::apply_delta).
  void apply_delta(Index t, const KeyedDelta<T>& delta) {
    checked(t, "apply_delta")
        .apply_delta(delta, bags_.table(t), "KeyedTableBatchedBags::apply_delta");
    generation_ = detail::next_batch_generation();
  }
  /// Removes keys from table t (logged); returns the pairs removed.
  std::vector<KeyRow> erase(Index t, std::span<const std::uint64_t> keys) {
    State& s = checked(t, "erase");
    generation_ = detail::next_batch_generation();
    return s.erase(keys);
  }
  /// The eviction log of table t.
  [[nodiscard]] std::span<const KeyLogEntry> eviction_log(Index t) const {
    return checked(t, "eviction_log").log();
  }

 private:
  friend struct detail::KeyedAccess;

  using State = detail::KeyedState<T>;

  static std::vector<State> make_states(const std::vector<KeyedTableConfig>& tables) {
    std::vector<State> states;
    states.reserve(tables.size());
    for (const KeyedTableConfig& c : tables)
      states.emplace_back(c.capacity, c.d_model, c.options, "KeyedTableBatchedBags");
    return states;
  }
  static std::vector<Embedding<T>> make_tables(const std::vector<State>& states) {
    std::vector<Embedding<T>> tables;
    tables.reserve(states.size());
    for (const State& s : states) tables.push_back(s.make_table(LookupScale::none()));
    return tables;
  }

  [[nodiscard]] const State& state(Index t) const noexcept {
    return states_[static_cast<std::size_t>(t)];
  }
  [[nodiscard]] State& state(Index t) noexcept { return states_[static_cast<std::size_t>(t)]; }
  /// state(t) after the door's check of t.
  [[nodiscard]] const State& checked(Index t, const char* call) const {
    detail::check_index({"KeyedTableBatchedBags", call}, "table", t, num_tables());
    return state(t);
  }
  [[nodiscard]] State& checked(Index t, const char* call) {
    detail::check_index({"KeyedTableBatchedBags", call}, "table", t, num_tables());
    return state(t);
  }

  /// The first position of each feature (F + 1 entries, the last n) from offsets[F·B + 1] or
  /// lengths[F·B], checked as TableBatchedBags checks them (so map refuses what forward would).
  template <class O>
  std::vector<Index> feature_starts(std::size_t n_keys, const O& offsets, bool lengths,
                                    const char* call) const {
    const detail::Where where{"KeyedTableBatchedBags", call};
    const auto n = static_cast<Index>(n_keys);
    const Index f = num_features();
    return detail::with_ids(offsets, [&](auto off) {
      const auto m = static_cast<Index>(off.size());
      const Index entries = lengths ? m : m - 1;
      if (m == 0 && !lengths) {
        throw ShapeError(detail::message(where, "offsets is empty; it needs F·B + 1 entries"), 0, 1,
                         0);
      }
      if (entries % f != 0) {
        throw ShapeError(
            detail::message(where, lengths ? "lengths" : "offsets", " has ", m, " entries, not F·B",
                            lengths ? "" : " + 1", " for F = ", f, " features"),
            0, f, entries);
      }
      const Index b = entries / f;
      // One pass over the bounds (bag k starts at `bound`), keeping each feature's first.
      std::vector<Index> starts(static_cast<std::size_t>(f) + 1);
      Index bound = 0;
      for (Index k = 0; k <= entries; ++k) {
        if (lengths && k > 0) {
          const auto v = static_cast<std::int64_t>(off[static_cast<std::size_t>(k) - 1]);
          if (v < 0) {
            throw ValueError(detail::message(where, "lengths[", k - 1, "] = ", v, " is negative"),
                             static_cast<double>(v));
          }
          bound += static_cast<Index>(v);
        } else if (!lengths) {
          const auto v = static_cast<std::int64_t>(off[static_cast<std::size_t>(k)]);
          if (v < bound || (k == 0 && v != 0)) {
            throw ValueError(
                detail::message(where, "offsets[", k, "] = ", v,
                                k == 0 ? " must be 0" : " is below the offset before it"),
                static_cast<double>(v));
          }
          bound = static_cast<Index>(v);
        }
        if (b > 0 && k % b == 0) starts[static_cast<std::size_t>(k / b)] = bound;
      }
      if (b == 0) std::fill(starts.begin(), starts.end(), bound);  // no bags
      if (bound != n) {
        throw ValueError(detail::message(where, "the bags end at position ", bound,
                                         ", expected the number of keys ", n),
                         static_cast<double>(bound));
      }
      return starts;
    });
  }

  [[nodiscard]] std::vector<TokenId> find_rows(std::span<const std::uint64_t> keys,
                                               const std::vector<Index>& starts) const {
    std::vector<TokenId> rows(keys.size());
    for (Index f = 0; f < num_features(); ++f) {
      const auto b = static_cast<std::size_t>(starts[static_cast<std::size_t>(f)]);
      const auto e = static_cast<std::size_t>(starts[static_cast<std::size_t>(f) + 1]);
      state(feature(f).table)
          .find(keys.subspan(b, e - b), std::span<TokenId>(rows).subspan(b, e - b));
    }
    return rows;
  }

  /// The features of table t, in feature order.
  [[nodiscard]] std::vector<Index> features_of(Index t) const {
    std::vector<Index> out;
    for (Index f = 0; f < num_features(); ++f)
      if (feature(f).table == t) out.push_back(f);
    return out;
  }

  /// Table t's keys (and scores) of a batch: those of its one feature where they are, or those of
  /// its features gathered in feature then position order into the table's scratch.
  struct TableKeys {
    std::span<const std::uint64_t> keys;
    std::span<const double> scores;
  };
  TableKeys table_keys(Index t, std::span<const std::uint64_t> keys, std::span<const double> scores,
                       const std::vector<Index>& starts) {
    const auto u = static_cast<std::size_t>(t);
    const bool scored = state(t).options().index.policy == EvictionPolicy::score;
    const std::vector<Index>& fs = table_features_[u];
    const auto range = [&](Index f) {
      const auto b = static_cast<std::size_t>(starts[static_cast<std::size_t>(f)]);
      const auto e = static_cast<std::size_t>(starts[static_cast<std::size_t>(f) + 1]);
      return std::pair{b, e - b};
    };
    if (fs.size() == 1) {
      const auto [b, len] = range(fs[0]);
      return {keys.subspan(b, len), scored ? scores.subspan(b, len) : std::span<const double>{}};
    }
    Scratch& sc = scratch_[u];
    sc.keys.clear();
    sc.scores.clear();
    for (const Index f : fs) {
      const auto [b, len] = range(f);
      sc.keys.insert(sc.keys.end(), keys.begin() + static_cast<std::ptrdiff_t>(b),
                     keys.begin() + static_cast<std::ptrdiff_t>(b + len));
      if (scored)
        sc.scores.insert(sc.scores.end(), scores.begin() + static_cast<std::ptrdiff_t>(b),
                         scores.begin() + static_cast<std::ptrdiff_t>(b + len));
    }
    return {sc.keys, sc.scores};
  }

  void map_impl(std::span<const std::uint64_t> keys, const std::vector<Index>& starts,
                std::int64_t step, std::span<const double> scores, KeyedBatch& out) {
    constexpr detail::Where where{"KeyedTableBatchedBags", "map"};
    const auto n = static_cast<Index>(keys.size());
    bool scored = false;
    for (const State& s : states_) {
      scored = scored || s.options().index.policy == EvictionPolicy::score;
      if (step < 0 || step < s.index().last_step()) {
        throw ValueError(detail::message(where, "step ", step, " is below a table's last step ",
                                         s.index().last_step(), " (or negative)"),
                         static_cast<double>(step));
      }
    }
    if (scored || !scores.empty()) {
      detail::check_extent(where, "scores", 0, scored ? n : 0, static_cast<Index>(scores.size()),
                           scored ? "the number of keys" : "0 (no table scores)");
    }
    detail::check_finite_scores(where, scores);
    // Only the capacity is left to fail on: a table that evicts fails only if its batch has more
    // keys than it has rows, so those (and tables that never evict) are checked and held before
    // any table changes; the maps below commit what they held.
    const auto nt = static_cast<std::size_t>(num_tables());
    detail::KeyIndexHold::Scope held;  // on every exit (a refusal too), no table stays held
    for (std::size_t t = 0; t < nt; ++t) {
      const TableKeys tk = table_keys(static_cast<Index>(t), keys, scores, starts);
      scratch_[t].batch = tk;
      KeyIndex& ix = states_[t].index();
      if (nt > 1 && (ix.options().policy == EvictionPolicy::none ||
                     static_cast<Index>(tk.keys.size()) > ix.key_capacity()))
        held.hold(ix, tk.keys, step, tk.scores);
    }
    generation_ = detail::next_batch_generation();  // `out` is stale until every table stamped it
    auto& rows = detail::KeyedBatchAccess::rows(out);
    rows.resize(keys.size());
    detail::KeyedBatchAccess::restart(out);
    for (std::size_t t = 0; t < nt; ++t) {
      const auto ti = static_cast<Index>(t);
      const TableKeys& tk = scratch_[t].batch;
      const std::vector<Index>& fs = table_features_[t];
      std::span<TokenId> trows;
      if (fs.size() == 1) {  // straight into the batch
        const auto b = static_cast<std::size_t>(starts[static_cast<std::size_t>(fs[0])]);
        trows = std::span<TokenId>(rows).subspan(b, tk.keys.size());
      } else {
        scratch_[t].rows.resize(tk.keys.size());
        trows = scratch_[t].rows;
      }
      const InsertResult r = states_[t].map(tk.keys, trows, step, tk.scores, bags_.table(ti));
      if (fs.size() != 1) {
        std::size_t k = 0;
        for (const Index f : fs)
          for (Index i = starts[static_cast<std::size_t>(f)];
               i < starts[static_cast<std::size_t>(f) + 1]; ++i)
            rows[static_cast<std::size_t>(i)] = trows[k++];
      }
      detail::KeyedBatchAccess::stamp(out, r, step, generation_, this);
    }
  }

  void check_batch(const KeyedBatch& batch, const char* call) const {
    detail::KeyedBatchAccess::check_current(batch, generation_, this,
                                            {"KeyedTableBatchedBags", call});
  }

  template <class Opt>
  void reset_all(std::span<Opt> optimizers) {
    for (std::size_t t = 0; t < states_.size(); ++t) states_[t].reset(optimizers[t]);
  }
  /// Table t's optimizer, resetting its table's rows as its update begins (detail::ResetOnApply).
  template <class Opt>
  std::vector<detail::ResetOnApply<T, Opt>> resetting_all(std::span<Opt> optimizers) {
    std::vector<detail::ResetOnApply<T, Opt>> out;
    out.reserve(states_.size());
    for (std::size_t t = 0; t < states_.size(); ++t) out.emplace_back(optimizers[t], states_[t]);
    return out;
  }

  std::vector<State> states_;
  TableBatchedBags<T> bags_;
  /// The identity of the latest map (detail::next_batch_generation), which current batches carry.
  std::uint64_t generation_ = detail::next_batch_generation();
  /// Per table: its features, and the keys, scores and rows of a batch gathered when it has
  /// several features; `batch` is the table's keys and scores of the batch being mapped (into
  /// the batch's own arrays or into `keys` / `scores`), gathered once for the checks and the map.
  struct Scratch {
    std::vector<std::uint64_t> keys;
    std::vector<double> scores;
    std::vector<TokenId> rows;
    TableKeys batch;
  };
  std::vector<std::vector<Index>> table_features_;
  std::vector<Scratch> scratch_;
};

}  // namespace ember::inline EMBER_ISA
