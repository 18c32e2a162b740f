// KeyIndex (ember/keys/key_index.hpp) against std::unordered_map<std::uint64_t, std::int64_t>
// doing the same work on the same keys, at steady state: a full index of 2^20 (or 2^23) rows,
// batches of 16384 keys from a 2^40 key space, a share `hit` of each batch drawn from the resident
// keys and the rest never seen before (so every miss is a new key that evicts one). The index is
// first filled, then runs 8 batches of the stream before the timed 24 (its eviction candidates
// are those of a running job).
//   find_or_insert  ember: KeyIndex::find_or_insert (exact lru, lfu or score eviction, the victims
//                   chosen by the index itself); map: find, and on a miss erase the key ember
//                   evicted and emplace the new key on its row (a replay: the map is handed the
//                   eviction decisions, so it pays only for its lookups, erases and inserts)
//   find            ember: KeyIndex::find (read-only); map: find
//   memory          heap bytes per row (glibc's mallinfo2 around building each, full) and
//                   KeyIndex::memory_bytes()
// Both sides run on the same batches in every iteration; times are the thread's CPU time (the
// machine may be shared), the iteration time is ember's, the counter x_map = map time / ember
// time (above 1: ember is faster). Run at OMP_NUM_THREADS=1.
// SPDX-License-Identifier: MIT
#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ember/keys/key_index.hpp>

#include "support/bench_support.hpp"

namespace {

using ember::EvictionPolicy;
using ember::Index;
using ember::KeyIndex;
using ember::TokenId;
using Map = std::unordered_map<std::uint64_t, std::int64_t>;

constexpr Index kBatch = 16384;
constexpr int kWarmup = 8;
constexpr int kBatches = 24;
constexpr std::uint64_t kKeySpace = std::uint64_t{1} << 40;

/// The calling thread's CPU time in seconds.
double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}
double seconds_since(double t0) { return cpu_now() - t0; }

/// A full index, the batches that follow it and what ember evicted in each.
struct Stream {
  std::unique_ptr<KeyIndex> start;
  std::vector<std::pair<std::uint64_t, std::int64_t>> resident;  // start's (key, row)
  std::vector<std::vector<std::uint64_t>> batches;
  std::vector<std::vector<double>> scores;
  std::vector<std::vector<ember::KeyRow>> evicted;
  std::int64_t first_step = 0;
};

Stream make_stream(int hit_percent, const ember::KeyIndexOptions& options, Index capacity) {
  const EvictionPolicy policy = options.policy;
  Stream s;
  std::mt19937_64 rng(20240601 + static_cast<std::uint64_t>(hit_percent));
  std::uniform_int_distribution<std::uint64_t> fresh(0, kKeySpace - 1);
  std::uniform_real_distribution<double> score(0.0, 1.0);
  KeyIndex index(capacity, options);
  std::vector<std::uint64_t> pool;  // the resident keys, for drawing hits
  std::unordered_map<std::uint64_t, std::size_t> where;
  std::int64_t step = 0;
  std::vector<TokenId> rows(static_cast<std::size_t>(kBatch));
  const auto run = [&](const std::vector<std::uint64_t>& keys, std::vector<double>& sc) {
    sc.clear();
    if (policy == EvictionPolicy::score)
      for (std::size_t i = 0; i < keys.size(); ++i) sc.push_back(score(rng));
    const auto result = index.find_or_insert(keys, rows, step++, sc);
    std::vector<ember::KeyRow> ev(result.evicted.begin(), result.evicted.end());
    std::size_t next = 0;
    for (const std::uint64_t k : keys) {
      if (where.count(k) != 0 || !index.contains(k)) continue;
      if (next < ev.size()) {  // k took an evicted key's place
        const std::size_t at = where[ev[next].key];
        where.erase(ev[next].key);
        pool[at] = k;
        where[k] = at;
        ++next;
      } else {
        where[k] = pool.size();
        pool.push_back(k);
      }
    }
    return ev;
  };
  std::vector<double> unused;
  while (index.size() < index.capacity()) {  // fill with new keys
    std::vector<std::uint64_t> keys(static_cast<std::size_t>(kBatch));
    for (auto& k : keys) k = fresh(rng);
    run(keys, unused);
  }
  const auto hits = static_cast<std::size_t>(kBatch * hit_percent / 100);
  for (int b = -kWarmup; b < kBatches; ++b) {
    if (b == 0) {
      s.start = std::make_unique<KeyIndex>(index);
      s.first_step = step;
      for (const auto& e : index) s.resident.emplace_back(e.key, e.row);
    }
    std::vector<std::uint64_t> keys;
    std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
    for (std::size_t i = 0; i < hits; ++i) keys.push_back(pool[pick(rng)]);
    while (keys.size() < static_cast<std::size_t>(kBatch)) keys.push_back(fresh(rng));
    std::shuffle(keys.begin(), keys.end(), rng);
    std::vector<double> sc;
    std::vector<ember::KeyRow> ev = run(keys, sc);
    if (b < 0) continue;
    s.evicted.push_back(std::move(ev));
    s.batches.push_back(std::move(keys));
    s.scores.push_back(std::move(sc));
  }
  return s;
}

