/// KeyedEmbedding<T>: a KeyIndex in front of a trainable Embedding<T>, so raw 64-bit keys read,
/// train and evict rows of an ordinary ember table; with the batches, deltas and state every keyed
/// layer shares (keyed/keyed_bags.hpp, distributed/sharded_keyed_embedding.hpp).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "ember/check.hpp"
#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/init.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/keys/key_index.hpp"
#include "ember/optim/row_optimizer.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA {

namespace detail {
struct KeyedBatchAccess;
struct KeyedAccess;
}  // namespace detail

/// What the keys without a row (not yet admitted, or evicted) of a keyed table read.
enum class KeyFallback {
  /// A zero row that is the table's padding row: lookups give zeros, bags leave it out of their
  /// pooling (and of the mean's count), backward gives it nothing, optimizers never move it.
  zeros,
  /// One trainable row that every key without a row shares (TorchRec's reserved last row).
  shared_row
};

/// Options of a keyed table (KeyedEmbedding, KeyedEmbeddingBag, each table of a
/// KeyedTableBatchedBags, ShardedKeyedEmbedding).
struct KeyedOptions {
  /// The index: policy, admission, sketch. Its fallback_row must stay -1: the keyed table owns
  /// its fallback row (row capacity() of the table).
  KeyIndexOptions index = {};
  /// What keys without a row read.
  KeyFallback fallback = KeyFallback::zeros;
  /// The values a key's row gets whenever the key gets a row (also a reused one): init applied to
  /// the row from seed key_seed(seed, key), so a key's first values depend on the key alone.
  Init init = Init::normal();
  /// The seed of init.
  std::uint64_t seed = 0;
  /// The lookup scale of KeyedEmbedding::forward (√width by default, as Embedding; bags never
  /// scale).
  LookupScale scale = {};
  /// The number of rows Xavier's bound counts (fan_out); 0: the capacity. A sharded table sets it
  /// to the total capacity so every rank draws what one process would.
  Index init_rows = 0;
};

/// The seed from which a keyed table initialises the row of `key` (KeyedOptions::init).
[[nodiscard]] constexpr std::uint64_t key_seed(std::uint64_t seed, std::uint64_t key) noexcept {
  return detail::mix_key(key ^ detail::mix_key(seed ^ 0x6A09E667F3BCC909ULL));
}

/// The seed of a keyed table's shared fallback row (KeyFallback::shared_row).
[[nodiscard]] constexpr std::uint64_t fallback_seed(std::uint64_t seed) noexcept {
  return detail::mix_key(seed ^ 0xBB67AE8584CAA73BULL);
}

/// One key's loss of its row, as a keyed table logs it for export_delta.
struct KeyLogEntry {
  std::uint64_t key = 0;  ///< the key
  std::int64_t step = 0;  ///< the step it lost its row at
  friend bool operator==(const KeyLogEntry&, const KeyLogEntry&) = default;
};

/// The rows of a keyed table that changed after a step, for a serving copy (apply_delta).
template <class T>
struct KeyedDelta {
  std::int64_t since_step = -1;        ///< the step the delta starts after
  std::int64_t step = -1;              ///< the latest step it covers
  std::vector<std::uint64_t> keys;     ///< keys seen (and so possibly written) after since_step
  RowMatrix<T> values;                 ///< values.row(i): the row of keys[i], keys.size() x d
  std::vector<std::uint64_t> evicted;  ///< keys that lost their row after since_step and have none
  RowVector<T> fallback;               ///< the fallback row (zeros, or the shared row)
};

/// One batch a keyed table mapped for training (map): the rows its keys read, valid until the
/// table maps its next batch (or erases, resizes or applies a delta): forward, backward and the
/// steps then refuse it with StateError, since its rows may belong to other keys by then.
class KeyedBatch {
 public:
  /// The row of each key, in the keys' order (the fallback row for keys without one).
  [[nodiscard]] std::span<const TokenId> rows() const noexcept { return rows_; }
  /// Number of keys.
  [[nodiscard]] Index size() const noexcept { return static_cast<Index>(rows_.size()); }
  /// The step it was mapped at.
  [[nodiscard]] std::int64_t step() const noexcept { return step_; }
  /// Positions whose key already had a row.
  [[nodiscard]] Index hits() const noexcept { return hits_; }
  /// Keys that got a row.
  [[nodiscard]] Index inserted() const noexcept { return inserted_; }
  /// Positions reading the fallback row.
  [[nodiscard]] Index fallbacks() const noexcept { return fallbacks_; }
  /// The (key, row) pairs the mapping evicted, in eviction order.
  [[nodiscard]] std::span<const KeyRow> evicted() const noexcept { return evicted_; }

