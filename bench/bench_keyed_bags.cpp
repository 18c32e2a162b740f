// The DLRM-like step of bench_table_batched_bags (26 tables with the Criteo Kaggle cardinalities,
// the four largest capped at 4M rows, d = 64, batch 2048; 13 features with one id per bag and 13
// with 15-25) on raw keys: each feature draws Zipf(1.1) ranks over its table's cardinality and
// scatters them over a 2^40 key space. The keyed tables hold min(cardinality, 4M) keys each and
// start full with their most frequent keys, so the capped tables evict at steady state.
//   keyed        KeyedTableBatchedBags: map into one batch kept across steps (every table's
//                keys, find_or_insert with lru eviction, the initialisation of the rows new keys
//                got) + forward + backward_step (RowwiseAdagrad, after resetting reused rows)
//   pre-mapped   the same TableBatchedBags forward + backward_step on the rows of the previous
//                iteration's keyed batch: the step with its keys already mapped to rows
// Both run in every iteration on the same tables; times are the thread's CPU time; the
// iteration time is the keyed step's, the counter x_premapped = keyed / pre-mapped (the
// overhead of keys, 1 = none) and map_share = the map's part of the keyed step. find_ms times
// each table's read-only KeyIndex::find over the same keys after the step (every key resident):
// x_find_floor = (pre-mapped + find) / pre-mapped, what a step that only looked its keys up would
// cost against the pre-mapped one; inserted = keys that got a row per step.
// SPDX-License-Identifier: MIT
#include <time.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <ember/keyed/keyed_bags.hpp>
#include <ember/optim.hpp>

#include "support/bench_support.hpp"

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

constexpr Index kDim = 64, kBatch = 2048, kCap = 4'000'000;
constexpr Index kCriteo[26] = {1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
                               93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
                               2173,  4,    7046547,  18,      15,  286181, 105,     142572};
constexpr std::uint64_t kKeyMask = (std::uint64_t{1} << 40) - 1;

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

/// The raw key of rank r of feature f: the rank scattered over 2^40.
std::uint64_t key_of(std::uint64_t rank, std::size_t f) {
  return ember::detail::mix_key(rank * 26 + f) & kKeyMask;
}

/// A Zipf(s) rank in [0, n) by inversion of the continuous approximation of its CDF.
std::uint64_t zipf_rank(std::mt19937_64& rng, double n, double s) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const double a = 1.0 - s;
  const double x = std::pow(u * (std::pow(n, a) - 1.0) + 1.0, 1.0 / a);
  return std::min(static_cast<std::uint64_t>(x) - 1, static_cast<std::uint64_t>(n) - 1);
}

/// The batches' layout (offsets[26·B + 1]: even features one key per bag, odd ones 15-25), the
/// same for every batch so a batch's rows fit the layout of the next.
std::vector<Index> make_offsets(std::mt19937_64& rng) {
  std::uniform_int_distribution<Index> pooling(15, 25);
  std::vector<Index> offsets{0};
  for (std::size_t f = 0; f < 26; ++f)
    for (Index i = 0; i < kBatch; ++i)
      offsets.push_back(offsets.back() + (f % 2 == 1 ? pooling(rng) : 1));
  return offsets;
}

/// The keys of one batch in that layout.
std::vector<std::uint64_t> make_keys(std::mt19937_64& rng, const std::vector<Index>& offsets) {
  std::vector<std::uint64_t> keys;
  for (std::size_t f = 0; f < 26; ++f) {
    const auto end = static_cast<std::size_t>(offsets[(f + 1) * static_cast<std::size_t>(kBatch)]);
    while (keys.size() < end)
      keys.push_back(key_of(zipf_rank(rng, static_cast<double>(kCriteo[f]), 1.1), f));
  }
  return keys;
}

