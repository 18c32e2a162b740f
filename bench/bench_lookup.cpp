// Lookup benchmarks: ember's forward (lookup x scale) and fused lookup + scale + positions, next
// to the memory floors and the alternatives in the same binary:
//   (a) memcpy of N x d contiguous floats, (b) the plain gather loop (memcpy per row),
//   (c) the hand-written fused loop, (d) Eigen 3.4's indexed view W(ids, all) * s,
//   (e) LibTorch at::embedding(W, ids) * s (+ pe), when found.
// Names: op/impl/size/ids/cache; plot.py reads them from the JSON.
// SPDX-License-Identifier: MIT
#include <cstring>
#include <string>

#include <ember/input_embedding.hpp>
#include <ember/positional.hpp>

#include "support/bench_support.hpp"

namespace {

using namespace ember_bench;

struct Case {
  Shape shape;
  Dist dist;
  Cache cache;
};

std::string name(const char* op, const char* impl, const Case& c) {
  return std::string(op) + "/" + impl + "/" + c.shape.name + "/" + name_of(c.dist) + "/" +
         name_of(c.cache);
}

// Runs `body` once per iteration; for cold cases first evicts the table rows of `ids` and `out`
// with the timer paused.
template <class Body>
void run(benchmark::State& state, const Case& c, const float* table,
         const std::vector<TokenId>& ids, const float* out, Body&& body) {
  const Index d = c.shape.d;
  for (auto _ : state) {
    if (c.cache == Cache::cold) {
      state.PauseTiming();
      flush_rows(table, d, ids);
      if (out != nullptr) {
        flush_range(out, static_cast<std::size_t>(ids.size()) * static_cast<std::size_t>(d) *
                             sizeof(float));
      }
      flush_fence();
      state.ResumeTiming();
    }
    body();
  }
}

void register_case(const Case& c) {
  const Index d = c.shape.d;
  const Index n = kTokens;
  auto ids = std::make_shared<std::vector<TokenId>>(make_ids(n, c.shape.vocab, c.dist));
  auto out = std::make_shared<RowMatrix<float>>(n, d);

  // ---- lookup x scale ---------------------------------------------------------------------------
  add(name("lookup", "memcpy_contiguous", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    // (a) the first N rows, contiguous: the bandwidth ceiling of any N x d copy.
    std::vector<TokenId> first(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) first[static_cast<std::size_t>(i)] = i % c.shape.vocab;
    run(state, c, emb.weight().data(), first, out->data(), [&] {
      std::memcpy(out->data(), emb.weight().data(),
                  static_cast<std::size_t>(n * d) * sizeof(float));
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

  add(name("lookup", "gather_memcpy", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    const float* table = emb.weight().data();
    // (b) the plain gather loop: one memcpy per row, no scale. The floor of a lookup.
    run(state, c, table, *ids, out->data(), [&] {
      float* dst = out->data();
      for (Index i = 0; i < n; ++i) {
        std::memcpy(dst + i * d, table + (*ids)[static_cast<std::size_t>(i)] * d,
                    static_cast<std::size_t>(d) * sizeof(float));
      }
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

  add(name("lookup", "ember_forward", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    run(state, c, emb.weight().data(), *ids, out->data(), [&] {
      emb.forward(*ids, *out);
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

  add(name("lookup", "eigen_indexed", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    const float s = emb.scale();
    // (d) Eigen 3.4 indexed view.
    run(state, c, emb.weight().data(), *ids, out->data(), [&] {
      out->noalias() = emb.weight()(*ids, Eigen::all) * s;
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

#if defined(EMBER_BENCH_HAVE_TORCH)
  add(name("lookup", "torch_embedding", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    const at::Tensor w = torch_view(emb.weight().data(), c.shape.vocab, d);
    const at::Tensor t_ids = torch_ids(*ids);
    // Bare at::embedding, no scale: LibTorch's gather against the floor.
    run(state, c, emb.weight().data(), *ids, nullptr, [&] {
      at::Tensor y = at::embedding(w, t_ids);
      benchmark::DoNotOptimize(y.data_ptr());
    });
    set_memory_counters(state, n, d, n, n);
  });

  add(name("lookup", "torch_embedding_scale", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    const at::Tensor w = torch_view(emb.weight().data(), c.shape.vocab, d);
    const at::Tensor t_ids = torch_ids(*ids);
    const double s = static_cast<double>(emb.scale());
    run(state, c, emb.weight().data(), *ids, nullptr, [&] {
      at::Tensor y = at::embedding(w, t_ids) * s;
      benchmark::DoNotOptimize(y.data_ptr());
    });
    set_memory_counters(state, n, d, n, n);
  });
#endif

  // ---- lookup x scale + positions
  // -----------------------------------------------------------------
  auto pe = std::make_shared<ember::SinusoidalEncoding<float>>(kSeqLen, d);

  add(name("fused", "fused_loop", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    const float* table = emb.weight().data();
    const float* pos = pe->table().data();
    const float s = emb.scale();
    // (c) the hand-written fused loop: out[i] = W[id] * s + pe[i % T].
    run(state, c, table, *ids, out->data(), [&] {
      float* dst = out->data();
      for (Index i = 0; i < n; ++i) {
        const float* w = table + (*ids)[static_cast<std::size_t>(i)] * d;
        const float* p = pos + (i % kSeqLen) * d;
        float* o = dst + i * d;
        for (Index k = 0; k < d; ++k) o[k] = w[k] * s + p[k];
      }
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

  add(name("fused", "ember_fused", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    run(state, c, emb.weight().data(), *ids, out->data(), [&] {
      ember::embed_with_positions(emb, *pe, *ids, *out, kSeqLen);
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

  add(name("fused", "ember_unfused", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    // ember's own two-pass pipeline: forward, then SinusoidalEncoding::add_to.
    run(state, c, emb.weight().data(), *ids, out->data(), [&] {
      emb.forward(*ids, *out);
      pe->add_to(*out, kSeqLen);
      benchmark::ClobberMemory();
    });
    set_memory_counters(state, n, d, n, n);
  });

#if defined(EMBER_BENCH_HAVE_TORCH)
  add(name("fused", "torch_pipeline", c), [=](benchmark::State& state) {
    const auto& emb = table_for(c.shape);
    const at::Tensor w = torch_view(emb.weight().data(), c.shape.vocab, d);
    const at::Tensor t_ids = torch_ids(*ids).view({kBatch, kSeqLen});
    const at::Tensor t_pe = torch_view(pe->table().data(), kSeqLen, d);
    const double s = static_cast<double>(emb.scale());
    // What a LibTorch model writes: embedding(ids) * sqrt(d) + pe, pe broadcast over the batch.
    run(state, c, emb.weight().data(), *ids, nullptr, [&] {
      at::Tensor y = at::embedding(w, t_ids) * s + t_pe;
      benchmark::DoNotOptimize(y.data_ptr());
    });
    set_memory_counters(state, n, d, n, n);
  });
#endif
}

void register_all() {
  for (const Shape& shape : shapes()) {
    for (const Dist dist : {Dist::uniform, Dist::zipf}) {
      for (const Cache cache : {Cache::warm, Cache::cold}) register_case({shape, dist, cache});
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
