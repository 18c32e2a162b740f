// Sparse backward benchmarks: ember's Embedding::backward into a SparseRowGrad (cleared each step,
// as in training) next to
//   - slotmap_loop: a hand-written slot-map accumulation (V-entry int -> compact row, rows left in
//     first-seen order: no sorted output, no determinism contract) — the floor;
//   - stream_floor / read_floor: the same useful bytes moved sequentially (read grad_out, write
//     the distinct rows) / grad_out only read: the memory floors of any implementation;
//   - dense_loop: zero-fill V x d then scatter-add, what a dense framework does;
//   - LibTorch at::embedding_backward dense, sparse (uncoalesced) and sparse + coalesce().
// LibTorch's backward gets grad_out without the sqrt(d) scale (its scale lives in the forward's
// mul node), so it does strictly less arithmetic than ember's. Names: op/impl/size/ids/cache.
// SPDX-License-Identifier: MIT
#include <cstring>
#include <string>

#include <ember/sparse_grad.hpp>

#include "support/bench_support.hpp"

namespace {

using namespace ember_bench;

std::string name(const char* impl, const Shape& shape, Dist dist) {
  return std::string("backward/") + impl + "/" + shape.name + "/" + name_of(dist) + "/warm";
}

void register_case(const Shape& shape, Dist dist) {
  const Index d = shape.d;
  const Index n = kTokens;
  const Index vocab = shape.vocab;
  auto ids = std::make_shared<std::vector<TokenId>>(make_ids(n, vocab, dist));
  auto grad_out = std::make_shared<RowMatrix<float>>(RowMatrix<float>::Random(n, d));
  Index distinct = 0;
  {
    std::vector<char> seen(static_cast<std::size_t>(vocab), 0);
    for (const TokenId id : *ids) distinct += seen[static_cast<std::size_t>(id)]++ == 0 ? 1 : 0;
  }
  // Useful bytes: every grad_out row read once, every touched row written once.
  const auto counters = [=](benchmark::State& state) {
    set_memory_counters(state, n, d, n, distinct);
    state.counters["distinct_rows"] = static_cast<double>(distinct);
  };

  add(name("ember_backward", shape, dist), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    ember::SparseRowGrad<float> grad(vocab, d);
    for (auto _ : state) {
      grad.clear();
      emb.backward(*ids, *grad_out, grad);
      benchmark::DoNotOptimize(grad.values().data());
      benchmark::ClobberMemory();
    }
    counters(state);
  });

  add(name("slotmap_loop", shape, dist), [=](benchmark::State& state) {
    const float s = table_for(shape).scale();
    std::vector<std::int32_t> slot(static_cast<std::size_t>(vocab), -1);
    std::vector<TokenId> rows;
    RowMatrix<float> values;
    for (auto _ : state) {
      rows.clear();
      values.resize(n, d);  // capacity for the worst case; only `rows.size()` rows are used
      for (Index i = 0; i < n; ++i) {
        const TokenId id = (*ids)[static_cast<std::size_t>(i)];
        std::int32_t& k = slot[static_cast<std::size_t>(id)];
        const float* g = grad_out->data() + i * d;
        if (k < 0) {
          k = static_cast<std::int32_t>(rows.size());
          rows.push_back(id);
          float* dst = values.data() + static_cast<Index>(k) * d;
          for (Index c = 0; c < d; ++c) dst[c] = s * g[c];
        } else {
          float* dst = values.data() + static_cast<Index>(k) * d;
          for (Index c = 0; c < d; ++c) dst[c] += s * g[c];
        }
      }
      for (const TokenId id : rows) slot[static_cast<std::size_t>(id)] = -1;
      benchmark::DoNotOptimize(values.data());
      benchmark::ClobberMemory();
    }
    counters(state);
  });

  add(name("stream_floor", shape, dist), [=](benchmark::State& state) {
    // The memory floor of any sparse backward, in the same binary: the same useful bytes as
    // ember's (every grad_out row read once, `distinct` rows written once), moved in the best
    // possible pattern: one sequential read of grad_out (the first `distinct` rows memcpy'd into
    // the output, the rest summed) and one sequential write. No grouping, no gather by id.
    RowMatrix<float> values(distinct, d);
    for (auto _ : state) {
      std::memcpy(values.data(), grad_out->data(),
                  static_cast<std::size_t>(distinct * d) * sizeof(float));
      const float rest = grad_out->bottomRows(n - distinct).sum();
      benchmark::DoNotOptimize(rest);
      benchmark::DoNotOptimize(values.data());
      benchmark::ClobberMemory();
    }
    counters(state);
  });

  add(name("read_floor", shape, dist), [=](benchmark::State& state) {
    // Reading grad_out once (n x d floats, sequential) and nothing else: a lower bound no
    // backward can beat, whatever it writes.
    for (auto _ : state) {
      const float all = grad_out->sum();
      benchmark::DoNotOptimize(all);
    }
    set_memory_counters(state, n, d, n, 0);  // bytes it actually moves: the reads alone
    state.counters["distinct_rows"] = static_cast<double>(distinct);
  });

  add(name("dense_loop", shape, dist), [=](benchmark::State& state) {
    const float s = table_for(shape).scale();
    RowMatrix<float> dense(vocab, d);
    for (auto _ : state) {
      dense.setZero();
      for (Index i = 0; i < n; ++i) {
        dense.row((*ids)[static_cast<std::size_t>(i)]) += s * grad_out->row(i);
      }
      benchmark::DoNotOptimize(dense.data());
      benchmark::ClobberMemory();
    }
    counters(state);
  });

#if defined(EMBER_BENCH_HAVE_TORCH)
  const auto torch_case = [=](const char* impl, bool sparse, bool coalesce) {
    add(name(impl, shape, dist), [=](benchmark::State& state) {
      const at::Tensor g = torch_view(grad_out->data(), n, d);
      const at::Tensor t_ids = torch_ids(*ids);
      for (auto _ : state) {
        at::Tensor grad = at::embedding_backward(g, t_ids, vocab, /*padding_idx=*/-1,
                                                 /*scale_grad_by_freq=*/false, sparse);
        if (coalesce) grad = grad.coalesce();
        benchmark::DoNotOptimize(grad.unsafeGetTensorImpl());
        benchmark::ClobberMemory();
      }
      counters(state);
    });
  };
  torch_case("torch_dense", false, false);
  torch_case("torch_sparse", true, false);
  torch_case("torch_sparse_coalesce", true, true);
#endif
}

void register_all() {
  for (const Shape& shape : shapes()) {
    for (const Dist dist : {Dist::uniform, Dist::zipf}) register_case(shape, dist);
  }
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