 private:
  friend struct detail::KeyedBatchAccess;
  std::vector<TokenId> rows_;
  std::vector<KeyRow> evicted_;
  Index hits_ = 0;
  Index inserted_ = 0;
  Index fallbacks_ = 0;
  std::int64_t step_ = -1;
  std::uint64_t generation_ = 0;
  const void* owner_ = nullptr;
};

namespace detail {

/// A value no other call returns in this process: the identity of one mapping of one keyed
/// table, which its batches carry. A table destroyed and another built at its address get other
/// values, so no batch of the one passes the other's check.
[[nodiscard]] inline std::uint64_t next_batch_generation() noexcept {
  static std::atomic<std::uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

/// ember's keyed layers' door into a KeyedBatch (not for users).
struct KeyedBatchAccess {
  static std::vector<TokenId>& rows(KeyedBatch& b) noexcept { return b.rows_; }
  /// Forgets what earlier mappings stamped (a batch being mapped again).
  static void restart(KeyedBatch& b) noexcept {
    b.evicted_.clear();
    b.hits_ = 0;
    b.inserted_ = 0;
    b.fallbacks_ = 0;
  }
  static void stamp(KeyedBatch& b, const InsertResult& r, std::int64_t step,
                    std::uint64_t generation, const void* owner) {
    b.evicted_.insert(b.evicted_.end(), r.evicted.begin(), r.evicted.end());
    b.hits_ += r.hits;
    b.inserted_ += r.inserted;
    b.fallbacks_ += r.fallbacks;
    b.step_ = step;
    b.generation_ = generation;
    b.owner_ = owner;
  }
  /// The stale-batch check of every keyed layer: throws StateError, from `where`, unless `b`
  /// was stamped by `owner` at its current `generation` (its latest map).
  static void check_current(const KeyedBatch& b, std::uint64_t generation, const void* owner,
                            const Where& where) {
    if (b.owner_ != owner || b.generation_ != generation) [[unlikely]] {
      throw StateError(message(where,
                               "the batch was not mapped by this layer's latest map(); its rows "
                               "may belong to other keys now (map a batch, train on it, then map "
                               "the next)"));
    }
  }
};

/// ember's keyed tables' door into a row optimizer's state: the step count and the per-row state,
/// which keyed tables move with their rows and write into checkpoints (not for users). Every
/// function takes the optimizer as its RowOptimizer base, so it works for each ember optimizer.
struct RowOptimizerAccess {
  template <class D, class T, class O>
  [[nodiscard]] static std::int64_t steps(const optim::RowOptimizer<D, T, O>& opt) noexcept {
    return opt.steps_;
  }
  template <class D, class T, class O>
  static void set_steps(optim::RowOptimizer<D, T, O>& opt, std::int64_t steps) noexcept {
    opt.steps_ = steps;
  }
  template <class D, class T, class O>
  [[nodiscard]] static const detail::RowState<T>& state(
      const optim::RowOptimizer<D, T, O>& opt) noexcept {
    return opt.state_;
  }
  template <class D, class T, class O>
  [[nodiscard]] static detail::RowState<T>& state(optim::RowOptimizer<D, T, O>& opt) noexcept {
    return opt.state_;
  }
  /// Values of state per row and plane for a table of width d (0: the rule keeps none).
  template <class D, class T, class O>
  [[nodiscard]] static Index state_width(const optim::RowOptimizer<D, T, O>& opt,
                                         Index d) noexcept {
    return opt.state_width_of(d);
  }
};

/// Moves the optimizer state of row `from` to row `to` (to's own state is dropped; from ends
/// without state). The state must already follow a table holding both rows.
template <class T>
void move_row_state(detail::RowState<T>& state, Index from, Index to) {
  if (from == to) return;
  state.erase(to);  // may move another row's slot, never from's existence
  if (state.slot(from) < 0) return;
  const Index t = state.ensure(to);
  const Index f = state.slot(from);
  for (int p = 0; p < state.planes(); ++p)
    std::copy_n(state.data(p, f), state.width(), state.data(p, t));
  if (state.with_steps()) state.steps(t) = state.steps(f);
  state.erase(from);
}

/// Throws ValueError, from `where`, naming the first of a batch's `scores` that is not finite.
inline void check_finite_scores(const Where& where, std::span<const double> scores) {
  for (std::size_t i = 0; i < scores.size(); ++i) {
    if (!std::isfinite(scores[i])) {
      throw ValueError(
          detail::message(where, "score ", scores[i], " at position ", i, " is not finite"),
          scores[i]);
    }
  }
}

/// What every keyed layer keeps beside its table: the index, the rule for the rows of new keys,
/// the rows whose optimizer state must be reset at the next step, the log of keys that lost their
/// rows (for deltas), and the generation that tells current batches from stale ones (a value of
/// next_batch_generation, new at every map, erase, resize and apply_delta).
template <class T>
class KeyedState {
 public:
  KeyedState(Index capacity, Index d_model, const KeyedOptions& options, const char* where)
      : index_(capacity, index_options(capacity, options, where)),
        options_(options),
        d_(d_model),
        rule_(resolved_rule(options, capacity, d_model, where)) {}

  /// The table of a keyed layer: capacity + 1 rows of zeros, the last the fallback row (the
  /// padding row with KeyFallback::zeros, else initialised from fallback_seed).
  [[nodiscard]] Embedding<T> make_table(LookupScale scale) const {
    const Index c = index_.capacity();
    Embedding<T> table(RowMatrix<T>::Zero(c + 1, d_), scale);
    if (options_.fallback == KeyFallback::zeros) {
      table.set_padding_idx(c);
    } else {
      rule_.fill(table.weight().row(c), fallback_seed(options_.seed));
    }
    return table;
  }

  [[nodiscard]] const KeyIndex& index() const noexcept { return index_; }
  [[nodiscard]] KeyIndex& index() noexcept { return index_; }
  [[nodiscard]] const KeyedOptions& options() const noexcept { return options_; }
  [[nodiscard]] Index d_model() const noexcept { return d_; }
  [[nodiscard]] TokenId fallback_row() const noexcept {
    return static_cast<TokenId>(index_.capacity());
  }
  [[nodiscard]] std::uint64_t generation() const noexcept { return generation_; }
  [[nodiscard]] const std::vector<TokenId>& pending() const noexcept { return pending_; }
  [[nodiscard]] std::vector<TokenId>& pending() noexcept { return pending_; }
  [[nodiscard]] const std::vector<KeyLogEntry>& log() const noexcept { return log_; }
  [[nodiscard]] std::vector<KeyLogEntry>& log() noexcept { return log_; }

  /// rows[i] = the row of keys[i] or the fallback row (read-only).
  void find(std::span<const std::uint64_t> keys, std::span<TokenId> rows) const {
    index_.find(keys, rows);
  }

  /// Maps keys at `step` into rows (find_or_insert, or the commit of the batch the index holds),
  /// initialising the row of every key that got one in `table`, queueing it for an
  /// optimizer-state reset and logging the evicted keys.
  /// Throws: as KeyIndex::find_or_insert (nothing changes then).
  InsertResult map(std::span<const std::uint64_t> keys, std::span<TokenId> rows, std::int64_t step,
                   std::span<const double> scores, Embedding<T>& table,
                   std::span<const std::int64_t> counts = {}) {
    const InsertResult r = KeyIndexHold::held(index_)
                               ? KeyIndexHold::commit(index_, keys, rows, step, scores, counts)
                               : index_.find_or_insert(keys, rows, step, scores, counts);
    adopt(r, step, table);
    return r;
  }

  /// After a mapping: new rows initialised and queued for reset, evictions logged.
  void adopt(const InsertResult& r, std::int64_t step, Embedding<T>& table) {
    for (const KeyRow& a : r.added) {
      init_row(table, a.row, a.key);
      pending_.push_back(a.row);
    }
    for (const KeyRow& e : r.evicted) log_.push_back({e.key, step});
  }

  /// A new generation: batches mapped before are stale.
  void advance() noexcept { generation_ = next_batch_generation(); }

  /// Writes init's values for `key` into row `row`.
  void init_row(Embedding<T>& table, TokenId row, std::uint64_t key) const {
    rule_.fill(table.weight().row(static_cast<Index>(row)), key_seed(options_.seed, key));
  }

  /// The keyed door of a step of `opt` with `grad` on this table (`grads[table]` of a
  /// collection, with table >= 0), run before the resets so that a refused step changes nothing:
  /// ShapeError unless grad is empty or bound to the table's capacity + 1 rows and width, or if
  /// the optimizer's state was built for another width; with the optimizer's check_finite and
  /// resets pending, the scan of grad for NaN and infinity (ValueError) that the step would run
  /// after them.
  template <class Opt>
  void check_step(const Opt& opt, const SparseRowGrad<T>& grad, const Where& where,
                  Index table = -1) const {
    const auto name = [table] {
      return table < 0 ? std::string("grad") : text("grads[", table, "]");
    };
    const Index rows = index_.capacity() + 1;
    if (grad.vocab_size() != 0 && (grad.vocab_size() != rows || grad.d_model() != d_))
        [[unlikely]] {
      check_extent(where, name().c_str(), 0, rows, grad.vocab_size(), "capacity() + 1");
      check_extent(where, name().c_str(), 1, d_, grad.d_model(), "the width");
    }
    const Index width = RowOptimizerAccess::state_width(opt, d_);
    if (width > 0) RowOptimizerAccess::state(opt).check_table(where, width);
    if constexpr (requires { opt.options().check_finite; }) {
      if (opt.options().check_finite && !pending_.empty())
        check_finite(grad, where, name().c_str());
    }
  }

  /// Resets the optimizer state of the rows given to new keys since the last step.
  template <class Opt>
  void reset(Opt& opt) {
    if (pending_.empty()) return;
    opt.reset_rows(pending_);
    pending_.clear();
  }

  /// Removes keys (logged at the index's latest step); returns the pairs removed.
  std::vector<KeyRow> erase(std::span<const std::uint64_t> keys) {
    std::vector<KeyRow> out = index_.erase(keys);
    const std::int64_t step = std::max<std::int64_t>(index_.last_step(), 0);
    for (const KeyRow& e : out) log_.push_back({e.key, step});
    if (!out.empty()) advance();
    return out;
  }

  /// Changes the capacity (KeyIndex::resize): the table is rebuilt with the kept rows (moved
  /// ones copied), the fallback row moved to the new last row; with an optimizer's state it moves
  /// with the rows, without one every moved row's state is queued for a reset.
  ResizeResult resize(Index capacity, Embedding<T>& table, detail::RowState<T>* state) {
    const Index old_c = index_.capacity();
    ResizeResult r = index_.resize(capacity, static_cast<TokenId>(capacity));  // may throw
    const std::int64_t step = std::max<std::int64_t>(index_.last_step(), 0);
    for (const KeyRow& e : r.evicted) log_.push_back({e.key, step});
    RowMatrix<T> next = RowMatrix<T>::Zero(capacity + 1, d_);
    const Index kept = std::min(old_c, capacity);
    next.topRows(kept) = table.weight().topRows(kept);
    for (const auto& [from, to] : r.moved) next.row(to) = table.weight().row(from);
    next.row(capacity) = table.weight().row(old_c);
    if (options_.fallback == KeyFallback::zeros) table.set_padding_idx(std::nullopt);
    table.resize(capacity + 1, ResizeInit::zeros);
    table.weight() = next;
    if (options_.fallback == KeyFallback::zeros) table.set_padding_idx(capacity);
    if (state != nullptr) {
      if (state->size() > 0) {
        state->follow_table(std::max(old_c, capacity) + 1, state->width());
        for (const KeyRow& e : r.evicted) state->erase(static_cast<Index>(e.row));
        for (const auto& [from, to] : r.moved)
          move_row_state(*state, static_cast<Index>(from), static_cast<Index>(to));
        move_row_state(*state, old_c, capacity);
        state->follow_table(capacity + 1, state->width());
      }
    } else {
      for (const auto& [from, to] : r.moved) pending_.push_back(to);
      pending_.push_back(static_cast<TokenId>(capacity));
    }
    std::vector<TokenId> live;
    for (const TokenId p : pending_)
      if (p <= capacity) live.push_back(p);
    pending_ = std::move(live);
    advance();
    return r;
  }

  /// The keys seen after `since_step` with their rows, the keys evicted since and not back, the
  /// fallback row.
  [[nodiscard]] KeyedDelta<T> export_delta(std::int64_t since_step,
                                           const Embedding<T>& table) const {
    KeyedDelta<T> delta;
    delta.since_step = since_step;
    delta.step = index_.last_step();
    std::vector<TokenId> rows;
    for (const KeyEntry& e : index_) {
      if (e.last_step <= since_step) continue;
      delta.keys.push_back(e.key);
      rows.push_back(e.row);
    }
    delta.values.resize(static_cast<Index>(rows.size()), d_);
    for (std::size_t i = 0; i < rows.size(); ++i)
      delta.values.row(static_cast<Index>(i)) = table.weight().row(static_cast<Index>(rows[i]));
    std::vector<std::uint64_t> gone;
    for (const KeyLogEntry& l : log_)
      if (l.step > since_step && !index_.contains(l.key)) gone.push_back(l.key);
    std::sort(gone.begin(), gone.end());
    gone.erase(std::unique(gone.begin(), gone.end()), gone.end());
    delta.evicted = std::move(gone);
    delta.fallback = table.weight().row(index_.capacity());
    return delta;
  }

  /// Applies a delta of another table of width d: its evicted keys are removed, its keys get
  /// their values (new keys take free rows, without admission or eviction), the fallback row its
  /// values. Throws: ShapeError for a delta of another width or inconsistent sizes; CapacityError
  /// if its new keys do not fit the free rows. Nothing changes when it throws.
  void apply_delta(const KeyedDelta<T>& delta, Embedding<T>& table, const Where& where) {
    check_extent(where, "the delta's values", 1, d_, delta.values.cols(), "the width");
    check_extent(where, "the delta's values", 0, static_cast<Index>(delta.keys.size()),
                 delta.values.rows(), "the number of its keys");
    check_extent(where, "the delta's fallback row", 1, d_, delta.fallback.cols(), "the width");
    Index gone = 0;
    for (const std::uint64_t k : delta.evicted) gone += index_.contains(k) ? 1 : 0;
    std::vector<std::uint64_t> fresh;
    for (const std::uint64_t k : delta.keys)
      if (!index_.contains(k)) fresh.push_back(k);
    std::sort(fresh.begin(), fresh.end());
    fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
    const Index needed = index_.size() - gone + static_cast<Index>(fresh.size());
    if (needed > index_.key_capacity()) {
      throw CapacityError(
          message(where, "the delta needs ", needed, " rows, capacity ", index_.key_capacity()),
          index_.key_capacity(), needed);
    }
    index_.erase(delta.evicted);
    std::vector<TokenId> rows(delta.keys.size());
    const std::int64_t step = std::max(delta.step, index_.last_step());
    index_.insert(delta.keys, rows, std::max<std::int64_t>(step, 0));
    for (std::size_t i = 0; i < rows.size(); ++i)
      table.weight().row(static_cast<Index>(rows[i])) = delta.values.row(static_cast<Index>(i));
    table.weight().row(index_.capacity()) = delta.fallback;
    advance();
  }

  /// Drops the log entries at or before `step`.
  void trim_log(std::int64_t step) {
    std::erase_if(log_, [step](const KeyLogEntry& l) { return l.step <= step; });
  }

 private:
  static KeyIndexOptions index_options(Index capacity, const KeyedOptions& o, const Where& where) {
    if (o.index.fallback_row != -1) {
      throw ValueError(message(where, "options.index.fallback_row is ", o.index.fallback_row,
                               "; a keyed table owns its fallback row (leave it -1, choose the "
                               "KeyFallback)"),
                       static_cast<double>(o.index.fallback_row));
    }
    KeyIndexOptions io = o.index;
    io.fallback_row = static_cast<TokenId>(capacity);  // the table's last row, outside the index
    return io;
  }

  /// init applied to one row at a time: Xavier's bound is the full table's.
  static Init resolved_rule(const KeyedOptions& o, Index capacity, Index d, const Where& where) {
    check_positive_size(where, "width", d);
    o.init.validate();
    if (o.init_rows < 0) {
      throw ValueError(message(where, "init_rows ", o.init_rows, " is negative"),
                       static_cast<double>(o.init_rows));
    }
    Init rule = o.init;
    if (rule.kind == Init::Kind::xavier_uniform) {
      const Index rows = o.init_rows > 0 ? o.init_rows : capacity;
      const double bound = rule.a * std::sqrt(6.0 / static_cast<double>(rows + d));
      rule = Init::uniform(-bound, bound);
    }
    if (rule.kind == Init::Kind::normal && rule.a == 0.0)
      rule.a = 1.0 / std::sqrt(static_cast<double>(d));  // the default std of the full table
    return rule;
  }

  KeyIndex index_;
  KeyedOptions options_;
  Index d_;
  Init rule_;
  std::vector<TokenId> pending_;
  std::vector<KeyLogEntry> log_;
  std::uint64_t generation_ = next_batch_generation();
};

/// An optimizer as the fused-step door (FusedStepAccess) sees it, which runs a keyed table's
/// pending resets as its update begins: after every check of the step, before any row moves. The
/// keyed bags hand it to EmbeddingBag and TableBatchedBags, whose doors check their whole input
/// first, so a step they refuse resets nothing.
template <class T, class Opt>
class ResetOnApply {
 public:
  ResetOnApply(Opt& opt, KeyedState<T>& state) noexcept : opt_(&opt), state_(&state) {}
  [[nodiscard]] const auto& options() const noexcept { return opt_->options(); }
  void fused_check(const Embedding<T>& emb, const FusedStepChecks<T>& checks) const {
    FusedStepAccess::check(*opt_, emb, checks);
  }
  template <class Id, class Rows>
  void fused_apply(Embedding<T>& emb, const FusedStepRows<T, Id, Rows>& rows,
                   const Eigen::Ref<const RowMatrix<T>>* dense,
                   const optim::FusedStepOptions& fused) {
    state_->reset(*opt_);
    FusedStepAccess::apply(*opt_, emb, rows, FusedStepChecks<T>{nullptr, dense, &fused, nullptr});
  }

 private:
  Opt* opt_;
  KeyedState<T>* state_;
};

/// What every single-table keyed layer (KeyedEmbedding, KeyedEmbeddingBag) offers beyond its
/// lookups: shape, the index, mapping, erasing, resizing, deltas and the eviction log. `Derived`
/// holds the table (keyed_table()) and names itself (`name`).
template <class Derived, class T>
class KeyedCommon {
  static_assert(Scalar<T>, "ember's keyed layers: T must be float or double");

 public:
  using Scalar = T;

  /// Keys the table can hold (rows [0, capacity())).
  [[nodiscard]] Index capacity() const noexcept { return state_.index().capacity(); }
  /// Values per row: the width the layer was built with.
  [[nodiscard]] Index d_model() const noexcept { return state_.d_model(); }
  /// Resident keys.
  [[nodiscard]] Index size() const noexcept { return state_.index().size(); }
  /// The options.
  [[nodiscard]] const KeyedOptions& options() const noexcept { return state_.options(); }
  /// The index (read-only: map, erase and resize change it through the layer).
  [[nodiscard]] const KeyIndex& index() const noexcept { return state_.index(); }
  /// The table: capacity() + 1 rows, the last the fallback row (read-only: the optimizers step
  /// it through the layer's step / backward_step, which reset the state of reused rows first).
  [[nodiscard]] const Embedding<T>& table() const noexcept { return self().keyed_table(); }
  /// The fallback row's index in table(): capacity().
  [[nodiscard]] TokenId fallback_row() const noexcept { return state_.fallback_row(); }

  /// The row of each key (the fallback row for keys without one), without inserting or counting.
  [[nodiscard]] std::vector<TokenId> find(std::span<const std::uint64_t> keys) const {
    std::vector<TokenId> rows(keys.size());
    state_.find(keys, rows);
    return rows;
  }

  /// Maps a training batch at `step`: KeyIndex::find_or_insert, the rows of keys that got one
  /// re-initialised (KeyedOptions::init), their optimizer state queued for a reset.
  /// Shapes:  keys[n]; scores[n] with EvictionPolicy::score, else empty.
  /// Throws:  as KeyIndex::find_or_insert (CapacityError included); nothing changes then.
  /// Complexity: as find_or_insert, plus O(d) per inserted key.
  [[nodiscard]] KeyedBatch map(std::span<const std::uint64_t> keys, std::int64_t step,
                               std::span<const double> scores = {}) {
    KeyedBatch batch;
    auto& rows = KeyedBatchAccess::rows(batch);
    rows.resize(keys.size());
    const InsertResult r = state_.map(keys, rows, step, scores, self().keyed_table());
    state_.advance();
    KeyedBatchAccess::stamp(batch, r, step, state_.generation(), &self());
    return batch;
  }

  /// Sets the shared fallback row's values.
  /// Throws: StateError with KeyFallback::zeros; ShapeError unless values has d_model() entries
  ///         (the width).
  void set_fallback_values(const Eigen::Ref<const RowVector<T>>& values) {
    const Where where{Derived::name, "set_fallback_values"};
    if (options().fallback != KeyFallback::shared_row) {
      throw StateError(message(where, "the fallback is the zero (padding) row"));
    }
    check_extent(where, "values", 1, d_model(), values.cols(), "the width");
    self().keyed_table().weight().row(capacity()) = values;
  }

  /// Resets the optimizer state of the rows new keys got since the last step, then
  /// opt.step(table(), grad).
  /// Throws: ShapeError if grad is bound to another shape than table() (capacity() + 1 rows of
  ///         the width) or the optimizer's state to another width; as opt.step. These are
  ///         checked before the resets: nothing changes when it throws.
  template <class Opt>
  void step(Opt& opt, const SparseRowGrad<T>& grad) {
    state_.check_step(opt, grad, {Derived::name, "step"});
    state_.reset(opt);
    opt.step(self().keyed_table(), grad);
  }

  /// Removes keys (logged for deltas); returns the (key, row) pairs removed. Batches mapped
  /// before are stale afterwards.
  std::vector<KeyRow> erase(std::span<const std::uint64_t> keys) { return state_.erase(keys); }

  /// Changes the capacity (KeyIndex::resize: growing keeps every row, shrinking evicts by the
  /// policy), the optimizer state moving with the rows. Batches mapped before are stale after.
  /// Throws: as KeyIndex::resize; nothing changes then.
  template <class Opt>
  ResizeResult resize(Index capacity, Opt& opt) {
    return state_.resize(capacity, self().keyed_table(), &RowOptimizerAccess::state(opt));
  }
  /// resize without an optimizer: the moved rows' optimizer state is reset at the next step.
  ResizeResult resize(Index capacity) {
    return state_.resize(capacity, self().keyed_table(), nullptr);
  }

  /// The keys seen after since_step (at later steps) with their row values, the keys evicted
  /// (or erased) after it that have no row now, and the fallback row. Complexity: O(C + k·d).
  [[nodiscard]] KeyedDelta<T> export_delta(std::int64_t since_step) const {
    return state_.export_delta(since_step, self().keyed_table());
  }
  /// Applies a delta of a table of the same width: evicted keys go, keys get their values (new
  /// ones take free rows; no admission, no eviction), the fallback row its values.
  /// Throws: ShapeError for another width or inconsistent sizes; CapacityError if the new keys
  ///         do not fit. Nothing changes when it throws.
  void apply_delta(const KeyedDelta<T>& delta) {
    state_.apply_delta(delta, self().keyed_table(), {Derived::name, "apply_delta"});
  }
  /// The keys that lost their rows, with the steps they lost them at (what export_delta reads).
  [[nodiscard]] std::span<const KeyLogEntry> eviction_log() const noexcept { return state_.log(); }
  /// Forgets the log entries at or before `step` (after every consumer has a delta past it).
  void trim_eviction_log(std::int64_t step) { state_.trim_log(step); }

 protected:
  KeyedCommon(Index capacity, Index d_model, const KeyedOptions& options)
      : state_(capacity, d_model, options, Derived::name) {}

  /// The door of every call on a mapped batch: StateError unless `batch` is this layer's
  /// current batch (so its rows are rows of table() the index gave, and need no check again).
  void check_batch(const KeyedBatch& batch, const char* call) const {
    KeyedBatchAccess::check_current(batch, state_.generation(), &self(), {Derived::name, call});
  }

  KeyedState<T> state_;

 private:
  friend struct KeyedAccess;
  Derived& self() noexcept { return static_cast<Derived&>(*this); }
  const Derived& self() const noexcept { return static_cast<const Derived&>(*this); }
};

/// ember's own door into the parts of a keyed layer (checkpoints, the sharded table).
struct KeyedAccess {
  template <class L>
  static auto& state(L& layer) noexcept {
    return layer.state_;
  }
  template <class L>
  static auto& table(L& layer) noexcept {
    return layer.keyed_table();
  }
  /// Table t's state and table in a KeyedTableBatchedBags.
  template <class L>
  static auto& state_of(L& layer, Index t) noexcept {
    return layer.states_[static_cast<std::size_t>(t)];
  }
  template <class L>
  static auto& table_of(L& layer, Index t) noexcept {
    return layer.bags_.table(t);
  }
  /// The TableBatchedBags of a KeyedTableBatchedBags (benchmarks time it on pre-mapped rows).
  template <class L>
  static auto& bags(L& layer) noexcept {
    return layer.bags_;
  }
};

}  // namespace detail

/// A trainable embedding table indexed by raw 64-bit keys: a KeyIndex maps keys to the rows
/// [0, capacity) of an ordinary Embedding<T> of capacity + 1 rows, the last one the fallback row
/// (KeyFallback). Every kernel, backward and optimizer of Embedding applies unchanged.
///
/// Inference: forward(keys) reads the rows of resident keys and the fallback row for the others,
/// never inserting. Training, per batch: map(keys, step) finds or inserts the keys (admission,
/// eviction, KeyIndex's rules); forward(batch), backward(batch, grad_out, grad) +
/// step(opt, grad), or backward_step(batch, grad_out, opt) then train the rows as
/// Embedding::forward / backward / the optimizers do. A key that gets a row (a new one or one
/// another key was evicted from) starts fresh: its row is re-initialised by KeyedOptions::init and
/// its optimizer state is reset at the next step or backward_step, so nothing of an evicted key
/// leaks into a new one. Use one optimizer per keyed table, and step it through this table.
///
/// Deltas: export_delta(since_step) gives every key seen after a step with its row values, the
/// keys evicted since, and the fallback row; apply_delta brings a serving copy up to date.
/// Checkpoints: io/keyed_checkpoint.hpp (needs ember::io).
///
/// Thread safety: const members may run concurrently; map, backward and step may not.
///
/// Example:
/// ```cpp
/// ember::KeyedEmbedding<float> emb(/*capacity=*/1 << 20, /*d_model=*/64,
///                                  {.index = {.policy = ember::EvictionPolicy::lru}});
/// ember::optim::Adam<float> adam({.lr = 1e-3});
/// std::vector<std::uint64_t> keys{0x9E3779B97F4A7C15, 42, 42};
/// ember::KeyedBatch batch = emb.map(keys, /*step=*/0);
/// ember::RowMatrix<float> x = emb.forward(batch);          // 3 x 64
/// emb.backward_step(batch, /*grad_out=*/x, adam);           // the rows of 2 keys move
/// ```
template <class T>
class KeyedEmbedding : public detail::KeyedCommon<KeyedEmbedding<T>, T> {
  using Base = detail::KeyedCommon<KeyedEmbedding<T>, T>;
  friend Base;
  using Base::state_;

