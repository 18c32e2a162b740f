/// Checkpoints of a ShardedEmbedding: one safetensors file per rank with its row range in
/// __metadata__, loadable into any number of ranks (re-sharding). Needs ember::mpi and ember::io.
// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "ember/config.hpp"
#include "ember/detail/checks.hpp"
#include "ember/distributed/detail/mpi.hpp"
#include "ember/distributed/row_partition.hpp"
#include "ember/distributed/sharded_embedding.hpp"
#include "ember/errors.hpp"
#include "ember/io/detail/whole_number.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/types.hpp"

namespace ember::inline EMBER_ISA::distributed {

/// The file rank `rank` of `world_size` writes:
/// `<prefix>.shard-<rank>-of-<world_size>.safetensors`.
[[nodiscard]] inline std::string shard_path(const std::string& prefix, int rank, int world_size) {
  return prefix + ".shard-" + std::to_string(rank) + "-of-" + std::to_string(world_size) +
         ".safetensors";
}

}  // namespace ember::inline EMBER_ISA::distributed

namespace ember::inline EMBER_ISA::detail {

/// The __metadata__ entry `key` of a shard as one whole decimal integer (detail::whole_number:
/// " 7", "+7" or "7x" is refused, not read as 7).
/// Throws: FormatError naming the file and the key when it is missing or malformed.
inline std::int64_t metadata_int(const io::SafetensorsFile& f, const std::string& key) {
  const auto& meta = f.metadata();
  const auto it = meta.find(key);
  if (it == meta.end()) {
    throw FormatError(
        detail::message("load_shards", f.path(), " has no __metadata__ entry '", key, "'"),
        f.path(), 8);
  }
  const auto v = detail::whole_number<std::int64_t>(it->second);
  if (!v) {
    throw FormatError(
        detail::message("load_shards", f.path(), ": __metadata__ '", key,
                        "' = ", detail::quoted(it->second), " is not a decimal 64-bit integer"),
        f.path(), 8);
  }
  return *v;
}

// The world size of the one checkpoint saved under `prefix` (from the file names).
// Throws: FormatError, from `where`, unless the files there are of exactly one world size.
inline int saved_world_size(const std::string& prefix, const char* where) {
  namespace fs = std::filesystem;
  const fs::path p(prefix);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string stem = p.filename().string() + ".shard-";
  std::set<int> sizes;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view ext = ".safetensors";
    if (name.rfind(stem, 0) != 0 || name.size() <= stem.size() + ext.size() ||
        name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
      continue;
    }
    const std::string mid = name.substr(stem.size(), name.size() - stem.size() - ext.size());
    const auto of = mid.find("-of-");
    if (of == std::string::npos) continue;
    // Only a name that is exactly <stem><r>-of-<P>.safetensors counts ("2x" or " 2" is another
    // file), and P must be a world size MPI can have.
    const auto rank = detail::whole_number<int>(std::string_view(mid).substr(0, of));
    const auto world = detail::whole_number<int>(std::string_view(mid).substr(of + 4));
    if (rank && world && *rank >= 0 && *world >= 1 && *rank < *world) sizes.insert(*world);
  }
  if (sizes.size() != 1) {
    throw FormatError(
        detail::message(where, "expected the files of one checkpoint at '", prefix,
                        ".shard-<r>-of-<P>.safetensors', found ", sizes.size(), " world sizes"),
        prefix, 0);
  }
  return *sizes.begin();
}

}  // namespace ember::inline EMBER_ISA::detail

