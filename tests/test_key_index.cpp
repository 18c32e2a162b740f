// Tests of ember/keys/key_index.hpp: KeyIndex against its plain reference
// (tests/support/key_index_reference.hpp) bit for bit over random batch streams for every policy,
// admission, ties, the batch's own keys, CapacityError and the bad inputs.
#include "ember/keys/key_index.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/error_checks.hpp"
#include "support/key_index_reference.hpp"
#include "support/threads.hpp"

namespace {

using ember::EvictionPolicy;
using ember::Index;
using ember::KeyIndex;
using ember::KeyIndexOptions;
using ember::TokenId;

std::vector<ember::KeyEntry> entries_of(const KeyIndex& index) {
  return {index.begin(), index.end()};
}

/// A random stream: each batch draws keys from a small space (spread over all 64 bits), so hits,
/// repeats, evictions and re-insertions all happen; steps advance by 0-2 per batch.
struct Stream {
  std::mt19937_64 rng;
  Index space;
  std::vector<std::uint64_t> names;
  Stream(std::uint64_t seed, Index key_space) : rng(seed), space(key_space) {
    for (Index k = 0; k < key_space; ++k)
      names.push_back(ember::detail::mix_key(static_cast<std::uint64_t>(k) * 7919 + seed));
    names[0] = std::numeric_limits<std::uint64_t>::max();  // the values other tables reserve
    if (key_space > 1) names[1] = 0;
  }
  std::vector<std::uint64_t> batch(Index max_n) {
    std::uniform_int_distribution<Index> size(0, max_n);
    std::uniform_int_distribution<Index> pick(0, space - 1);
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(size(rng)));
    for (auto& k : keys) k = names[static_cast<std::size_t>(pick(rng))];
    return keys;
  }
};

/// Runs `batches` random batches through a KeyIndex and the reference, comparing everything after
/// each: the rows, the evicted pairs, the entries, the CapacityErrors, the admission counts. With
/// far_steps, one batch in eight comes up to 2^33 steps after the one before.
void compare_stream(Index capacity, KeyIndexOptions o, std::uint64_t seed, int batches,
                    Index key_space, Index max_batch, bool with_counts, bool with_erase,
                    bool far_steps = false) {
  KeyIndex index(capacity, o);
  ember_test::KeyIndexReference ref(capacity, o);
  Stream stream(seed, key_space);
  std::int64_t step = 0;
  std::uniform_int_distribution<int> advance(0, 2);
  std::uniform_int_distribution<std::int64_t> leap(1, std::int64_t{1} << 33);
  std::uniform_real_distribution<double> score(-4.0, 4.0);
  std::uniform_int_distribution<std::int64_t> count(1, 3);
  int capacity_errors = 0;
  Index evictions = 0;
  for (int b = 0; b < batches; ++b) {
    INFO("batch " << b);
    step += advance(stream.rng);
    if (far_steps && stream.rng() % 8 == 0) step += leap(stream.rng);
    const std::vector<std::uint64_t> keys = stream.batch(max_batch);
    std::vector<double> scores;
    if (o.policy == EvictionPolicy::score) {
      for (std::size_t i = 0; i < keys.size(); ++i) scores.push_back(std::round(score(stream.rng)));
    }
    std::vector<std::int64_t> counts;
    if (with_counts) {
      for (std::size_t i = 0; i < keys.size(); ++i) counts.push_back(count(stream.rng));
    }
    std::vector<TokenId> rows(keys.size(), -7);
    const auto expected = ref.find_or_insert(keys, step, scores, counts);
    if (!expected) {
      const auto before = entries_of(index);
      const auto e = ember_test::catch_as<ember::CapacityError>(
          [&] { index.find_or_insert(keys, rows, step, scores, counts); });
      REQUIRE(e);
      CHECK(e->capacity() == index.key_capacity());
      CHECK(entries_of(index) == before);
      CHECK(std::all_of(rows.begin(), rows.end(), [](TokenId r) { return r == -7; }));
      ++capacity_errors;
      continue;
    }
    const ember::InsertResult result = index.find_or_insert(keys, rows, step, scores, counts);
    REQUIRE(rows == *expected);
    REQUIRE(std::vector<ember::KeyRow>(result.evicted.begin(), result.evicted.end()) ==
            ref.evicted);
    REQUIRE(std::vector<ember::KeyRow>(result.added.begin(), result.added.end()) == ref.added);
    REQUIRE(entries_of(index) == ref.entries());
    CHECK(index.size() == ref.size());
    evictions += static_cast<Index>(result.evicted.size());
    for (std::size_t i = 0; i < keys.size(); i += 3)
      CHECK(index.admission_count(keys[i]) == ref.admission_count(keys[i]));
    if (with_erase && b % 7 == 3 && !keys.empty()) {
      index.erase(keys.front());
      ref.erase(keys.front());
      REQUIRE(entries_of(index) == ref.entries());
    }
  }
  // The stream must have exercised what it is meant to.
  if (o.policy != EvictionPolicy::none) CHECK(evictions > 0);
  if (o.policy == EvictionPolicy::none) CHECK(capacity_errors > 0);
}

}  // namespace