 public:
  /// The layer's name in messages.
  static constexpr const char* name = "KeyedEmbedding";

  /// A table for `keys` keys (its capacity) of `width` values (its d_model()), empty.
  /// Throws:  ValueError for a capacity or index option KeyIndex refuses, an index fallback_row
  ///          other than -1, a negative init_rows or a bad init; ShapeError if width <= 0.
  KeyedEmbedding(Index keys, Index width, KeyedOptions options = {})
      : Base(keys, width, options), table_(state_.make_table(options.scale)) {}

  using Base::capacity;
  using Base::d_model;
  using Base::find;

  /// The lookup scale of forward.
  [[nodiscard]] T scale() const noexcept { return table_.scale(); }

  // ---- inference --------------------------------------------------------------------------------

  /// out.row(i) = the row of keys[i] · scale() (the fallback row for keys without one).
  /// Read-only: nothing is inserted, counted or moved.
  /// Shapes:  keys[n] -> out[n, d].
  /// Throws:  ShapeError if out is not n x d (d the width); out is untouched then.
  /// Complexity: O(n·d) plus one probe per key.
  void forward(std::span<const std::uint64_t> keys, Eigen::Ref<RowMatrix<T>> out) const {
    check_out(static_cast<Index>(keys.size()), out);
    const std::vector<TokenId> rows = find(keys);
    detail::TableAccess::forward_validated(table_, std::span<const TokenId>(rows), out);
  }
  /// Owning form of forward(keys, out).
  [[nodiscard]] RowMatrix<T> forward(std::span<const std::uint64_t> keys) const {
    const std::vector<TokenId> rows = find(keys);
    RowMatrix<T> out(static_cast<Index>(rows.size()), d_model());
    detail::TableAccess::forward_validated(table_, std::span<const TokenId>(rows), out);
    return out;
  }

