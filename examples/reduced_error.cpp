// reduced_error FILE.bin...: what half, bfloat16 and int8 storage cost in accuracy on a real
// word2vec table. For each format: bytes, worst element error, and the tied logits error
// (hidden = the table's own rows, logits = hidden · Wᵀ): max |Δlogit|, max |Δlogit| / max |logit|,
// top-1 agreement and nearest-neighbour (cosine) top-10 overlap with the float table.
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <ember/embedding.hpp>
#include <ember/io/word2vec.hpp>
#include <ember/quantized.hpp>
#include <ember/query/similarity.hpp>
#include <ember/reduced.hpp>

namespace {

using ember::Index;
using ember::RowMatrix;

struct Errors {
  double max_abs = 0, max_rel = 0, top1 = 0, overlap = 0;
};

// Logits of `hidden` against the float table (ref) and a format (fmt): errors and agreement.
template <class Table>
Errors compare(const Table& fmt, const RowMatrix<float>& table, const RowMatrix<float>& hidden,
               const RowMatrix<float>& ref_logits, const RowMatrix<float>& decoded) {
  Errors e;
  const RowMatrix<float> got = fmt.logits(hidden);
  e.max_abs = static_cast<double>((got - ref_logits).cwiseAbs().maxCoeff());
  e.max_rel = e.max_abs / static_cast<double>(ref_logits.cwiseAbs().maxCoeff());
  Index agree = 0;
  for (Index i = 0; i < hidden.rows(); ++i) {
    Index a = 0, b = 0;
    ref_logits.row(i).maxCoeff(&a);
    got.row(i).maxCoeff(&b);
    agree += a == b ? 1 : 0;
  }
  e.top1 = static_cast<double>(agree) / static_cast<double>(hidden.rows());
  const ember::query::Neighbours<float> exact(table), approx(decoded);
  std::size_t shared = 0, total = 0;
  for (Index q = 0; q < hidden.rows(); ++q) {
    const Index id = q * table.rows() / hidden.rows();
    const auto x = exact.nearest(id, 10), y = approx.nearest(id, 10);
    for (const auto& u : x)
      for (const auto& v : y) shared += u.id == v.id ? 1 : 0;
    total += x.size();
  }
  e.overlap = static_cast<double>(shared) / static_cast<double>(total);
  return e;
}

void print(const char* name, std::size_t bytes, std::size_t float_bytes, double elem,
           const Errors& e) {
  std::printf("  %-14s %6.1f%%  %9.2e  %9.2e  %9.2e  %7.2f%%  %7.2f%%\n", name,
              100.0 * static_cast<double>(bytes) / static_cast<double>(float_bytes), elem,
              e.max_abs, e.max_rel, 100.0 * e.top1, 100.0 * e.overlap);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: reduced_error FILE.bin...  (word2vec binary files)\n");
    return 2;
  }
  for (int a = 1; a < argc; ++a) {
    const auto wv = ember::io::load_word2vec_binary<float>(argv[a]);
    const RowMatrix<float>& t = wv.vectors;
    const Index n = std::min<Index>(t.rows(), 1000);  // hidden = n rows spread over the table
    RowMatrix<float> hidden(n, t.cols());
    for (Index i = 0; i < n; ++i) hidden.row(i) = t.row(i * t.rows() / n);
    const RowMatrix<float> ref = ember::Embedding<float>(t).logits(hidden);
    const auto float_bytes = static_cast<std::size_t>(t.size()) * sizeof(float);
    std::printf("%s: %lld x %lld, %lld hidden rows\n", argv[a], static_cast<long long>(t.rows()),
                static_cast<long long>(t.cols()), static_cast<long long>(n));
    std::printf("  %-14s %7s  %9s  %9s  %9s  %8s  %8s\n", "format", "bytes", "elem err", "max|dL|",
                "rel dL", "top-1", "NN@10");

    const auto h = ember::HalfEmbedding::from_float(t);
    const auto b = ember::BFloat16Embedding::from_float(t);
    const ember::QuantizedEmbedding q(t);
    const RowMatrix<float> hf = h.to_float(), bf = b.to_float(), qf = q.dequantize();
    const auto rel = [&](const RowMatrix<float>& x) {
      return static_cast<double>(
          ((x - t).cwiseAbs().array() / t.cwiseAbs().array().max(1e-30f)).maxCoeff());
    };
    print("fp16", h.storage_bytes(), float_bytes, rel(hf), compare(h, t, hidden, ref, hf));
    print("bf16", b.storage_bytes(), float_bytes, rel(bf), compare(b, t, hidden, ref, bf));
    print("int8 rowwise", q.storage_bytes(), float_bytes, q.max_row_error(t).maxCoeff(),
          compare(q, t, hidden, ref, qf));
    const ember::QuantizedEmbedding qm(t, /*keep_float_master=*/true);
    print("int8 + master", q.storage_bytes() + float_bytes, float_bytes,
          q.max_row_error(t).maxCoeff(), compare(qm, t, hidden, ref, qf));
  }
  std::printf("(elem err: max relative error for fp16/bf16, max absolute error for int8)\n");
  return 0;
}