const Stream& stream_for(int hit_percent, const ember::KeyIndexOptions& options, Index capacity) {
  static std::map<std::tuple<int, int, std::int64_t, Index>, Stream> cache;
  const auto key = std::make_tuple(hit_percent, static_cast<int>(options.policy),
                                   options.lfu_half_life, capacity);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_stream(hit_percent, options, capacity)).first;
  return it->second;
}

Map map_of(const Stream& s) {
  Map m;
  m.reserve(s.resident.size());
  for (const auto& [k, r] : s.resident) m.emplace(k, r);
  return m;
}

/// Keys per second of both sides and their ratio, over all the iterations' batches.
void report(benchmark::State& state, const Stream& s, double ember_total, double map_total) {
  const double keys = static_cast<double>(kBatch) * static_cast<double>(s.batches.size()) *
                      static_cast<double>(state.iterations());
  state.counters["ember_Mkeys_s"] = keys / ember_total * 1e-6;
  state.counters["map_Mkeys_s"] = keys / map_total * 1e-6;
  state.counters["x_map"] = map_total / ember_total;
  state.SetItemsProcessed(static_cast<std::int64_t>(keys));
}

void BM_FindOrInsert(benchmark::State& state, ember::KeyIndexOptions options) {
  const int hit = static_cast<int>(state.range(0));
  const Stream& s = stream_for(hit, options, Index{1} << state.range(1));
  std::vector<TokenId> rows(static_cast<std::size_t>(kBatch));
  double ember_total = 0.0, map_total = 0.0;
  std::int64_t checksum = 0;
  for (auto _ : state) {
    KeyIndex index = *s.start;
    Map map = map_of(s);
    double t0 = cpu_now();
    for (std::size_t b = 0; b < s.batches.size(); ++b) {
      index.find_or_insert(s.batches[b], rows, s.first_step + static_cast<std::int64_t>(b),
                           s.scores[b]);
      benchmark::DoNotOptimize(rows.data());
    }
    const double ember_time = seconds_since(t0);
    checksum += rows[0];
    t0 = cpu_now();
    for (std::size_t b = 0; b < s.batches.size(); ++b) {
      const auto& keys = s.batches[b];
      const auto& ev = s.evicted[b];
      std::size_t next = 0;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto it = map.find(keys[i]);
        if (it != map.end()) {
          rows[i] = it->second;
          continue;
        }
        const ember::KeyRow v = ev[next++];
        map.erase(v.key);
        map.emplace(keys[i], v.row);
        rows[i] = v.row;
      }
      benchmark::DoNotOptimize(rows.data());
    }
    const double map_time = seconds_since(t0);
    checksum += rows[0];
    state.SetIterationTime(ember_time);
    ember_total += ember_time;
    map_total += map_time;
  }
  benchmark::DoNotOptimize(checksum);
  report(state, s, ember_total, map_total);
}

