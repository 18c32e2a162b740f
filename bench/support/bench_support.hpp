// Shared pieces of ember's benchmark suite: the sizes, seeded uniform and Zipf id generators, a
// cache flusher for the "cold" variants, the byte/token counters and a main() that reports the
// thread count and the optional baselines found.
// SPDX-License-Identifier: MIT
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

#include <ember/config.hpp>
#include <ember/embedding.hpp>

#if defined(EMBER_BENCH_HAVE_TORCH)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace ember_bench {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

/// A model size of the suite.
struct Shape {
  const char* name;
  Index vocab;
  Index d;
};

/// GPT-2 small and Transformer base (Vaswani et al.) vocabularies and widths.
inline const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all{{"gpt2", 50257, 768}, {"base", 37000, 512}};
  return all;
}

/// One training batch: B = 8 sequences of T = 512 tokens.
inline constexpr Index kBatch = 8;
inline constexpr Index kSeqLen = 512;
inline constexpr Index kTokens = kBatch * kSeqLen;

/// Id distributions: uniform over the vocabulary, or Zipf with exponent 1.1 (real text is skewed)
/// over a fixed random permutation of the ids (so frequent ids are not neighbours in the table).
enum class Dist { uniform, zipf };
inline const char* name_of(Dist dist) { return dist == Dist::uniform ? "uniform" : "zipf"; }

inline constexpr double kZipfExponent = 1.1;
inline constexpr std::uint64_t kIdSeed = 20240601;

/// n ids in [0, vocab), fixed seed.
inline std::vector<TokenId> make_ids(Index n, Index vocab, Dist dist,
                                     std::uint64_t seed = kIdSeed) {
  std::mt19937_64 rng(seed);
  std::vector<TokenId> ids(static_cast<std::size_t>(n));
  if (dist == Dist::uniform) {
    std::uniform_int_distribution<TokenId> pick(0, vocab - 1);
    for (auto& id : ids) id = pick(rng);
    return ids;
  }
  // Inverse CDF of P(rank r) ∝ r^-s, r = 1..vocab.
  std::vector<double> cdf(static_cast<std::size_t>(vocab));
  double total = 0.0;
  for (Index r = 0; r < vocab; ++r) {
    total += std::pow(static_cast<double>(r + 1), -kZipfExponent);
    cdf[static_cast<std::size_t>(r)] = total;
  }
  std::vector<TokenId> id_of_rank(static_cast<std::size_t>(vocab));
  std::iota(id_of_rank.begin(), id_of_rank.end(), TokenId{0});
  std::mt19937_64 perm_rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::shuffle(id_of_rank.begin(), id_of_rank.end(), perm_rng);
  std::uniform_real_distribution<double> unit(0.0, total);
  for (auto& id : ids) {
    const auto it = std::lower_bound(cdf.begin(), cdf.end(), unit(rng));
    const auto rank = std::min<std::ptrdiff_t>(it - cdf.begin(), vocab - 1);
    id = id_of_rank[static_cast<std::size_t>(rank)];
  }
  return ids;
}

/// The table of a shape, built once per process (a GPT-2 table is 154 MB and takes a while to
/// initialise) and shared by every benchmark of that shape.
inline const ember::Embedding<float>& table_for(const Shape& shape) {
  static std::map<std::pair<Index, Index>, std::unique_ptr<ember::Embedding<float>>> cache;
  auto& slot = cache[{shape.vocab, shape.d}];
  if (!slot) slot = std::make_unique<ember::Embedding<float>>(shape.vocab, shape.d, 1);
  return *slot;
}

/// Cache state of a variant. Warm: the same ids every iteration, so the rows they touch stay in
/// cache (the whole GPT-2 table fits this machine's 480 MB L3). Cold: before every iteration,
/// with the timer paused, the cache lines of every table row the ids read and of the output are
/// evicted from all levels with clflushopt — exact and cheap, where streaming a buffer larger
/// than L3 would cost ~0.1 s per iteration.
/// A fast deterministic table fill (xorshift64*, values in [-0.05, 0.05)): Init::normal over
/// hundreds of millions of elements would dominate a run.
inline RowMatrix<float> fast_table(Index vocab, Index d) {
  RowMatrix<float> t(vocab, d);
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  float* p = t.data();
  for (Index k = 0; k < t.size(); ++k) {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    const auto bits = static_cast<std::uint32_t>((s * 0x2545F4914F6CDD1Dull) >> 40);  // 24 bits
    p[k] = (static_cast<float>(bits) / 16777216.0f - 0.5f) * 0.1f;
  }
  return t;
}

enum class Cache { warm, cold };
inline const char* name_of(Cache cache) { return cache == Cache::warm ? "warm" : "cold"; }

/// Evicts [data, data + bytes) from every cache level (no-op off x86).
inline void flush_range(const void* data, std::size_t bytes) {
#if defined(__x86_64__) || defined(_M_X64)
  const auto* p = static_cast<const char*>(data);
  const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{63};
  const auto end = reinterpret_cast<std::uintptr_t>(p) + bytes;
  for (std::uintptr_t line = begin; line < end; line += 64) {
    _mm_clflush(reinterpret_cast<const void*>(line));
  }
#else
  static_cast<void>(data);
  static_cast<void>(bytes);
#endif
}

