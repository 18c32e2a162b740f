// A DLRM-like training step on the sparse features: 26 tables with the Criteo Kaggle
// cardinalities (the four largest capped at 4M rows), d = 64, batch 2048; 13 features with one
// id per bag and 13 with 15-25 (about 20); Zipf ids. Every path runs once per iteration on the
// same tables (their values drift; the timing does not depend on them):
//   fused    ember: TableBatchedBags::forward + backward_step with one RowwiseAdagrad per table
//   unfused  ember: forward + backward into 26 SparseRowGrads + 26 RowwiseAdagrad::step
//   torch    LibTorch, per table: embedding_bag (sum, sparse) forward, the outputs concatenated,
//            _embedding_bag_backward (sparse, as autograd calls it), then torch.optim.Adagrad's
//            update of a sparse gradient (coalesce, state_sum += g², param -= lr · g / (√state_sum
//            + eps))
// The iteration time is the fused step's; counters x_unfused = unfused / fused and
// x_torch = torch / fused.
// SPDX-License-Identifier: MIT
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <ember/optim.hpp>
#include <ember/table_batched_bags.hpp>

#include "support/bench_support.hpp"

namespace {

using ember_bench::Dist;
using ember_bench::Index;
using ember_bench::RowMatrix;
using ember_bench::TokenId;
using clock_type = std::chrono::steady_clock;

constexpr Index kDim = 64, kBatch = 2048, kCap = 4'000'000;
// Criteo Kaggle (DLRM's day-split) cardinalities of the 26 categorical features.
constexpr Index kCriteo[26] = {1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
                               93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
                               2173,  4,    7046547,  18,      15,  286181, 105,     142572};

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The batch: feature f reads table f; even features one id per bag, odd ones 15-25.
struct Batch {
  std::vector<TokenId> indices;
  std::vector<Index> offsets;                     // 26·B + 1
  std::vector<std::vector<TokenId>> per_ids;      // feature f's ids
  std::vector<std::vector<TokenId>> per_offsets;  // feature f's B bag starts (PyTorch layout)
};

Batch make_batch(const std::vector<Index>& vocab) {
  Batch batch;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<Index> pooling(15, 25);
  batch.offsets.push_back(0);
  for (std::size_t f = 0; f < vocab.size(); ++f) {
    std::vector<Index> lengths(kBatch, 1);
    if (f % 2 == 1) {
      for (auto& l : lengths) l = pooling(rng);
    }
    Index n = 0;
    for (const Index l : lengths) n += l;
    const auto ids = ember_bench::make_ids(n, vocab[f], Dist::zipf, ember_bench::kIdSeed + f);
    batch.per_ids.push_back(ids);
    batch.per_offsets.emplace_back();
    Index at = 0;
    for (const Index l : lengths) {
      batch.per_offsets.back().push_back(at);
      at += l;
      batch.offsets.push_back(static_cast<Index>(batch.indices.size()) + at);
    }
    batch.indices.insert(batch.indices.end(), ids.begin(), ids.end());
  }
  return batch;
}

void BM_DlrmStep(benchmark::State& state) {
  std::vector<Index> vocab;
  std::vector<ember::Embedding<float>> tables;
  for (const Index v : kCriteo) {
    vocab.push_back(std::min(v, kCap));
    tables.emplace_back(ember_bench::fast_table(vocab.back(), kDim));
  }
  ember::TableBatchedBags<float> tbe(std::move(tables), ember::BagMode::sum);
  const Batch batch = make_batch(vocab);
  RowMatrix<float> out(kBatch, tbe.width());
  const RowMatrix<float> grad_out = 1e-3F * ember_bench::fast_table(kBatch, tbe.width());
  using Adagrad = ember::optim::RowwiseAdagrad<float>;
  std::vector<Adagrad> fused(26, Adagrad({.lr = 0.01}));
  std::vector<Adagrad> unfused(26, Adagrad({.lr = 0.01}));
  std::vector<ember::SparseRowGrad<float>> grads;
#if defined(EMBER_BENCH_HAVE_TORCH)
  std::vector<at::Tensor> weight, state_sum, t_ids, t_offsets;
  for (Index t = 0; t < 26; ++t) {
    weight.push_back(ember_bench::torch_view(tbe.table(t).weight().data(),
                                             vocab[static_cast<std::size_t>(t)], kDim));
    state_sum.push_back(at::zeros_like(weight.back()));
    t_ids.push_back(ember_bench::torch_ids(batch.per_ids[static_cast<std::size_t>(t)]));
    t_offsets.push_back(ember_bench::torch_ids(batch.per_offsets[static_cast<std::size_t>(t)]));
  }
  const at::Tensor t_grad = ember_bench::torch_view(grad_out.data(), kBatch, tbe.width());
#endif
  const auto round = [&](double* times) {
    auto t0 = clock_type::now();
    tbe.forward(batch.indices, batch.offsets, out);
    tbe.backward_step(batch.indices, batch.offsets, grad_out, std::span<Adagrad>(fused));
    times[0] += seconds_since(t0);
    t0 = clock_type::now();
    tbe.forward(batch.indices, batch.offsets, out);
    for (auto& g : grads) g.clear();
    tbe.backward(batch.indices, batch.offsets, grad_out, grads);
    for (Index t = 0; t < 26; ++t)
      unfused[static_cast<std::size_t>(t)].step(tbe.table(t), grads[static_cast<std::size_t>(t)]);
    times[1] += seconds_since(t0);
#if defined(EMBER_BENCH_HAVE_TORCH)
    t0 = clock_type::now();
    std::vector<at::Tensor> outs;
    std::vector<std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor>> saved;
    for (std::size_t t = 0; t < 26; ++t) {
      saved.push_back(at::_embedding_bag(weight[t], t_ids[t], t_offsets[t], false, /*mode=*/0,
                                         /*sparse=*/true));
      outs.push_back(std::get<0>(saved.back()));
    }
    const at::Tensor pooled = at::cat(outs, 1);
    benchmark::DoNotOptimize(pooled.data_ptr());
    Index column = 0;
    for (std::size_t t = 0; t < 26; ++t) {
      const at::Tensor g_out = t_grad.narrow(1, column, kDim);
      column += kDim;
      // What autograd calls for a sparse embedding_bag (it builds offset2bag, which the
      // forward leaves empty in sum mode, then takes the sparse backward).
      at::Tensor g = at::_embedding_bag_backward(
          g_out, t_ids[t], t_offsets[t], std::get<1>(saved[t]), std::get<2>(saved[t]),
          std::get<3>(saved[t]), vocab[t], false, /*mode=*/0, /*sparse=*/true, c10::nullopt);
      g = g.coalesce();
      const at::Tensor idx = g._indices();
      const at::Tensor values = g._values();
      const auto make_sparse = [&](const at::Tensor& v) {
        return at::sparse_coo_tensor(idx, v, g.sizes());
      };
      state_sum[t].add_(make_sparse(values.pow(2)));
      const at::Tensor std_values = state_sum[t].sparse_mask(g)._values().sqrt_().add_(1e-10);
      weight[t].add_(make_sparse(values / std_values), -0.01);
    }
    times[2] += seconds_since(t0);
#endif
    benchmark::ClobberMemory();
  };
  double warm[3] = {0, 0, 0};
  round(warm);  // sizes the slot maps, scratch and state
  double total[3] = {0, 0, 0};
  for (auto _ : state) {
    double times[3] = {0, 0, 0};
    round(times);
    state.SetIterationTime(times[0]);
    for (int k = 0; k < 3; ++k) total[k] += times[k];
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["fused_ms"] = 1e3 * total[0] / n;
  state.counters["unfused_ms"] = 1e3 * total[1] / n;
  state.counters["x_unfused"] = total[1] / total[0];
#if defined(EMBER_BENCH_HAVE_TORCH)
  state.counters["torch_ms"] = 1e3 * total[2] / n;
  state.counters["x_torch"] = total[2] / total[0];
#endif
  state.counters["ids"] = static_cast<double>(batch.indices.size());
}

void register_all() {
  benchmark::RegisterBenchmark("dlrm_step/criteo26/d64/B2048", BM_DlrmStep)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
