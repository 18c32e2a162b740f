// GGUF tables (GgmlEmbeddingView, codec::Ggml) on a LLaMA-2-sized token table, V = 32000,
// d = 4096, for every ggml type ember decodes, each against the float table and against the
// floor of its own bytes in the same run:
//   lookup: rows/s of forward(ids, out) for 4096 uniform ids whose rows (and the output) are
//           evicted from every cache level before each iteration (clflush, timer paused), vs
//           Embedding<float>::forward and vs a memcpy of the same encoded row bytes;
//   logits: the tied logits of N = 1 and N = 64 hidden rows vs Embedding<float>::logits and vs a
//           streaming read of the encoded table (a sum of its bytes; 74 MB for q4_K, more than
//           the LLC, so every pass reads memory).
// At the end it prints the ratios from the medians of the repetitions (CPU time), against the
// targets: every type's lookup >= float rows/s, q4_K and q4_0 >= 1.5x, decode logits (N = 1)
// >= 0.7x the streaming read.
//
// The encoded tables hold 512 distinct rows quantized by ggml's reference quantizers from the
// float table's first rows, repeated: every row is a real row of its type (speed does not depend
// on the values, and quantizing 131M values per type would take minutes).
//
// Run (one line): OMP_NUM_THREADS=1 build/release/bench/bench_gguf --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true [--benchmark_filter=...]
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <ember/embedding.hpp>
#include <ember/ggml/encode.hpp>
#include <ember/ggml_embedding.hpp>
#include <ember/io/ggml_type.hpp>

#include "support/bench_support.hpp"

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember::io::GgmlType;

constexpr Index kVocab = 32000;
constexpr Index kDim = 4096;
constexpr Index kIds = 4096;          // ids per lookup call
constexpr Index kDistinctRows = 512;  // distinct encoded rows, repeated over the table

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q5_1, GgmlType::Q5_0,
                               GgmlType::Q4_K, GgmlType::Q4_1, GgmlType::Q4_0, GgmlType::Q3_K,
                               GgmlType::Q2_K};

const ember::Embedding<float>& float_table() {
  static const ember::Embedding<float> t(ember_bench::fast_table(kVocab, kDim),
                                         ember::LookupScale::none());
  return t;
}

/// The encoded table of one type, built on first use; the previous type's is freed first.
struct Encoded {
  GgmlType type = GgmlType::F32;
  std::vector<std::uint8_t> bytes;
  std::unique_ptr<ember::GgmlEmbeddingView> view;
};

const Encoded& encoded(GgmlType type) {
  static Encoded e;
  if (!e.view || e.type != type) {
    e = Encoded{};
    const ember::codec::Ggml codec(type);
    const auto rb = static_cast<std::size_t>(codec.units_per_row(kDim));
    e.bytes.resize(rb * static_cast<std::size_t>(kVocab));
    const RowMatrix<float>& w = float_table().weight();
    for (Index r = 0; r < kDistinctRows; ++r) {
      ember::detail::ggml::quantize(type, w.row(r).data(), kDim,
                                    e.bytes.data() + static_cast<std::size_t>(r) * rb);
    }
    for (Index r = kDistinctRows; r < kVocab; ++r) {
      std::memcpy(e.bytes.data() + static_cast<std::size_t>(r) * rb,
                  e.bytes.data() + static_cast<std::size_t>(r % kDistinctRows) * rb, rb);
    }
    e.view = std::make_unique<ember::GgmlEmbeddingView>(codec, e.bytes.data(), kVocab, kDim, -1,
                                                        nullptr, ember::LookupScale::none());
    e.type = type;
  }
  return e;
}

const std::vector<TokenId>& ids() {
  static const std::vector<TokenId> v =
      ember_bench::make_ids(kIds, kVocab, ember_bench::Dist::uniform);
  return v;
}

/// Evicts the rows of the ids (row_bytes each, `stride` apart) and the output.
void flush(const void* table, std::size_t row_bytes, const void* out, std::size_t out_bytes) {
  for (const TokenId id : ids()) {
    ember_bench::flush_range(
        static_cast<const char*>(table) + static_cast<std::size_t>(id) * row_bytes, row_bytes);
  }
  ember_bench::flush_range(out, out_bytes);
  ember_bench::flush_fence();
}

