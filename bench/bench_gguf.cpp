// GGUF tables (GgmlEmbeddingView, codec::Ggml) on a LLaMA-2-sized token table, V = 32000,
// d = 4096, for every ggml type ember decodes, each against the float table and against the
// floor of its own bytes in the same run:
//   lookup: rows/s of forward(ids, out) for 4096 uniform ids whose rows (and the output) are
//           evicted from every cache level before each iteration (clflush, timer paused), vs
//           Embedding<float>::forward and vs a memcpy of the same encoded row bytes;
//   logits: the tied logits of N = 1, 2, 4, 8 and 64 hidden rows in both LogitsMode's, cold (the
//           encoded table, the hidden rows and the output evicted from every cache level before
//           each call, timer paused) and warm, vs Embedding<float>::logits and vs a streaming read
//           of the encoded table (a sum of its bytes, cold and warm alike: 74 MB for q4_K, more
//           than the LLC);
//   paired: the same logits, cold, each call timed right after a streaming read of the same
//           table, the ratio of the two taken per iteration (x_read, the median over the
//           iterations): on a shared machine whose load moves every time by up to 1.5x between
//           runs, the two times of a pair move alike, so the ratio holds where the separate
//           medians' ratio does not;
//   exact float operations: with AVX-512, the float operations the bits of exact mode fix for
//           N = 8 over the table of a block type, alone (BM_ExactFloatOps: no table, no decoding),
//           the floor of the exact N = 8 logits, printed against their cold time.
// At the end it prints the ratios from the medians of the repetitions (CPU time): lookups against
// their targets (every type >= float rows/s, q4_K and q4_0 >= 1.5x), and the logits of each type
// cold at N = 1 and N = 8 in both modes against the streaming read of its bytes (targets:
// quantized_hidden N = 1 >= 0.9x, f16 / bf16 >= 0.95x; exact N = 1 >= 0.5x) and against their
// own N = 1 (quantized_hidden N = 8 <= 2.5x, exact <= 4x).
//
// The encoded tables hold 512 distinct rows quantized by ggml's reference quantizers from the
// float table's first rows, repeated: every row is a real row of its type (speed does not depend
// on the values, and quantizing 131M values per type would take minutes).
//
// Run (one line): OMP_NUM_THREADS=1 build/release/bench/bench_gguf --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true [--benchmark_filter=...]
// (--benchmark_filter='Lookup' or 'Logits|StreamRead' runs one half, 'Paired' the paired logits;
// the tables list what ran.)
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
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
#include <ember/logits_mode.hpp>

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

constexpr Index kLogitsRows[] = {1, 2, 4, 8, 64};
using ember::LogitsMode;
using ember_bench::Cache;

/// Evicts a logits call's operands before a cold call.
void flush_logits(const void* table, std::size_t table_bytes, const RowMatrix<float>& h,
                  const RowMatrix<float>& out) {
  ember_bench::flush_range(table, table_bytes);
  ember_bench::flush_range(h.data(), static_cast<std::size_t>(h.size()) * sizeof(float));
  ember_bench::flush_range(out.data(), static_cast<std::size_t>(out.size()) * sizeof(float));
  ember_bench::flush_fence();
}

void BM_LogitsFloat(benchmark::State& state, Index n, Cache cache) {
  const auto& t = float_table();
  const RowMatrix<float> h = hidden(n);
  RowMatrix<float> out(n, kVocab);
  const auto bytes = static_cast<std::size_t>(t.weight().size()) * sizeof(float);
  for (auto _ : state) {
    if (cache == Cache::cold) {
      state.PauseTiming();
      flush_logits(t.weight().data(), bytes, h, out);
      state.ResumeTiming();
    }
    t.logits(h, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ember_bench::set_gflops(state, 2.0 * static_cast<double>(n * kVocab * kDim));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes));
}

void BM_Logits(benchmark::State& state, GgmlType type, Index n, LogitsMode mode, Cache cache) {
  const Encoded& e = encoded(type);
  const RowMatrix<float> h = hidden(n);
  RowMatrix<float> out(n, kVocab);
  for (auto _ : state) {
    if (cache == Cache::cold) {
      state.PauseTiming();
      flush_logits(e.bytes.data(), e.bytes.size(), h, out);
      state.ResumeTiming();
    }
    e.view->logits(h, out, mode);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  ember_bench::set_gflops(state, 2.0 * static_cast<double>(n * kVocab * kDim));
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(e.bytes.size()));
}

/// The floor of the logits: one pass over the encoded table, summing its bytes (psadbw where the
/// build has AVX2, so the pass is bound by memory, not by the adds).
std::uint64_t stream_sum(const std::uint8_t* p, std::size_t size) {
  const std::size_t n = size / 128 * 128;
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
  for (std::size_t i = n; i < size; ++i) total += p[i];
  return total;
}

