/// Checkpoints of a ShardedKeyedEmbedding: one keyed checkpoint per rank (the format of
/// io/keyed_checkpoint.hpp), loadable into any number of ranks, each taking the keys
/// key_owner gives it. Needs ember::mpi and ember::io.
// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/distributed/checkpoint.hpp"
#include "ember/distributed/detail/mpi.hpp"
#include "ember/distributed/sharded_keyed_embedding.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/checks.hpp"
#include "ember/io/keyed_checkpoint.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::detail {

/// ember's keyed checkpoints' door into a ShardedKeyedEmbedding (not for users).
struct ShardedKeyedAccess {
  template <class T>
  static auto& state(distributed::ShardedKeyedEmbedding<T>& e) noexcept {
    return e.state_;
  }
  template <class T>
  static const auto& state(const distributed::ShardedKeyedEmbedding<T>& e) noexcept {
    return e.state_;
  }
  template <class T>
  static Embedding<T>& shard(distributed::ShardedKeyedEmbedding<T>& e) noexcept {
    return e.sharded_.shard();
  }
};

/// The keys of saved tables `files` that `owner` (of `world` ranks) takes, merged into one table
/// of capacity max(saved capacity, keys taken): rows assigned in (file, saved row) order, the
/// admission sketches summed, the logs merged, optimizer state kept for every key that was not
/// awaiting a reset. Precondition: the files agree (check_agree).
template <class T>
SavedKeyedTable<T> merge_for(const std::vector<SavedKeyedTable<T>>& files, int owner, int world) {
  const SavedKeyedTable<T>& first = files.front();
  SavedKeyedTable<T> m;
  m.options = first.options;
  m.d_model = first.d_model;
  m.index = first.index;  // clocks and options
  m.index.keys.clear();
  m.index.rows.clear();
  m.index.last_steps.clear();
  m.index.counts.clear();
  m.index.scores.clear();
  m.index.decay.clear();
  struct Taken {
    std::size_t file;
    std::size_t entry;
  };
  std::vector<Taken> taken;
  for (std::size_t f = 0; f < files.size(); ++f) {
    const KeyIndexSnapshot& ix = files[f].index;
    std::vector<std::size_t> by_row(ix.keys.size());
    for (std::size_t i = 0; i < by_row.size(); ++i) by_row[i] = i;
    std::sort(by_row.begin(), by_row.end(),
              [&](std::size_t a, std::size_t b) { return ix.rows[a] < ix.rows[b]; });
    for (const std::size_t i : by_row)
      if (distributed::key_owner(ix.keys[i], world) == owner) taken.push_back({f, i});
  }
  const Index capacity = std::max<Index>(first.index.capacity, static_cast<Index>(taken.size()));
  m.index.capacity = capacity;
  m.index.options.fallback_row = static_cast<TokenId>(capacity);
  m.weight = RowMatrix<T>::Zero(capacity + 1, m.d_model);
  const std::size_t source =
      static_cast<std::size_t>(owner) < files.size() ? static_cast<std::size_t>(owner) : 0;
  m.weight.row(capacity) = files[source].weight.row(files[source].index.capacity);
  m.optimizer = first.optimizer;
  std::vector<std::vector<T>> state_rows;
  for (std::size_t k = 0; k < taken.size(); ++k) {
    const SavedKeyedTable<T>& f = files[taken[k].file];
    const std::size_t i = taken[k].entry;
    const auto saved_row = f.index.rows[i];
    m.index.keys.push_back(f.index.keys[i]);
    m.index.rows.push_back(static_cast<std::int64_t>(k));
    m.index.last_steps.push_back(f.index.last_steps[i]);
    m.index.counts.push_back(f.index.counts[i]);
    m.index.scores.push_back(f.index.scores[i]);
    m.index.decay.push_back(f.index.decay[i]);
    m.weight.row(static_cast<Index>(k)) = f.weight.row(saved_row);
    if (!f.optimizer.present) continue;
    if (std::find(f.pending.begin(), f.pending.end(), saved_row) != f.pending.end()) continue;
    const auto at = std::find(f.state_rows.begin(), f.state_rows.end(), saved_row);
    if (at == f.state_rows.end()) continue;
    const auto j = static_cast<Index>(at - f.state_rows.begin());
    m.state_rows.push_back(static_cast<std::int64_t>(k));
    state_rows.emplace_back(f.state.row(j).data(), f.state.row(j).data() + f.state.cols());
    if (f.optimizer.with_steps) m.row_steps.push_back(f.row_steps[static_cast<std::size_t>(j)]);
  }
  m.state.resize(static_cast<Index>(state_rows.size()), m.optimizer.planes * m.optimizer.width);
  for (std::size_t k = 0; k < state_rows.size(); ++k)
    for (Index c = 0; c < m.state.cols(); ++c)
      m.state(static_cast<Index>(k), c) = state_rows[k][static_cast<std::size_t>(c)];
  // The sketch counts are per key only in sum: every file's counts bound its keys', so their
  // saturating sum bounds each key's count over all the files.
  if (!first.index.sketch.empty()) {
    m.index.sketch.assign(first.index.sketch.size(), 0);
    for (const auto& f : files)
      for (std::size_t c = 0; c < m.index.sketch.size(); ++c)
        m.index.sketch[c] = static_cast<std::uint16_t>(
            std::min<std::uint32_t>(0xFFFF, std::uint32_t{m.index.sketch[c]} + f.index.sketch[c]));
  }
  std::vector<std::pair<std::int64_t, std::uint64_t>> log;
  for (const auto& f : files)
    for (std::size_t i = 0; i < f.log_keys.size(); ++i)
      if (distributed::key_owner(f.log_keys[i], world) == owner)
        log.emplace_back(f.log_steps[i], f.log_keys[i]);
  std::sort(log.begin(), log.end());
  for (const auto& [step, key] : log) {
    m.log_steps.push_back(step);
    m.log_keys.push_back(key);
  }
  return m;
}