void set_rows(benchmark::State& state, Index row_bytes) {
  const double rows = static_cast<double>(state.iterations()) * static_cast<double>(kIds);
  state.counters["rows/s"] = benchmark::Counter(rows, benchmark::Counter::kIsRate);
  state.counters["row_bytes"] = static_cast<double>(row_bytes);
}

void BM_LookupFloat(benchmark::State& state) {
  const auto& t = float_table();
  RowMatrix<float> out(kIds, kDim);
  for (auto _ : state) {
    state.PauseTiming();
    flush(t.weight().data(), kDim * sizeof(float), out.data(),
          static_cast<std::size_t>(out.size()) * 4);
    state.ResumeTiming();
    t.forward(ids(), out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rows(state, kDim * 4);
}

void BM_Lookup(benchmark::State& state, GgmlType type) {
  const Encoded& e = encoded(type);
  RowMatrix<float> out(kIds, kDim);
  const auto rb = static_cast<std::size_t>(e.view->row_bytes());
  for (auto _ : state) {
    state.PauseTiming();
    flush(e.bytes.data(), rb, out.data(), static_cast<std::size_t>(out.size()) * 4);
    state.ResumeTiming();
    e.view->forward(ids(), out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rows(state, e.view->row_bytes());
}

/// The floor: a memcpy of each selected encoded row into a packed buffer.
void BM_LookupRaw(benchmark::State& state, GgmlType type) {
  const Encoded& e = encoded(type);
  const auto rb = static_cast<std::size_t>(e.view->row_bytes());
  std::vector<std::uint8_t> out(rb * static_cast<std::size_t>(kIds));
  for (auto _ : state) {
    state.PauseTiming();
    flush(e.bytes.data(), rb, out.data(), out.size());
    state.ResumeTiming();
    std::uint8_t* dst = out.data();
    for (const TokenId id : ids()) {
      std::memcpy(dst, e.bytes.data() + static_cast<std::size_t>(id) * rb, rb);
      dst += rb;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rows(state, static_cast<Index>(rb));
}

RowMatrix<float> hidden(Index n) { return ember_bench::fast_table(n, kDim); }

void BM_LogitsFloat(benchmark::State& state, Index n) {
  const auto& t = float_table();
  const RowMatrix<float> h = hidden(n);
  RowMatrix<float> out(n, kVocab);
  for (auto _ : state) {
    t.logits(h, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ember_bench::set_gflops(state, 2.0 * static_cast<double>(n * kVocab * kDim));
}

void BM_Logits(benchmark::State& state, GgmlType type, Index n) {
  const Encoded& e = encoded(type);
  const RowMatrix<float> h = hidden(n);
  RowMatrix<float> out(n, kVocab);
  for (auto _ : state) {
    e.view->logits(h, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ember_bench::set_gflops(state, 2.0 * static_cast<double>(n * kVocab * kDim));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(e.bytes.size()));
}

/// The floor of the decode logits: one pass over the encoded table, summing its bytes (psadbw
/// where the build has AVX2, so the pass is bound by memory, not by the adds).
void BM_StreamRead(benchmark::State& state, GgmlType type) {
  const Encoded& e = encoded(type);
  const std::uint8_t* p = e.bytes.data();
  const std::size_t n = e.bytes.size() / 128 * 128;
  for (auto _ : state) {
    std::uint64_t total = 0;
#if defined(__AVX2__)
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    const __m256i zero = _mm256_setzero_si256();
    auto load = [&](std::size_t i) {
      return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    };
    for (std::size_t i = 0; i < n; i += 128) {
      a0 = _mm256_add_epi64(a0, _mm256_sad_epu8(load(i), zero));
      a1 = _mm256_add_epi64(a1, _mm256_sad_epu8(load(i + 32), zero));
      a2 = _mm256_add_epi64(a2, _mm256_sad_epu8(load(i + 64), zero));
      a3 = _mm256_add_epi64(a3, _mm256_sad_epu8(load(i + 96), zero));
    }
    alignas(32) std::uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                       _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
#else
    for (std::size_t i = 0; i < n; ++i) total += p[i];
#endif
    for (std::size_t i = n; i < e.bytes.size(); ++i) total += p[i];
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(e.bytes.size()));
}

std::string name_of(GgmlType t) { return std::string(ember::io::to_string(t)); }

void register_all() {
  benchmark::RegisterBenchmark("BM_Lookup<float>", BM_LookupFloat)->Unit(benchmark::kMillisecond);
  for (const Index n : {Index{1}, Index{64}}) {
    benchmark::RegisterBenchmark(("BM_Logits<float>/n:" + std::to_string(n)).c_str(),
                                 BM_LogitsFloat, n)
        ->Unit(benchmark::kMillisecond);
  }
  for (const GgmlType t : kTypes) {
    const std::string tn = name_of(t);
    benchmark::RegisterBenchmark(("BM_Lookup<" + tn + ">").c_str(), BM_Lookup, t)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_Lookup_Raw<" + tn + ">").c_str(), BM_LookupRaw, t)
        ->Unit(benchmark::kMillisecond);
    for (const Index n : {Index{1}, Index{64}}) {
      benchmark::RegisterBenchmark(("BM_Logits<" + tn + ">/n:" + std::to_string(n)).c_str(),
                                   BM_Logits, t, n)
          ->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark(("BM_StreamRead<" + tn + ">").c_str(), BM_StreamRead, t)
        ->Unit(benchmark::kMillisecond);
  }
}

/// Console output plus the median (over repetitions) of each benchmark's rows/s or CPU time, for
/// the closing ratio table (CPU time: on a shared machine wall time includes waiting for a core;
/// rows/s is counted on CPU time too, the eviction before each lookup call excluded).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (!ember_bench::MedianOf::wanted(r)) continue;
      const auto it = r.counters.find("rows/s");
      values_[r.run_name.str()].record(
          r, it != r.counters.end() ? it->second.value : r.GetAdjustedCPUTime());
    }
  }

  void print_ratios() const {
    std::printf(
        "\nSame-run ratios (medians). lookup: rows/s vs float and vs a memcpy of the encoded rows "
        "(targets: >= 1.0x float, q4_K and q4_0 >= 1.5x); logits: speed (1/time) vs float and, at "
        "N = 1, vs a streaming read of the encoded table (target >= 0.7x)\n");
    std::printf("%-6s %10s %9s %9s | %9s %9s %9s | %9s %9s\n", "type", "rows/s", "vs float",
                "vs raw", "N=1 ms", "vs float", "vs read", "N=64 ms", "vs float");
    const double f_rows = get("BM_Lookup<float>");
    const double f1 = get("BM_Logits<float>/n:1");
    const double f64 = get("BM_Logits<float>/n:64");
    for (const GgmlType t : kTypes) {
      const std::string tn = name_of(t);
      const double rows = get("BM_Lookup<" + tn + ">");
      const double raw = get("BM_Lookup_Raw<" + tn + ">");
      const double l1 = get("BM_Logits<" + tn + ">/n:1");
      const double l64 = get("BM_Logits<" + tn + ">/n:64");
      const double read = get("BM_StreamRead<" + tn + ">");
      if (!(rows > 0 || l1 > 0)) continue;
      std::printf("%-6s %10.0f %8.2fx %8.2fx | %9.2f %8.2fx %8.2fx | %9.1f %8.2fx\n", tn.c_str(),
                  rows, ratio(rows, f_rows), ratio(rows, raw), l1, ratio(f1, l1), ratio(read, l1),
                  l64, ratio(f64, l64));
    }
  }

 private:
  static double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : 0.0; }
  [[nodiscard]] double get(const std::string& name) const {
    const auto it = values_.find(name);
    return it == values_.end() ? 0.0 : it->second.value();
  }
  std::map<std::string, ember_bench::MedianOf> values_;
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