/// stream_sum of the encoded table, cold (evicted before each pass, timer paused) or warm.
void BM_StreamRead(benchmark::State& state, GgmlType type, Cache cache) {
  const Encoded& e = encoded(type);
  for (auto _ : state) {
    if (cache == Cache::cold) {
      state.PauseTiming();
      ember_bench::flush_range(e.bytes.data(), e.bytes.size());
      ember_bench::flush_fence();
      state.ResumeTiming();
    }
    benchmark::DoNotOptimize(stream_sum(e.bytes.data(), e.bytes.size()));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(e.bytes.size()));
}

/// The logits and the streaming read of the same table in turn, cold, every iteration: x_read is
/// the median over the iterations of read time / logits time, each pair measured back to back, so
/// that the load of a shared machine (which moves either time by up to 1.5x between runs) moves
/// both alike. The time reported is the logits'. `logits()` computes out from h over the table's
/// `size` bytes at `table`.
template <class Logits>
void paired(benchmark::State& state, const std::uint8_t* table, std::size_t size,
            const RowMatrix<float>& h, RowMatrix<float>& out, const Logits& logits) {
  std::vector<double> ratios;
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    ember_bench::flush_range(table, size);
    ember_bench::flush_fence();
    const auto r0 = Clock::now();
    benchmark::DoNotOptimize(stream_sum(table, size));
    const double read = std::chrono::duration<double>(Clock::now() - r0).count();
    flush_logits(table, size, h, out);
    const auto l0 = Clock::now();
    logits();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    const double time = std::chrono::duration<double>(Clock::now() - l0).count();
    state.SetIterationTime(time);
    ratios.push_back(read / time);
  }
  std::sort(ratios.begin(), ratios.end());
  state.counters["x_read"] = ratios.empty() ? 0.0 : ratios[ratios.size() / 2];
}

void BM_Paired(benchmark::State& state, GgmlType type, Index n, LogitsMode mode) {
  const Encoded& e = encoded(type);
  const RowMatrix<float> h = hidden(n);
  RowMatrix<float> out(n, kVocab);
  paired(state, e.bytes.data(), e.bytes.size(), h, out, [&] { e.view->logits(h, out, mode); });
}

/// BM_Paired for Embedding<float>::logits, paired with the read of its float table.
void BM_PairedFloat(benchmark::State& state, Index n) {
  const auto& t = float_table();
  const RowMatrix<float> h = hidden(n);
  RowMatrix<float> out(n, kVocab);
  paired(state, reinterpret_cast<const std::uint8_t*>(t.weight().data()),
         static_cast<std::size_t>(t.weight().size()) * sizeof(float), h, out,
         [&] { t.logits(h, out); });
}

#if defined(__AVX512F__) && (defined(__GNUC__) || defined(__clang__))
#define EMBER_BENCH_EXACT_OPS 1
/// The float operations that exact mode's bits fix for 8 hidden rows over the table of a block
/// type, alone: per 32 columns and hidden row a multiply and a multiply-add of the decoded codes by
/// the hidden values (16 lanes each) and a multiply-add of that by the block's scale into the
/// row's accumulator, issued as the AVX-512 kernel issues them (dot_tiles: chunks of 8 rows over
/// tiles of 512 columns), with the hidden tile in L1 and no table, decoding or memory traffic.
/// Its time over V rows of d is a floor of the exact N = 8 logits of every block type
/// (docs/lm_head.md).
void BM_ExactFloatOps(benchmark::State& state) {
  constexpr int n = 8;
  constexpr Index tile = 512;
  constexpr Index chunk = 8;
  const RowMatrix<float> h = hidden(n);
  for (auto _ : state) {
    __m512 acc[n];
    for (__m512& a : acc) a = _mm512_setzero_ps();
    __m512 v0 = _mm512_set1_ps(1.0f), v1 = _mm512_set1_ps(2.0f), a = _mm512_set1_ps(0.5f);
    for (Index r0 = 0; r0 < kVocab; r0 += chunk) {
      for (Index c0 = 0; c0 < kDim; c0 += tile) {
        for (Index r = 0; r < chunk; ++r) {
          for (Index c = c0; c < c0 + tile; c += 32) {
            // Other codes and scale every 32 columns, as far as the compiler knows.
            asm volatile("" : "+v"(v0), "+v"(v1), "+v"(a));
#pragma GCC unroll 8
            for (int j = 0; j < n; ++j) {
              const float* x = h.data() + j * kDim + c;
              const __m512 p = _mm512_fmadd_ps(v1, _mm512_loadu_ps(x + 16),
                                               _mm512_mul_ps(v0, _mm512_loadu_ps(x)));
              acc[j] = _mm512_fmadd_ps(p, a, acc[j]);
            }
          }
        }
      }
    }
    __m512 sum = acc[0];
    for (int j = 1; j < n; ++j) sum = _mm512_add_ps(sum, acc[j]);
    benchmark::DoNotOptimize(sum);
  }
}
#endif

