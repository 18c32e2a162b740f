/// A portable, seeded random generator (xoshiro256**) with uniform and normal variates whose
/// values are defined by ember, not by the standard library.
// SPDX-License-Identifier: MIT
#pragma once

#include <cmath>
#include <cstdint>

#include "ember/config.hpp"

namespace ember::inline EMBER_ISA {

/// Seeded pseudo-random generator: xoshiro256** (Blackman & Vigna), seeded through SplitMix64.
///
/// Every variate is computed by ember's own code (std::normal_distribution's algorithm is
/// implementation-defined), so a seed gives the same stream on every compiler and library: the
/// integer stream and uniform() exactly; normal() (Marsaglia polar) up to the last bit of libm's
/// std::log. Every product is rounded before it is added (detail::rounded), so builds with and
/// without FMA give the same stream.
///
/// Not thread-safe: use one generator per thread.
class Random {
 public:
  /// Seeds the four state words from `seed` through SplitMix64 (any seed, including 0, is fine).
  explicit Random(std::uint64_t seed = 0) noexcept {
    std::uint64_t x = seed;
    for (auto& word : s_) word = splitmix64(x);
  }

  /// The next 64 random bits.
  std::uint64_t next_u64() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Uniform double in [0, 1) with 53 random bits (exact on every platform).
  double uniform() noexcept { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  /// Uniform double in [a, b).
  double uniform(double a, double b) noexcept { return a + detail::rounded(uniform() * (b - a)); }

  /// Uniform integer in [0, n) for n > 0, unbiased (rejects the low 2^64 mod n values).
  std::uint64_t uniform_index(std::uint64_t n) noexcept {
    const std::uint64_t threshold = (0 - n) % n;
    std::uint64_t x = next_u64();
    while (x < threshold) x = next_u64();
    return x % n;
  }

  /// Standard normal variate N(0, 1), Marsaglia polar method; variates come in pairs and the
  /// second of each pair is returned by the next call.
  double normal() noexcept {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u = 0.0;
    double v = 0.0;
    double s = 0.0;
    do {
      u = uniform(-1.0, 1.0);
      v = uniform(-1.0, 1.0);
      s = detail::rounded(u * u) + detail::rounded(v * v);
    } while (s >= 1.0 || s == 0.0);
    const double factor = std::sqrt((-2.0 * std::log(s)) / s);
    spare_ = v * factor;
    has_spare_ = true;
    return u * factor;
  }

  /// Normal variate N(mean, stddev^2).
  double normal(double mean, double stddev) noexcept {
    return mean + detail::rounded(normal() * stddev);
  }

  /// Normal variate N(mean, stddev^2) truncated to mean ± k·stddev by resampling (TensorFlow's
  /// truncated_normal, PyTorch's trunc_normal_ with a = -k·std, b = k·std). Requires k > 0.
  double truncated_normal(double mean, double stddev, double k = 2.0) noexcept {
    double z = normal();
    while (std::fabs(z) > k) z = normal();
    return mean + detail::rounded(z * stddev);
  }

 private:
  static constexpr std::uint64_t rotl(std::uint64_t x, int k) noexcept {
    return (x << k) | (x >> (64 - k));
  }
  static constexpr std::uint64_t splitmix64(std::uint64_t& x) noexcept {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t s_[4]{};
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace ember::inline EMBER_ISA
