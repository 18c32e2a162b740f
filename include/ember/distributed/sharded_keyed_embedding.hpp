/// ShardedKeyedEmbedding<T>: a keyed table split over the ranks of an MPI communicator by a hash
/// of the key: each rank's KeyIndex maps its keys into its shard of a ShardedEmbedding, whose
/// exchange then reads and trains the rows. Needs ember::mpi.
// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/distributed/detail/mpi.hpp"
#include "ember/distributed/sharded_embedding.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/fused_step.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/keys/key_index.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::distributed {

/// The rank that owns `key` among `world_size` ranks: mix_key(key ^ salt) mod world_size (a
/// bijective 64-bit mixer, so owners are balanced whatever structure the keys have).
/// Precondition: world_size >= 1.
[[nodiscard]] inline int key_owner(std::uint64_t key, int world_size) noexcept {
  return static_cast<int>(detail::mix_key(key ^ 0x5851F42D4C957F2DULL) %
                          static_cast<std::uint64_t>(world_size));
}

}  // namespace ember::inline EMBER_ISA::distributed

namespace ember::inline EMBER_ISA::detail {
struct ShardedKeyedAccess;
}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::distributed {

/// A keyed table over MPI ranks: key k lives on rank key_owner(k, P), in that rank's KeyIndex of
/// capacity_per_rank keys and its shard of a ShardedEmbedding of P · (capacity_per_rank + 1)
/// rows (rank r owns global rows [r · (C + 1), (r + 1) · (C + 1)), its last the fallback row).
///
/// map(keys, step) sends each rank's distinct keys, with their sightings (and largest score), to
/// their owners, which map them as KeyIndex::find_or_insert (each owner looks its keys up once
/// and holds the batch until every rank has accepted its own, then commits: a CapacityError on
/// one rank is thrown on all, nothing mapped) and answer with global rows; forward, backward and
/// backward_step then run ShardedEmbedding's exchange on those rows. Rows new keys get are
/// re-initialised and their optimizer state reset, on their owner.
///
/// Equivalence: a key's first values come from its own seed, so every rank count draws the same
/// values; forward equals KeyedEmbedding::forward of one process that maps the ranks' batches in
/// rank order, and backward its backward called once per rank's batch in rank order, whenever the
/// mapping is the same: always while no rank evicts and admission counts stay below their ceiling
/// (each owner evicts and admits over its own keys and sketch: the policy is partitioned, as in
/// sharded HierarchicalKV or TorchRec tables).
///
/// Collective calls (the constructor, map, find, forward, backward, backward_step and the
/// checkpoints of distributed/keyed_checkpoint.hpp) run on every rank in the same order, each
/// with its own batch (possibly empty). Errors are agreed as ShardedEmbedding's are. A batch's
/// hits, inserted, fallbacks and evicted() count what this rank's index did as an owner.
template <class T>
class ShardedKeyedEmbedding {
  static_assert(Scalar<T>,
                "ember::distributed::ShardedKeyedEmbedding<T>: T must be float or double");

 public:
  using Scalar = T;

  /// Collective. Every rank holds capacity_per_rank keys of d_model values. options.init_rows
  /// of 0 means the total capacity P · capacity_per_rank (so Xavier's bound is the one-process
  /// table's).
  /// Throws (on every rank): as KeyedEmbedding's constructor; ShapeError if the ranks disagree on
  /// the sizes.
  ShardedKeyedEmbedding(MPI_Comm comm, Index capacity_per_rank, Index d_model,
                        KeyedOptions options = {})
      : ShardedKeyedEmbedding(setup(comm, capacity_per_rank, d_model, options)) {}

  /// Move-only, as ShardedEmbedding.
  ShardedKeyedEmbedding(ShardedKeyedEmbedding&&) noexcept = default;
  ShardedKeyedEmbedding& operator=(ShardedKeyedEmbedding&&) = delete;

  /// The (duplicated) communicator.
  [[nodiscard]] MPI_Comm comm() const noexcept { return sharded_.comm(); }
  /// This rank.
  [[nodiscard]] int rank() const noexcept { return sharded_.rank(); }
  /// Number of ranks P.
  [[nodiscard]] int world_size() const noexcept { return sharded_.world_size(); }
  /// Keys each rank can hold.
  [[nodiscard]] Index capacity_per_rank() const noexcept { return state_.index().capacity(); }
  /// Values per row.
  [[nodiscard]] Index d_model() const noexcept { return sharded_.d_model(); }
  /// The options.
  [[nodiscard]] const KeyedOptions& options() const noexcept { return state_.options(); }
  /// This rank's index (the keys it owns).
  [[nodiscard]] const KeyIndex& index() const noexcept { return state_.index(); }
  /// This rank's shard: capacity_per_rank() + 1 rows of local row ids, the last the fallback row.
  [[nodiscard]] const Embedding<T>& shard() const noexcept { return sharded_.shard(); }
  /// The row-sharded table underneath (its exchange statistics, its tied logits).
  [[nodiscard]] const ShardedEmbedding<T>& sharded() const noexcept { return sharded_; }
  /// The global row of this rank's local row r.
  [[nodiscard]] TokenId global_row(TokenId r) const noexcept {
    return static_cast<TokenId>(rank()) * (capacity_per_rank() + 1) + r;
  }

  /// Collective. Maps this rank's keys for training at `step` on their owners and returns the
  /// batch of their global rows.
  /// Shapes:  keys[n] (n may differ per rank); scores[n] with EvictionPolicy::score, else empty.
  /// Throws:  on every rank, what KeyIndex::find_or_insert would throw on some owner (ValueError
  ///          for a bad step or score, ShapeError for a scores size, CapacityError), and
  ///          ShapeError if a rank's batch has 2^31 keys or more. Nothing changes then.
  /// Complexity: O(n log n) per rank (the keys sorted by owner) plus the owners' evictions; one
  ///          MPI_Alltoall, three MPI_Alltoallv (four with scores) and two agreements; an owner
  ///          looks each key it receives up once.
  [[nodiscard]] KeyedBatch map(std::span<const std::uint64_t> keys, std::int64_t step,
                               std::span<const double> scores = {}) {
    return route(keys, step, scores, true);
  }

  /// Collective. The rows of keys for inference (fallback rows for keys without one), nothing
  /// inserted or counted: a batch valid for forward only until the next map.
  [[nodiscard]] KeyedBatch find(std::span<const std::uint64_t> keys) {
    return route(keys, 0, {}, false);
  }

  /// Collective. ShardedEmbedding::forward of a batch: rows · scale().
  /// Throws: on every rank, StateError if some rank's batch is stale; as ShardedEmbedding::forward.
  void forward(const KeyedBatch& batch, Eigen::Ref<RowMatrix<T>> out) {
    check_batch(batch, "forward");
    sharded_.forward(batch.rows(), out);
  }
  /// Owning form.
  [[nodiscard]] RowMatrix<T> forward(const KeyedBatch& batch) {
    RowMatrix<T> out(batch.size(), d_model());
    forward(batch, out);
    return out;
  }
  /// Collective. forward(find(keys)): an inference lookup.
  [[nodiscard]] RowMatrix<T> forward(std::span<const std::uint64_t> keys) {
    return forward(find(keys));
  }

  /// Collective. ShardedEmbedding::backward of a mapped batch into grad (this rank's shard's
  /// local rows).
  /// Throws: on every rank, StateError for a stale batch; as ShardedEmbedding::backward.
  void backward(const KeyedBatch& batch, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad) {
    check_batch(batch, "backward");
    sharded_.backward(batch.rows(), grad_out, grad);
  }

  /// Local. Resets the state of rows new keys got on this rank, then opt.step(shard, grad).
  template <class Opt>
  void step(Opt& opt, const SparseRowGrad<T>& grad) {
    state_.reset(opt);
    opt.step(sharded_.shard(), grad);
  }

  /// Collective. backward into a fresh gradient, then step.
  template <class Opt>
  void backward_step(const KeyedBatch& batch, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     Opt& opt) {
    SparseRowGrad<T> grad;
    backward(batch, grad_out, grad);
    step(opt, grad);
  }

 private:
  friend struct detail::ShardedKeyedAccess;

  struct Setup {
    ShardedEmbedding<T> sharded;
    detail::KeyedState<T> state;
  };

  explicit ShardedKeyedEmbedding(Setup s)
      : sharded_(std::move(s.sharded)), state_(std::move(s.state)) {}

  static Setup setup(MPI_Comm comm, Index capacity, Index d, KeyedOptions options) {
    int size = 0;
    detail::check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    if (options.init_rows == 0 && capacity > 0) options.init_rows = capacity * size;
    std::vector<detail::KeyedState<T>> made;
    detail::validate_collectively(comm, [&] {
      made.emplace_back(capacity, d, options, "ShardedKeyedEmbedding");
      if (static_cast<double>(capacity + 1) * size > static_cast<double>(INT_MAX)) {
        throw ShapeError(detail::message("ShardedKeyedEmbedding", size, " ranks of ", capacity + 1,
                                         " rows exceed INT_MAX rows"),
                         -1, INT_MAX, (capacity + 1) * size);
      }
    });
    Embedding<T> shard = made.front().make_table(options.scale);
    ShardedOptions so;
    so.scale = options.scale;
    ShardedEmbedding<T> sharded(comm, (capacity + 1) * size, RowMatrix<T>(shard.weight()), so);
    if (options.fallback == KeyFallback::zeros) sharded.shard().set_padding_idx(capacity);
    return {std::move(sharded), std::move(made.front())};
  }

  void check_batch(const KeyedBatch& batch, const char* call) const {
    detail::validate_collectively(comm(), [&] {
      detail::KeyedBatchAccess::check_current(
          batch, state_.generation(), this, {"ShardedKeyedEmbedding", call, rank(), world_size()});
    });
  }

  /// Sends each rank's distinct keys (with sightings and largest scores) to their owners, which
  /// map (train) or find them and send back the global rows.
  KeyedBatch route(std::span<const std::uint64_t> keys, std::int64_t step,
                   std::span<const double> scores, bool train) {
    const detail::Where where{"ShardedKeyedEmbedding", train ? "map" : "find", rank(),
                              world_size()};
    const int p = world_size();
    const auto n = static_cast<Index>(keys.size());
    const bool scored = train && options().index.policy == EvictionPolicy::score;
    detail::validate_collectively(comm(), [&] {
      if (n > INT_MAX) {
        throw ShapeError(detail::message(where, n, " keys exceed INT_MAX per call"), 0, INT_MAX, n);
      }
      detail::check_extent(where, "scores", 0, scored ? n : 0, static_cast<Index>(scores.size()),
                           scored ? "the number of keys" : "0");
      detail::check_finite_scores(where, scores);
    });
    // Distinct keys grouped by owner, with their sightings and largest score.
    order_.resize(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) {
      const std::uint64_t k = keys[static_cast<std::size_t>(i)];
      order_[static_cast<std::size_t>(i)] = {key_owner(k, p), k, i};
    }
    std::sort(order_.begin(), order_.end());
    send_keys_.clear();
    send_counts_.clear();
    send_scores_.clear();
    slot_of_.resize(static_cast<std::size_t>(n));
    std::vector<int> counts(static_cast<std::size_t>(p), 0);
    for (const auto& [owner, k, i] : order_) {
      if (send_keys_.empty() || send_keys_.back() != k) {
        send_keys_.push_back(k);
        send_counts_.push_back(0);
        send_scores_.push_back(-std::numeric_limits<double>::infinity());
        ++counts[static_cast<std::size_t>(owner)];
      }
      send_counts_.back() += 1;
      if (scored)
        send_scores_.back() = std::max(send_scores_.back(), scores[static_cast<std::size_t>(i)]);
      slot_of_[static_cast<std::size_t>(i)] = static_cast<Index>(send_keys_.size()) - 1;
    }
    const std::vector<int> displs = detail::exclusive_sum(counts);
    std::vector<int> recv_counts(static_cast<std::size_t>(p), 0);
    detail::check_mpi(
        MPI_Alltoall(counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm()),
        "MPI_Alltoall");
    const std::vector<int> recv_displs = detail::exclusive_sum(recv_counts);
    const auto total =
        static_cast<std::size_t>(recv_displs.back()) + static_cast<std::size_t>(recv_counts.back());
    recv_keys_.resize(total);
    recv_counts64_.resize(total);
    recv_scores_.resize(scored ? total : 0);
    detail::alltoallv(send_keys_.data(), counts, displs, recv_keys_.data(), recv_counts,
                      recv_displs, MPI_UINT64_T, comm());
    if (train) {
      detail::alltoallv(send_counts_.data(), counts, displs, recv_counts64_.data(), recv_counts,
                        recv_displs, MPI_INT64_T, comm());
    }
    if (scored) {
      detail::alltoallv(send_scores_.data(), counts, displs, recv_scores_.data(), recv_counts,
                        recv_displs, MPI_DOUBLE, comm());
    }
    // The owners map: every rank looks its batch up once and holds it, the ranks agree, then
    // every rank commits what it held. If any rank refuses (a CapacityError, a bad step), every
    // rank throws and the ranks that held release their batch: nothing changes anywhere.
    local_rows_.resize(total);
    if (train) {
      detail::KeyIndexHold::Scope held;  // on every exit (a refusal on any rank too), released
      detail::validate_collectively(comm(), [&] {
        held.hold(state_.index(), recv_keys_, step, recv_scores_, recv_counts64_);
      });
      const InsertResult r =
          state_.map(recv_keys_, local_rows_, step, recv_scores_, sharded_.shard(), recv_counts64_);
      last_ = r;
      last_evicted_.assign(r.evicted.begin(), r.evicted.end());
      state_.advance();
    } else {
      state_.find(recv_keys_, local_rows_);
    }
    for (auto& r : local_rows_) r = global_row(r);
    reply_.resize(send_keys_.size());
    detail::alltoallv(local_rows_.data(), recv_counts, recv_displs, reply_.data(), counts, displs,
                      MPI_INT64_T, comm());
    KeyedBatch batch;
    auto& rows = detail::KeyedBatchAccess::rows(batch);
    rows.resize(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i)
      rows[static_cast<std::size_t>(i)] =
          reply_[static_cast<std::size_t>(slot_of_[static_cast<std::size_t>(i)])];
    InsertResult stats;
    if (train) {
      stats = last_;
      stats.evicted = last_evicted_;
    }
    detail::KeyedBatchAccess::stamp(batch, stats, train ? step : -1, state_.generation(), this);
    return batch;
  }

  ShardedEmbedding<T> sharded_;
  detail::KeyedState<T> state_;
  // Scratch reused across calls.
  struct Routed {
    int owner;
    std::uint64_t key;
    Index position;
    friend bool operator<(const Routed& a, const Routed& b) noexcept {
      return a.owner != b.owner ? a.owner < b.owner
             : a.key != b.key   ? a.key < b.key
                                : a.position < b.position;
    }
  };
  std::vector<Routed> order_;
  std::vector<std::uint64_t> send_keys_, recv_keys_;
  std::vector<std::int64_t> send_counts_, recv_counts64_;
  std::vector<double> send_scores_, recv_scores_;
  std::vector<Index> slot_of_;
  std::vector<TokenId> local_rows_, reply_;
  InsertResult last_;
  std::vector<KeyRow> last_evicted_;
};

}  // namespace ember::inline EMBER_ISA::distributed
