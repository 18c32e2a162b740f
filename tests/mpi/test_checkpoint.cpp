// Tests for ember/distributed/checkpoint.hpp: per-rank safetensors shards and re-sharding into
// another number of ranks (sub-communicators of MPI_COMM_WORLD play the saving and loading jobs).
// SPDX-License-Identifier: MIT
#include "ember/distributed/checkpoint.hpp"

#include <mpi.h>
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/io/safetensors.hpp"
#include "support/error_checks.hpp"
#include "support/matrix_compare.hpp"
#include "support/sharded_embedding_reference.hpp"

using Catch::Matchers::Contains;
using ember::Index;
using ember::RowMatrix;
using ember::distributed::ShardedEmbedding;
using ember_test::same_bits;

namespace {

constexpr Index kVocab = 23;
constexpr Index kDim = 5;

using ember_test::first_ranks;
using SharedDir = ember_test::SharedDir;

}  // namespace

TEMPLATE_TEST_CASE("a checkpoint saved by P ranks loads into any number of ranks", "[checkpoint]",
                   float, double) {
  using T = TestType;
  const auto w = ember_test::world();
  const SharedDir dir;
  const RowMatrix<T> table = ember_test::full_table<T>(kVocab, kDim);
  for (int saved = 1; saved <= w.size; ++saved) {
    for (int loaded = 1; loaded <= w.size; ++loaded) {
      const std::string prefix =
          (dir.path / ("t" + std::to_string(saved) + "_" + std::to_string(loaded))).string();
      if (MPI_Comm sub = first_ranks(saved); sub != MPI_COMM_NULL) {
        {
          auto emb = ShardedEmbedding<T>::from_full_table(sub, table);
          ember::distributed::save_shards(emb, prefix);
        }
        MPI_Comm_free(&sub);
      }
      MPI_Barrier(MPI_COMM_WORLD);
      if (w.rank == 0) {
        // One file per saving rank, its row range in the metadata.
        const ember::io::SafetensorsFile f(
            ember::distributed::shard_path(prefix, saved - 1, saved));
        const ember::distributed::RowPartition rule(kVocab, saved);
        CHECK(f.metadata().at("ember.row_begin") == std::to_string(rule.row_begin(saved - 1)));
        CHECK(f.metadata().at("ember.row_end") == std::to_string(kVocab));
        CHECK(f.metadata().at("ember.world_size") == std::to_string(saved));
      }
      if (MPI_Comm sub = first_ranks(loaded); sub != MPI_COMM_NULL) {
        {
          auto emb = ember::distributed::load_shards<T>(sub, prefix);
          CHECK(emb.world_size() == loaded);
          CHECK(emb.vocab_size() == kVocab);
          CHECK(emb.d_model() == kDim);
          CHECK(
              same_bits(emb.shard().weight(), table.middleRows(emb.row_begin(), emb.local_rows())));
          INFO("saved by " << saved << " ranks, loaded into " << loaded);
          CHECK(same_bits(emb.gather_table(), table));
        }
        MPI_Comm_free(&sub);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
}

TEST_CASE("shards stored as F16 load back rounded to half precision", "[checkpoint]") {
  const SharedDir dir;
  const RowMatrix<float> table = ember_test::full_table<float>(kVocab, kDim);
  const std::string prefix = (dir.path / "half").string();
  {
    auto emb = ShardedEmbedding<float>::from_full_table(MPI_COMM_WORLD, table);
    ember::distributed::save_shards(emb, prefix, ember::io::SafetensorsDtype::F16);
  }
  auto emb = ember::distributed::load_shards<float>(MPI_COMM_WORLD, prefix);
  const RowMatrix<float> back = emb.gather_table();
  CHECK((back - table).cwiseAbs().maxCoeff() <= 1e-3f);
}

TEST_CASE("a missing or inconsistent checkpoint raises FormatError on every rank", "[checkpoint]") {
  const auto w = ember_test::world();
  const SharedDir dir;
  SECTION("no files under the prefix") {
    REQUIRE_THROWS_AS(
        ember::distributed::load_shards<float>(MPI_COMM_WORLD, (dir.path / "none").string()),
        ember::FormatError);
  }
  SECTION("a row range that contradicts the rule") {
    const std::string prefix = (dir.path / "bad").string();
    if (w.rank == 0) {
      const RowMatrix<float> t = RowMatrix<float>::Ones(kVocab, kDim);
      ember::io::SafetensorsWriter writer;
      writer.add("weight", t)
          .metadata("ember.row_begin", "0")
          .metadata("ember.row_end", std::to_string(kVocab - 1))
          .metadata("ember.vocab_size", std::to_string(kVocab))
          .metadata("ember.world_size", "1");
      writer.save(ember::distributed::shard_path(prefix, 0, 1));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE_THROWS_WITH(ember::distributed::load_shards<float>(MPI_COMM_WORLD, prefix),
                        Contains("bad.shard-0-of-1.safetensors") && Contains("row range differs"));
  }
}

TEST_CASE("a shard's __metadata__ numbers are read whole: a malformed one raises FormatError",
          "[checkpoint]") {
  const auto w = ember_test::world();
  const SharedDir dir;
  const std::string prefix = (dir.path / "numbers").string();
  const std::string path = ember::distributed::shard_path(prefix, 0, 1);
  const RowMatrix<float> t = RowMatrix<float>::Ones(kVocab, kDim);
  const std::map<std::string, std::string> good = {{"ember.row_begin", "0"},
                                                   {"ember.row_end", std::to_string(kVocab)},
                                                   {"ember.vocab_size", std::to_string(kVocab)},
                                                   {"ember.world_size", "1"}};
  // Rank 0 writes the one shard of a 1-rank checkpoint with `key` set to `value`.
  const auto write = [&](const std::string& key, const std::string& value) {
    MPI_Barrier(MPI_COMM_WORLD);  // every rank is done with the previous file
    if (w.rank == 0) {
      ember::io::SafetensorsWriter writer;
      writer.add("weight", t);
      for (const auto& [k, v] : good) writer.metadata(k, k == key ? value : v);
      writer.save(path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  };
  write("", "");
  REQUIRE_NOTHROW(ember::distributed::load_shards<float>(MPI_COMM_WORLD, prefix));
  for (const auto& [key, value] : good) {
    // std::stoll took " 23" and "+23" as 23.
    for (const std::string& bad :
         {" " + value, "+" + value, value + " ", value + "x", std::string(), "0x" + value}) {
      INFO(key << " = '" << bad << "'");
      write(key, bad);
      const auto e = ember_test::catch_as<ember::FormatError>(
          [&] { (void)ember::distributed::load_shards<float>(MPI_COMM_WORLD, prefix); });
      REQUIRE(e);
      CHECK_THAT(e->what(), Contains(path) && Contains("'" + key + "'"));
    }
  }
}