TEST_CASE("every 64-bit value is a key, and two keys never share a row", "[key_index]") {
  KeyIndex index(8);
  const std::vector<std::uint64_t> keys{0,
                                        std::numeric_limits<std::uint64_t>::max(),
                                        std::uint64_t{1} << 63,
                                        0xFFFFFFFFFFFFFFFE,
                                        0xFFFFFFFFFFFFFFFD,
                                        1,
                                        0,
                                        1};
  std::vector<TokenId> rows(keys.size());
  const auto result = index.find_or_insert(keys, rows, 0);
  CHECK(rows == std::vector<TokenId>{0, 1, 2, 3, 4, 5, 0, 5});
  CHECK(result.inserted == 6);
  CHECK(result.hits == 0);  // the repeats of new keys are not hits
  CHECK(index.size() == 6);
  for (std::size_t i = 0; i < keys.size(); ++i) CHECK(index.find(keys[i]) == rows[i]);
  CHECK(index.find(std::uint64_t{2}) == KeyIndex::no_row);
  CHECK(!index.contains(2));
  CHECK(index.contains(std::numeric_limits<std::uint64_t>::max()));
}

/// The inverse of ember::detail::mix_key: the key whose hash is h.
std::uint64_t key_with_hash(std::uint64_t h) {
  const auto inverse = [](std::uint64_t m) {  // of an odd m, modulo 2^64 (Newton's iteration)
    std::uint64_t x = m;
    for (int i = 0; i < 5; ++i) x *= 2 - m * x;
    return x;
  };
  const auto unshift = [](std::uint64_t y, int s) {  // undoes y ^= y >> s
    std::uint64_t x = y;
    for (int k = s; k < 64; k += s) x = y ^ (x >> s);
    return x;
  };
  std::uint64_t x = unshift(h, 31);
  x *= inverse(0x94d049bb133111ebULL);
  x = unshift(x, 27);
  x *= inverse(0xbf58476d1ce4e5b9ULL);
  return unshift(x, 30);
}

TEST_CASE("keys whose hashes agree on the first slot and the tag are told apart", "[key_index]") {
  // Hashes differing only in bit 40 share the tag (low bits) and, in a small index, the first
  // slot (high bits): each probe meets the other key's slot first.
  const std::uint64_t h = 0x0123456789ABCDEFULL;
  const std::vector<std::uint64_t> keys{key_with_hash(h),
                                        key_with_hash(h ^ (std::uint64_t{1} << 40)),
                                        key_with_hash(h ^ (std::uint64_t{1} << 41))};
  CHECK(ember::detail::mix_key(keys[1]) == (h ^ (std::uint64_t{1} << 40)));
  for (const EvictionPolicy policy : {EvictionPolicy::none, EvictionPolicy::lru}) {
    KeyIndex index(4, {.policy = policy});
    std::vector<TokenId> rows(2);
    index.find_or_insert(std::vector<std::uint64_t>{keys[0], keys[1]}, rows, 0);
    CHECK(rows == std::vector<TokenId>{0, 1});
    CHECK(index.find(keys) == std::vector<TokenId>{0, 1, KeyIndex::no_row});
    CHECK(index.find(keys[1]) == 1);
    CHECK(!index.contains(keys[2]));
    std::vector<TokenId> three(3);
    const auto result = index.find_or_insert(keys, three, 1);
    CHECK(three == std::vector<TokenId>{0, 1, 2});
    CHECK(result.hits == 2);
    index.erase(keys[0]);
    CHECK(index.find(keys) == std::vector<TokenId>{KeyIndex::no_row, 1, 2});
  }
}

TEST_CASE("find is read-only and gives the fallback to keys without a row", "[key_index]") {
  KeyIndex index(4, {.fallback_row = 9});
  std::vector<std::uint64_t> keys{10, 11};
  std::vector<TokenId> rows(2);
  index.find_or_insert(keys, rows, 3);
  const auto before = entries_of(index);
  const std::vector<std::uint64_t> probe{11, 12, 10};
  CHECK(index.find(probe) == std::vector<TokenId>{1, 9, 0});
  CHECK(entries_of(index) == before);
  CHECK(index.last_step() == 3);
  std::vector<TokenId> wrong(2);
  CHECK_THROWS_AS(index.find(probe, wrong), ember::ShapeError);
}

TEST_CASE("KeyIndex matches its reference bit for bit, lru", "[key_index]") {
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    compare_stream(32, {.policy = EvictionPolicy::lru}, seed, 300, 90, 24, false, true);
  }
  compare_stream(40, {.policy = EvictionPolicy::lru}, 9, 200, 120, 30, true, false);
}

