// Tied logits benchmarks: ember::logits (h W^T) and logits_backward (G W, W_grad += G^T h) next
// to the GEMMs available on the machine, same shapes, same run:
//   - eigen_gemm: Eigen's product written by hand (what ember calls);
//   - cblas_sgemm: OpenBLAS (or the CBLAS found) called directly, when found;
//   - LibTorch at::linear(h, W) / at::mm + addmm_, when found.
// This file is built twice: bench_tied_logits (Eigen's own GEMM) and bench_tied_logits_blas
// (linked with ember::blas, so EIGEN_USE_BLAS sends ember's products to the BLAS); the impl names
// carry the tag so both land in one table. GFLOP/s = 2 N V d / time per GEMM.
// N = 512 (one sequence): at N = 4096 a GPT-2 logits GEMM is ~300 GFLOP, seconds per call, and the
// GEMM efficiency is already at its plateau at N = 512.
// The LM head at decode time (docs/lm_head.md): logits of N = 1, 2, 4, 8 and 64 hidden rows over
// the float table and its half, bfloat16 and int8 encodings, in both LogitsMode's, cold (table,
// hidden rows and output evicted before each call, timer paused) and warm, next to Eigen's GEMM
// of the float table and one streaming read of each encoding's bytes, same run:
//   small_logits/<impl>/<shape>/n<N>/<mode>/<cache>, stream_read/<table>/<shape>/<cache>.
// SPDX-License-Identifier: MIT
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include <ember/logits_mode.hpp>
#include <ember/quantized.hpp>
#include <ember/reduced.hpp>
#include <ember/tied_logits.hpp>

#include "support/bench_support.hpp"

#if defined(EMBER_BENCH_HAVE_CBLAS)
#include <cblas.h>
#endif

namespace {

using namespace ember_bench;

inline constexpr Index kLogitsTokens = 512;

#if defined(EMBER_BENCH_EIGEN_BLAS)
constexpr const char* kTag = "blas";
#else
constexpr const char* kTag = "eigen";
#endif

std::string name(const char* op, const std::string& impl, const Shape& shape) {
  return std::string(op) + "/" + impl + "/" + shape.name + "/n" + std::to_string(kLogitsTokens) +
         "/warm";
}

void register_case(const Shape& shape) {
  const Index n = kLogitsTokens;
  const Index vocab = shape.vocab;
  const Index d = shape.d;
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(vocab) * static_cast<double>(d);
  auto hidden = std::make_shared<RowMatrix<float>>(RowMatrix<float>::Random(n, d));
  auto grad_logits = std::make_shared<RowMatrix<float>>(RowMatrix<float>::Random(n, vocab));
  const std::string tag = kTag;

  // ---- forward: out[n, V] = h[n, d] W[V, d]^T --------------------------------------------------
  add(name("logits", "ember_logits_" + tag, shape), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    RowMatrix<float> out(n, vocab);
    for (auto _ : state) {
      emb.logits(*hidden, out);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_gflops(state, flops);
  });

  add(name("logits", "gemm_" + tag, shape), [=](benchmark::State& state) {
    const auto& w = table_for(shape).weight();
    RowMatrix<float> out(n, vocab);
    for (auto _ : state) {
      out.noalias() = *hidden * w.transpose();
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_gflops(state, flops);
  });

#if defined(EMBER_BENCH_HAVE_CBLAS)
  add(name("logits", "cblas_sgemm", shape), [=](benchmark::State& state) {
    const auto& w = table_for(shape).weight();
    RowMatrix<float> out(n, vocab);
    const auto ni = static_cast<int>(n), vi = static_cast<int>(vocab), di = static_cast<int>(d);
    for (auto _ : state) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ni, vi, di, 1.0f, hidden->data(), di,
                  w.data(), di, 0.0f, out.data(), vi);
      benchmark::DoNotOptimize(out.data());
      benchmark::ClobberMemory();
    }
    set_gflops(state, flops);
  });
#endif

#if defined(EMBER_BENCH_HAVE_TORCH) && !defined(EMBER_BENCH_EIGEN_BLAS)
  add(name("logits", "torch_linear", shape), [=](benchmark::State& state) {
    const auto& w = table_for(shape).weight();
    const at::Tensor tw = torch_view(w.data(), vocab, d);
    const at::Tensor th = torch_view(hidden->data(), n, d);
    for (auto _ : state) {
      at::Tensor y = at::linear(th, tw);
      benchmark::DoNotOptimize(y.data_ptr());
    }
    set_gflops(state, flops);
  });
#endif