  // ---- training -------------------------------------------------------------------------------

  /// The lookup of a mapped batch: rows · scale().
  /// Shapes:  batch of n keys -> out[n, d].
  /// Throws:  StateError for a batch not mapped by this table's latest map; ShapeError if out is
  ///          not n x d. out is untouched when it throws.
  void forward(const KeyedBatch& batch, Eigen::Ref<RowMatrix<T>> out) const {
    this->check_batch(batch, "forward");
    check_out(batch.size(), out);
    detail::TableAccess::forward_validated(table_, batch.rows(), out);
  }
  /// Owning form of forward(batch, out).
  [[nodiscard]] RowMatrix<T> forward(const KeyedBatch& batch) const {
    this->check_batch(batch, "forward");
    RowMatrix<T> out(batch.size(), d_model());
    detail::TableAccess::forward_validated(table_, batch.rows(), out);
    return out;
  }

  /// Embedding::backward of forward(batch) into grad (rows of table(); the zero fallback row gets
  /// nothing, a shared fallback row its keys' sum).
  /// Shapes:  batch of n keys, grad_out[n, d] -> grad (capacity() + 1 x d, row-sparse).
  /// Throws:  StateError for a stale batch; ShapeError if grad_out is not n x d or grad is bound
  ///          to another table shape. grad is unchanged when it throws.
  void backward(const KeyedBatch& batch, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad) const {
    constexpr detail::Where where{name, "backward"};
    this->check_batch(batch, "backward");
    detail::check_dims(where, "grad_out", grad_out, batch.size(), "the number of keys", d_model(),
                       "the width");
    detail::SparseRowGradAccess::check_shape(grad, where, table_.vocab_size(), d_model());
    detail::TableAccess::backward_validated(table_, batch.rows(), grad_out, grad,
                                            table_.accumulate_options());
  }

