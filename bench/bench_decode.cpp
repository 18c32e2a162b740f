// Decoding-sized calls (N = 1..8 ids, GPT-2 table, warm): ember's forward and fused
// lookup + positions against the bare row copies, so the difference is ember's per-call
// overhead (validation, views, dispatch). Target: <= ~100 ns above the copies.
// Names: op/impl/gpt2/n<N>/warm.
// SPDX-License-Identifier: MIT
#include <cstring>
#include <string>

#include <ember/input_embedding.hpp>
#include <ember/positional.hpp>

#include "support/bench_support.hpp"

namespace {

using namespace ember_bench;

inline constexpr Index kOffset = 100;  // decoding position of the first id in the call

std::string name(const char* op, const char* impl, Index n) {
  return std::string(op) + "/" + impl + "/gpt2/n" + std::to_string(n) + "/warm";
}

void register_n(Index n) {
  const Shape shape = shapes().front();
  const Index d = shape.d;
  auto ids = std::make_shared<std::vector<TokenId>>(make_ids(n, shape.vocab, Dist::zipf));
  auto pe = std::make_shared<ember::SinusoidalEncoding<float>>(1024, d);

  add(name("decode_lookup", "gather_memcpy", n), [=](benchmark::State& state) {
    const float* table = table_for(shape).weight().data();
    RowMatrix<float> out(n, d);
    for (auto _ : state) {
      for (Index i = 0; i < n; ++i) {
        std::memcpy(out.data() + i * d, table + (*ids)[static_cast<std::size_t>(i)] * d,
                    static_cast<std::size_t>(d) * sizeof(float));
      }
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_memory_counters(state, n, d, n, n);
  });

  add(name("decode_lookup", "ember_forward", n), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    RowMatrix<float> out(n, d);
    for (auto _ : state) {
      emb.forward(*ids, out);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_memory_counters(state, n, d, n, n);
  });

  add(name("decode_fused", "fused_loop", n), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    const float* table = emb.weight().data();
    const float* pos = pe->table().data();
    const float s = emb.scale();
    RowMatrix<float> out(n, d);
    for (auto _ : state) {
      for (Index i = 0; i < n; ++i) {
        const float* w = table + (*ids)[static_cast<std::size_t>(i)] * d;
        const float* p = pos + (kOffset + i) * d;
        float* o = out.data() + i * d;
        for (Index k = 0; k < d; ++k) o[k] = w[k] * s + p[k];
      }
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_memory_counters(state, n, d, n, n);
  });

  add(name("decode_fused", "ember_fused", n), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    RowMatrix<float> out(n, d);
    for (auto _ : state) {
      // One sequence of n new tokens at positions kOffset .. kOffset + n - 1.
      ember::embed_with_positions(emb, *pe, *ids, out, n, kOffset);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_memory_counters(state, n, d, n, n);
  });

#if defined(EMBER_BENCH_HAVE_TORCH)
  add(name("decode_lookup", "torch_embedding", n), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    const at::Tensor w = torch_view(emb.weight().data(), shape.vocab, d);
    const at::Tensor t_ids = torch_ids(*ids);
    for (auto _ : state) {
      at::Tensor y = at::embedding(w, t_ids);
      benchmark::DoNotOptimize(y.data_ptr());
    }
    set_memory_counters(state, n, d, n, n);
  });
#endif
}

void register_all() {
  for (const Index n : {1, 2, 4, 8}) register_n(n);
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