TEST_CASE("KeyIndex matches its reference bit for bit, lfu and decayed lfu", "[key_index]") {
  for (const std::uint64_t seed : {4u, 5u}) {
    compare_stream(32, {.policy = EvictionPolicy::lfu}, seed, 300, 90, 24, seed == 5, true);
    compare_stream(32, {.policy = EvictionPolicy::lfu, .lfu_half_life = 3}, seed, 300, 90, 24,
                   seed == 4, true);
  }
}

TEST_CASE("KeyIndex matches its reference bit for bit, user scores", "[key_index]") {
  for (const std::uint64_t seed : {6u, 7u}) {
    compare_stream(32, {.policy = EvictionPolicy::score}, seed, 300, 90, 24, seed == 7, true);
  }
}

TEST_CASE("KeyIndex matches its reference with admission, halving and a reserved fallback row",
          "[key_index]") {
  compare_stream(32, {.policy = EvictionPolicy::lru, .min_count = 3, .sketch_width = 64}, 8, 300,
                 200, 24, false, true);
  compare_stream(
      32,
      {.policy = EvictionPolicy::lfu, .min_count = 2, .sketch_width = 64, .sketch_half_life = 5},
      10, 300, 300, 24, true, false);
  compare_stream(24, {.policy = EvictionPolicy::lru, .fallback_row = 5}, 11, 200, 90, 20, false,
                 true);
}

TEST_CASE("KeyIndex matches its reference on batches longer than its capacity", "[key_index]") {
  // A batch of at most key_capacity() keys cannot be refused, and its lookup pass writes the hits
  // straight to the rows (under lru and undecayed lfu, through its own branch-free pass); a
  // longer one (up to 48 keys on 32 rows, repeats included) may still throw CapacityError, so
  // its pass saves what it writes. One stream mixes both.
  for (const std::uint64_t seed : {20u, 21u}) {
    compare_stream(32, {.policy = EvictionPolicy::lru}, seed, 300, 60, 48, seed == 21, true);
    compare_stream(32, {.policy = EvictionPolicy::lfu}, seed, 300, 60, 48, seed == 20, true);
    compare_stream(32, {.policy = EvictionPolicy::lfu, .lfu_half_life = 2}, seed, 200, 60, 48,
                   false, false);
    compare_stream(32, {.policy = EvictionPolicy::score}, seed, 200, 60, 48, seed == 21, false);
  }
}

TEST_CASE("KeyIndex without eviction throws CapacityError once full, like its reference",
          "[key_index]") {
  compare_stream(40, {.policy = EvictionPolicy::none}, 12, 150, 90, 16, false, true);
}

TEST_CASE("KeyIndex matches its reference where eviction scans a large index", "[key_index]") {
  // Capacity 3000: the candidates are a sampled, bounded pool, refilled by scans.
  compare_stream(3000, {.policy = EvictionPolicy::lru}, 13, 40, 9000, 800, false, false);
  compare_stream(3000, {.policy = EvictionPolicy::lfu}, 14, 40, 9000, 800, false, false);
  compare_stream(3000, {.policy = EvictionPolicy::score}, 15, 30, 9000, 800, false, false);
}

TEST_CASE(
    "KeyIndex matches its reference where late candidates are folded into a lazily sorted pool",
    "[key_index]") {
  // Capacity 24000: a pool of 2000 candidates sorted in chunks as eviction reaches them, and
  // batches that are mostly hits, so that many keys fall below the threshold and the late heap
  // outgrows its bound (1024) and is folded into the pool between scans. Capacity 10000: a pool
  // of 833, partly sorted when a trim keeps the smallest of it. lfu: the new keys fall below.
  compare_stream(24000, {.policy = EvictionPolicy::score}, 16, 100, 24500, 8000, false, false);
  compare_stream(10000, {.policy = EvictionPolicy::score}, 17, 60, 11000, 9900, false, false);
  compare_stream(24000, {.policy = EvictionPolicy::lfu}, 18, 40, 40000, 8000, false, false);
  compare_stream(24000, {.policy = EvictionPolicy::lfu, .lfu_half_life = 3}, 19, 40, 40000, 8000,
                 false, false);
}

