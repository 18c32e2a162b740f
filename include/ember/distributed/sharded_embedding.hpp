/// ShardedEmbedding<T>: an embedding table split by rows across the ranks of an MPI communicator,
/// with all-to-all lookup, pre-reduced sparse backward and vocabulary-parallel tied logits.
// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/detail/gather.hpp"
#include "ember/keys/detail/key_slots.hpp"
#include "ember/detail/table_ref.hpp"
#include "ember/distributed/detail/mpi.hpp"
#include "ember/distributed/row_partition.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/init.hpp"
#include "ember/positional.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/table.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::distributed {

/// Traffic of the last forward/backward call on this rank. "Remote" means to or from another
/// rank; the rows a rank serves to itself are copied locally and are not counted as bytes.
struct ExchangeStats {
  Index ids = 0;          ///< ids passed in by this rank
  Index unique_ids = 0;   ///< ids this rank requested (after de-duplication if enabled)
  Index ids_sent = 0;     ///< requested ids owned by another rank
  Index rows_served = 0;  ///< requests of other ranks this shard answered (rows sent in forward,
                          ///< gradient rows received in backward)
  std::uint64_t bytes_sent = 0;      ///< id bytes + row bytes sent to other ranks
  std::uint64_t bytes_received = 0;  ///< id bytes + row bytes received from other ranks
};

/// Options of a ShardedEmbedding.
struct ShardedOptions {
  /// Send each distinct id once per forward (off: one per position, only to measure what this
  /// saves). The backward always pre-reduces gradient rows per distinct id.
  bool deduplicate = true;
  /// The lookup scale of the table (√d_model by default), the same on every rank.
  LookupScale scale = {};
};

/// A V x d embedding table whose rows are split across the ranks of an MPI communicator by a
/// RowPartition. Each rank holds only its shard, an ordinary `Embedding<T>` of its rows (full-table
/// row `id` is shard row `id - row_begin()`), so every optimizer that steps an Embedding with a
/// SparseRowGrad steps a shard unchanged.
///
/// Collective calls (the constructors, forward, forward_with_positions, backward, logits,
/// logits_backward, hidden_offsets, gather_table, and save_shards/load_shards of checkpoint.hpp)
/// are made by every rank in the same order, each with its own batch (possibly empty).
///
/// Errors: each collective call validates on every rank and agrees on the outcome (one
/// MPI_Allreduce) before any data moves: if some rank's input is bad, EVERY rank throws the
/// exception (type, fields, message) of the lowest failing rank, whose message names it
/// ("ShardedEmbedding::forward (rank 1 of 4): id 50 at position 3 is outside [0, 40)"), and
/// nothing was written. Ranks building tables of different shapes throw too.
///
/// Determinism: forward is bit-identical to Embedding::forward on the full table; backward into an
/// empty gradient gives the bits of Embedding::backward called once per rank's batch, in rank
/// order, into one SparseRowGrad (docs/distributed.md).
///
/// MPI must be initialised while the object is built and used; its communicator is duplicated.
/// Collective members reuse scratch buffers: call them from one thread per rank. backward ignores
/// the shard's padding_idx and scale_grad_by_freq (plain sums): pass zero rows for padding.
template <class T>
class ShardedEmbedding {
  static_assert(Scalar<T>, "ember::distributed::ShardedEmbedding<T>: T must be float or double");

  struct Setup {
    MPI_Comm comm;
    int rank;
    RowPartition partition;
    Index d_model;
    detail::Where where;  // "ShardedEmbedding (rank r of P)"
  };

 public:
  using Scalar = T;

  /// Collective. A vocab_size x d_model table filled by `init`, each rank creating only its rows:
  /// row r is `init` applied to a 1 x d_model table with seed row_seed(seed, r) (Xavier's bound
  /// with the full fan_out = vocab_size), so the table does not depend on the number of ranks (it
  /// is not the table Embedding(V, d, init, seed) draws from one stream).
  /// Throws (on every rank): ShapeError if a size is not positive, if the ranks disagree on
  /// (vocab_size, d_model), or if the communicator has more ranks than rows; ValueError for an
  /// invalid init.
  ShardedEmbedding(MPI_Comm comm, Index vocab_size, Index d_model,
                   const Init& init = Init::normal(), std::uint64_t seed = 0,
                   ShardedOptions options = {})
      : ShardedEmbedding(
            setup(
                comm, vocab_size, d_model, [&] { init.validate(); }, [](const Setup&) {}),
            [&](const Setup& s) { return make_shard(s, init, seed); }, options) {}