void BM_KeyedDlrmStep(benchmark::State& state) {
  std::vector<ember::KeyedTableConfig> tables;
  for (std::size_t t = 0; t < 26; ++t) {
    tables.push_back({.capacity = std::min(kCriteo[t], kCap),
                      .d_model = kDim,
                      .options = {.index = {.policy = ember::EvictionPolicy::lru},
                                  .init = ember::Init::uniform(-0.01, 0.01)}});
  }
  std::vector<ember::BagFeature> features;
  for (Index f = 0; f < 26; ++f) features.push_back({.table = f});
  ember::KeyedTableBatchedBags<float> model(tables, features);
  // Full from the start: every table holds its most frequent keys.
  for (std::size_t t = 0; t < 26; ++t) {
    auto& index = ember::detail::KeyedAccess::state_of(model, static_cast<Index>(t)).index();
    std::vector<std::uint64_t> keys;
    for (std::uint64_t r = 0; r < static_cast<std::uint64_t>(index.key_capacity()); ++r)
      keys.push_back(key_of(r, t));
    std::vector<TokenId> rows(keys.size());
    index.insert(keys, rows, 0);
  }
  std::mt19937_64 rng(20240601);
  const std::vector<Index> offsets = make_offsets(rng);
  std::vector<std::vector<std::uint64_t>> batches;
  for (int k = 0; k < 8; ++k) batches.push_back(make_keys(rng, offsets));
  auto& bags = ember::detail::KeyedAccess::bags(model);
  using Adagrad = ember::optim::RowwiseAdagrad<float>;
  std::vector<Adagrad> keyed_opt(26, Adagrad({.lr = 0.01}));
  std::vector<Adagrad> plain_opt(26, Adagrad({.lr = 0.01}));
  RowMatrix<float> out(kBatch, model.width());
  const RowMatrix<float> grad_out = 1e-3F * ember_bench::fast_table(kBatch, model.width());
  std::int64_t step = 1;
  std::vector<TokenId> previous;
  std::vector<TokenId> found(static_cast<std::size_t>(offsets.back()));
  std::size_t next = 0;
  ember::KeyedBatch batch;  // mapped into at every step, as a training loop would keep it
  double inserted = 0.0;
  const auto round = [&](double* t) {
    const std::vector<std::uint64_t>& keys = batches[next++ % batches.size()];
    if (!previous.empty()) {
      const double t0 = cpu_now();
      bags.forward(previous, offsets, out);
      bags.backward_step(previous, offsets, grad_out, std::span<Adagrad>(plain_opt));
      t[2] += cpu_now() - t0;
    }
    const double t0 = cpu_now();
    model.map(keys, offsets, step++, batch);
    const double t1 = cpu_now();
    model.forward(batch, offsets, out);
    model.backward_step(batch, offsets, grad_out, std::span<Adagrad>(keyed_opt));
    const double t2 = cpu_now();
    t[0] += t2 - t0;
    t[1] += t1 - t0;
    previous.assign(batch.rows().begin(), batch.rows().end());
    inserted += static_cast<double>(batch.inserted());
    // The lookups alone: each table's KeyIndex::find (read-only) over its feature's keys.
    const double t3 = cpu_now();
    for (std::size_t f = 0; f < 26; ++f) {
      const auto b = static_cast<std::size_t>(offsets[f * static_cast<std::size_t>(kBatch)]);
      const auto e = static_cast<std::size_t>(offsets[(f + 1) * static_cast<std::size_t>(kBatch)]);
      model.index(static_cast<Index>(f))
          .find(std::span<const std::uint64_t>(keys).subspan(b, e - b),
                std::span<TokenId>(found).subspan(b, e - b));
    }
    t[3] += cpu_now() - t3;
    benchmark::DoNotOptimize(found.data());
    benchmark::ClobberMemory();
  };
  double warm[4] = {0, 0, 0, 0};
  for (int k = 0; k < 4; ++k) round(warm);
  double total[4] = {0, 0, 0, 0};
  inserted = 0.0;
  for (auto _ : state) {
    double t[4] = {0, 0, 0, 0};
    round(t);
    state.SetIterationTime(t[0]);
    for (int k = 0; k < 4; ++k) total[k] += t[k];
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["keyed_ms"] = 1e3 * total[0] / n;
  state.counters["map_ms"] = 1e3 * total[1] / n;
  state.counters["premapped_ms"] = 1e3 * total[2] / n;
  state.counters["x_premapped"] = total[0] / total[2];
  state.counters["map_share"] = total[1] / total[0];
  state.counters["find_ms"] = 1e3 * total[3] / n;
  state.counters["x_find_floor"] = (total[2] + total[3]) / total[2];
  state.counters["keys"] = static_cast<double>(offsets.back());
  state.counters["inserted"] = inserted / n;
}

void register_all() {
  benchmark::RegisterBenchmark("keyed_dlrm_step/criteo26/d64/B2048", BM_KeyedDlrmStep)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
