// Tests for ember/distributed/sharded_keyed_embedding.hpp, run at 1-4 ranks: every rank rebuilds
// every other rank's batches, so it can compare its shard with a single-process reference (a
// KeyedEmbedding over all keys, or one KeyedEmbedding per owner when ranks evict).
// SPDX-License-Identifier: MIT
#include "ember/distributed/sharded_keyed_embedding.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/sgd.hpp"
#include "support/matrix_compare.hpp"
#include "support/sharded_embedding_reference.hpp"
#include "support/sharded_keyed_fixtures.hpp"

namespace {

constexpr Index kDim = 4;

/// Rank r's keys at step s (the same on every rank, so each can rebuild the others').
Keys batch_of(int r, std::int64_t s, std::uint64_t space) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(1000 * r + s + 1));
  std::uniform_int_distribution<std::uint64_t> pick(0, space - 1);
  std::uniform_int_distribution<int> size(0, 7);
  Keys k(static_cast<std::size_t>(size(rng)));
  for (auto& x : k) x = ember::detail::mix_key(pick(rng)) | 1;  // spread over all 64 bits
  return k;
}

RowMatrix<double> grad_of(Index n, int r, std::int64_t s) {
  RowMatrix<double> g(n, kDim);
  for (Index i = 0; i < g.size(); ++i)
    g.data()[i] = 0.01 * static_cast<double>((i * 7 + r * 3 + s) % 11) - 0.05;
  return g;
}

}  // namespace

