// EmbeddingBag throughput: sum / mean / max forward and sum / mean / max backward on a GPT-2 small
// table (50257 x 768) and a recommendation-sized table (4M x 64, 1 GB: larger than the last-level
// cache of most machines), bags of 10..30 ids (mean 20) drawn uniform or Zipf(1.1). Compared with
//   floor - a hand-written pooling loop (raw pointers, no validation) and, for the sum backward,
//           a hand-written slot-map accumulation with no ordering contract;
//   torch - at::embedding_bag (forward) and at::_embedding_bag_sparse_backward + coalesce
//           (backward), when LibTorch is found.
// Counters: rows/s (ids pooled per second), GB/s of table rows read (backward: gradient rows
// written) and FBGEMM's effective GB/s (each row rounded up to whole 64-byte lines).
//
// Run: build/release/bench/bench_bag --benchmark_repetitions=5 --benchmark_report_aggregates_only
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <ember/bag.hpp>
#include <ember/sparse_grad.hpp>

#include "support/bench_support.hpp"

namespace {

using ember::BagMode;
using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_bench::Dist;

constexpr Index kBags = 512;  // bags per call; ~10k ids

struct BagShape {
  const char* name;
  Index vocab;
  Index d;
};

const std::vector<BagShape>& bag_shapes() {
  static const std::vector<BagShape> all{{"gpt2", 50257, 768}, {"rec4M", 4'000'000, 64}};
  return all;
}

/// One bag layer per mode over the same table of a shape, built once (the largest shape only
/// while it is in use: 3 x 1 GB).
struct Layers {
  Index vocab = 0, d = 0;
  std::unique_ptr<ember::EmbeddingBag<float>> sum, mean, max;
};

Layers& layers_for(const BagShape& shape) {
  static Layers l;
  if (l.vocab != shape.vocab || l.d != shape.d) {
    l = Layers{};
    RowMatrix<float> t = ember_bench::fast_table(shape.vocab, shape.d);
    l.sum = std::make_unique<ember::EmbeddingBag<float>>(ember::Embedding<float>(t), BagMode::sum);
    l.mean =
        std::make_unique<ember::EmbeddingBag<float>>(ember::Embedding<float>(t), BagMode::mean);
    l.max = std::make_unique<ember::EmbeddingBag<float>>(ember::Embedding<float>(std::move(t)),
                                                         BagMode::max);
    l.vocab = shape.vocab;
    l.d = shape.d;
  }
  return l;
}

ember::EmbeddingBag<float>& layer(Layers& l, BagMode mode) {
  return mode == BagMode::sum ? *l.sum : mode == BagMode::mean ? *l.mean : *l.max;
}

/// kBags bags of 10..30 ids (fixed seed): ids and PyTorch offsets [B].
struct Bags {
  std::vector<TokenId> ids;
  std::vector<TokenId> offsets;
};

Bags make_bags(Index vocab, Dist dist) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<Index> len(10, 30);
  Bags b;
  Index n = 0;
  for (Index k = 0; k < kBags; ++k) {
    b.offsets.push_back(n);
    n += len(rng);
  }
  b.ids = ember_bench::make_ids(n, vocab, dist);
  return b;
}

const char* mode_name(BagMode mode) { return ember::to_string(mode); }