void BM_Find(benchmark::State& state) {
  const int hit = static_cast<int>(state.range(0));
  const Stream& s = stream_for(hit, {.policy = EvictionPolicy::lru}, Index{1} << state.range(1));
  const KeyIndex& index = *s.start;
  const Map map = map_of(s);
  std::vector<TokenId> rows(static_cast<std::size_t>(kBatch));
  double ember_total = 0.0, map_total = 0.0;
  for (auto _ : state) {
    double t0 = cpu_now();
    for (const auto& keys : s.batches) {
      index.find(keys, rows);
      benchmark::DoNotOptimize(rows.data());
    }
    const double ember_time = seconds_since(t0);
    t0 = cpu_now();
    for (const auto& keys : s.batches) {
      for (std::size_t i = 0; i < keys.size(); ++i) {
        const auto it = map.find(keys[i]);
        rows[i] = it != map.end() ? it->second : -1;
      }
      benchmark::DoNotOptimize(rows.data());
    }
    const double map_time = seconds_since(t0);
    state.SetIterationTime(ember_time);
    ember_total += ember_time;
    map_total += map_time;
  }
  report(state, s, ember_total, map_total);
}

std::size_t heap_in_use() { return mallinfo2().uordblks + mallinfo2().hblkhd; }

void BM_Memory(benchmark::State& state, ember::KeyIndexOptions options) {
  const Index capacity = Index{1} << state.range(0);
  const Stream& s = stream_for(90, options, capacity);
  double ember_heap = 0.0, ember_self = 0.0, map_heap = 0.0;
  for (auto _ : state) {
    std::size_t before = heap_in_use();
    {
      // The full index as a training run leaves it: rebuilt from the stream's start, then the
      // batches (so its candidates and scratch are those of steady state).
      auto index = std::make_unique<KeyIndex>(*s.start);
      std::vector<TokenId> rows(static_cast<std::size_t>(kBatch));
      for (std::size_t b = 0; b < s.batches.size(); ++b)
        index->find_or_insert(s.batches[b], rows, s.first_step + static_cast<std::int64_t>(b),
                              s.scores[b]);
      ember_heap = static_cast<double>(heap_in_use() - before - rows.capacity() * sizeof(TokenId) -
                                       index->scratch_bytes());
      ember_self = static_cast<double>(index->memory_bytes());
      benchmark::DoNotOptimize(index.get());
    }
    before = heap_in_use();
    {
      Map map;  // grown as a training run grows it, without reserve
      for (const auto& [k, r] : s.resident) map.emplace(k, r);
      map_heap = static_cast<double>(heap_in_use() - before);
      benchmark::DoNotOptimize(&map);
    }
  }
  const auto rows = static_cast<double>(capacity);
  state.counters["ember_bytes_per_row"] = ember_heap / rows;
  state.counters["ember_memory_bytes_per_row"] = ember_self / rows;
  state.counters["map_bytes_per_row"] = map_heap / rows;
}

void register_all() {
  // lfu_decayed: counts halving every 8 batches (steps).
  const std::pair<const char*, ember::KeyIndexOptions> policies[] = {
      {"lru", {.policy = EvictionPolicy::lru}},
      {"lfu", {.policy = EvictionPolicy::lfu}},
      {"lfu_decayed", {.policy = EvictionPolicy::lfu, .lfu_half_life = 8}},
      {"score", {.policy = EvictionPolicy::score}}};
  for (const auto& [name, options] : policies) {
    auto* b = benchmark::RegisterBenchmark((std::string("find_or_insert/") + name).c_str(),
                                           BM_FindOrInsert, options);
    b->ArgNames({"hit%", "log2_rows"})->UseManualTime()->Unit(benchmark::kMillisecond);
    for (const int hit : {50, 90, 99}) b->Args({hit, 20});
    if (options.policy == EvictionPolicy::lru)
      for (const int hit : {50, 90, 99}) b->Args({hit, 23});
  }
  auto* f = benchmark::RegisterBenchmark("find/lru", BM_Find);
  f->ArgNames({"hit%", "log2_rows"})->UseManualTime()->Unit(benchmark::kMillisecond);
  for (const int rows : {20, 23})
    for (const int hit : {50, 90, 99}) f->Args({hit, rows});
  for (const auto& [name, options] : policies) {
    benchmark::RegisterBenchmark((std::string("memory/") + name).c_str(), BM_Memory, options)
        ->ArgName("log2_rows")
        ->Arg(20)
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