TEST_CASE("a sharded keyed table trains as one process while no rank evicts",
          "[sharded_keyed_embedding]") {
  const auto w = ember_test::world();
  const KeyedOptions o{
      .index = {.policy = ember::EvictionPolicy::lfu, .min_count = 2, .sketch_width = 4096},
      .seed = 11,
      .init_rows = 64 * w.size};
  ShardedKeyedEmbedding<double> sharded(MPI_COMM_WORLD, 64, kDim, o);
  KeyedEmbedding<double> single(64 * w.size, kDim, o);  // room for every key
  ember::optim::Adam<double> opt({.lr = 0.05}), ref_opt({.lr = 0.05});
  for (std::int64_t s = 0; s < 12; ++s) {
    // One process maps the ranks' batches in rank order, in one call.
    const auto [all, begin] =
        ember_test::in_rank_order(w.size, [&](int r) { return batch_of(r, s, 20); });
    const KeyedBatch ref = single.map(all, s);
    const Keys mine = batch_of(w.rank, s, 20);
    const KeyedBatch batch = sharded.map(mine, s);
    const RowMatrix<double> x = sharded.forward(batch);
    const auto lo = static_cast<std::size_t>(begin[static_cast<std::size_t>(w.rank)]);
    const std::vector<TokenId> ref_rows(
        ref.rows().begin() + static_cast<std::ptrdiff_t>(lo),
        ref.rows().begin() + static_cast<std::ptrdiff_t>(lo + mine.size()));
    CHECK(same_bits(x, single.table().forward(ref_rows)));
    // Backward: one process's backward per rank's batch, in rank order, into one gradient.
    ember::SparseRowGrad<double> grad;
    sharded.backward(batch, grad_of(static_cast<Index>(mine.size()), w.rank, s), grad);
    sharded.step(opt, grad);
    ember::SparseRowGrad<double> ref_grad;
    for (int r = 0; r < w.size; ++r) {
      const auto b = static_cast<std::size_t>(begin[static_cast<std::size_t>(r)]);
      const auto e = static_cast<std::size_t>(begin[static_cast<std::size_t>(r) + 1]);
      const std::vector<TokenId> rows(ref.rows().begin() + static_cast<std::ptrdiff_t>(b),
                                      ref.rows().begin() + static_cast<std::ptrdiff_t>(e));
      single.table().backward(rows, grad_of(static_cast<Index>(e - b), r, s), ref_grad);
    }
    single.step(ref_opt, ref_grad);
  }
  // Every key this rank owns has the values the one process trained.
  Index owned = 0;
  for (const ember::KeyEntry& e : sharded.index()) {
    ++owned;
    CHECK(key_owner(e.key, w.size) == w.rank);
    const auto ref_entry = single.index().entry(e.key);
    REQUIRE(ref_entry);
    CHECK(e.count == ref_entry->count);
    CHECK(e.last_step == ref_entry->last_step);
    CHECK(same_bits(RowMatrix<double>(sharded.shard().weight().row(e.row)),
                    RowMatrix<double>(single.table().weight().row(ref_entry->row))));
  }
  Index total = 0;
  MPI_Allreduce(&owned, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK(total == single.size());
  // Inference: never inserts; keys without a row read zeros.
  const Index before = sharded.index().size();
  const RowMatrix<double> y = sharded.forward(Keys{0xABCDEF});
  CHECK(y.isZero());
  CHECK(sharded.index().size() == before);
}

TEST_CASE("with eviction each rank evicts over its own keys, as one index per owner",
          "[sharded_keyed_embedding]") {
  const auto w = ember_test::world();
  const KeyedOptions o{.index = {.policy = ember::EvictionPolicy::lru}, .seed = 5};
  ShardedKeyedEmbedding<double> sharded(MPI_COMM_WORLD, 6, kDim, o);
  std::vector<KeyedEmbedding<double>> owners;
  for (int q = 0; q < w.size; ++q) {
    KeyedOptions oq = o;
    oq.init_rows = 6 * w.size;
    owners.emplace_back(6, kDim, oq);
  }
  ember::optim::SGD<double> opt({.lr = 0.1, .momentum = 0.9});
  Index evictions = 0;
  int refused = 0;
  for (std::int64_t s = 0; s < 14; ++s) {
    // What owner q receives: each rank's distinct keys for q (ascending), with their sightings,
    // rank after rank.
    std::vector<Keys> keys(static_cast<std::size_t>(w.size));
    std::vector<std::vector<std::int64_t>> counts(static_cast<std::size_t>(w.size));
    for (int r = 0; r < w.size; ++r) {
      std::map<std::uint64_t, std::int64_t> by_key;
      for (const std::uint64_t k : batch_of(r, s, 40)) ++by_key[k];
      for (const auto& [k, c] : by_key) {
        const auto q = static_cast<std::size_t>(key_owner(k, w.size));
        keys[q].push_back(k);
        counts[q].push_back(c);
      }
    }
    // A batch some owner cannot take is refused on every rank, and changes nothing.
    bool fits = true;
    for (int q = 0; q < w.size; ++q) {
      auto& ref = ember::detail::KeyedAccess::state(owners[static_cast<std::size_t>(q)]);
      try {
        ref.index().check_insert(keys[static_cast<std::size_t>(q)], s, {},
                                 counts[static_cast<std::size_t>(q)]);
      } catch (const ember::CapacityError&) {
        fits = false;
      }
    }
    if (!fits) {
      REQUIRE_THROWS_AS(sharded.map(batch_of(w.rank, s, 40), s), ember::CapacityError);
      ++refused;
      continue;
    }
    for (int q = 0; q < w.size; ++q) {
      auto& owner = owners[static_cast<std::size_t>(q)];
      auto& ref = ember::detail::KeyedAccess::state(owner);
      std::vector<TokenId> rows(keys[static_cast<std::size_t>(q)].size());
      ref.map(keys[static_cast<std::size_t>(q)], rows, s, {},
              ember::detail::KeyedAccess::table(owner), counts[static_cast<std::size_t>(q)]);
      ref.advance();
    }
    const KeyedBatch batch = sharded.map(batch_of(w.rank, s, 40), s);
    evictions += static_cast<Index>(batch.evicted().size());
    sharded.backward_step(batch, grad_of(batch.size(), w.rank, s), opt);
  }
  INFO("refused batches: " << refused);
  const auto& mine = owners[static_cast<std::size_t>(w.rank)];
  CHECK(std::vector<ember::KeyEntry>(sharded.index().begin(), sharded.index().end()) ==
        std::vector<ember::KeyEntry>(mine.index().begin(), mine.index().end()));
  Index all_evictions = 0;
  MPI_Allreduce(&evictions, &all_evictions, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  CHECK(all_evictions > 0);
}

TEST_CASE("a sharded map that cannot fit throws CapacityError on every rank, mapping nothing",
          "[sharded_keyed_embedding]") {
  const auto w = ember_test::world();
  ShardedKeyedEmbedding<float> sharded(MPI_COMM_WORLD, 2, kDim,
                                       {.index = {.policy = ember::EvictionPolicy::none}});
  // Rank 0 sends many keys (they land on every owner); the others none.
  Keys keys;
  if (w.rank == 0)
    for (std::uint64_t k = 1; k <= static_cast<std::uint64_t>(8 * w.size); ++k) keys.push_back(k);
  REQUIRE_THROWS_AS(sharded.map(keys, 0), ember::CapacityError);
  CHECK(sharded.index().empty());
  const KeyedBatch ok = sharded.map(Keys{}, 0);
  CHECK(ok.size() == 0);
  // A stale batch is refused on every rank.
  const KeyedBatch b1 = sharded.map(Keys{}, 1);
  const KeyedBatch b2 = sharded.map(Keys{}, 2);
  ember::SparseRowGrad<float> g;
  REQUIRE_THROWS_AS(sharded.backward(b1, RowMatrix<float>(0, kDim), g), ember::StateError);
  CHECK_NOTHROW(sharded.backward(b2, RowMatrix<float>(0, kDim), g));
  // A bad step is refused on every rank.
  REQUIRE_THROWS_AS(sharded.map(Keys{}, w.rank == w.size - 1 ? 0 : 3), ember::ValueError);
}

TEST_CASE("a refused sharded map leaves the ranks that accepted their batch as they were",
          "[sharded_keyed_embedding]") {
  const auto w = ember_test::world();
  ShardedKeyedEmbedding<double> sharded(MPI_COMM_WORLD, 4, kDim,
                                        {.index = {.policy = ember::EvictionPolicy::lru}});
  // owned[q]: keys owner q holds, the first two resident from step 0.
  std::vector<Keys> owned(static_cast<std::size_t>(w.size));
  for (std::uint64_t k = 1;
       std::any_of(owned.begin(), owned.end(), [](const Keys& o) { return o.size() < 7; }); ++k) {
    Keys& o = owned[static_cast<std::size_t>(key_owner(k, w.size))];
    if (o.size() < 7) o.push_back(k);
  }
  const Keys& mine = owned[static_cast<std::size_t>(w.rank)];
  const KeyedBatch first = sharded.map(Keys(mine.begin(), mine.begin() + 2), 0);
  CHECK(first.inserted() == 2);
  const std::vector<ember::KeyEntry> before(sharded.index().begin(), sharded.index().end());
  const RowMatrix<double> shard_before = sharded.shard().weight();
  // Every rank sends its resident keys again (hits on their owner); the last rank also sends
  // five new keys of its own, more than its owner's 4 rows can take at once with its 2 resident.
  Keys again(mine.begin(), mine.begin() + 2);
  if (w.rank == w.size - 1) again.insert(again.end(), mine.begin() + 2, mine.end());
  REQUIRE_THROWS_AS(sharded.map(again, 5), ember::CapacityError);
  CHECK(std::vector<ember::KeyEntry>(sharded.index().begin(), sharded.index().end()) == before);
  CHECK(sharded.index().last_step() == 0);
  CHECK(sharded.shard().weight() == shard_before);
  // Nothing stays held: the next batch maps, counting each resident key's sighting once.
  const KeyedBatch next = sharded.map(Keys(mine.begin(), mine.begin() + 2), 5);
  CHECK(next.hits() == 2);
  CHECK(next.inserted() == 0);
  for (const ember::KeyEntry& e : sharded.index()) {
    CHECK(e.count == 2);
    CHECK(e.last_step == 5);
  }
}