  /// Collective. Adopts this rank's shard: rows [row_begin(), row_end()) of a vocab_size-row table.
  /// Throws (on every rank): as above, and ShapeError if some rank's shard has not
  /// RowPartition(vocab_size, P).rows(rank) rows.
  ShardedEmbedding(MPI_Comm comm, Index vocab_size, RowMatrix<T> shard, ShardedOptions options = {})
      : ShardedEmbedding(
            setup(
                comm, vocab_size, shard.cols(), [] {},
                [&](const Setup& s) {
                  detail::check_extent(s.where, "shard", 0, s.partition.rows_of(s.rank),
                                       shard.rows(), "the rows this rank owns");
                }),
            [&](const Setup&) { return std::move(shard); }, options) {}

  /// Collective. Every rank passes the same full V x d table (small enough for each host) and keeps
  /// its own rows. Throws (on every rank): as the first constructor.
  [[nodiscard]] static ShardedEmbedding from_full_table(MPI_Comm comm,
                                                        const Eigen::Ref<const RowMatrix<T>>& table,
                                                        ShardedOptions options = {}) {
    return ShardedEmbedding(
        setup(
            comm, table.rows(), table.cols(), [] {}, [](const Setup&) {}),
        [&](const Setup& s) {
          const Index b = s.partition.begin_of(s.rank);
          return RowMatrix<T>(table.middleRows(b, s.partition.rows_of(s.rank)));
        },
        options);
  }

  /// Move-only; the duplicated communicator is freed with the object (unless MPI is finalized).
  ShardedEmbedding(ShardedEmbedding&&) noexcept = default;
  ShardedEmbedding& operator=(ShardedEmbedding&&) = delete;

  /// The seed of row `row` in the initialising constructor (SplitMix64 of seed and row).
  [[nodiscard]] static std::uint64_t row_seed(std::uint64_t seed, Index row) noexcept {
    return detail::mix_key(seed ^ (0x9E3779B97F4A7C15ULL * (static_cast<std::uint64_t>(row) + 1)));
  }

  // ---- shape and placement --------------------------------------------------------------------

