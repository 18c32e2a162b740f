// Tests for ember/random.hpp: the portable xoshiro256** generator and its variates.
// SPDX-License-Identifier: MIT
#include "ember/random.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// An independent transcription of the published reference algorithms, used to check ember's:
// SplitMix64 (Steele, Lea & Flood; Vigna's splitmix64.c) and xoshiro256** 1.0 (Blackman & Vigna,
// xoshiro256starstar.c), seeded the way Vigna recommends: four consecutive SplitMix64 outputs.
std::uint64_t reference_splitmix64(std::uint64_t& state) {
  state += 0x9e3779b97f4a7c15ULL;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t reference_rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

struct ReferenceXoshiro {
  std::array<std::uint64_t, 4> s{};

  explicit ReferenceXoshiro(std::uint64_t seed) {
    std::uint64_t sm = seed;
    for (auto& word : s) word = reference_splitmix64(sm);
  }

  std::uint64_t next() {
    const std::uint64_t result = reference_rotl(s[1] * 5, 7) * 9;
    const std::uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = reference_rotl(s[3], 45);
    return result;
  }
};

struct Moments {
  double mean = 0.0;
  double stddev = 0.0;
};

Moments moments(const std::vector<double>& xs) {
  double sum = 0.0;
  for (const double x : xs) sum += x;
  const double mean = sum / static_cast<double>(xs.size());
  double sq = 0.0;
  for (const double x : xs) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / static_cast<double>(xs.size() - 1))};
}

}  // namespace

TEST_CASE("the reference SplitMix64 reproduces its published first output", "[random]") {
  // 0xe220a8397b1dcdaf is the published first SplitMix64 output for seed 0 (a widely quoted test
  // vector of the reference splitmix64.c); it anchors the independent reference below to the
  // outside world, so the golden values are not merely ember checking itself.
  std::uint64_t state = 0;
  CHECK(reference_splitmix64(state) == 0xe220a8397b1dcdafULL);
  CHECK(reference_splitmix64(state) == 0x6e789e6aa1b965f4ULL);
}

TEST_CASE("next_u64 matches an independent xoshiro256** seeded by SplitMix64", "[random]") {
  for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{42},
                                   std::uint64_t{0xdeadbeef}, ~std::uint64_t{0}}) {
    CAPTURE(seed);
    ember::Random rng(seed);
    ReferenceXoshiro ref(seed);
    for (int i = 0; i < 1000; ++i) REQUIRE(rng.next_u64() == ref.next());
  }
}

TEST_CASE("golden values: the stream of a seed is the same on every platform", "[random]") {
  // Cross-platform reproducibility check. These constants were recorded once from ember and
  // agree with the independent reference above (itself anchored by the published SplitMix64
  // value). The generator uses only 64-bit unsigned arithmetic, which C++ defines exactly, so
  // every compiler, standard library and CPU must print these very numbers; a failure here means
  // seeds no longer reproduce tables saved elsewhere. Do not "update" them without a major
  // version bump.
  SECTION("seed 0") {
    ember::Random rng(0);
    CHECK(rng.next_u64() == 0x99ec5f36cb75f2b4ULL);
    CHECK(rng.next_u64() == 0xbf6e1f784956452aULL);
    CHECK(rng.next_u64() == 0x1a5f849d4933e6e0ULL);
    CHECK(rng.next_u64() == 0x6aa594f1262d2d2cULL);
  }
  SECTION("seed 42") {
    ember::Random rng(42);
    CHECK(rng.next_u64() == 0x15780b2e0c2ec716ULL);
    CHECK(rng.next_u64() == 0x6104d9866d113a7eULL);
    CHECK(rng.next_u64() == 0xae17533239e499a1ULL);
    CHECK(rng.next_u64() == 0xecb8ad4703b360a1ULL);
  }
  SECTION("uniform() is exact: the top 53 bits times 2^-53") {
    ember::Random rng(42);
    CHECK(rng.uniform() == static_cast<double>(0x15780b2e0c2ec716ULL >> 11) * 0x1.0p-53);
    CHECK(rng.uniform() == 0.37898025066266861);
  }
  SECTION("normal() for seed 0, to a few ulps (it calls std::log)") {
    ember::Random rng(0);
    CHECK_THAT(rng.normal(), WithinRel(0.5981026483626094, 1e-14));
    CHECK_THAT(rng.normal(), WithinRel(1.4634599192204392, 1e-14));
    CHECK_THAT(rng.normal(), WithinRel(-0.89505255323799138, 1e-14));
    CHECK_THAT(rng.normal(), WithinRel(-0.1880627660388742, 1e-14));
  }
}

