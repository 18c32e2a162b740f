// Core benchmarks: lookup, fused lookup + positions, sparse backward and tied logits, each next
// to a raw baseline in the same binary so the cost of the abstraction is visible as a ratio.
// SPDX-License-Identifier: MIT
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include <ember/embedding.hpp>
#include <ember/input_embedding.hpp>
#include <ember/positional.hpp>
#include <ember/random.hpp>

namespace {

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

std::vector<TokenId> uniform_ids(Index n, Index vocab, std::uint64_t seed) {
  ember::Random rng(seed);
  std::vector<TokenId> ids(static_cast<std::size_t>(n));
  for (auto& id : ids)
    id = static_cast<TokenId>(rng.uniform_index(static_cast<std::uint64_t>(vocab)));
  return ids;
}

void set_counters(benchmark::State& state, Index n, Index d, Index bytes_per_row_moved) {
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * d * bytes_per_row_moved);
}

// Baseline: the plain gather loop, one memcpy per row, no scale (the floor a lookup must match).
void BM_Lookup_Raw(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2);
  ember::Embedding<float> emb(vocab, d, 1);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> out(n, d);
  for (auto _ : state) {
    const float* table = emb.weight().data();
    for (Index i = 0; i < n; ++i) {
      std::memcpy(out.data() + i * d, table + ids[static_cast<std::size_t>(i)] * d,
                  static_cast<std::size_t>(d) * sizeof(float));
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

// ember's validated, scaled lookup into a reused buffer.
void BM_ForwardInto(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2);
  ember::Embedding<float> emb(vocab, d, 1);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> out(n, d);
  for (auto _ : state) {
    emb.forward(ids, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

// Baseline: Eigen 3.4 indexed view, W(ids, all) * s.
void BM_Lookup_EigenIndexed(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2);
  ember::Embedding<float> emb(vocab, d, 1);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> out(n, d);
  const float s = emb.scale();
  for (auto _ : state) {
    out = emb.weight()(ids, Eigen::all) * s;
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

// Fused lookup x scale + sinusoidal positions (one pass) vs forward then add_to (two passes).
void BM_FusedPositions(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2), seq = 512;
  ember::Embedding<float> emb(vocab, d, 1);
  ember::SinusoidalEncoding<float> pe(seq, d);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> out(n, d);
  for (auto _ : state) {
    ember::embed_with_positions(emb, pe, ids, out, seq);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

void BM_UnfusedPositions(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2), seq = 512;
  ember::Embedding<float> emb(vocab, d, 1);
  ember::SinusoidalEncoding<float> pe(seq, d);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> out(n, d);
  for (auto _ : state) {
    emb.forward(ids, out);
    pe.add_to(out, seq);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

// Sparse backward into a fresh SparseRowGrad each step (what a training step does).
void BM_Backward(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2);
  ember::Embedding<float> emb(vocab, d, 1);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> grad_out = RowMatrix<float>::Constant(n, d, 0.5f);
  ember::SparseRowGrad<float> grad(vocab, d);
  for (auto _ : state) {
    grad.clear();
    emb.backward(ids, grad_out, grad);
    benchmark::DoNotOptimize(grad.values().data());
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

// Baseline: dense backward, zero-fill V x d then scatter-add (what a dense framework does).
void BM_Backward_DenseBaseline(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2);
  ember::Embedding<float> emb(vocab, d, 1);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> grad_out = RowMatrix<float>::Constant(n, d, 0.5f);
  RowMatrix<float> dense(vocab, d);
  const float s = emb.scale();
  for (auto _ : state) {
    dense.setZero();
    for (Index i = 0; i < n; ++i)
      dense.row(ids[static_cast<std::size_t>(i)]) += s * grad_out.row(i);
    benchmark::DoNotOptimize(dense.data());
    benchmark::ClobberMemory();
  }
  set_counters(state, n, d, 2 * static_cast<Index>(sizeof(float)));
}

// Tied logits h . W^T: GFLOP/s = 2 n V d / time.
void BM_Logits(benchmark::State& state) {
  const Index vocab = state.range(0), d = state.range(1), n = state.range(2);
  ember::Embedding<float> emb(vocab, d, 1);
  RowMatrix<float> hidden = RowMatrix<float>::Random(n, d);
  RowMatrix<float> out(n, vocab);
  for (auto _ : state) {
    emb.logits(hidden, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(n) * static_cast<double>(vocab) * static_cast<double>(d),
      benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

// Decode-time calls: 1..8 ids, where per-call overhead dominates.
void BM_ForwardSmallN(benchmark::State& state) {
  const Index vocab = 50257, d = 768, n = state.range(0);
  ember::Embedding<float> emb(vocab, d, 1);
  const auto ids = uniform_ids(n, vocab, 2);
  RowMatrix<float> out(n, d);
  for (auto _ : state) {
    emb.forward(ids, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void gpt2_and_base(benchmark::internal::Benchmark* b) {
  b->ArgNames({"vocab", "dim", "n"});
  b->Args({50257, 768, 4096});
  b->Args({37000, 512, 4096});
}

}  // namespace

BENCHMARK(BM_Lookup_Raw)->Apply(gpt2_and_base);
BENCHMARK(BM_ForwardInto)->Apply(gpt2_and_base);
BENCHMARK(BM_Lookup_EigenIndexed)->Apply(gpt2_and_base);
BENCHMARK(BM_FusedPositions)->Apply(gpt2_and_base);
BENCHMARK(BM_UnfusedPositions)->Apply(gpt2_and_base);
BENCHMARK(BM_Backward)->Apply(gpt2_and_base);
BENCHMARK(BM_Backward_DenseBaseline)->Apply(gpt2_and_base);
BENCHMARK(BM_Logits)
    ->ArgNames({"vocab", "dim", "n"})
    ->Args({50257, 768, 64})
    ->Args({37000, 512, 64});
BENCHMARK(BM_ForwardSmallN)->ArgName("n")->DenseRange(1, 8, 7);

BENCHMARK_MAIN();