TEST_CASE("ties fall to the older step, then to the smaller key", "[key_index]") {
  KeyIndex lru(3, {.policy = EvictionPolicy::lru});
  std::vector<TokenId> rows(3);
  const std::vector<std::uint64_t> first{30, 10, 20};
  lru.find_or_insert(first, rows, 0);
  const std::vector<std::uint64_t> one{99};
  std::vector<TokenId> row(1);
  auto r = lru.find_or_insert(one, row, 1);
  REQUIRE(r.evicted.size() == 1);
  CHECK(r.evicted[0] == ember::KeyRow{10, 1});  // all seen at step 0: the smallest key
  CHECK(row[0] == 1);

  KeyIndex lfu(3, {.policy = EvictionPolicy::lfu});
  const std::vector<std::uint64_t> a{5, 6, 7, 7};  // 5 and 6 seen once at step 0, 7 twice
  std::vector<TokenId> ra(4);
  lfu.find_or_insert(a, ra, 0);
  const std::vector<std::uint64_t> b{6};
  std::vector<TokenId> rb(1);
  lfu.find_or_insert(b, rb, 1);  // 6 now twice; 5 once
  const std::vector<std::uint64_t> c{8};
  std::vector<TokenId> rc(1);
  r = lfu.find_or_insert(c, rc, 2);
  REQUIRE(r.evicted.size() == 1);
  CHECK(r.evicted[0].key == 5);
  const std::vector<std::uint64_t> d{9, 10};
  std::vector<TokenId> rd(2);
  r = lfu.find_or_insert(d, rd, 3);  // 8 once; 6 and 7 twice, 7 seen last at step 0
  REQUIRE(r.evicted.size() == 2);
  CHECK(r.evicted[0].key == 8);
  CHECK(r.evicted[1].key == 7);
}

TEST_CASE("a batch never evicts its own keys", "[key_index]") {
  KeyIndex index(4, {.policy = EvictionPolicy::lru});
  std::vector<TokenId> rows(4);
  const std::vector<std::uint64_t> first{1, 2, 3, 4};
  index.find_or_insert(first, rows, 0);
  // 1 and 2 are the oldest, but this batch reads them: 3 and 4 make room.
  const std::vector<std::uint64_t> next{1, 5, 2, 6};
  const auto r = index.find_or_insert(next, rows, 1);
  CHECK(rows == std::vector<TokenId>{0, 2, 1, 3});
  REQUIRE(r.evicted.size() == 2);
  CHECK(r.evicted[0] == ember::KeyRow{3, 2});
  CHECK(r.evicted[1] == ember::KeyRow{4, 3});
}

TEST_CASE("a key repeated in a batch holds one row", "[key_index]") {
  // Capacity 4: the batch (7 keys) could be refused; capacity 8: it cannot, and the lookup pass
  // writes the rows at once. Either way 1 holds one row and 2, 3, 4 (the smallest other keys of
  // step 0) make room for 15, 16 and 17.
  for (const EvictionPolicy policy : {EvictionPolicy::lru, EvictionPolicy::lfu}) {
    for (const Index capacity : {4, 8}) {
      INFO("policy " << static_cast<int>(policy) << ", capacity " << capacity);
      KeyIndex index(capacity, {.policy = policy});
      std::vector<std::uint64_t> start{1, 2, 3, 4, 11, 12, 13, 14};
      start.resize(static_cast<std::size_t>(capacity));
      std::vector<TokenId> rows(start.size());
      index.find_or_insert(start, rows, 0);
      const std::vector<std::uint64_t> batch{1, 15, 1, 16, 1, 17, 1};
      CHECK(index.check_insert(batch, 1) == 4);
      std::vector<TokenId> out(batch.size());
      const auto r = index.find_or_insert(batch, out, 1);
      CHECK(out == std::vector<TokenId>{0, 1, 0, 2, 0, 3, 0});
      CHECK(r.hits == 4);
      CHECK(std::vector<ember::KeyRow>(r.evicted.begin(), r.evicted.end()) ==
            std::vector<ember::KeyRow>{{2, 1}, {3, 2}, {4, 3}});
      const auto entries = entries_of(index);
      const auto e = std::find_if(entries.begin(), entries.end(),
                                  [](const ember::KeyEntry& k) { return k.key == 1; });
      REQUIRE(e != entries.end());
      CHECK(e->count == 5);
      CHECK(e->last_step == 1);
    }
  }
}

TEST_CASE("a batch needing more rows than can be freed throws CapacityError, changing nothing",
          "[key_index]") {
  KeyIndex index(4, {.policy = EvictionPolicy::lfu, .min_count = 1});
  std::vector<TokenId> rows(3);
  const std::vector<std::uint64_t> first{1, 2, 3};
  index.find_or_insert(first, rows, 0);
  const auto before = entries_of(index);
  const std::vector<std::uint64_t> big{1, 2, 3, 4, 5};
  std::vector<TokenId> out(5, -9);
  const auto e =
      ember_test::catch_as<ember::CapacityError>([&] { index.find_or_insert(big, out, 1); });
  REQUIRE(e);
  CHECK(e->capacity() == 4);
  CHECK(e->needed() == 5);
  CHECK_THAT(e->what(), Catch::Contains("needs 5 rows at once") && Catch::Contains("capacity 4"));
  CHECK(dynamic_cast<const std::length_error*>(&*e) != nullptr);
  CHECK(entries_of(index) == before);
  CHECK(out == std::vector<TokenId>(5, -9));
  CHECK(index.last_step() == 0);
  CHECK_THROWS_AS(index.check_insert(big, 1), ember::CapacityError);
  CHECK(index.check_insert(std::vector<std::uint64_t>{1, 9}, 1) == 2);
  CHECK(entries_of(index) == before);

  KeyIndex none(2, {.policy = EvictionPolicy::none});
  std::vector<TokenId> two(2);
  none.find_or_insert(std::vector<std::uint64_t>{7, 8}, two, 0);
  std::vector<TokenId> one(1);
  const auto f = ember_test::catch_as<ember::CapacityError>(
      [&] { none.find_or_insert(std::vector<std::uint64_t>{9}, one, 0); });
  REQUIRE(f);
  CHECK(f->needed() == 3);
  CHECK_THAT(f->what(), Catch::Contains("no eviction"));
}

