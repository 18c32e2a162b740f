// Tests of ember/keys/key_index_types.hpp: the value types of KeyIndex's API on their own (names,
// defaults, equality), and that a KeyIndex reports through them what it did.
#include "ember/keys/key_index_types.hpp"

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/keys/key_index.hpp"

TEST_CASE("every eviction policy has its name", "[key_index_types]") {
  STATIC_REQUIRE(std::string_view(ember::to_string(ember::EvictionPolicy::lru)) == "lru");
  CHECK(std::string(ember::to_string(ember::EvictionPolicy::lfu)) == "lfu");
  CHECK(std::string(ember::to_string(ember::EvictionPolicy::score)) == "score");
  CHECK(std::string(ember::to_string(ember::EvictionPolicy::none)) == "none");
}

TEST_CASE("KeyIndexOptions' defaults are lru, admit at first sight, no decay, no fallback row",
          "[key_index_types]") {
  const ember::KeyIndexOptions o;
  CHECK(o.policy == ember::EvictionPolicy::lru);
  CHECK(o.min_count == 1);
  CHECK(o.lfu_half_life == 0);
  CHECK(o.sketch_width == 0);
  CHECK(o.sketch_half_life == 0);
  CHECK(o.fallback_row == ember::KeyIndex::no_row);
}

TEST_CASE("the reported pairs, entries and clocks compare member by member", "[key_index_types]") {
  const ember::KeyRow a{7, 3};
  CHECK(a == ember::KeyRow{7, 3});
  CHECK_FALSE(a == ember::KeyRow{7, 4});
  CHECK_FALSE(a == ember::KeyRow{8, 3});
  CHECK(ember::KeyRow{}.row == -1);

  const ember::KeyEntry e{7, 3, 2.0, 2, 5};
  ember::KeyEntry f = e;
  CHECK(e == f);
  f.last_step = 6;
  CHECK_FALSE(e == f);

  const ember::KeyIndexClocks c;
  CHECK(c.origin == -1);
  CHECK(c.last == -1);
  CHECK(c.base == 0);
  CHECK(c.sketch_epoch == 0);
  ember::KeyIndexClocks d = c;
  d.sketch_epoch = 1;
  CHECK_FALSE(c == d);
}

TEST_CASE("a KeyIndex reports a batch and a resize through these types", "[key_index_types]") {
  ember::KeyIndex index(2, {.policy = ember::EvictionPolicy::lru});
  std::vector<ember::TokenId> rows(2);
  const std::vector<std::uint64_t> first{10, 11};
  const ember::InsertResult r = index.find_or_insert(first, rows, /*step=*/0);
  CHECK(r.hits == 0);
  CHECK(r.inserted == 2);
  CHECK(r.fallbacks == 0);
  CHECK(r.evicted.empty());
  REQUIRE(r.added.size() == 2);
  CHECK(r.added[0] == ember::KeyRow{10, rows[0]});
  CHECK(r.added[1] == ember::KeyRow{11, rows[1]});
  const ember::TokenId row_of_10 = rows[0];  // r's spans end at the next call

  const std::vector<std::uint64_t> second{12, 11};
  const ember::InsertResult s = index.find_or_insert(second, rows, /*step=*/1);
  CHECK(s.hits == 1);
  CHECK(s.inserted == 1);
  REQUIRE(s.evicted.size() == 1);
  CHECK(s.evicted[0].key == 10);  // the least recently seen
  CHECK(s.evicted[0].row == row_of_10);

  const ember::ResizeResult shrunk = index.resize(1);
  REQUIRE(shrunk.evicted.size() == 1);
  CHECK(shrunk.evicted[0].key == 11);  // seen at step 1 as 12 was: the smaller key goes first
}
