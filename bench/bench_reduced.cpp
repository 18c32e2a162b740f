// Lookup throughput per storage format (float, half, bfloat16, int8 row-wise) on the same table
// and the same uniform random ids, in rows/s and in GB/s of table bytes read, raw and rounded up
// to whole 64-byte cache lines per row (FBGEMM's "effective" GB/s). At the end it prints each
// format's rows/s relative to float measured in this run, against the targets
// (half >= 1.6x, int8 >= 2.5x on tables larger than the last-level cache), for ids cut from a
// pool too large to stay in the LLC ("cold", the case the targets are about) and from the small
// pool this benchmark used before ("warm").
//
// Run (one line): GLIBC_TUNABLES=glibc.malloc.hugetlb=1 build/release/bench/bench_reduced
//        --benchmark_repetitions=5 --benchmark_report_aggregates_only [--benchmark_filter=...]
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <ember/embedding.hpp>
#include <ember/quantized.hpp>
#include <ember/random.hpp>
#include <ember/reduced.hpp>

#include "support/bench_support.hpp"

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

constexpr Index kIds = 8192;  // ids per iteration, uniform over the table

/// Ids in the pool an iteration's ids are cut from, one window of kIds after the other. "cold":
/// 2^22 ids (16 MB), so a row comes back only after ~500 iterations and the rows touched between
/// two visits (1.3 GB of float rows at 4M x 128) exceed the last-level cache: the case the
/// targets are about. "warm": 16 windows cycled, the pool this benchmark used before (131,072
/// ids); its rows (67 MB of float, 18 MB of int8 at 4M x 128) stay in a large LLC (480 MB on
/// the machine of bench/README.md), so it measures lookups that mostly hit the LLC.
constexpr Index kColdPool = Index{1} << 22;
constexpr Index kWarmPool = 16 * kIds;

/// All four formats of one V x d table, built once and shared by the benchmarks of that shape.
struct Tables {
  Index vocab = 0, dim = 0;
  std::unique_ptr<ember::Embedding<float>> f32;
  std::unique_ptr<ember::HalfEmbedding> f16;
  std::unique_ptr<ember::BFloat16Embedding> bf16;
  std::unique_ptr<ember::QuantizedEmbedding> int8;
};

Tables& tables(Index vocab, Index dim) {
  static Tables t;
  if (t.vocab != vocab || t.dim != dim) {
    t = Tables{};  // free the previous shape first: 4M x 128 in four formats is ~4.6 GB
    RowMatrix<float> f = ember_bench::fast_table(vocab, dim);
    t.f16 = std::make_unique<ember::HalfEmbedding>(RowMatrix<Eigen::half>(f.cast<Eigen::half>()));
    t.bf16 = std::make_unique<ember::BFloat16Embedding>(
        RowMatrix<Eigen::bfloat16>(f.cast<Eigen::bfloat16>()));
    t.int8 = std::make_unique<ember::QuantizedEmbedding>(f);
    t.f32 = std::make_unique<ember::Embedding<float>>(std::move(f));
    t.vocab = vocab;
    t.dim = dim;
  }
  return t;
}

/// `pool` uniform ids in [0, vocab), built once per (vocab, pool) and shared by every format.
const std::vector<TokenId>& id_pool(Index vocab, Index pool) {
  static std::map<std::pair<Index, Index>, std::vector<TokenId>> pools;
  auto& ids = pools[{vocab, pool}];
  if (ids.empty()) {
    ember::Random rng(100);
    ids.resize(static_cast<std::size_t>(pool));
    for (auto& id : ids)
      id = static_cast<TokenId>(rng.uniform_index(static_cast<std::uint64_t>(vocab)));
  }
  return ids;
}