TEST_CASE("admission: a key gets a row at its min_count-th sighting, read the fallback before",
          "[key_index]") {
  KeyIndex index(8, {.min_count = 3, .sketch_width = 1024, .fallback_row = -1});
  std::vector<TokenId> row(1);
  const std::vector<std::uint64_t> k{77};
  auto r = index.find_or_insert(k, row, 0);
  CHECK(row[0] == KeyIndex::no_row);
  CHECK(r.fallbacks == 1);
  CHECK(index.admission_count(77) == 1);
  r = index.find_or_insert(k, row, 1);
  CHECK(row[0] == KeyIndex::no_row);
  CHECK(index.admission_count(77) == 2);
  CHECK(index.size() == 0);
  r = index.find_or_insert(k, row, 2);
  CHECK(row[0] == 0);
  CHECK(r.inserted == 1);
  REQUIRE(index.entry(77));
  CHECK(index.entry(77)->count == 1);  // sightings since it got its row: this batch's
  // Three sightings in one batch admit at once; all of its positions read the row.
  std::vector<TokenId> rows(4);
  index.find_or_insert(std::vector<std::uint64_t>{5, 6, 5, 5}, rows, 3);
  CHECK(rows == std::vector<TokenId>{1, -1, 1, 1});
  // counts pre-aggregate sightings.
  std::vector<TokenId> one(1);
  const std::vector<std::int64_t> three{3};
  index.find_or_insert(std::vector<std::uint64_t>{40}, one, 4, {}, three);
  CHECK(one[0] == 2);
}

TEST_CASE("admission counts halve every sketch_half_life steps", "[key_index]") {
  KeyIndex index(8, {.min_count = 4, .sketch_width = 1024, .sketch_half_life = 10});
  std::vector<TokenId> rows(3);
  index.find_or_insert(std::vector<std::uint64_t>{1, 1, 1}, rows, 0);
  CHECK(index.admission_count(1) == 3);
  std::vector<TokenId> row(1);
  index.find_or_insert(std::vector<std::uint64_t>{2}, row, 10);  // one halving: 3 -> 1
  CHECK(index.admission_count(1) == 1);
  index.find_or_insert(std::vector<std::uint64_t>{1}, row, 11);
  CHECK(row[0] == KeyIndex::no_row);  // 1 + 1 < 4
  CHECK(index.admission_count(1) == 2);
}

TEST_CASE("a reserved fallback row is never given to a key", "[key_index]") {
  KeyIndex index(3, {.fallback_row = 0});
  CHECK(index.key_capacity() == 2);
  std::vector<TokenId> rows(3);
  index.find_or_insert(std::vector<std::uint64_t>{4, 5}, std::span<TokenId>(rows.data(), 2), 0);
  CHECK(rows[0] == 1);
  CHECK(rows[1] == 2);
  const auto r =
      index.find_or_insert(std::vector<std::uint64_t>{6}, std::span<TokenId>(rows.data(), 1), 1);
  CHECK(rows[0] != 0);
  CHECK(r.evicted.size() == 1);
  CHECK(index.find(std::uint64_t{4}) == 0);  // evicted: reads the fallback row 0
}

TEST_CASE("decayed lfu forgets old sightings", "[key_index]") {
  KeyIndex index(2, {.policy = EvictionPolicy::lfu, .lfu_half_life = 1});
  std::vector<TokenId> rows(8);
  index.find_or_insert(std::vector<std::uint64_t>{1, 1, 1, 1, 1, 1, 1, 1}, rows, 0);
  std::vector<TokenId> two(2);
  index.find_or_insert(std::vector<std::uint64_t>{2, 2}, two, 5);  // 1: 8 · 2^-5 = 0.25 now
  CHECK(index.entry(1)->score == 0.25);
  CHECK(index.entry(2)->score == 2.0);
  CHECK(index.entry(1)->count == 8);
  std::vector<TokenId> one(1);
  const auto r = index.find_or_insert(std::vector<std::uint64_t>{3}, one, 5);
  REQUIRE(r.evicted.size() == 1);
  CHECK(r.evicted[0].key == 1);  // 8 sightings, but old ones
}