  // ---- backward: grad_h = G W (assigned), grad_W += G^T h (accumulated) ------------------------
  add(name("logits_backward", "ember_logits_backward_" + tag, shape), [=](benchmark::State& state) {
    const auto& emb = table_for(shape);
    RowMatrix<float> grad_h(n, d);
    RowMatrix<float> grad_w = RowMatrix<float>::Zero(vocab, d);
    for (auto _ : state) {
      emb.logits_backward(*hidden, *grad_logits, grad_h, grad_w);
      benchmark::DoNotOptimize(grad_w.data());
      benchmark::ClobberMemory();
    }
    set_gflops(state, 2 * flops);
  });

  add(name("logits_backward", "gemm_" + tag, shape), [=](benchmark::State& state) {
    const auto& w = table_for(shape).weight();
    RowMatrix<float> grad_h(n, d);
    RowMatrix<float> grad_w = RowMatrix<float>::Zero(vocab, d);
    for (auto _ : state) {
      grad_h.noalias() = *grad_logits * w;
      grad_w.noalias() += grad_logits->transpose() * *hidden;
      benchmark::DoNotOptimize(grad_w.data());
      benchmark::ClobberMemory();
    }
    set_gflops(state, 2 * flops);
  });

#if defined(EMBER_BENCH_HAVE_CBLAS)
  add(name("logits_backward", "cblas_sgemm", shape), [=](benchmark::State& state) {
    const auto& w = table_for(shape).weight();
    RowMatrix<float> grad_h(n, d);
    RowMatrix<float> grad_w = RowMatrix<float>::Zero(vocab, d);
    const auto ni = static_cast<int>(n), vi = static_cast<int>(vocab), di = static_cast<int>(d);
    for (auto _ : state) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, di, vi, 1.0f, grad_logits->data(),
                  vi, w.data(), di, 0.0f, grad_h.data(), di);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, vi, di, ni, 1.0f, grad_logits->data(),
                  vi, hidden->data(), di, 1.0f, grad_w.data(), di);
      benchmark::DoNotOptimize(grad_w.data());
      benchmark::ClobberMemory();
    }
    set_gflops(state, 2 * flops);
  });
#endif

#if defined(EMBER_BENCH_HAVE_TORCH) && !defined(EMBER_BENCH_EIGEN_BLAS)
  add(name("logits_backward", "torch_mm", shape), [=](benchmark::State& state) {
    const auto& w = table_for(shape).weight();
    const at::Tensor tw = torch_view(w.data(), vocab, d);
    const at::Tensor th = torch_view(hidden->data(), n, d);
    const at::Tensor tg = torch_view(grad_logits->data(), n, vocab);
    at::Tensor grad_w = at::zeros({vocab, d}, at::kFloat);
    for (auto _ : state) {
      at::Tensor grad_h = at::mm(tg, tw);
      grad_w.addmm_(tg.t(), th);
      benchmark::DoNotOptimize(grad_h.data_ptr());
      benchmark::ClobberMemory();
    }
    set_gflops(state, 2 * flops);
  });
#endif
}

/// The encodings of a shape's float table, built once.
struct Encodings {
  ember::HalfEmbedding half;
  ember::ReducedEmbedding<Eigen::bfloat16> bf16;
  ember::QuantizedEmbedding int8;
};
const Encodings& encodings_for(const Shape& shape) {
  static std::map<std::pair<Index, Index>, std::unique_ptr<Encodings>> cache;
  auto& slot = cache[{shape.vocab, shape.d}];
  if (!slot) {
    const auto& w = table_for(shape).weight();
    slot = std::make_unique<Encodings>(Encodings{
        ember::HalfEmbedding::from_float(w),
        ember::ReducedEmbedding<Eigen::bfloat16>::from_float(w), ember::QuantizedEmbedding(w)});
  }
  return *slot;
}

template <class Table>
std::span<const std::uint8_t> table_bytes(const Table& t) {
  if constexpr (requires { t.bytes(); }) {
    return t.bytes();
  } else {
    return {reinterpret_cast<const std::uint8_t*>(t.weight().data()),
            static_cast<std::size_t>(t.weight().size()) * sizeof(t.weight().data()[0])};
  }
}

void evict(std::span<const std::uint8_t> table, const RowMatrix<float>& h,
           const RowMatrix<float>& out) {
  flush_range(table.data(), table.size());
  flush_range(h.data(), static_cast<std::size_t>(h.size()) * sizeof(float));
  flush_range(out.data(), static_cast<std::size_t>(out.size()) * sizeof(float));
  flush_fence();
}