void set_counters(benchmark::State& state, Index row_bytes) {
  const double rows = static_cast<double>(state.iterations()) * static_cast<double>(kIds);
  const auto effective = static_cast<double>((row_bytes + 63) / 64 * 64);
  state.counters["rows/s"] = benchmark::Counter(rows, benchmark::Counter::kIsRate);
  state.counters["GB/s"] =
      benchmark::Counter(rows * static_cast<double>(row_bytes) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["effGB/s"] =
      benchmark::Counter(rows * effective * 1e-9, benchmark::Counter::kIsRate);
  state.counters["row_bytes"] = static_cast<double>(row_bytes);
}

enum Format { kF32, kF16, kBF16, kInt8 };

template <Format F>
void BM_Lookup(benchmark::State& state) {
  const Index vocab = state.range(0), dim = state.range(1), pool = state.range(2);
  Tables& t = tables(vocab, dim);
  // Ids drawn ahead of time (a generator in the loop would be timed too), one window per
  // iteration.
  const std::vector<TokenId>& all = id_pool(vocab, pool);
  RowMatrix<float> out(kIds, dim);
  Index k = 0;
  for (auto _ : state) {
    const std::span<const TokenId> ids(all.data() + k * kIds, static_cast<std::size_t>(kIds));
    k = (k + 1) % (pool / kIds);
    if constexpr (F == kF32) t.f32->forward(ids, out);
    if constexpr (F == kF16) t.f16->forward(ids, out);
    if constexpr (F == kBF16) t.bf16->forward(ids, out);
    if constexpr (F == kInt8) t.int8->forward(ids, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const Index row_bytes = F == kF32 ? dim * 4 : F == kInt8 ? t.int8->row_bytes() : dim * 2;
  set_counters(state, row_bytes);
}

// Registered shape by shape (all formats of one shape together) so each table is built once.
void register_all() {
  const std::vector<std::pair<Index, Index>> list{{4'000'000, 64}, {4'000'000, 128}, {50'257, 768}};
  const std::vector<std::pair<const char*, Index>> pools{{"cold", kColdPool}, {"warm", kWarmPool}};
  const std::vector<std::pair<const char*, void (*)(benchmark::State&)>> formats{
      {"float", BM_Lookup<kF32>},
      {"half", BM_Lookup<kF16>},
      {"bfloat16", BM_Lookup<kBF16>},
      {"int8", BM_Lookup<kInt8>}};
  for (const auto& [v, d] : list) {
    for (const auto& [pool_name, pool] : pools) {
      const std::string suffix =
          "/vocab:" + std::to_string(v) + "/dim:" + std::to_string(d) + "/ids:" + pool_name;
      for (const auto& [format, fn] : formats) {
        benchmark::RegisterBenchmark(("BM_Lookup<" + std::string(format) + ">" + suffix).c_str(),
                                     fn)
            ->Args({v, d, pool})
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

/// Console output plus a record of rows/s per (format, shape) for the closing ratio table. With
/// --benchmark_repetitions the table uses the median of the repetitions (the "median" aggregate,
/// also when only aggregates are reported; else the median of the reported iterations).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (!ember_bench::MedianOf::wanted(r)) continue;
      const std::string name = r.run_name.str();  // without the "_median" suffix
      const auto lt = name.find('<'), gt = name.find('>');
      if (lt == std::string::npos || gt == std::string::npos) continue;
      const auto it = r.counters.find("rows/s");
      if (it == r.counters.end()) continue;
      rates_[{name.substr(gt + 1), name.substr(lt + 1, gt - lt - 1)}].record(r, it->second.value);
    }
  }
  void print_ratios() const {
    std::printf(
        "\nrows/s relative to float, same run, medians of the repetitions (targets on tables "
        "larger than the LLC: half >= 1.6x, int8 >= 2.5x)\n");
    for (const auto& [key, rates] : rates_) {
      if (key.second != "float") continue;
      const double base = rates.value();
      if (!(base > 0)) continue;
      std::printf("%-44s", key.first.c_str());
      for (const char* f : {"half", "bfloat16", "int8"}) {
        const auto it = rates_.find({key.first, f});
        if (it != rates_.end()) std::printf("  %s %.2fx", f, it->second.value() / base);
      }
      std::printf("\n");
    }
  }

 private:
  std::map<std::pair<std::string, std::string>, ember_bench::MedianOf> rates_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_all();
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.print_ratios();
  benchmark::Shutdown();
  return 0;
}