TEST_CASE("insert, erase, clear and iteration", "[key_index]") {
  KeyIndex index(5, {.policy = EvictionPolicy::lru, .min_count = 10});
  std::vector<TokenId> rows(3);
  const auto r = index.insert(std::vector<std::uint64_t>{9, 8, 9}, rows, 2);  // no admission
  CHECK(rows == std::vector<TokenId>{0, 1, 0});
  CHECK(r.inserted == 2);
  CHECK(index.entry(9)->count == 2);
  CHECK(index.erase(9));
  CHECK(!index.erase(9));
  CHECK(index.size() == 1);
  std::vector<TokenId> more(2);
  index.insert(std::vector<std::uint64_t>{4, 5}, more, 3);
  CHECK(more == std::vector<TokenId>{0, 2});  // the lowest free row first
  std::vector<std::uint64_t> seen;
  for (const ember::KeyEntry& e : index) seen.push_back(e.key);
  CHECK(seen == std::vector<std::uint64_t>{4, 8, 5});
  std::vector<TokenId> four(4);
  CHECK_THROWS_AS(index.insert(std::vector<std::uint64_t>{20, 21, 22, 23}, four, 3),
                  ember::CapacityError);
  CHECK(index.size() == 3);
  index.clear();
  CHECK(index.empty());
  CHECK(index.begin() == index.end());
  CHECK(index.last_step() == -1);
}

TEST_CASE("resize grows keeping every row, shrinks by the policy", "[key_index]") {
  KeyIndex index(6, {.policy = EvictionPolicy::lru});
  std::vector<TokenId> rows(1);
  for (std::uint64_t k = 0; k < 6; ++k)
    index.find_or_insert(std::vector<std::uint64_t>{100 + k}, rows, static_cast<std::int64_t>(k));
  const auto grown = index.resize(10);
  CHECK(grown.evicted.empty());
  CHECK(grown.moved.empty());
  CHECK(index.capacity() == 10);
  CHECK(index.find(std::uint64_t{105}) == 5);
  index.find_or_insert(std::vector<std::uint64_t>{101}, rows, 7);  // 101 now the most recent
  const auto shrunk = index.resize(3);
  CHECK(shrunk.evicted ==
        std::vector<ember::KeyRow>{{100, 0}, {102, 2}, {103, 3}});  // the least recent first
  CHECK(shrunk.moved == std::vector<std::pair<TokenId, TokenId>>{{4, 0}, {5, 2}});
  CHECK(index.find(std::uint64_t{101}) == 1);
  CHECK(index.find(std::uint64_t{104}) == 0);
  CHECK(index.find(std::uint64_t{105}) == 2);
  CHECK(index.size() == 3);
  std::vector<TokenId> r2(1);
  index.find_or_insert(std::vector<std::uint64_t>{1}, r2, 8);
  CHECK(r2[0] == 0);  // evicted 104 (step 4), the least recent
  KeyIndex none(4, {.policy = EvictionPolicy::none});
  std::vector<TokenId> three(3);
  none.insert(std::vector<std::uint64_t>{1, 2, 3}, three, 0);
  CHECK_THROWS_AS(none.resize(2), ember::CapacityError);
  CHECK(none.capacity() == 4);
}