  /// The (duplicated) communicator ember uses.
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_.get(); }
  /// This process's rank in comm().
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// Number of ranks P.
  [[nodiscard]] int world_size() const noexcept { return partition_.world_size(); }
  /// Rows of the full table V.
  [[nodiscard]] Index vocab_size() const noexcept { return partition_.vocab_size(); }
  /// Row width d.
  [[nodiscard]] Index d_model() const noexcept { return shard_.d_model(); }
  /// The lookup scale √d_model, as Embedding::scale().
  [[nodiscard]] T scale() const noexcept { return shard_.scale(); }
  /// The sharding rule.
  [[nodiscard]] const RowPartition& partition() const noexcept { return partition_; }
  /// First full-table row this rank owns.
  [[nodiscard]] Index row_begin() const noexcept { return partition_.begin_of(rank_); }
  /// One past the last full-table row this rank owns.
  [[nodiscard]] Index row_end() const noexcept { return partition_.begin_of(rank_ + 1); }
  /// Rows this rank owns.
  [[nodiscard]] Index local_rows() const noexcept { return partition_.rows_of(rank_); }
  /// This rank's shard: local_rows() x d, local row ids. Step it with any ember optimizer and
  /// the SparseRowGrad from backward(). Do not resize it.
  [[nodiscard]] Embedding<T>& shard() noexcept { return shard_; }
  /// This rank's shard (read-only).
  [[nodiscard]] const Embedding<T>& shard() const noexcept { return shard_; }
  /// The options in force.
  [[nodiscard]] const ShardedOptions& options() const noexcept { return options_; }
  /// Changes the options (local; keep them equal on all ranks for meaningful statistics).
  void set_options(ShardedOptions options) noexcept { options_ = options; }
  /// Traffic of the last forward or backward call on this rank.
  [[nodiscard]] const ExchangeStats& last_exchange() const noexcept { return stats_; }

  // ---- lookup ---------------------------------------------------------------------------------

  /// Collective. Row ids[i] of the full table times scale(), for this rank's ids: the distinct
  /// ids (sorted, hence grouped by owner) go to their owners (MPI_Alltoall of counts,
  /// MPI_Alltoallv of ids), which send their scaled rows back (MPI_Alltoallv).
  /// Shapes:  ids[n] (n may differ per rank, may be 0) -> out[n, d].
  /// Throws:  on every rank, IndexError if some rank has an id outside [0, vocab_size()), or
  ///          ShapeError if some rank's out is not n x d or n >= 2^31. out is untouched then.
  /// Complexity: O(n log n + n·d) local work; bytes sent ≈ 8·u + d·sizeof(T)·u for u remote
  ///          unique ids (see last_exchange()).
  template <class R>
  void forward(const R& ids, Eigen::Ref<RowMatrix<T>> out) {
    detail::with_ids(ids, [&](auto span) { forward_impl(span, out, nullptr, 0, 0, "forward"); });
  }

  /// Owning form of forward(ids, out).
  template <class R>
  [[nodiscard]] RowMatrix<T> forward(const R& ids) {
    RowMatrix<T> out(static_cast<Index>(std::ranges::size(ids)), d_model());
    forward(ids, out);
    return out;
  }

  /// Collective. ember::embed_with_positions on a sharded table: out.row(i) = row ids[i] · scale()
  /// + positions.row(offset + i % seq_len). Every rank passes the same positions table; it is
  /// added after the rows come back, so the result equals forward() followed by add_to bit for bit.
  /// Shapes:  ids[B·seq_len], positions[max_len, d] -> out[B·seq_len, d].
  /// Throws:  on every rank, as forward, and IndexError if offset + seq_len > max_len, ShapeError
  ///          if seq_len <= 0, n % seq_len != 0 or positions has not d columns.
  template <class R>
  void forward_with_positions(const R& ids, const Eigen::Ref<const RowMatrix<T>>& positions,
                              Eigen::Ref<RowMatrix<T>> out, Index seq_len, Index offset = 0) {
    detail::with_ids(ids, [&](auto span) {
      forward_impl(span, out, &positions, seq_len, offset, "forward_with_positions");
    });
  }

  /// forward_with_positions over a sinusoidal encoding.
  template <class R>
  void forward_with_positions(const R& ids, const SinusoidalEncoding<T>& positions,
                              Eigen::Ref<RowMatrix<T>> out, Index seq_len, Index offset = 0) {
    forward_with_positions(ids, positions.table(), out, seq_len, offset);
  }

  /// Collective. Accumulates the gradient of forward into the owners' shards:
  /// grad[id - row_begin()] += scale() · Σ_{ranks, i: ids[i] = id} grad_out[i] on the owner of id.
  /// Each rank sends one summed, scaled row per distinct id to its owner, which accumulates them in
  /// source-rank order into `grad` with LOCAL row ids (local_rows() x d, for
  /// `optimizer.step(shard(), grad)`).
  /// Shapes:  ids[n], grad_out[n, d] -> grad (local_rows x d, row-sparse).
  /// Throws:  on every rank, IndexError for an id outside [0, vocab_size()) on some rank,
  ///          ShapeError if some rank's grad_out is not n x d or its grad is bound to another
  ///          shape. No grad changes then.
  /// Complexity: O(n log n + n·d) local; bytes sent ≈ (8 + d·sizeof(T)) per remote distinct id.
  template <class R>
  void backward(const R& ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                SparseRowGrad<T>& grad) {
    detail::with_ids(ids, [&](auto span) { backward_impl(span, grad_out, grad); });
  }

  // ---- tied logits (vocabulary-parallel) --------------------------------------------------------

  /// Collective. The tied output projection, vocabulary-parallel: the hidden rows of all ranks are
  /// all-gathered in rank order into H[N, d] (offsets: hidden_offsets()) and rank r returns
  /// H · shard().weight()ᵀ, columns [row_begin(), row_end()) of the full N x V logits (a softmax
  /// over V then needs a max and a sum across ranks, by the caller).
  /// Shapes:  hidden[n_r, d] -> out[N, local_rows].
  /// Throws:  on every rank, ShapeError if some rank's hidden has not d columns.
  [[nodiscard]] RowMatrix<T> logits(const Eigen::Ref<const RowMatrix<T>>& hidden) {
    constexpr const char* name = "logits";
    detail::validate_collectively(comm(), [&] { check_hidden(where(name), hidden); });
    const std::vector<int> counts = hidden_counts(hidden.rows());
    return shard_.logits(gather_hidden(hidden, counts, detail::exclusive_sum(counts)));
  }

  /// Collective. Backward of logits(), grad_logits being this rank's N x local_rows() block:
  /// grad_weight += grad_logitsᵀ · H (this shard's rows, for optimizer.step(shard(), sparse_grad,
  /// grad_weight)) and grad_hidden = Σ_r grad_logits_r · W_r on this rank's rows, exchanged with
  /// one MPI_Alltoallv and added in rank order (deterministic for a given number of ranks).
  /// Shapes:  hidden[n_r, d], grad_logits[N, local_rows] -> grad_hidden[n_r, d] (assigned),
  ///          grad_weight[local_rows, d] (accumulated).
  /// Throws:  on every rank, ShapeError on any mismatch on any rank; nothing is written then.
  void logits_backward(const Eigen::Ref<const RowMatrix<T>>& hidden,
                       const Eigen::Ref<const RowMatrix<T>>& grad_logits,
                       Eigen::Ref<RowMatrix<T>> grad_hidden, Eigen::Ref<RowMatrix<T>> grad_weight) {
    constexpr const char* name = "logits_backward";
    const Index n = hidden.rows();
    const Index d = d_model();
    const Index v = local_rows();
    detail::validate_collectively(comm(), [&] {
      const detail::Where w = where(name);
      check_hidden(w, hidden);
      detail::check_extent(w, "grad_logits", 1, v, grad_logits.cols(), "the rows this rank owns");
      detail::check_dims(w, "grad_hidden", grad_hidden, n, "hidden's rows", d, "d_model");
      detail::check_dims(w, "grad_weight", grad_weight, v, "the rows this rank owns", d, "d_model");
    });
    const std::vector<int> counts = hidden_counts(n);
    const std::vector<int> displs = detail::exclusive_sum(counts);
    const Index total = displs.back() + counts.back();
    detail::validate_collectively(comm(), [&] {
      detail::check_extent(where(name), "grad_logits", 0, total, grad_logits.rows(),
                           "the hidden rows of all ranks");
    });
    const RowMatrix<T> all = gather_hidden(hidden, counts, displs);
    RowMatrix<T> partial(total, d);  // grad_logits · W of this shard's rows, for every rank's rows
    shard_.logits_backward(all, grad_logits, partial, grad_weight);
    const int p = world_size();
    const std::vector<int> recv_counts(static_cast<std::size_t>(p), static_cast<int>(n));
    const std::vector<int> recv_displs = detail::exclusive_sum(recv_counts);
    RowMatrix<T> parts(static_cast<Index>(p) * n, d);
    detail::alltoallv(partial.data(), counts, displs, parts.data(), recv_counts, recv_displs,
                      row_type_.get(), comm());
    grad_hidden.setZero();
    for (int r = 0; r < p; ++r) grad_hidden += parts.middleRows(static_cast<Index>(r) * n, n);
  }

  /// Collective. Offsets of each rank's n hidden rows in the all-gathered H (P + 1 entries, N
  /// last).
  [[nodiscard]] std::vector<Index> hidden_offsets(Index n) {
    const std::vector<int> counts = hidden_counts(n);
    std::vector<Index> offsets(counts.size() + 1, 0);
    for (std::size_t r = 0; r < counts.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
    return offsets;
  }

  /// Collective. The full V x d table on every rank (MPI_Allgatherv): for tests and small tables.
  [[nodiscard]] RowMatrix<T> gather_table() const {
    std::vector<int> counts(static_cast<std::size_t>(world_size()));
    for (int r = 0; r < world_size(); ++r) {
      counts[static_cast<std::size_t>(r)] = static_cast<int>(partition_.rows_of(r));
    }
    const std::vector<int> displs = detail::exclusive_sum(counts);
    RowMatrix<T> full(vocab_size(), d_model());
    detail::check_mpi(
        MPI_Allgatherv(shard_.weight().data(), counts[static_cast<std::size_t>(rank_)],
                       row_type_.get(), full.data(), counts.data(), displs.data(), row_type_.get(),
                       comm()),
        "MPI_Allgatherv");
    return full;
  }

 private:
  // The object is built only after setup() has run every collective check.
  template <class Make>
  ShardedEmbedding(const Setup& s, Make&& make, ShardedOptions options)
      : comm_(detail::duplicate(s.comm)),
        rank_(s.rank),
        partition_(s.partition),
        shard_(make(s), options.scale),
        options_(options),
        row_type_(detail::row_type<T>(s.d_model)) {}

  // Collective construction checks, in one fixed order on every rank: local sizes and init, then
  // equal (V, d) on all ranks, then the partition, then shard-specific checks.
  template <class Local, class Post>
  static Setup setup(MPI_Comm comm, Index vocab_size, Index d_model, Local&& local, Post&& post) {
    int rank = 0;
    int size = 0;
    detail::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
    detail::check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
    const detail::Where w{"ShardedEmbedding", nullptr, rank, size};
    detail::validate_collectively(comm, [&] {
      detail::check_positive_size(w, "vocab_size", vocab_size);
      detail::check_positive_size(w, "d_model", d_model);
      if (d_model > INT_MAX) {
        throw ShapeError(detail::message(w, "d_model ", d_model, " exceeds INT_MAX"), -1, INT_MAX,
                         d_model);
      }
      local();
    });
    // Same shape everywhere: every rank sees all shapes and throws the same error itself.
    const std::int64_t mine[2] = {static_cast<std::int64_t>(vocab_size),
                                  static_cast<std::int64_t>(d_model)};
    std::vector<std::int64_t> all(2 * static_cast<std::size_t>(size));
    detail::check_mpi(MPI_Allgather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, comm),
                      "MPI_Allgather");
    for (std::size_t k = 2; k < all.size(); ++k) {  // all[2r + dim]: rank r's extent dim
      const int dim = static_cast<int>(k % 2);
      if (all[k] != all[k % 2]) {
        const char* what = dim == 0 ? "vocab_size" : "d_model";
        throw ShapeError(detail::message("ShardedEmbedding", "rank ", k / 2, " has ", what, " = ",
                                         all[k], " but rank 0 has ", what, " = ", all[k % 2],
                                         "; all ranks must build the same table"),
                         dim, static_cast<Index>(all[k % 2]), static_cast<Index>(all[k]));
      }
    }
    Setup s{comm, rank, RowPartition(vocab_size, size), d_model, w};  // same outcome on all ranks
    if (s.partition.rows_of(0) > INT_MAX) {
      throw ShapeError(detail::message("ShardedEmbedding", s.partition.rows_of(0),
                                       " rows per rank exceed INT_MAX; use more ranks"),
                       0, INT_MAX, s.partition.rows_of(0));
    }
    detail::validate_collectively(comm, [&] { post(s); });
    return s;
  }

  static RowMatrix<T> make_shard(const Setup& s, const Init& init, std::uint64_t seed) {
    const Index b = s.partition.begin_of(s.rank);
    const Index rows = s.partition.rows_of(s.rank);
    Init rule = init;
    if (rule.kind == Init::Kind::xavier_uniform) {  // the bound belongs to the full table
      const double bound =
          rule.a * std::sqrt(6.0 / static_cast<double>(s.partition.vocab_size() + s.d_model));
      rule = Init::uniform(-bound, bound);
    }
    RowMatrix<T> shard(rows, s.d_model);
    for (Index r = 0; r < rows; ++r) rule.fill(shard.row(r), row_seed(seed, b + r));
    return shard;
  }

  // The call and the rank in messages: "ShardedEmbedding::forward (rank r of P)".
  [[nodiscard]] detail::Where where(const char* call) const noexcept {
    return {"ShardedEmbedding", call, rank_, world_size()};
  }

  void check_hidden(detail::Where w, const Eigen::Ref<const RowMatrix<T>>& hidden) const {
    detail::check_extent(w, "hidden", 1, d_model(), hidden.cols(), "d_model");
    check_count(w, hidden.rows(), "hidden rows");
  }

  static void check_count(detail::Where w, Index n, const char* what) {
    if (n > INT_MAX) {
      throw ShapeError(detail::message(w, n, " ", what, " exceed INT_MAX per call"), 0, INT_MAX, n);
    }
  }

  std::vector<int> hidden_counts(Index n) const {
    const int mine = static_cast<int>(n);
    std::vector<int> counts(static_cast<std::size_t>(world_size()));
    detail::check_mpi(MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm()),
                      "MPI_Allgather");
    return counts;
  }

  RowMatrix<T> gather_hidden(const Eigen::Ref<const RowMatrix<T>>& hidden,
                             const std::vector<int>& counts, const std::vector<int>& displs) {
    // MPI needs the rows contiguous; copy only a strided hidden (e.g. a block of a wider matrix).
    RowMatrix<T> copy;
    const T* mine = hidden.data();
    if (hidden.rows() > 1 && hidden.outerStride() != hidden.cols()) {
      copy = hidden;
      mine = copy.data();
    }
    RowMatrix<T> all(static_cast<Index>(displs.back() + counts.back()), d_model());
    detail::check_mpi(
        MPI_Allgatherv(mine, static_cast<int>(hidden.rows()), row_type_.get(), all.data(),
                       counts.data(), displs.data(), row_type_.get(), comm()),
        "MPI_Allgatherv");
    return all;
  }

  // Groups this rank's ids by owner: plan_.send_ids (sorted and unique when deduplicating, else
  // stably grouped by owner), plan_.slot_of[i] = row of position i in the reply, counts per rank.
  template <class Id>
  void build_plan(std::span<const Id> ids, bool dedup) {
    const auto n = static_cast<Index>(ids.size());
    const auto p = static_cast<std::size_t>(world_size());
    plan_.slot_of.resize(static_cast<std::size_t>(n));
    plan_.send_counts.assign(p, 0);
    plan_.send_ids.clear();
    if (dedup) {
      order_.resize(static_cast<std::size_t>(n));
      for (Index i = 0; i < n; ++i) {
        order_[static_cast<std::size_t>(i)] = {
            static_cast<TokenId>(ids[static_cast<std::size_t>(i)]), i};
      }
      std::sort(order_.begin(), order_.end());
      for (const auto& [id, pos] : order_) {
        if (plan_.send_ids.empty() || plan_.send_ids.back() != id) {
          plan_.send_ids.push_back(id);
          ++plan_.send_counts[static_cast<std::size_t>(partition_.owner_of(id))];
        }
        plan_.slot_of[static_cast<std::size_t>(pos)] =
            static_cast<Index>(plan_.send_ids.size()) - 1;
      }
    } else {
      for (Index i = 0; i < n; ++i) {
        const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
        ++plan_.send_counts[static_cast<std::size_t>(partition_.owner_of(id))];
      }
      std::vector<int> cursor = detail::exclusive_sum(plan_.send_counts);
      plan_.send_ids.resize(static_cast<std::size_t>(n));
      for (Index i = 0; i < n; ++i) {
        const auto id = static_cast<TokenId>(ids[static_cast<std::size_t>(i)]);
        const int k = cursor[static_cast<std::size_t>(partition_.owner_of(id))]++;
        plan_.send_ids[static_cast<std::size_t>(k)] = id;
        plan_.slot_of[static_cast<std::size_t>(i)] = k;
      }
    }
    plan_.send_displs = detail::exclusive_sum(plan_.send_counts);
  }

  // Exchanges counts and ids: afterwards plan_.recv_local holds, per source rank in rank order,
  // the LOCAL rows other ranks (and this one) requested.
  void exchange_ids() {
    const auto p = static_cast<std::size_t>(world_size());
    plan_.recv_counts.assign(p, 0);
    detail::check_mpi(MPI_Alltoall(plan_.send_counts.data(), 1, MPI_INT, plan_.recv_counts.data(),
                                   1, MPI_INT, comm()),
                      "MPI_Alltoall");
    plan_.recv_displs = detail::exclusive_sum(plan_.recv_counts);
    const auto total =
        static_cast<std::size_t>(plan_.recv_displs.back() + plan_.recv_counts.back());
    plan_.recv_local.resize(total);
    detail::alltoallv(plan_.send_ids.data(), plan_.send_counts, plan_.send_displs,
                      plan_.recv_local.data(), plan_.recv_counts, plan_.recv_displs, MPI_INT64_T,
                      comm());
    const TokenId b = row_begin();
    for (auto& id : plan_.recv_local) id -= b;
  }

  // Traffic of the call just made. Forward: ids go to the owners and rows come back; backward:
  // ids and gradient rows both go to the owners.
  void record_stats(Index n, bool rows_come_back) {
    const auto self = static_cast<std::size_t>(rank_);
    const auto sent = static_cast<Index>(plan_.send_ids.size());
    const auto received = static_cast<Index>(plan_.recv_local.size());
    const auto ids_out = static_cast<std::uint64_t>(sent - plan_.send_counts[self]);
    const auto ids_in = static_cast<std::uint64_t>(received - plan_.recv_counts[self]);
    const auto row_bytes = static_cast<std::uint64_t>(d_model()) * sizeof(T);
    stats_.ids = n;
    stats_.unique_ids = sent;
    stats_.ids_sent = static_cast<Index>(ids_out);
    stats_.rows_served = static_cast<Index>(ids_in);
    const std::uint64_t rows_out = rows_come_back ? ids_in : ids_out;
    const std::uint64_t rows_in = rows_come_back ? ids_out : ids_in;
    stats_.bytes_sent = ids_out * sizeof(TokenId) + rows_out * row_bytes;
    stats_.bytes_received = ids_in * sizeof(TokenId) + rows_in * row_bytes;
  }

  template <class Id>
  void forward_impl(std::span<const Id> ids, Eigen::Ref<RowMatrix<T>> out,
                    const Eigen::Ref<const RowMatrix<T>>* positions, Index seq_len, Index offset,
                    const char* name) {
    const auto n = static_cast<Index>(ids.size());
    const Index d = d_model();
    detail::validate_collectively(comm(), [&] {
      const detail::Where w = where(name);
      check_count(w, n, "ids");
      if (positions != nullptr) {
        detail::check_fused(w, n, d, positions->rows(), positions->cols(), out.rows(), out.cols(),
                            seq_len, offset);
      } else {
        detail::check_lookup_out(w, n, d, out.rows(), out.cols());
      }
      detail::check_ids(ids, vocab_size(), w);
    });
    build_plan(ids, options_.deduplicate);
    exchange_ids();
    // Owner side: gather and scale the requested rows, exactly as Embedding::forward does.
    reply_.resize(static_cast<Index>(plan_.recv_local.size()), d);
    detail::lookup_rows<T>(detail::rows_of(shard_), std::span<const TokenId>(plan_.recv_local),
                           scale(), detail::mutable_table(reply_));
    rows_.resize(static_cast<Index>(plan_.send_ids.size()), d);
    detail::alltoallv(reply_.data(), plan_.recv_counts, plan_.recv_displs, rows_.data(),
                      plan_.send_counts, plan_.send_displs, row_type_.get(), comm());
    for (Index i = 0; i < n; ++i) {
      out.row(i) = rows_.row(plan_.slot_of[static_cast<std::size_t>(i)]);
      if (positions != nullptr) out.row(i) += positions->row(offset + i % seq_len);
    }
    record_stats(n, /*rows_come_back=*/true);
  }

  template <class Id>
  void backward_impl(std::span<const Id> ids, const Eigen::Ref<const RowMatrix<T>>& grad_out,
                     SparseRowGrad<T>& grad) {
    constexpr const char* name = "backward";
    const auto n = static_cast<Index>(ids.size());
    const Index d = d_model();
    detail::validate_collectively(comm(), [&] {
      const detail::Where w = where(name);
      check_count(w, n, "ids");
      detail::check_backward_grad_out(w, n, d, grad_out.rows(), grad_out.cols());
      if (grad.vocab_size() != 0) {
        detail::check_extent(w, "grad", 0, local_rows(), grad.vocab_size(),
                             "the rows this rank owns");
        detail::check_extent(w, "grad", 1, d, grad.d_model(), "d_model");
      }
      detail::check_ids(ids, vocab_size(), w);
    });
    build_plan(ids, /*dedup=*/true);
    // (Not a SparseRowGrad over the full vocabulary: its memory may grow with V, and V is what
    // does not fit on one host.)
    // Pre-reduce: one row per distinct id, summed in position order, then scaled (the same
    // operations SparseRowGrad performs for one call on a single process).
    const auto u = static_cast<Index>(plan_.send_ids.size());
    partial_.resize(u, d);
    seen_.assign(static_cast<std::size_t>(u), 0);
    for (Index i = 0; i < n; ++i) {
      const auto k = plan_.slot_of[static_cast<std::size_t>(i)];
      if (seen_[static_cast<std::size_t>(k)] == 0) {
        partial_.row(k) = grad_out.row(i);
        seen_[static_cast<std::size_t>(k)] = 1;
      } else {
        partial_.row(k) += grad_out.row(i);
      }
    }
    const T s = scale();
    for (Index k = 0; k < u; ++k) partial_.row(k) = s * partial_.row(k);
    exchange_ids();
    reply_.resize(static_cast<Index>(plan_.recv_local.size()), d);
    detail::alltoallv(partial_.data(), plan_.send_counts, plan_.send_displs, reply_.data(),
                      plan_.recv_counts, plan_.recv_displs, row_type_.get(), comm());
    // Received rows are in source-rank order; one accumulate call sums each row's contributions
    // in that order and adds the finished sum once.
    grad.accumulate(plan_.recv_local, reply_, T(1), local_rows(), {}, name);
    record_stats(n, /*rows_come_back=*/false);
  }

  struct Plan {
    std::vector<TokenId> send_ids;
    std::vector<Index> slot_of;
    std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
    std::vector<TokenId> recv_local;
  };

  detail::Handle<MPI_Comm, MPI_Comm_free> comm_;
  int rank_ = 0;
  RowPartition partition_;
  Embedding<T> shard_;
  ShardedOptions options_;
  detail::Handle<MPI_Datatype, MPI_Type_free> row_type_;
  ExchangeStats stats_;
  // Scratch reused across calls.
  Plan plan_;
  std::vector<std::pair<TokenId, Index>> order_;
  RowMatrix<T> reply_;
  RowMatrix<T> rows_;
  RowMatrix<T> partial_;
  std::vector<unsigned char> seen_;
};

/// Collective. ember::embed_with_positions on a sharded table: see
/// ShardedEmbedding::forward_with_positions.
template <class T, class R>
void embed_with_positions(ShardedEmbedding<T>& tokens,
                          const Eigen::Ref<const RowMatrix<std::type_identity_t<T>>>& positions,
                          const R& ids, Eigen::Ref<RowMatrix<std::type_identity_t<T>>> out,
                          Index seq_len, Index offset = 0) {
  tokens.forward_with_positions(ids, positions, out, seq_len, offset);
}

}  // namespace ember::inline EMBER_ISA::distributed