std::string name_of(GgmlType t) { return std::string(ember::io::to_string(t)); }

std::string logits_name(const std::string& table, Index n, const char* mode, Cache cache) {
  return "BM_Logits<" + table + ">/n:" + std::to_string(n) + "/" + mode + "/" +
         ember_bench::name_of(cache);
}

const char* name_of(LogitsMode mode) { return mode == LogitsMode::exact ? "exact" : "quantized"; }

std::string paired_name(const std::string& table, Index n, const char* mode) {
  return "BM_Paired<" + table + ">/n:" + std::to_string(n) + "/" + mode;
}

void register_all() {
  constexpr Cache caches[] = {Cache::cold, Cache::warm};
  benchmark::RegisterBenchmark("BM_Lookup<float>", BM_LookupFloat)->Unit(benchmark::kMillisecond);
  for (const Cache c : caches) {
    for (const Index n : kLogitsRows) {
      benchmark::RegisterBenchmark(logits_name("float", n, "exact", c).c_str(), BM_LogitsFloat, n,
                                   c)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const Index n : kLogitsRows) {
    benchmark::RegisterBenchmark(paired_name("float", n, "exact").c_str(), BM_PairedFloat, n)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
#if EMBER_BENCH_EXACT_OPS
  benchmark::RegisterBenchmark("BM_ExactFloatOps/n:8", BM_ExactFloatOps)
      ->Unit(benchmark::kMillisecond);
#endif
  for (const GgmlType t : kTypes) {
    const std::string tn = name_of(t);
    benchmark::RegisterBenchmark(("BM_Lookup<" + tn + ">").c_str(), BM_Lookup, t)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_Lookup_Raw<" + tn + ">").c_str(), BM_LookupRaw, t)
        ->Unit(benchmark::kMillisecond);
    for (const Cache c : caches) {
      benchmark::RegisterBenchmark(("BM_StreamRead<" + tn + ">/" + ember_bench::name_of(c)).c_str(),
                                   BM_StreamRead, t, c)
          ->Unit(benchmark::kMillisecond);
      for (const LogitsMode mode : {LogitsMode::exact, LogitsMode::quantized_hidden}) {
        for (const Index n : kLogitsRows) {
          benchmark::RegisterBenchmark(logits_name(tn, n, name_of(mode), c).c_str(), BM_Logits, t,
                                       n, mode, c)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
    for (const LogitsMode mode : {LogitsMode::exact, LogitsMode::quantized_hidden}) {
      for (const Index n : kLogitsRows) {
        benchmark::RegisterBenchmark(paired_name(tn, n, name_of(mode)).c_str(), BM_Paired, t, n,
                                     mode)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
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
      const auto x = r.counters.find("x_read");
      if (x != r.counters.end()) paired_[r.run_name.str()].record(r, x->second.value);
      const auto it = r.counters.find("rows/s");
      values_[r.run_name.str()].record(
          r, it != r.counters.end() ? it->second.value : r.GetAdjustedCPUTime());
    }
  }

  void print_ratios() const {
    std::printf(
        "\nSame-run ratios (medians). lookup: rows/s vs float and vs a memcpy of the encoded rows "
        "(targets: >= 1.0x float, q4_K and q4_0 >= 1.5x)\n");
    std::printf("%-6s %10s %9s %9s\n", "type", "rows/s", "vs float", "vs raw");
    const double f_rows = get("BM_Lookup<float>");
    for (const GgmlType t : kTypes) {
      const std::string tn = name_of(t);
      const double rows = get("BM_Lookup<" + tn + ">");
      if (!(rows > 0)) continue;
      std::printf("%-6s %10.0f %8.2fx %8.2fx\n", tn.c_str(), rows, ratio(rows, f_rows),
                  ratio(rows, get("BM_Lookup_Raw<" + tn + ">")));
    }
    for (const Cache c : {Cache::cold, Cache::warm}) {
      const char* cn = ember_bench::name_of(c);
      std::printf(
          "\nlogits, %s: ms at N = 1 and 8; vs read = streaming read time / logits time (targets "
          "at N = 1: quantized >= 0.9x, f16/bf16 0.95x; exact >= 0.5x); N8/N1 = time ratio "
          "(targets: quantized <= 2.5x, exact <= 4x); vs float = float table time / time\n",
          cn);
      std::printf("%-6s %-9s %8s %8s %8s %8s %7s %8s %8s %8s %8s\n", "type", "mode", "N=1 ms",
                  "vs read", "N=8 ms", "vs read", "N8/N1", "N=2 ms", "N=4 ms", "N=64 ms",
                  "vs float");
      const std::string fl = "float";
      for (const GgmlType t : kTypes) {
        const std::string tn = name_of(t);
        const double read = get("BM_StreamRead<" + tn + ">/" + cn);
        for (const char* mode : {"exact", "quantized"}) {
          const double l1 = get(logits_name(tn, 1, mode, c));
          if (!(l1 > 0)) continue;
          const double l8 = get(logits_name(tn, 8, mode, c));
          std::printf("%-6s %-9s %8.2f %7.2fx %8.2f %7.2fx %6.2fx %8.2f %8.2f %8.1f %7.2fx\n",
                      tn.c_str(), mode, l1, ratio(read, l1), l8, ratio(read, l8), ratio(l8, l1),
                      get(logits_name(tn, 2, mode, c)), get(logits_name(tn, 4, mode, c)),
                      get(logits_name(tn, 64, mode, c)),
                      ratio(get(logits_name(fl, 1, "exact", c)), l1));
        }
      }
      const double f1 = get(logits_name(fl, 1, "exact", c));
      if (f1 > 0) {
        const double read = get(std::string("BM_StreamRead<f32>/") + cn);
        const double f8 = get(logits_name(fl, 8, "exact", c));
        std::printf(
            "%-6s %-9s %8.2f %7.2fx %8.2f %7.2fx %6.2fx %8.2f %8.2f %8.1f (Embedding<float>; "
            "target N = 8 >= 0.6x read)\n",
            "float", "exact", f1, ratio(read, f1), f8, ratio(read, f8), ratio(f8, f1),
            get(logits_name(fl, 2, "exact", c)), get(logits_name(fl, 4, "exact", c)),
            get(logits_name(fl, 64, "exact", c)));
      }
    }
    print_paired();
    print_exact_ops();
  }

  /// The floor of the exact N = 8 logits (BM_ExactFloatOps) against their cold time, per type.
  void print_exact_ops() const {
    const double ops = get("BM_ExactFloatOps/n:8");
    if (!(ops > 0)) return;
    std::printf(
        "\nexact, N = 8: the float operations its bits fix, alone (BM_ExactFloatOps, hidden rows "
        "in L1, no table): %.2f ms; the cold logits of each block type over that:\n",
        ops);
    for (const GgmlType t : kTypes) {
      const double l8 = get(logits_name(name_of(t), 8, "exact", Cache::cold));
      if (l8 > 0 && ember::detail::ggml::traits(t).block_size > 1) {
        std::printf("  %s %.2fx", name_of(t).c_str(), ratio(l8, ops));
      }
    }
    std::printf("\n");
  }

  /// The paired runs: each logits call over the streaming read timed just before it.
  void print_paired() const {
    if (paired_.empty()) return;
    std::printf(
        "\nlogits, cold, paired with the read (BM_Paired: the median over iterations of read time "
        "/ logits time, each pair back to back); N8/N1 = the time ratio, x(N=1) / x(N=8)\n");
    std::printf("%-6s %-9s %7s %7s %7s %7s %7s %7s\n", "type", "mode", "N=1", "N=2", "N=4", "N=8",
                "N=64", "N8/N1");
    for (const GgmlType t : kTypes) {
      const std::string tn = name_of(t);
      for (const char* mode : {"exact", "quantized"}) {
        const double x1 = get_paired(paired_name(tn, 1, mode));
        if (!(x1 > 0)) continue;
        const double x8 = get_paired(paired_name(tn, 8, mode));
        std::printf("%-6s %-9s %6.2fx %6.2fx %6.2fx %6.2fx %6.2fx %6.2fx\n", tn.c_str(), mode, x1,
                    get_paired(paired_name(tn, 2, mode)), get_paired(paired_name(tn, 4, mode)), x8,
                    get_paired(paired_name(tn, 64, mode)), ratio(x1, x8));
      }
    }
    const double f1 = get_paired(paired_name("float", 1, "exact"));
    if (f1 > 0) {
      const double f8 = get_paired(paired_name("float", 8, "exact"));
      std::printf("%-6s %-9s %6.2fx %6.2fx %6.2fx %6.2fx %6.2fx %6.2fx (Embedding<float>)\n",
                  "float", "exact", f1, get_paired(paired_name("float", 2, "exact")),
                  get_paired(paired_name("float", 4, "exact")), f8,
                  get_paired(paired_name("float", 64, "exact")), ratio(f1, f8));
    }
  }

 private:
  [[nodiscard]] double get_paired(const std::string& name) const {
    const auto it = paired_.find(name + "/manual_time");  // UseManualTime's suffix
    return it == paired_.end() ? 0.0 : it->second.value();
  }
  std::map<std::string, ember_bench::MedianOf> paired_;
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