/// Evicts the rows `ids` select from a row-major table of width d.
inline void flush_rows(const float* table, Index d, std::span<const TokenId> ids) {
  for (const TokenId id : ids) {
    flush_range(table + id * d, static_cast<std::size_t>(d) * sizeof(float));
  }
}

/// Ends a flush: later loads must not be reordered before the evictions.
inline void flush_fence() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_mfence();
#endif
}

/// Counters of a memory-bound op: bytes/s of useful bytes (rows read + output written; the
/// positional rows too for the fused op), tokens/s, and FBGEMM's "effective" bytes/s with every
/// row rounded up to 64 B, so figures compare with FBGEMM's own benchmark.
inline void set_memory_counters(benchmark::State& state, Index tokens, Index d, Index rows_read,
                                Index rows_written) {
  const auto row = static_cast<double>(d) * sizeof(float);
  const double padded = std::ceil(row / 64.0) * 64.0;
  const auto iters = static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * tokens);
  state.SetBytesProcessed(
      static_cast<std::int64_t>(iters * row * static_cast<double>(rows_read + rows_written)));
  state.counters["eff_bytes_per_second"] = benchmark::Counter(
      padded * static_cast<double>(rows_read + rows_written),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
}

/// GFLOP/s of a GEMM of `flops` per iteration (2·n·V·d for the logits).
inline void set_gflops(benchmark::State& state, double flops) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

/// Registers `fn` under "op/impl/size/..." — the name plot.py parses — timed in wall-clock time
/// (threads run in parallel).
inline benchmark::internal::Benchmark* add(const std::string& name,
                                           std::function<void(benchmark::State&)> fn) {
  return benchmark::RegisterBenchmark(name.c_str(), std::move(fn))->UseRealTime();
}

/// Threads the run uses: OMP_NUM_THREADS for ember, Eigen, LibTorch and OpenBLAS alike.
inline int threads() {
#if EMBER_HAS_OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#if defined(EMBER_BENCH_HAVE_TORCH)
/// A LibTorch view of an ember table, no copy.
inline at::Tensor torch_view(const float* data, Index rows, Index cols) {
  return at::from_blob(const_cast<float*>(data), {rows, cols}, at::TensorOptions(at::kFloat));
}
/// A LibTorch view of ids (int64, as at::embedding wants), no copy.
inline at::Tensor torch_ids(const std::vector<TokenId>& ids) {
  return at::from_blob(const_cast<TokenId*>(ids.data()), {static_cast<std::int64_t>(ids.size())},
                       at::TensorOptions(at::kLong));
}
#endif

/// One benchmark's figure over --benchmark_repetitions, for the ratio tables some binaries print
/// at the end: the "median" aggregate when it is reported (also with
/// --benchmark_report_aggregates_only), else the median of the reported iterations.
struct MedianOf {
  double median = -1;        ///< the "median" aggregate, when reported
  std::vector<double> runs;  ///< every reported iteration run
  /// True for the runs a MedianOf takes: iterations and the median aggregate.
  static bool wanted(const benchmark::BenchmarkReporter::Run& r) {
    using Run = benchmark::BenchmarkReporter::Run;
    return r.run_type == Run::RT_Iteration ||
           (r.run_type == Run::RT_Aggregate && r.aggregate_name == "median");
  }
  /// Records x, the figure of the wanted run r.
  void record(const benchmark::BenchmarkReporter::Run& r, double x) {
    if (r.run_type == benchmark::BenchmarkReporter::Run::RT_Aggregate) {
      median = x;
    } else {
      runs.push_back(x);
    }
  }
  [[nodiscard]] double value() const {
    if (median >= 0) return median;
    if (runs.empty()) return 0;
    std::vector<double> v = runs;
    std::sort(v.begin(), v.end());
    const std::size_t m = v.size() / 2;
    return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
  }
};

/// main() of every bench binary: sets LibTorch's threads to the run's, records the configuration
/// in the JSON context, registers the file's benchmarks and runs them.
inline int run_main(int argc, char** argv, const std::function<void()>& register_all) {
  const int t = threads();
#if defined(EMBER_BENCH_HAVE_TORCH)
  at::set_num_threads(t);
  benchmark::AddCustomContext("torch", "1");
#else
  benchmark::AddCustomContext("torch", "0");
#endif
#if defined(EMBER_BENCH_HAVE_CBLAS)
  benchmark::AddCustomContext("cblas", "1");
#else
  benchmark::AddCustomContext("cblas", "0");
#endif
#if defined(EIGEN_USE_BLAS)
  benchmark::AddCustomContext("eigen_use_blas", "1");
#else
  benchmark::AddCustomContext("eigen_use_blas", "0");
#endif
  benchmark::AddCustomContext("threads", std::to_string(t));
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace ember_bench