void set_counters(benchmark::State& state, Index ids, Index d) {
  const auto row = static_cast<double>(d) * sizeof(float);
  const double padded = static_cast<double>((static_cast<Index>(row) + 63) / 64 * 64);
  const auto n = static_cast<double>(ids);
  state.counters["rows/s"] = benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] =
      benchmark::Counter(n * row * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["effGB/s"] =
      benchmark::Counter(n * padded * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

/// The floor: a plain pooling loop over raw rows, no checks, no padding, no argmax.
void floor_pool(const float* table, Index d, const Bags& bags, BagMode mode, float* out) {
  const auto n = static_cast<Index>(bags.ids.size());
  for (Index b = 0; b < kBags; ++b) {
    const Index begin = bags.offsets[static_cast<std::size_t>(b)];
    const Index end = b + 1 < kBags ? bags.offsets[static_cast<std::size_t>(b + 1)] : n;
    float* o = out + b * d;
    if (mode == BagMode::max) {
      std::fill(o, o + d, -std::numeric_limits<float>::infinity());
    } else {
      std::fill(o, o + d, 0.0f);
    }
    for (Index i = begin; i < end; ++i) {
      const float* r = table + bags.ids[static_cast<std::size_t>(i)] * d;
      if (mode == BagMode::max) {
        for (Index c = 0; c < d; ++c) o[c] = std::max(o[c], r[c]);
      } else {
        for (Index c = 0; c < d; ++c) o[c] += r[c];
      }
    }
    if (mode == BagMode::mean && end > begin) {
      const float inv = 1.0f / static_cast<float>(end - begin);
      for (Index c = 0; c < d; ++c) o[c] *= inv;
    }
  }
}

/// The backward floor: slot-map accumulation of grad_out[b] into one row per distinct id, in
/// first-seen order (no sorting), slots reset sparsely.
struct FloorGrad {
  std::vector<std::int32_t> slot;
  std::vector<TokenId> rows;
  RowMatrix<float> values;
  void run(const Bags& bags, const RowMatrix<float>& grad_out, Index vocab) {
    const Index d = grad_out.cols();
    const auto n = static_cast<Index>(bags.ids.size());
    if (static_cast<Index>(slot.size()) != vocab) slot.assign(static_cast<std::size_t>(vocab), -1);
    if (values.rows() < n) values.resize(n, d);
    rows.clear();
    for (Index b = 0; b < kBags; ++b) {
      const Index begin = bags.offsets[static_cast<std::size_t>(b)];
      const Index end = b + 1 < kBags ? bags.offsets[static_cast<std::size_t>(b + 1)] : n;
      const float* g = grad_out.row(b).data();
      for (Index i = begin; i < end; ++i) {
        const TokenId id = bags.ids[static_cast<std::size_t>(i)];
        std::int32_t& s = slot[static_cast<std::size_t>(id)];
        float* v = nullptr;
        if (s < 0) {
          s = static_cast<std::int32_t>(rows.size());
          rows.push_back(id);
          v = values.row(s).data();
          std::copy(g, g + d, v);
        } else {
          v = values.row(s).data();
          for (Index c = 0; c < d; ++c) v[c] += g[c];
        }
      }
    }
    for (const TokenId id : rows) slot[static_cast<std::size_t>(id)] = -1;
  }
};

#if defined(EMBER_BENCH_HAVE_TORCH)
/// LibTorch views (no copies) of the table of a shape's bag layer and of the bags' ids and offsets.
struct TorchBags {
  at::Tensor weight, ids, offsets;
};

TorchBags torch_bags(const BagShape& shape, BagMode mode, const Bags& bags) {
  const auto& bag = layer(layers_for(shape), mode);
  return {ember_bench::torch_view(bag.embedding().weight().data(), shape.vocab, shape.d),
          ember_bench::torch_ids(bags.ids), ember_bench::torch_ids(bags.offsets)};
}
#endif

std::string bench_name(const char* op, const char* impl, const BagShape& s, Dist dist) {
  return std::string(op) + "/" + impl + "/" + s.name + "/" + ember_bench::name_of(dist);
}

void register_all() {
  using ember_bench::add;
  for (const BagShape& shape : bag_shapes()) {
    for (const Dist dist : {Dist::uniform, Dist::zipf}) {
      auto bags = std::make_shared<const Bags>(make_bags(shape.vocab, dist));
      const auto n = static_cast<Index>(bags->ids.size());
      for (const BagMode mode : {BagMode::sum, BagMode::mean, BagMode::max}) {
        const std::string op = std::string("bag_") + mode_name(mode);
        add(bench_name(op.c_str(), "ember", shape, dist), [=](benchmark::State& state) {
          auto& bag = layer(layers_for(shape), mode);
          RowMatrix<float> out(kBags, shape.d);
          for (auto _ : state) {
            bag.forward(bags->ids, bags->offsets, out);
            benchmark::DoNotOptimize(out.data());
            benchmark::ClobberMemory();
          }
          set_counters(state, n, shape.d);
        })->Unit(benchmark::kMicrosecond);
        add(bench_name(op.c_str(), "floor", shape, dist), [=](benchmark::State& state) {
          const auto& bag = layer(layers_for(shape), mode);
          RowMatrix<float> out(kBags, shape.d);
          for (auto _ : state) {
            floor_pool(bag.embedding().weight().data(), shape.d, *bags, mode, out.data());
            benchmark::DoNotOptimize(out.data());
            benchmark::ClobberMemory();
          }
          set_counters(state, n, shape.d);
        })->Unit(benchmark::kMicrosecond);
#if defined(EMBER_BENCH_HAVE_TORCH)
        add(bench_name(op.c_str(), "torch", shape, dist), [=](benchmark::State& state) {
          const auto [w, t_ids, t_off] = torch_bags(shape, mode, *bags);
          const auto m = static_cast<std::int64_t>(mode);  // 0 sum, 1 mean, 2 max, as ours
          for (auto _ : state) {
            auto result = at::embedding_bag(w, t_ids, t_off, false, m);
            benchmark::DoNotOptimize(std::get<0>(result).data_ptr());
          }
          set_counters(state, n, shape.d);
        })->Unit(benchmark::kMicrosecond);
#endif
      }

      // sum and mean backward: grad_out[B, d] -> row-sparse table gradient (mean: each position
      // scaled by 1 / its bag size, the coefficient path of the gather)
      for (const BagMode mode : {BagMode::sum, BagMode::mean}) {
        const std::string op = std::string("bag_") + mode_name(mode) + "_backward";
        add(bench_name(op.c_str(), "ember", shape, dist), [=](benchmark::State& state) {
          const auto& bag = layer(layers_for(shape), mode);
          const RowMatrix<float> g = RowMatrix<float>::Constant(kBags, shape.d, 0.01f);
          ember::SparseRowGrad<float> grad;
          for (auto _ : state) {
            grad.clear();
            bag.backward(bags->ids, bags->offsets, g, grad);
            benchmark::DoNotOptimize(&grad);
            benchmark::ClobberMemory();
          }
          state.counters["distinct_rows"] = static_cast<double>(grad.rows().size());
          set_counters(state, n, shape.d);
        })->Unit(benchmark::kMicrosecond);
      }
      // max backward: grad_out[B, d] to the row that won each (bag, column), from the argmax the
      // forward recorded once
      add(bench_name("bag_max_backward", "ember", shape, dist), [=](benchmark::State& state) {
        const auto& bag = layer(layers_for(shape), BagMode::max);
        RowMatrix<float> out(kBags, shape.d);
        ember::BagArgmax argmax;
        bag.forward(bags->ids, bags->offsets, out, {}, &argmax);
        const RowMatrix<float> g = RowMatrix<float>::Constant(kBags, shape.d, 0.01f);
        ember::SparseRowGrad<float> grad;
        for (auto _ : state) {
          grad.clear();
          bag.backward(bags->ids, bags->offsets, g, grad, {}, &argmax);
          benchmark::DoNotOptimize(&grad);
          benchmark::ClobberMemory();
        }
        state.counters["distinct_rows"] = static_cast<double>(grad.rows().size());
        set_counters(state, n, shape.d);
      })->Unit(benchmark::kMicrosecond);
      add(bench_name("bag_sum_backward", "floor", shape, dist), [=](benchmark::State& state) {
        const RowMatrix<float> g = RowMatrix<float>::Constant(kBags, shape.d, 0.01f);
        FloorGrad grad;
        for (auto _ : state) {
          grad.run(*bags, g, shape.vocab);
          benchmark::DoNotOptimize(grad.values.data());
          benchmark::ClobberMemory();
        }
        set_counters(state, n, shape.d);
      })->Unit(benchmark::kMicrosecond);
#if defined(EMBER_BENCH_HAVE_TORCH)
      for (const BagMode mode : {BagMode::sum, BagMode::mean}) {
        const std::string op = std::string("bag_") + mode_name(mode) + "_backward";
        add(bench_name(op.c_str(), "torch", shape, dist), [=](benchmark::State& state) {
          const auto [w, t_ids, t_off] = torch_bags(shape, mode, *bags);
          // The bag of each position and the size of each bag, as the forward records them for
          // autograd (built here: the forward-only path does not fill them).
          std::vector<std::int64_t> o2b(static_cast<std::size_t>(n)), sizes;
          for (Index b = 0; b < kBags; ++b) {
            const Index begin = bags->offsets[static_cast<std::size_t>(b)];
            const Index end = b + 1 < kBags ? bags->offsets[static_cast<std::size_t>(b + 1)] : n;
            for (Index i = begin; i < end; ++i) o2b[static_cast<std::size_t>(i)] = b;
            sizes.push_back(end - begin);
          }
          const at::Tensor t_o2b = at::from_blob(o2b.data(), {n}, at::TensorOptions(at::kLong));
          const at::Tensor t_sizes =
              at::from_blob(sizes.data(), {kBags}, at::TensorOptions(at::kLong));
          const at::Tensor g = at::full({kBags, shape.d}, 0.01f);
          std::int64_t nnz = 0;
          for (auto _ : state) {
            at::Tensor grad =
                at::_embedding_bag_sparse_backward(g, t_ids, t_off, t_o2b, t_sizes, shape.vocab,
                                                   false, static_cast<std::int64_t>(mode), {})
                    .coalesce();
            nnz = grad._nnz();
            benchmark::DoNotOptimize(grad.unsafeGetTensorImpl());
          }
          state.counters["distinct_rows"] = static_cast<double>(nnz);
          set_counters(state, n, shape.d);
        })->Unit(benchmark::kMicrosecond);
      }
#endif
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