TEST_CASE("the same seed gives the same stream and different seeds differ", "[random]") {
  ember::Random a(123);
  ember::Random b(123);
  ember::Random c(124);
  int equal_to_c = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t x = a.next_u64();
    REQUIRE(x == b.next_u64());
    if (x == c.next_u64()) ++equal_to_c;
  }
  CHECK(equal_to_c == 0);

  // Mixed variates stay in lockstep too, including the cached second normal of each pair.
  ember::Random d(7);
  ember::Random e(7);
  for (int i = 0; i < 100; ++i) {
    REQUIRE(d.normal() == e.normal());
    REQUIRE(d.uniform() == e.uniform());
    REQUIRE(d.uniform_index(17) == e.uniform_index(17));
    REQUIRE(d.truncated_normal(1.0, 2.0) == e.truncated_normal(1.0, 2.0));
  }

  // The default seed is 0, and a copy continues the same stream.
  ember::Random dflt;
  ember::Random zero(0);
  CHECK(dflt.next_u64() == zero.next_u64());
  ember::Random copy = zero;
  for (int i = 0; i < 10; ++i) REQUIRE(copy.next_u64() == zero.next_u64());
}

TEST_CASE("uniform() lies in 0 to 1 and uniform(a, b) in a to b, upper bound excluded",
          "[random]") {
  ember::Random rng(5);
  double lo = 1.0;
  double hi = 0.0;
  double sum = 0.0;
  constexpr int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  CHECK(lo < 1e-3);
  CHECK(hi > 1.0 - 1e-3);
  CHECK_THAT(sum / n, WithinAbs(0.5, 0.005));

  for (int i = 0; i < 10000; ++i) {
    const double v = rng.uniform(-3.0, 2.5);
    REQUIRE(v >= -3.0);
    REQUIRE(v < 2.5);
  }
}

TEST_CASE("uniform_index stays in range and is close to unbiased", "[random]") {
  ember::Random rng(11);
  SECTION("n = 1 always gives 0") {
    for (int i = 0; i < 1000; ++i) REQUIRE(rng.uniform_index(1) == 0);
  }
  SECTION("n = 10: every value about equally often") {
    constexpr int n = 100000;
    std::array<int, 10> counts{};
    for (int i = 0; i < n; ++i) {
      const std::uint64_t k = rng.uniform_index(10);
      REQUIRE(k < 10);
      ++counts[k];
    }
    for (std::size_t k = 0; k < counts.size(); ++k) {
      CAPTURE(k);
      // expected 10000 each, standard deviation ~95: 500 is over 5 sigma.
      CHECK(std::abs(counts[k] - n / 10) < 500);
    }
  }
  SECTION("n = 3 (not a power of two) and a huge n just above 2^63") {
    std::array<int, 3> counts{};
    for (int i = 0; i < 30000; ++i) ++counts[rng.uniform_index(3)];
    for (const int c : counts) CHECK(std::abs(c - 10000) < 500);

    // n = 3 * 2^62: a plain `x % n` would give the values below 2^62 twice the weight of the
    // others (P = 1/2 instead of 1/3); rejection sampling must restore 1/3.
    const std::uint64_t huge = std::uint64_t{3} << 62;
    int low = 0;
    for (int i = 0; i < 3000; ++i) {
      const std::uint64_t k = rng.uniform_index(huge);
      REQUIRE(k < huge);
      if (k < (std::uint64_t{1} << 62)) ++low;
    }
    CHECK(std::abs(low - 1000) < 120);  // binomial sd ~26; a biased draw gives ~1500
  }
}

TEST_CASE("normal() has mean 0 and standard deviation 1", "[random]") {
  ember::Random rng(2024);
  constexpr int n = 200000;
  std::vector<double> xs(n);
  int within_one = 0;
  for (auto& x : xs) {
    x = rng.normal();
    REQUIRE(std::isfinite(x));
    if (std::abs(x) < 1.0) ++within_one;
  }
  const Moments m = moments(xs);
  CHECK_THAT(m.mean, WithinAbs(0.0, 0.01));
  CHECK_THAT(m.stddev, WithinAbs(1.0, 0.01));
  // Shape, not just moments: P(|Z| < 1) = 0.6827.
  CHECK_THAT(within_one / static_cast<double>(n), WithinAbs(0.6827, 0.005));

  // normal(mean, stddev) is mean + stddev * Z.
  ember::Random a(3);
  ember::Random b(3);
  for (int i = 0; i < 100; ++i) REQUIRE(a.normal(5.0, 0.5) == 5.0 + b.normal() * 0.5);
}

TEST_CASE("truncated_normal never goes beyond k standard deviations", "[random]") {
  ember::Random rng(99);
  for (const double k : {2.0, 1.0, 0.25}) {
    CAPTURE(k);
    for (int i = 0; i < 20000; ++i) {
      const double v = rng.truncated_normal(3.0, 0.5, k);
      REQUIRE(v >= 3.0 - k * 0.5);
      REQUIRE(v <= 3.0 + k * 0.5);
    }
  }
  // Default k = 2: the standard deviation of N(0, 1) truncated to [-2, 2] is 0.8796.
  constexpr int n = 100000;
  std::vector<double> xs(n);
  for (auto& x : xs) {
    x = rng.truncated_normal(0.0, 1.0);
    REQUIRE(std::abs(x) <= 2.0);
  }
  const Moments m = moments(xs);
  CHECK_THAT(m.mean, WithinAbs(0.0, 0.01));
  CHECK_THAT(m.stddev, WithinAbs(0.8796, 0.01));
}