namespace ember::inline EMBER_ISA::distributed {

/// Collective. Every rank writes its shard to shard_path(prefix, rank, P) as tensor "weight"
/// (local_rows x d, stored as `dtype`, default the table's F32/F64) with __metadata__
/// "ember.row_begin", "ember.row_end", "ember.vocab_size", "ember.rank", "ember.world_size"
/// (decimal strings) and "ember.partition" = "contiguous-balanced", each file atomically.
/// Throws on every rank: the error of the lowest rank that failed (FormatError on I/O failure);
/// files other ranks wrote stay, so retry the save before relying on the checkpoint.
template <class T>
void save_shards(const ShardedEmbedding<T>& emb, const std::string& prefix,
                 std::optional<io::SafetensorsDtype> dtype = std::nullopt) {
  detail::validate_collectively(emb.comm(), [&] {
    io::SafetensorsWriter w;
    w.add("weight", emb.shard().weight(), dtype)
        .metadata("ember.row_begin", std::to_string(emb.row_begin()))
        .metadata("ember.row_end", std::to_string(emb.row_end()))
        .metadata("ember.vocab_size", std::to_string(emb.vocab_size()))
        .metadata("ember.rank", std::to_string(emb.rank()))
        .metadata("ember.world_size", std::to_string(emb.world_size()))
        .metadata("ember.partition", "contiguous-balanced");
    w.save(shard_path(prefix, emb.rank(), emb.world_size()));
  });
}

/// Collective. Loads the checkpoint saved by save_shards(…, prefix) into the ranks of `comm`,
/// whatever their number: each rank maps only the saved files overlapping its new row range.
///
/// Checks: exactly one saved world size under `prefix` (rank 0 reads the file names, so every rank
/// must see the files), every needed file present with a 2-D tensor "weight" of the rows and
/// __metadata__ row range the rule assigns it, and the same vocab_size and d everywhere.
/// Throws on every rank: FormatError naming the file for any violation or unreadable file;
/// ShapeError as the ShardedEmbedding constructor.
template <class T>
[[nodiscard]] ShardedEmbedding<T> load_shards(MPI_Comm comm, const std::string& prefix,
                                              ShardedOptions options = {}) {
  int rank = 0;
  int size = 0;
  detail::check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  detail::check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  // 1. Rank 0 finds the saved world size and the table shape; all ranks agree, then share them.
  std::int64_t header[3] = {0, 0, 0};  // saved P, V, d
  detail::validate_collectively(comm, [&] {
    if (rank != 0) return;
    const int saved = detail::saved_world_size(prefix, "load_shards");
    const io::SafetensorsFile first =
        detail::SafetensorsAccess::open(shard_path(prefix, 0, saved), "load_shards");
    header[0] = saved;
    header[1] = detail::metadata_int(first, "ember.vocab_size");
    if (!first.contains("weight") || first.info("weight").shape.size() != 2) {
      throw FormatError(detail::message("load_shards", first.path(), " has no 2-D tensor 'weight'"),
                        first.path(), 8);
    }
    header[2] = static_cast<std::int64_t>(first.info("weight").shape[1]);
  });
  detail::check_mpi(MPI_Bcast(header, 3, MPI_INT64_T, 0, comm), "MPI_Bcast");
  const auto saved_size = static_cast<int>(header[0]);
  const auto vocab = static_cast<Index>(header[1]);
  const auto d = static_cast<Index>(header[2]);

  // 2. Each rank copies the rows of its new range out of the overlapping saved shards.
  RowMatrix<T> shard;
  detail::validate_collectively(comm, [&] {
    const RowPartition saved(vocab, saved_size);  // throws ShapeError for nonsense metadata
    const RowPartition now(vocab, size);
    const Index begin = now.row_begin(rank);
    const Index end = now.row_end(rank);
    shard.resize(end - begin, d);
    for (int q = saved.owner(begin); q < saved_size && saved.row_begin(q) < end; ++q) {
      const std::string path = shard_path(prefix, q, saved_size);
      const io::SafetensorsFile f = detail::SafetensorsAccess::open(path, "load_shards");
      const auto bad = [&](const std::string& what) {
        throw FormatError(detail::message("load_shards", path, ": ", what), path, 8);
      };
      if (!f.contains("weight")) bad("no tensor 'weight'");
      const auto& shape = f.info("weight").shape;
      if (shape.size() != 2 || static_cast<Index>(shape[0]) != saved.rows(q) ||
          static_cast<Index>(shape[1]) != d) {
        bad(detail::text("tensor 'weight' is not ", saved.rows(q), " x ", d));
      }
      if (detail::metadata_int(f, "ember.vocab_size") != vocab ||
          detail::metadata_int(f, "ember.world_size") != saved_size ||
          detail::metadata_int(f, "ember.row_begin") != saved.row_begin(q) ||
          detail::metadata_int(f, "ember.row_end") != saved.row_end(q)) {
        bad(detail::text("__metadata__ row range differs from rows [", saved.row_begin(q), ", ",
                         saved.row_end(q), ") of ", vocab, " that rank ", q, " of ", saved_size,
                         " owns"));
      }
      const io::MappedTable<T> table = f.map<T>("weight");
      const Index lo = std::max(begin, saved.row_begin(q));
      const Index hi = std::min(end, saved.row_end(q));
      shard.middleRows(lo - begin, hi - lo) =
          table.matrix().middleRows(lo - saved.row_begin(q), hi - lo);
    }
  });
  return ShardedEmbedding<T>(comm, vocab, std::move(shard), options);
}

}  // namespace ember::inline EMBER_ISA::distributed
