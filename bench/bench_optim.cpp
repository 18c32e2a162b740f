// Optimizer-step benchmarks: a sparse step over the rows of one batch vs a dense step over all V
// rows, for SGD (momentum), lazy Adam and row-wise Adagrad, at GPT-2 size (V = 50257, d = 768)
// with 4096 Zipf-distributed ids per batch. items/s = rows updated per second.
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include <ember/embedding.hpp>
#include <ember/optim.hpp>
#include <ember/random.hpp>

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

constexpr Index kVocab = 50257, kDim = 768, kIds = 4096;

// Zipf(1) ids over [0, V) by inverse CDF: a realistic token batch (~1.4k unique rows of 4096).
std::vector<TokenId> zipf_ids(Index n, Index vocab, std::uint64_t seed) {
  std::vector<double> cdf(static_cast<std::size_t>(vocab));
  double total = 0.0;
  for (Index t = 0; t < vocab; ++t) cdf[static_cast<std::size_t>(t)] = total += 1.0 / double(t + 1);
  ember::Random rng(seed);
  std::vector<TokenId> ids(static_cast<std::size_t>(n));
  for (auto& id : ids) {
    const double u = rng.uniform() * total;
    std::size_t lo = 0, hi = cdf.size() - 1;
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (cdf[mid] < u)
        lo = mid + 1;
      else
        hi = mid;
    }
    id = static_cast<TokenId>(lo);
  }
  return ids;
}

ember::SparseRowGrad<float> batch_grad(const ember::Embedding<float>& emb) {
  const auto ids = zipf_ids(kIds, kVocab, 3);
  ember::SparseRowGrad<float> g;
  emb.backward(ids, RowMatrix<float>::Constant(kIds, kDim, 1e-3f), g);
  return g;
}

template <class Opt>
void BM_SparseStep(benchmark::State& state, Opt opt) {
  ember::Embedding<float> emb(kVocab, kDim, 1);
  const auto g = batch_grad(emb);
  opt.step(emb, g);  // first step allocates the slot map and the rows' state
  for (auto _ : state) {
    opt.step(emb, g);
    benchmark::DoNotOptimize(emb.weight().data());
    benchmark::ClobberMemory();
  }
  state.counters["rows"] = static_cast<double>(g.size());
  state.SetItemsProcessed(state.iterations() * g.size());
}

template <class Opt>
void BM_DenseStep(benchmark::State& state, Opt opt) {
  ember::Embedding<float> emb(kVocab, kDim, 1);
  RowMatrix<float> dense = RowMatrix<float>::Zero(kVocab, kDim);
  batch_grad(emb).add_to(dense);
  opt.step(emb, dense);
  for (auto _ : state) {
    opt.step(emb, dense);
    benchmark::DoNotOptimize(emb.weight().data());
    benchmark::ClobberMemory();
  }
  state.counters["rows"] = static_cast<double>(kVocab);
  state.SetItemsProcessed(state.iterations() * kVocab);
}

// Both steps timed in the same loop: reports dense_time / sparse_time as `speedup`.
void BM_AdamSparseVsDense(benchmark::State& state) {
  ember::Embedding<float> a(kVocab, kDim, 1), b(kVocab, kDim, 1);
  const auto g = batch_grad(a);
  RowMatrix<float> dense = RowMatrix<float>::Zero(kVocab, kDim);
  g.add_to(dense);
  ember::optim::Adam<float> lazy, full;
  lazy.step(a, g);
  full.step(b, dense);
  double sparse_s = 0.0, dense_s = 0.0;
  using clock = std::chrono::steady_clock;
  for (auto _ : state) {
    const auto t0 = clock::now();
    lazy.step(a, g);
    const auto t1 = clock::now();
    full.step(b, dense);
    const auto t2 = clock::now();
    benchmark::ClobberMemory();
    sparse_s += std::chrono::duration<double>(t1 - t0).count();
    dense_s += std::chrono::duration<double>(t2 - t1).count();
  }
  state.counters["rows_sparse"] = static_cast<double>(g.size());
  state.counters["speedup"] = dense_s / sparse_s;
}

}  // namespace

BENCHMARK_CAPTURE(BM_SparseStep, SGD_momentum,
                  ember::optim::SGD<float>({.lr = 0.1, .momentum = 0.9}))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DenseStep, SGD_momentum,
                  ember::optim::SGD<float>({.lr = 0.1, .momentum = 0.9}))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SparseStep, Adam, ember::optim::Adam<float>({.lr = 1e-3}))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DenseStep, Adam, ember::optim::Adam<float>({.lr = 1e-3}))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SparseStep, RowwiseAdagrad, ember::optim::RowwiseAdagrad<float>({.lr = 0.01}))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_DenseStep, RowwiseAdagrad, ember::optim::RowwiseAdagrad<float>({.lr = 0.01}))
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_AdamSparseVsDense)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
