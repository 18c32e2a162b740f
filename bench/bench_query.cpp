// Nearest-neighbour queries over a 50k x 300 table (single GEMV and blocked-GEMM batches, against a
// raw loop baseline) and load/save throughput of .npy and safetensors.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <ember/init.hpp>
#include <ember/io/npy.hpp>
#include <ember/query/similarity.hpp>
#if defined(EMBER_BENCH_HAVE_IO)
#include <ember/io/safetensors.hpp>
#endif

namespace {

const ember::RowMatrix<float>& table(ember::Index v, ember::Index d) {
  static ember::RowMatrix<float> t;
  if (t.rows() != v || t.cols() != d) {
    t.resize(v, d);
    ember::Init::normal(1.0).fill(t, 7);
  }
  return t;
}

void BM_Nearest(benchmark::State& state) {
  const auto v = state.range(0), d = state.range(1);
  const ember::query::Neighbours<float> nn(table(v, d));
  ember::TokenId id = 0;
  for (auto _ : state) {
    auto r = nn.nearest(id, 10);
    benchmark::DoNotOptimize(r);
    id = (id + 7919) % v;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Nearest)
    ->ArgNames({"vocab", "dim"})
    ->Args({50000, 300})
    ->Unit(benchmark::kMillisecond);

void BM_NearestBatch(benchmark::State& state) {
  const auto v = state.range(0), d = state.range(1), n = state.range(2);
  const ember::query::Neighbours<float> nn(table(v, d));
  const ember::RowMatrix<float> queries = table(v, d).topRows(n);
  for (auto _ : state) {
    auto r = nn.nearest_batch(queries, 10);
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations() * n);  // queries
}
BENCHMARK(BM_NearestBatch)
    ->ArgNames({"vocab", "dim", "n"})
    ->Args({50000, 300, 64})
    ->Args({50000, 300, 256})
    ->Unit(benchmark::kMillisecond);

// Baseline: the plain loop (dot products over pre-normalised rows + partial_sort), no GEMV.
void BM_Nearest_Raw(benchmark::State& state) {
  const auto v = state.range(0), d = state.range(1);
  const ember::query::Neighbours<float> nn(table(v, d));
  const ember::RowMatrix<float>& u = nn.normalized();
  std::vector<std::pair<float, ember::Index>> s(static_cast<std::size_t>(v));
  ember::Index q = 0;
  for (auto _ : state) {
    const float* qp = u.row(q).data();
    for (ember::Index r = 0; r < v; ++r) {
      const float* rp = u.row(r).data();
      float acc = 0;
      for (ember::Index c = 0; c < d; ++c) acc += rp[c] * qp[c];
      s[static_cast<std::size_t>(r)] = {-acc, r};
    }
    std::partial_sort(s.begin(), s.begin() + 11, s.end());
    benchmark::DoNotOptimize(s.data());
    q = (q + 7919) % v;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Nearest_Raw)
    ->ArgNames({"vocab", "dim"})
    ->Args({50000, 300})
    ->Unit(benchmark::kMillisecond);

std::string tmp_file(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

void BM_SaveNpy(benchmark::State& state) {
  const auto& t = table(50000, 300);
  const std::string path = tmp_file("ember_bench.npy");
  for (auto _ : state) ember::io::save_npy(path, t);
  state.SetBytesProcessed(state.iterations() * t.size() * 4);
  std::filesystem::remove(path);
}
BENCHMARK(BM_SaveNpy)->Unit(benchmark::kMillisecond);

void BM_LoadNpy(benchmark::State& state) {
  const auto& t = table(50000, 300);
  const std::string path = tmp_file("ember_bench_load.npy");
  ember::io::save_npy(path, t);
  for (auto _ : state) {
    auto m = ember::io::load_npy<float>(path);
    benchmark::DoNotOptimize(m.data());
  }
  state.SetBytesProcessed(state.iterations() * t.size() * 4);
  std::filesystem::remove(path);
}
BENCHMARK(BM_LoadNpy)->Unit(benchmark::kMillisecond);

void BM_MapNpy(benchmark::State& state) {  // zero-copy + the finite scan
  const auto& t = table(50000, 300);
  const std::string path = tmp_file("ember_bench_map.npy");
  ember::io::save_npy(path, t);
  for (auto _ : state) {
    auto m = ember::io::map_npy<float>(path);
    benchmark::DoNotOptimize(m.matrix().data());
  }
  state.SetBytesProcessed(state.iterations() * t.size() * 4);
  std::filesystem::remove(path);
}
BENCHMARK(BM_MapNpy)->Unit(benchmark::kMillisecond);

#if defined(EMBER_BENCH_HAVE_IO)
void BM_SaveSafetensors(benchmark::State& state) {
  const auto& t = table(50000, 300);
  const std::string path = tmp_file("ember_bench.safetensors");
  for (auto _ : state) ember::io::save_safetensors(path, "wte.weight", t);
  state.SetBytesProcessed(state.iterations() * t.size() * 4);
  std::filesystem::remove(path);
}
BENCHMARK(BM_SaveSafetensors)->Unit(benchmark::kMillisecond);

void BM_LoadSafetensors(benchmark::State& state) {
  const auto& t = table(50000, 300);
  const std::string path = tmp_file("ember_bench_load.safetensors");
  ember::io::save_safetensors(path, "wte.weight", t);
  for (auto _ : state) {
    auto m = ember::io::load_safetensors<float>(path, "wte.weight");
    benchmark::DoNotOptimize(m.data());
  }
  state.SetBytesProcessed(state.iterations() * t.size() * 4);
  std::filesystem::remove(path);
}
BENCHMARK(BM_LoadSafetensors)->Unit(benchmark::kMillisecond);
#endif

}  // namespace

BENCHMARK_MAIN();
