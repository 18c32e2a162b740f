// ember::top_k over the rows of a logits matrix at decoding shapes (1..64 rows x V = 32000 ..
// 256000, k = 1..50), against what a decoding loop writes by hand: std::partial_sort of the
// column indices, std::nth_element + sort of the k first, and torch.topk (LibTorch) when found.
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include <ember/init.hpp>
#include <ember/top_k.hpp>
#if defined(EMBER_BENCH_HAVE_TORCH)
#include <torch/torch.h>
#endif

#include "support/bench_support.hpp"

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

/// rows x V logits, N(0, 4) (a spread like a language model's), fixed seed.
const RowMatrix<float>& logits(Index rows, Index v) {
  static RowMatrix<float> x;
  if (x.rows() != rows || x.cols() != v) {
    x.resize(rows, v);
    ember::Init::normal(2.0).fill(x, 11);
  }
  return x;
}

void set_counters(benchmark::State& state, Index rows, Index v) {
  state.SetItemsProcessed(state.iterations() * rows * v);  // logits read
  state.SetBytesProcessed(state.iterations() * rows * v * static_cast<Index>(sizeof(float)));
}

void BM_TopK(benchmark::State& state) {
  const Index rows = state.range(0), v = state.range(1), k = state.range(2);
  const RowMatrix<float>& x = logits(rows, v);
  RowMatrix<float> values(rows, k);
  RowMatrix<TokenId> indices(rows, k);
  for (auto _ : state) {
    ember::top_k(x, k, values, indices);
    benchmark::DoNotOptimize(values.data());
    benchmark::DoNotOptimize(indices.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, rows, v);
}

/// A hand-written loop: per row, `select(order, k, better)` brings the k best column indices to
/// the front of `order` (iota) in order, by value with the lower index first on ties, as ember
/// orders them.
template <class Select>
void hand_written(benchmark::State& state, Select select) {
  const Index rows = state.range(0), v = state.range(1), k = state.range(2);
  const RowMatrix<float>& x = logits(rows, v);
  RowMatrix<float> values(rows, k);
  RowMatrix<TokenId> indices(rows, k);
  std::vector<TokenId> order(static_cast<std::size_t>(v));
  for (auto _ : state) {
    for (Index i = 0; i < rows; ++i) {
      const float* row = x.row(i).data();
      std::iota(order.begin(), order.end(), TokenId{0});
      select(order, k, [row](TokenId a, TokenId b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      for (Index j = 0; j < k; ++j) {
        indices(i, j) = order[static_cast<std::size_t>(j)];
        values(i, j) = row[indices(i, j)];
      }
    }
    benchmark::DoNotOptimize(values.data());
    benchmark::DoNotOptimize(indices.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, rows, v);
}

/// std::partial_sort of the column indices.
void BM_TopK_PartialSort(benchmark::State& state) {
  hand_written(state, [](std::vector<TokenId>& order, Index k, const auto& better) {
    std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
  });
}

/// std::nth_element to the k-th, then a sort of the k first.
void BM_TopK_NthElement(benchmark::State& state) {
  hand_written(state, [](std::vector<TokenId>& order, Index k, const auto& better) {
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), better);
    std::sort(order.begin(), order.begin() + k, better);
  });
}

#if defined(EMBER_BENCH_HAVE_TORCH)
/// torch.topk(x, k, -1, largest=True, sorted=True) on the same (borrowed) logits.
void BM_TopK_Torch(benchmark::State& state) {
  const Index rows = state.range(0), v = state.range(1), k = state.range(2);
  const RowMatrix<float>& x = logits(rows, v);
  const torch::Tensor t = torch::from_blob(const_cast<float*>(x.data()), {rows, v});
  torch::Tensor values = torch::empty({rows, k});
  torch::Tensor indices = torch::empty({rows, k}, torch::kInt64);
  for (auto _ : state) {
    torch::topk_out(values, indices, t, k, -1, true, true);
    benchmark::DoNotOptimize(values.data_ptr());
    benchmark::ClobberMemory();
  }
  set_counters(state, rows, v);
}
#endif

/// Decoding shapes: one sequence or a batch of 64, GPT-2 / LLaMA-2 (32000), LLaMA-3 (128256) and
/// Gemma (256000) vocabularies, greedy (k = 1) to top-50 sampling.
void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "vocab", "k"});
  for (const Index rows : {1, 8, 64})
    for (const Index v : {32000, 128256, 256000})
      for (const Index k : {1, 10, 50}) b->Args({rows, v, k});
  b->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_TopK)->Apply(shapes);
BENCHMARK(BM_TopK_PartialSort)->Apply(shapes);
BENCHMARK(BM_TopK_NthElement)->Apply(shapes);
#if defined(EMBER_BENCH_HAVE_TORCH)
BENCHMARK(BM_TopK_Torch)->Apply(shapes);
#endif

}  // namespace

// LibTorch runs at the run's thread count (OMP_NUM_THREADS), as ember's kernels do.
int main(int argc, char** argv) {
  return ember_bench::run_main(argc, argv, [] {});
}
