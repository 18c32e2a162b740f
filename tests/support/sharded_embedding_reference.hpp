// Helpers for the MPI tests of ShardedEmbedding (distributed/sharded_embedding.hpp) and its
// checkpoints: the world, deterministic per-rank batches (identical on every rank, so each rank
// can rebuild every other rank's batch), and single-process references.
// SPDX-License-Identifier: MIT
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "ember/distributed/sharded_embedding.hpp"
#include "ember/embedding.hpp"
#include "ember/init.hpp"
#include "ember/random.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"

namespace ember_test {

struct World {
  int rank = 0;
  int size = 1;
};

inline World world() {
  World w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  return w;
}

/// A fresh directory shared by all ranks (same host) for checkpoints, named `stem` + rank 0's
/// pid, removed at the end of its scope.
struct SharedDir {
  std::filesystem::path path;
  explicit SharedDir(const std::string& stem = "ember_ckpt_") {
    const auto w = world();
    long long pid = w.rank == 0 ? static_cast<long long>(::getpid()) : 0;
    MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    path = std::filesystem::temp_directory_path() / (stem + std::to_string(pid));
    if (w.rank == 0) std::filesystem::create_directories(path);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  ~SharedDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world().rank == 0) std::filesystem::remove_all(path);
  }
  SharedDir(const SharedDir&) = delete;
  SharedDir& operator=(const SharedDir&) = delete;
};

/// The first `n` ranks of MPI_COMM_WORLD (MPI_COMM_NULL on the others), the saving or loading
/// job of a re-sharding test.
inline MPI_Comm first_ranks(int n) {
  const auto w = world();
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, w.rank < n ? 0 : MPI_UNDEFINED, w.rank, &sub);
  return sub;
}

/// A V x d table, the same on every rank.
template <class T>
ember::RowMatrix<T> full_table(ember::Index vocab, ember::Index d, std::uint64_t seed = 7) {
  ember::RowMatrix<T> t(vocab, d);
  ember::Init::normal(0.5).fill(t, seed);
  return t;
}

/// The setup most ShardedEmbedding tests start from: the world, the full V x d table (the same on
/// every rank), the single-process Embedding over it and the ShardedEmbedding that shards it over
/// MPI_COMM_WORLD (collective: every rank builds it).
template <class T>
struct ShardedSetup {
  World w;
  ember::RowMatrix<T> table;
  ember::Embedding<T> single;
  ember::distributed::ShardedEmbedding<T> emb;

  ShardedSetup(ember::Index vocab, ember::Index d)
      : w(world()),
        table(full_table<T>(vocab, d)),
        single(table),
        emb(ember::distributed::ShardedEmbedding<T>::from_full_table(MPI_COMM_WORLD, table)) {}
};

/// Appends the rows of `more` below those of `all` (building the concatenated batch of all ranks).
template <class T>
void append_rows(ember::RowMatrix<T>& all, const ember::RowMatrix<T>& more) {
  ember::RowMatrix<T> grown(all.rows() + more.rows(), more.cols());
  grown << all, more;
  all = std::move(grown);
}

/// Rank r's batch: n = base + 3·r ids with repeats (a skewed draw: the square of a uniform
/// favours small ids, so several ranks ask for the same rows).
inline std::vector<ember::TokenId> batch_of(int rank, ember::Index vocab, ember::Index base = 9,
                                            std::uint64_t seed = 11) {
  ember::Random rng(seed + 1000 * static_cast<std::uint64_t>(rank));
  const ember::Index n = base + 3 * rank;
  std::vector<ember::TokenId> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) {
    const double u = rng.uniform();
    id = static_cast<ember::TokenId>(u * u * static_cast<double>(vocab));
  }
  return ids;
}

/// Rank r's upstream gradient for its batch of n ids.
template <class T>
ember::RowMatrix<T> grad_of(int rank, ember::Index n, ember::Index d, std::uint64_t seed = 23) {
  ember::RowMatrix<T> g(n, d);
  ember::Init::uniform(-1.0, 1.0).fill(g, seed + 77 * static_cast<std::uint64_t>(rank));
  return g;
}

/// Rank r's hidden states for the tied-logits tests.
template <class T>
ember::RowMatrix<T> hidden_of(int rank, ember::Index d, std::uint64_t seed = 31) {
  ember::RowMatrix<T> h(2 + rank, d);
  ember::Init::uniform(-1.0, 1.0).fill(h, seed + 13 * static_cast<std::uint64_t>(rank));
  return h;
}

/// Single process: one SparseRowGrad filled by Embedding::backward once per rank's batch, in rank
/// order, then plain SGD on the touched rows: W[t] -= lr · g[t].
template <class T>
ember::RowMatrix<T> reference_sgd_step(const ember::RowMatrix<T>& table, int world_size, T lr) {
  ember::Embedding<T> emb(table);
  ember::SparseRowGrad<T> grad;
  for (int r = 0; r < world_size; ++r) {
    const auto ids = batch_of(r, table.rows());
    emb.backward(ids, grad_of<T>(r, static_cast<ember::Index>(ids.size()), table.cols()), grad);
  }
  ember::RowMatrix<T> w = table;
  for (ember::Index k = 0; k < grad.size(); ++k) {
    w.row(grad.rows()[static_cast<std::size_t>(k)]) -= lr * grad.values().row(k);
  }
  return w;
}

}  // namespace ember_test