/// Throws FormatError unless the saved tables of one checkpoint agree on everything but their
/// keys: options, width, capacity, clocks, optimizer.
template <class T>
void check_agree(const std::vector<SavedKeyedTable<T>>& files,
                 const std::vector<std::string>& paths) {
  const SavedKeyedTable<T>& a = files.front();
  for (std::size_t f = 1; f < files.size(); ++f) {
    const SavedKeyedTable<T>& b = files[f];
    const auto& x = a.index;
    const auto& y = b.index;
    const bool same =
        a.d_model == b.d_model && x.capacity == y.capacity &&
        x.options.policy == y.options.policy && x.options.min_count == y.options.min_count &&
        x.options.lfu_half_life == y.options.lfu_half_life &&
        x.options.sketch_width == y.options.sketch_width &&
        x.options.sketch_half_life == y.options.sketch_half_life &&
        a.options.fallback == b.options.fallback && a.options.seed == b.options.seed &&
        a.options.init.kind == b.options.init.kind && a.options.init.a == b.options.init.a &&
        a.options.init.b == b.options.init.b && a.options.init_rows == b.options.init_rows &&
        x.clock == y.clock && a.optimizer == b.optimizer;
    if (!same) {
      detail::fail_at_byte(paths[f], 8,
                           "keyed checkpoint: the options, sizes, steps or optimizer of this "
                           "shard differ from those of ",
                           paths.front());
    }
  }
}

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::distributed {

/// Collective. Every rank writes its part of `emb` (its keys, their rows, steps, counts and
/// scores, its sketch, log and, with `opt`, its optimizer state) to shard_path(prefix, rank, P),
/// atomically, with "ember.rank" and "ember.world_size" in __metadata__.
/// Throws on every rank: the error of the lowest rank that failed (FormatError on I/O failure);
/// files other ranks wrote stay, so retry the save before relying on the checkpoint.
template <class T, class Opt = std::nullptr_t>
void save_keyed_shards(const ShardedKeyedEmbedding<T>& emb, const std::string& prefix,
                       const Opt* opt = nullptr) {
  detail::validate_collectively(emb.comm(), [&] {
    detail::save_one(shard_path(prefix, emb.rank(), emb.world_size()), "ShardedKeyedEmbedding",
                     detail::ShardedKeyedAccess::state(emb), emb.shard(), opt,
                     {{"scale", detail::exact(static_cast<double>(emb.shard().scale()))},
                      {"ember.rank", std::to_string(emb.rank())},
                      {"ember.world_size", std::to_string(emb.world_size())}});
  });
}

/// Collective. Loads the checkpoint save_keyed_shards wrote under `prefix` into the ranks of
/// `comm`, whatever their number: every rank reads each saved file and takes the keys
/// key_owner(key, P') gives it, with their rows, steps, counts, scores, log entries and (with
/// `opt`) optimizer state; the saved admission sketches are summed (an upper bound of every
/// key's count, exact when P' = P); a shared fallback row comes from the saved rank of the same
/// number, else rank 0. options.capacity (0: the saved one) is the capacity per rank; a rank
/// given more keys than it holds evicts by the policy. Loading into the saving number of ranks
/// and training on gives the bits of training on without the checkpoint.
/// Throws on every rank: FormatError naming the file and field for a missing, malformed or
/// inconsistent shard (or not exactly one checkpoint under prefix); as load_keyed otherwise.
/// `opt` is untouched when it throws.
template <class T, class Opt = std::nullptr_t>
[[nodiscard]] ShardedKeyedEmbedding<T> load_keyed_shards(MPI_Comm comm, const std::string& prefix,
                                                         Opt* opt = nullptr,
                                                         io::KeyedLoadOptions options = {}) {
  int rank = 0;
  int size = 0;
  detail::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  detail::check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  int saved = 0;
  detail::validate_collectively(comm, [&] {
    if (rank != 0) return;
    saved = detail::saved_world_size(prefix, "load_keyed_shards");
  });
  detail::check_mpi(MPI_Bcast(&saved, 1, MPI_INT, 0, comm), "MPI_Bcast");
  detail::SavedKeyedTable<T> mine;
  double scale = 0.0;
  detail::validate_collectively(comm, [&] {
    std::vector<detail::SavedKeyedTable<T>> files;
    std::vector<std::string> paths;
    for (int q = 0; q < saved; ++q) {
      paths.push_back(shard_path(prefix, q, saved));
      const io::SafetensorsFile f =
          detail::open_keyed(paths.back(), "ShardedKeyedEmbedding", "load_keyed_shards");
      for (const char* key : {"ember.rank", "ember.world_size", "scale"}) {
        if (f.metadata().count(key) == 0) {
          detail::fail_at_byte(paths.back(), 8, "keyed checkpoint field '", key, "': missing");
        }
      }
      if (f.metadata().at("ember.rank") != std::to_string(q) ||
          f.metadata().at("ember.world_size") != std::to_string(saved)) {
        detail::fail_at_byte(paths.back(), 8, "keyed checkpoint field 'ember.rank': not rank ", q,
                             " of ", saved);
      }
      const double s = detail::keyed_scale(f);  // one whole finite number, else FormatError
      if (q > 0 && s != scale) {
        detail::fail_at_byte(paths.back(), 8, "keyed checkpoint field 'scale': ", detail::exact(s),
                             " differs from ", detail::exact(scale), " in ", paths.front());
      }
      scale = s;
      files.push_back(detail::read_table<T>(f, ""));
      // Every key must live on the rank that saved it.
      for (const std::uint64_t k : files.back().index.keys) {
        if (key_owner(k, saved) != q) {
          detail::fail_at_byte(paths.back(), 8, "keyed checkpoint field 'keys': key ", k,
                               " does not belong to rank ", q);
        }
      }
    }
    detail::check_agree(files, paths);
    mine = saved == size ? std::move(files[static_cast<std::size_t>(rank)])
                         : detail::merge_for(files, rank, size);
  });
  const Index target = options.capacity > 0 ? options.capacity : mine.index.capacity;
  KeyedOptions ko = mine.options;
  ko.scale = LookupScale::constant(scale);
  ShardedKeyedEmbedding<T> emb(comm, target, mine.d_model, ko);
  // Built on the side, installed only once every rank has built its part.
  std::optional<detail::KeyedState<T>> built;
  std::optional<Embedding<T>> table;
  std::optional<Opt> copy;
  detail::validate_collectively(comm, [&] {
    built.emplace(mine.index.capacity, mine.d_model, ko, "load_keyed_shards");
    table.emplace(built->make_table(ko.scale));
    const std::string path = shard_path(prefix, std::min(rank, saved - 1), saved);
    detail::rebuild_on_copy(mine, *built, *table, opt, copy, target, path);
  });
  detail::ShardedKeyedAccess::shard(emb).weight() = table->weight();
  detail::ShardedKeyedAccess::state(emb) = std::move(*built);
  if (copy) *opt = std::move(*copy);
  return emb;
}

}  // namespace ember::inline EMBER_ISA::distributed