TEST_CASE("the same stream gives the same mapping for any thread count", "[key_index]") {
  std::vector<std::vector<TokenId>> results;
  for (const int threads : {1, 2, 3}) {
    ember_test::ScopedThreads scoped(threads);
    KeyIndex index(5000, {.policy = EvictionPolicy::lru});
    Stream stream(21, 20000);
    std::vector<TokenId> all;
    for (int b = 0; b < 6; ++b) {
      const auto keys = stream.batch(6000);
      std::vector<TokenId> rows(keys.size());
      index.find_or_insert(keys, rows, b);
      all.insert(all.end(), rows.begin(), rows.end());
      const auto found = index.find(keys);
      CHECK(found == rows);
    }
    results.push_back(all);
  }
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

TEST_CASE("steps more than 2^32 apart keep the order of the recent ones", "[key_index]") {
  KeyIndex index(3, {.policy = EvictionPolicy::lru});
  std::vector<TokenId> row(1);
  index.find_or_insert(std::vector<std::uint64_t>{1}, row, 0);
  index.find_or_insert(std::vector<std::uint64_t>{2}, row, 5);
  const std::int64_t far = std::int64_t{1} << 40;
  index.find_or_insert(std::vector<std::uint64_t>{3}, row, far);
  CHECK(index.entry(3)->last_step == far);
  index.find_or_insert(std::vector<std::uint64_t>{4}, row, far + 1);
  CHECK(!index.contains(1));  // the oldest still goes first
  index.find_or_insert(std::vector<std::uint64_t>{5}, row, far + 2);
  CHECK(!index.contains(2));
  CHECK(index.contains(3));
}

TEST_CASE("lru order and last steps stay exact when steps are more than 2^32 apart",
          "[key_index]") {
  KeyIndex index(3, {.policy = EvictionPolicy::lru});
  std::vector<TokenId> row(1);
  index.find_or_insert(std::vector<std::uint64_t>{5}, row, 0);
  index.find_or_insert(std::vector<std::uint64_t>{3}, row, 1);
  const std::int64_t far = std::int64_t{1} << 33;
  index.find_or_insert(std::vector<std::uint64_t>{7}, row, far);
  CHECK(index.entry(5)->last_step == 0);
  CHECK(index.entry(3)->last_step == 1);
  CHECK(index.entry(7)->last_step == far);
  const auto result = index.find_or_insert(std::vector<std::uint64_t>{9}, row, far + 1);
  REQUIRE(result.evicted.size() == 1);
  CHECK(result.evicted[0].key == 5);  // seen longest ago
  index.find_or_insert(std::vector<std::uint64_t>{11}, row, std::int64_t{1} << 62);
  CHECK(!index.contains(3));
  CHECK(index.entry(7)->last_step == far);
  CHECK(index.entry(9)->last_step == far + 1);
  index.find_or_insert(std::vector<std::uint64_t>{13}, row,
                       std::numeric_limits<std::int64_t>::max());
  CHECK(!index.contains(7));
  CHECK(index.entry(13)->last_step == std::numeric_limits<std::int64_t>::max());
}

TEST_CASE("KeyIndex matches its reference bit for bit with steps up to 2^33 apart", "[key_index]") {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    compare_stream(32, {.policy = EvictionPolicy::lru}, seed, 300, 90, 24, false, true, true);
    compare_stream(32, {.policy = EvictionPolicy::lfu}, seed, 300, 90, 24, true, false, true);
    compare_stream(32, {.policy = EvictionPolicy::lfu, .lfu_half_life = 1}, seed, 300, 90, 24, true,
                   true, true);
    compare_stream(32, {.policy = EvictionPolicy::score}, seed, 300, 90, 24, false, true, true);
  }
}

TEST_CASE("resize keeps the order of keys seen more than 2^31 steps ago", "[key_index]") {
  KeyIndex index(6, {.policy = EvictionPolicy::lru});
  std::vector<TokenId> row(1);
  const std::int64_t far = std::int64_t{1} << 34;
  for (std::uint64_t k = 0; k < 6; ++k) {  // keys 0..5 on rows 0..5, the first three long ago
    const auto step = static_cast<std::int64_t>(k < 3 ? 4 + 3 * k : std::uint64_t(far) + k);
    index.find_or_insert(std::vector<std::uint64_t>{k}, row, step);
  }
  const auto result = index.resize(4);
  CHECK(result.evicted == std::vector<ember::KeyRow>{{0, 0}, {1, 1}});  // steps 4 and 7 first
  CHECK(index.entry(2)->last_step == 10);
  CHECK(index.entry(5)->last_step == far + 5);
  const auto next = index.find_or_insert(std::vector<std::uint64_t>{6}, row, far + 9);
  REQUIRE(next.evicted.size() == 1);
  CHECK(next.evicted[0].key == 2);
}

TEST_CASE("decayed lfu keeps the order of keys unseen for hundreds of half-lives", "[key_index]") {
  KeyIndex index(4, {.policy = EvictionPolicy::lfu, .lfu_half_life = 1});
  const auto map = [&](std::vector<std::uint64_t> keys, std::int64_t step) {
    std::vector<TokenId> rows(keys.size());
    const auto result = index.find_or_insert(keys, rows, step);
    return std::vector<ember::KeyRow>(result.evicted.begin(), result.evicted.end());
  };
  map({1, 1, 1, 2}, 0);  // 3:1
  for (std::int64_t step = 0; step <= 300; ++step) map({100, 200}, step);
  CHECK(index.entry(1)->score > index.entry(2)->score);
  CHECK(index.entry(1)->score == std::ldexp(3.0, -300));  // 3 · 2^-300 against 2^-300
  CHECK(map({300}, 301) == std::vector<ember::KeyRow>{{2, 1}});
  // Past a double's range the scores read 0, and the order still holds: 3 sightings at step 0
  // against one at step 1 (2 at step 0), which the older step alone would evict first.
  index.clear();
  map({1, 1, 1}, 2002);
  map({2}, 2003);
  for (std::int64_t step = 2004; step <= 4000; ++step) map({100, 200}, step);
  CHECK(index.entry(1)->score == 0.0);
  CHECK(index.entry(2)->score == 0.0);
  CHECK(map({500}, 4001) == std::vector<ember::KeyRow>{{2, 1}});
}