template <class Get>
void register_small(const Shape& shape, const char* impl, Get get) {
  for (const Cache cache : {Cache::cold, Cache::warm}) {
    for (const ember::LogitsMode mode :
         {ember::LogitsMode::exact, ember::LogitsMode::quantized_hidden}) {
      for (const Index n : {Index{1}, Index{2}, Index{4}, Index{8}, Index{64}}) {
        const std::string name =
            std::string("small_logits/") + impl + "/" + shape.name + "/n" + std::to_string(n) +
            "/" + (mode == ember::LogitsMode::exact ? "exact" : "quantized") + "/" + name_of(cache);
        add(name, [=](benchmark::State& state) {
          const auto& t = get();
          const RowMatrix<float> h = fast_table(n, shape.d);
          RowMatrix<float> out(n, shape.vocab);
          for (auto _ : state) {
            if (cache == Cache::cold) {
              state.PauseTiming();
              evict(table_bytes(t), h, out);
              state.ResumeTiming();
            }
            t.logits(h, out, mode);
            benchmark::DoNotOptimize(out.data());
            benchmark::ClobberMemory();
          }
          set_gflops(state, 2.0 * static_cast<double>(n * shape.vocab * shape.d));
          state.SetBytesProcessed(state.iterations() *
                                  static_cast<std::int64_t>(table_bytes(t).size()));
        })->Unit(benchmark::kMillisecond);
      }
    }
    // One streaming read of the table's bytes (psadbw sums where the build has AVX2).
    add(std::string("stream_read/") + impl + "/" + shape.name + "/" + name_of(cache),
        [=](benchmark::State& state) {
          const auto bytes = table_bytes(get());
          for (auto _ : state) {
            if (cache == Cache::cold) {
              state.PauseTiming();
              flush_range(bytes.data(), bytes.size());
              flush_fence();
              state.ResumeTiming();
            }
            std::uint64_t total = 0;
            const std::size_t whole = bytes.size() / 32 * 32;
#if defined(__AVX2__)
            __m256i acc = _mm256_setzero_si256();
            for (std::size_t i = 0; i < whole; i += 32) {
              acc = _mm256_add_epi64(
                  acc, _mm256_sad_epu8(
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes.data() + i)),
                           _mm256_setzero_si256()));
            }
            alignas(32) std::uint64_t lanes[4];
            _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
            total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
#else
            for (std::size_t i = 0; i < whole; ++i) total += bytes[i];
#endif
            for (std::size_t i = whole; i < bytes.size(); ++i) total += bytes[i];
            benchmark::DoNotOptimize(total);
          }
          state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(bytes.size()));
        })
        ->Unit(benchmark::kMillisecond);
  }
}

/// Eigen's GEMM of the float table for the small N, as ember_logits went through before.
void register_small_gemm(const Shape& shape) {
  for (const Cache cache : {Cache::cold, Cache::warm}) {
    for (const Index n : {Index{1}, Index{2}, Index{4}, Index{8}, Index{64}}) {
      add(std::string("small_logits/gemm_") + kTag + "/" + shape.name + "/n" + std::to_string(n) +
              "/exact/" + name_of(cache),
          [=](benchmark::State& state) {
            const auto& w = table_for(shape).weight();
            const RowMatrix<float> h = fast_table(n, shape.d);
            RowMatrix<float> out(n, shape.vocab);
            for (auto _ : state) {
              if (cache == Cache::cold) {
                state.PauseTiming();
                evict(table_bytes(table_for(shape)), h, out);
                state.ResumeTiming();
              }
              out.noalias() = h * w.transpose();
              benchmark::DoNotOptimize(out.data());
              benchmark::ClobberMemory();
            }
            set_gflops(state, 2.0 * static_cast<double>(n * shape.vocab * shape.d));
          })
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void register_all() {
  for (const Shape& shape : shapes()) register_case(shape);
  for (const Shape& shape : shapes()) {
    register_small(
        shape, "float", [shape]() -> const auto& { return table_for(shape); });
    register_small(
        shape, "half", [shape]() -> const auto& { return encodings_for(shape).half; });
    register_small(
        shape, "bf16", [shape]() -> const auto& { return encodings_for(shape).bf16; });
    register_small(
        shape, "int8", [shape]() -> const auto& { return encodings_for(shape).int8; });
    register_small_gemm(shape);
  }
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
