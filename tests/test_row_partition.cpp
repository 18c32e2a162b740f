// Tests for ember/distributed/row_partition.hpp: the contiguous balanced sharding rule.
// SPDX-License-Identifier: MIT
#include "ember/distributed/row_partition.hpp"

#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include "ember/errors.hpp"

using Catch::Matchers::Contains;
using ember::Index;
using ember::distributed::RowPartition;

TEST_CASE("rows are split into contiguous ranges differing by at most one row", "[row_partition]") {
  const RowPartition p(10, 4);
  CHECK(p.vocab_size() == 10);
  CHECK(p.world_size() == 4);
  CHECK(p.row_begin(0) == 0);
  CHECK(p.row_end(0) == 3);
  CHECK(p.row_begin(1) == 3);
  CHECK(p.row_end(1) == 6);
  CHECK(p.row_begin(2) == 6);
  CHECK(p.row_end(2) == 8);
  CHECK(p.row_begin(3) == 8);
  CHECK(p.row_end(3) == 10);
  CHECK(p.rows(0) == 3);
  CHECK(p.rows(3) == 2);
  CHECK(p.row_begin(4) == 10);
}

TEST_CASE("owner and local_row agree with the ranges for every id", "[row_partition]") {
  for (Index v : {1, 2, 7, 37, 64, 1000}) {
    for (int ranks = 1; ranks <= 9 && ranks <= v; ++ranks) {
      const RowPartition p(v, ranks);
      Index covered = 0;
      for (int r = 0; r < ranks; ++r) {
        CHECK(p.row_begin(r) == covered);
        CHECK(p.rows(r) >= v / ranks);
        CHECK(p.rows(r) <= v / ranks + 1);
        covered += p.rows(r);
        for (Index id = p.row_begin(r); id < p.row_end(r); ++id) {
          REQUIRE(p.owner(id) == r);
          REQUIRE(p.local_row(id) == id - p.row_begin(r));
        }
      }
      CHECK(covered == v);
    }
  }
}

TEST_CASE("a partition with a rank owning no rows is refused", "[row_partition]") {
  REQUIRE_THROWS_AS(RowPartition(3, 4), ember::ShapeError);
  REQUIRE_THROWS_WITH(RowPartition(3, 4), Contains("world_size 4 exceeds vocab_size 3"));
  REQUIRE_THROWS_WITH(RowPartition(0, 1), Contains("vocab_size must be positive"));
  REQUIRE_THROWS_WITH(RowPartition(5, 0), Contains("world_size must be positive"));
  try {
    (void)RowPartition(3, 4);
  } catch (const ember::ShapeError& e) {
    CHECK(e.expected() == 3);
    CHECK(e.actual() == 4);
  }
}

TEST_CASE("partitions compare equal when they split the same rows over the same ranks",
          "[row_partition]") {
  CHECK(RowPartition(10, 3) == RowPartition(10, 3));
  CHECK(!(RowPartition(10, 3) == RowPartition(10, 2)));
  CHECK(!(RowPartition(11, 3) == RowPartition(10, 3)));
}

TEST_CASE("RowPartition's accessors refuse a rank or an id outside the partition",
          "[row_partition]") {
  const RowPartition p(10, 4);
  const auto refused = [](auto&& call, const char* message, Index value, Index bound) {
    try {
      static_cast<void>(call());
      FAIL("no throw");
    } catch (const ember::IndexError& e) {
      CHECK(std::string(e.what()) == message);
      CHECK(e.position() == -1);
      CHECK(e.value() == value);
      CHECK(e.bound() == bound);
    }
  };
  refused([&] { return p.row_begin(5); }, "RowPartition::row_begin: rank 5 is outside [0, 5)", 5,
          5);
  refused([&] { return p.row_begin(-1); }, "RowPartition::row_begin: rank -1 is outside [0, 5)", -1,
          5);
  refused([&] { return p.row_end(4); }, "RowPartition::row_end: rank 4 is outside [0, 4)", 4, 4);
  refused([&] { return p.rows(4); }, "RowPartition::rows: rank 4 is outside [0, 4)", 4, 4);
  refused([&] { return p.owner(10); }, "RowPartition::owner: id 10 is outside [0, 10)", 10, 10);
  refused([&] { return p.local_row(-1); }, "RowPartition::local_row: id -1 is outside [0, 10)", -1,
          10);
  // The edges inside the partition are fine: row_begin(P) is V.
  CHECK(p.row_begin(4) == 10);
  CHECK(p.row_end(3) == 10);
  CHECK(p.owner(9) == 3);
  CHECK(p.local_row(0) == 0);
}