TEST_CASE("decayed lfu refuses steps more than 2^39 half-lives after the first", "[key_index]") {
  KeyIndex index(4, {.policy = EvictionPolicy::lfu, .lfu_half_life = 4});
  std::vector<TokenId> row(1);
  index.find_or_insert(std::vector<std::uint64_t>{1}, row, 100);
  const std::int64_t end = 100 + (std::int64_t{1} << 39) * 4;
  index.find_or_insert(std::vector<std::uint64_t>{2}, row, end + 3);  // epoch 2^39: the last
  const auto before = entries_of(index);
  const auto e = ember_test::catch_as<ember::ValueError>(
      [&] { index.find_or_insert(std::vector<std::uint64_t>{3}, row, end + 4); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("2^39 half-lives"));
  CHECK(entries_of(index) == before);
  CHECK(index.last_step() == end + 3);
  KeyIndex plain(4, {.policy = EvictionPolicy::lfu});  // without decay no step is too late
  plain.find_or_insert(std::vector<std::uint64_t>{1}, row, 0);
  plain.find_or_insert(std::vector<std::uint64_t>{2}, row,
                       std::numeric_limits<std::int64_t>::max());
  CHECK(plain.size() == 2);
}

TEST_CASE("KeyIndex refuses bad options and bad batches, changing nothing", "[key_index]") {
  CHECK_THROWS_AS(KeyIndex(0), ember::ValueError);
  CHECK_THROWS_WITH(KeyIndex(0), Catch::Contains("capacity 0 is outside [1, "));
  CHECK_THROWS_AS(KeyIndex(-3), ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(KeyIndex::max_capacity + 1), ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(4, {.min_count = -1}), ember::ValueError);
  CHECK_THROWS_WITH(KeyIndex(4, {.min_count = -1}), Catch::Contains("min_count -1"));
  CHECK_THROWS_AS(KeyIndex(4, {.min_count = 70000}), ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(4, {.lfu_half_life = 3}), ember::ValueError);  // policy lru
  CHECK_THROWS_AS(KeyIndex(4, {.policy = EvictionPolicy::lfu, .lfu_half_life = -1}),
                  ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(4, {.sketch_half_life = -2}), ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(4, {.sketch_width = -1}), ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(4, {.fallback_row = -2}), ember::ValueError);
  CHECK_THROWS_AS(KeyIndex(1, {.fallback_row = 0}), ember::ValueError);
  CHECK_NOTHROW(KeyIndex(4, {.min_count = 0}));

  KeyIndex index(4, {.policy = EvictionPolicy::score});
  std::vector<TokenId> rows(2, -5);
  const std::vector<std::uint64_t> keys{1, 2};
  CHECK_THROWS_AS(index.find_or_insert(keys, rows, 0), ember::ShapeError);  // no scores
  const std::vector<double> nan{1.0, std::nan("")};
  CHECK_THROWS_WITH(index.find_or_insert(keys, rows, 0, nan),
                    Catch::Contains("at position 1 is not finite"));
  const std::vector<double> ok{1.0, 2.0};
  const std::vector<std::int64_t> zero{1, 0};
  CHECK_THROWS_WITH(index.find_or_insert(keys, rows, 0, ok, zero),
                    Catch::Contains("count 0 at position 1 is below 1"));
  std::vector<TokenId> short_rows(1);
  CHECK_THROWS_AS(index.find_or_insert(keys, short_rows, 0, ok), ember::ShapeError);
  CHECK_THROWS_AS(index.find_or_insert(keys, rows, -1, ok), ember::ValueError);
  index.find_or_insert(keys, rows, 5, ok);
  const auto before = entries_of(index);
  CHECK_THROWS_WITH(index.find_or_insert(keys, rows, 4, ok),
                    Catch::Contains("step 4 is below the last step 5"));
  CHECK(entries_of(index) == before);
  KeyIndex lru(4);
  CHECK_THROWS_AS(lru.find_or_insert(keys, rows, 0, ok), ember::ShapeError);  // scores unused
  CHECK(lru.empty());
}

TEST_CASE("KeyIndex memory stays near 24 bytes a row", "[key_index]") {
  KeyIndex index(1 << 16, {.policy = EvictionPolicy::lru});
  Stream stream(3, 1 << 18);
  for (int b = 0; b < 8; ++b) {
    const auto keys = stream.batch(40000);
    std::vector<TokenId> rows(keys.size());
    index.find_or_insert(keys, rows, b);
  }
  CHECK(index.size() == index.capacity());
  const double per_row =
      static_cast<double>(index.memory_bytes()) / static_cast<double>(index.capacity());
  INFO("bytes per row: " << per_row);
  CHECK(per_row <= 24.0);
  CHECK(index.sketch_bytes() == 0);
}
