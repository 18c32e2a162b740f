// Tests for ember/distributed/keyed_checkpoint.hpp: a sharded keyed table saved by P ranks loads
// into any number of ranks (sub-communicators of MPI_COMM_WORLD play the saving and loading
// jobs), and training on after a save and load at the same ranks gives the same bits.
// SPDX-License-Identifier: MIT
#include "ember/distributed/keyed_checkpoint.hpp"

#include <mpi.h>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/keyed/keyed_embedding.hpp"
#include "ember/optim/adam.hpp"
#include "support/error_checks.hpp"
#include "support/matrix_compare.hpp"
#include "support/safetensors_metadata.hpp"
#include "support/sharded_embedding_reference.hpp"
#include "support/sharded_keyed_fixtures.hpp"

namespace {

constexpr Index kDim = 3;

Keys batch_of(int r, std::int64_t s) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(77 * r + s + 5));
  std::uniform_int_distribution<std::uint64_t> pick(0, 29);
  Keys k(5);
  for (auto& x : k) x = ember::detail::mix_key(pick(rng) + 1000);
  return k;
}

RowMatrix<float> grad_of(Index n, std::int64_t s) {
  RowMatrix<float> g(n, kDim);
  for (Index i = 0; i < g.size(); ++i)
    g.data()[i] = 0.02f * static_cast<float>((i + s) % 7) - 0.06f;
  return g;
}

template <class E>
void train(E& emb, ember::optim::Adam<float>& opt, int rank, std::int64_t from, std::int64_t to) {
  for (std::int64_t s = from; s < to; ++s) {
    const KeyedBatch b = emb.map(batch_of(rank, s), s);
    emb.backward_step(b, grad_of(b.size(), s), opt);
  }
}

using ember_test::first_ranks;

}  // namespace

