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
// SPDX-License-Identifier: MIT
#include <string>

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

void register_all() {
  for (const Shape& shape : shapes()) register_case(shape);
}

}  // namespace

int main(int argc, char** argv) { return ember_bench::run_main(argc, argv, register_all); }