  /// backward + step fused (opt.backward_step on the table), after the resets of step.
  /// Throws:  StateError for a stale batch; ShapeError for a grad_out that is not n x d; what
  ///          opt.backward_step refuses (a bad `fused` option, the optimizer's state of another
  ///          width, with check_finite a non-finite grad_out). All are checked before the
  ///          resets: nothing changes when it throws.
  template <class Opt>
  void backward_step(const KeyedBatch& batch, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     Opt& opt, const optim::FusedStepOptions& fused = {}) {
    constexpr detail::Where where{name, "backward_step"};
    this->check_batch(batch, "backward_step");
    detail::check_dims(where, "grad_out", grad_out, batch.size(), "the number of keys", d_model(),
                       "the width");
    const detail::DirectRows<T> rows{detail::const_table(grad_out)};
    const detail::FusedStepChecks<T> checks{&grad_out, nullptr, &fused, where};
    detail::FusedStepAccess::check(opt, table_, checks);
    state_.reset(opt);
    detail::FusedStepAccess::apply(
        opt, table_,
        detail::fused_rows(batch.rows(), rows, false, table_.scale(), table_.accumulate_options()),
        checks);
  }

 private:
  [[nodiscard]] Embedding<T>& keyed_table() noexcept { return table_; }
  [[nodiscard]] const Embedding<T>& keyed_table() const noexcept { return table_; }
  friend struct detail::KeyedAccess;

  /// ShapeError, from forward, unless out is n x the width.
  void check_out(Index n, const Eigen::Ref<RowMatrix<T>>& out) const {
    detail::check_dims({name, "forward"}, "out", out, n, "the number of keys", d_model(),
                       "the width");
  }

  Embedding<T> table_;
};

}  // namespace ember::inline EMBER_ISA