TEST_CASE("a sharded keyed checkpoint saved by P ranks loads into any number of ranks",
          "[sharded_keyed_checkpoint]") {
  const auto w = ember_test::world();
  const ember_test::SharedDir dir("ember_keyed_ckpt_");
  const KeyedOptions o{.seed = 3, .init_rows = 256};
  for (int saved = 1; saved <= w.size; ++saved) {
    // The one-process truth: the saving job's batches in rank order (no rank evicts).
    KeyedEmbedding<float> single(256, kDim, o);
    ember::optim::Adam<float> single_opt({.lr = 0.05});
    for (std::int64_t s = 0; s < 6; ++s) {
      const auto [all, begin] =
          ember_test::in_rank_order(saved, [&](int r) { return batch_of(r, s); });
      const KeyedBatch b = single.map(all, s);
      ember::SparseRowGrad<float> g;
      for (int r = 0; r < saved; ++r) {
        const std::vector<ember::TokenId> rows(
            b.rows().begin() + begin[static_cast<std::size_t>(r)],
            b.rows().begin() + begin[static_cast<std::size_t>(r) + 1]);
        single.table().backward(rows, grad_of(static_cast<Index>(rows.size()), s), g);
      }
      single.step(single_opt, g);
    }
    const std::string prefix = (dir.path / ("k" + std::to_string(saved))).string();
    if (MPI_Comm sub = first_ranks(saved); sub != MPI_COMM_NULL) {
      {
        ShardedKeyedEmbedding<float> emb(sub, 256 / saved, kDim, o);
        ember::optim::Adam<float> opt({.lr = 0.05});
        train(emb, opt, w.rank, 0, 6);
        ember::distributed::save_keyed_shards(emb, prefix, &opt);
      }
      MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int loaded = 1; loaded <= w.size; ++loaded) {
      if (MPI_Comm sub = first_ranks(loaded); sub != MPI_COMM_NULL) {
        {
          INFO("saved by " << saved << " ranks, loaded into " << loaded);
          ember::optim::Adam<float> opt({.lr = 0.05});
          auto emb = ember::distributed::load_keyed_shards<float>(sub, prefix, &opt);
          Index held = 0;
          for (const ember::KeyEntry& e : emb.index()) {
            ++held;
            CHECK(key_owner(e.key, loaded) == w.rank);
            const auto ref = single.index().entry(e.key);
            REQUIRE(ref);
            CHECK(e.count == ref->count);
            CHECK(e.last_step == ref->last_step);
            CHECK(same_bits(RowMatrix<float>(emb.shard().weight().row(e.row)),
                            RowMatrix<float>(single.table().weight().row(ref->row))));
            CHECK(opt.exp_avg(e.row) == single_opt.exp_avg(ref->row));
          }
          Index total = 0;
          MPI_Allreduce(&held, &total, 1, MPI_INT64_T, MPI_SUM, sub);
          CHECK(total == single.size());
          CHECK(opt.step_count() == 6);
        }
        MPI_Comm_free(&sub);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
}

TEST_CASE("training on after a sharded save and load gives the bits of training straight on",
          "[sharded_keyed_checkpoint]") {
  const auto w = ember_test::world();
  const ember_test::SharedDir dir("ember_keyed_ckpt_");
  const std::string prefix = (dir.path / "resume").string();
  const KeyedOptions o{
      .index = {.policy = ember::EvictionPolicy::lru, .min_count = 2, .sketch_width = 64},
      .seed = 9};
  const Index capacity = 5 * w.size + 1;  // a step's keys always fit an owner
  ShardedKeyedEmbedding<float> straight(MPI_COMM_WORLD, capacity, kDim, o);
  ShardedKeyedEmbedding<float> first(MPI_COMM_WORLD, capacity, kDim, o);
  ember::optim::Adam<float> a({.lr = 0.05}), b({.lr = 0.05});
  train(straight, a, w.rank, 0, 12);
  train(first, b, w.rank, 0, 7);
  ember::distributed::save_keyed_shards(first, prefix, &b);
  ember::optim::Adam<float> c({.lr = 0.05});
  auto resumed = ember::distributed::load_keyed_shards<float>(MPI_COMM_WORLD, prefix, &c);
  train(resumed, c, w.rank, 7, 12);
  CHECK(std::vector<ember::KeyEntry>(resumed.index().begin(), resumed.index().end()) ==
        std::vector<ember::KeyEntry>(straight.index().begin(), straight.index().end()));
  CHECK(same_bits(resumed.shard().weight(), straight.shard().weight()));
}

TEST_CASE("a missing sharded keyed checkpoint raises FormatError on every rank",
          "[sharded_keyed_checkpoint]") {
  const ember_test::SharedDir dir("ember_keyed_ckpt_");
  REQUIRE_THROWS_AS(
      ember::distributed::load_keyed_shards<float>(MPI_COMM_WORLD, (dir.path / "none").string()),
      ember::FormatError);
}

TEST_CASE("a sharded keyed checkpoint's numbers are read whole: a malformed one raises FormatError",
          "[sharded_keyed_checkpoint]") {
  const auto w = ember_test::world();
  const ember_test::SharedDir dir("ember_keyed_numbers_");
  const std::string prefix = (dir.path / "k").string();
  const std::string shard0 = ember::distributed::shard_path(prefix, 0, w.size);
  // Saves a trained checkpoint from every rank, then rank 0 sets `key` of shard `q` to `value`.
  const auto save = [&](int q, const std::string& key, const std::string& value) {
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the previous files
    {
      ShardedKeyedEmbedding<float> emb(MPI_COMM_WORLD, 32, kDim, {.seed = 5});
      ember::optim::Adam<float> opt({.lr = 0.05});
      train(emb, opt, w.rank, 0, 3);
      ember::distributed::save_keyed_shards(emb, prefix, &opt);
    }
    if (w.rank == 0 && !key.empty()) {
      ember_test::set_safetensors_metadata(ember::distributed::shard_path(prefix, q, w.size), key,
                                           value);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  };
  const auto refused = [&](const std::string& path, const std::string& field) {
    const auto e = ember_test::catch_as<ember::FormatError>([&] {
      ember::optim::Adam<float> opt({.lr = 0.05});
      (void)ember::distributed::load_keyed_shards<float>(MPI_COMM_WORLD, prefix, &opt);
    });
    REQUIRE(e);
    CHECK_THAT(e->what(), Catch::Contains(path) && Catch::Contains("'" + field + "'"));
  };
  save(0, "", "");
  REQUIRE_NOTHROW(ember::distributed::load_keyed_shards<float>(MPI_COMM_WORLD, prefix));
  // strtod read "zz" and "" as a scale of 0 (every lookup zeros), "1.5x" as 1.5, " 2" as 2.
  for (const char* bad : {"zz", "", "1.5x", " 2", "+2", "1e-400", "nan"}) {
    INFO("scale = '" << bad << "'");
    save(0, "scale", bad);
    refused(shard0, "scale");
  }
  for (const char* key : {"capacity", "seed", "init.a", "last_step"}) {
    INFO(key << " = ' 1'");
    save(0, key, " 1");
    refused(shard0, key);
  }
  if (w.size > 1) {
    // Well-formed, but not the scale of shard 0.
    save(1, "scale", "0x1.8p+0");
    refused(ember::distributed::shard_path(prefix, 1, w.size), "scale");
  }
}
