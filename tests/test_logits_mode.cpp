// LogitsMode (ember/logits_mode.hpp) on every table kind: exact keeps its arithmetic (ggml tables
// the bits they had, plain float tables a streaming kernel within a stated bound of float64 and
// identical for any thread count, the other codecs the bits of a plain table holding their
// decoded rows), quantized_hidden rounds the hidden rows as ggml does and equals
// the int64 reference of support/lm_head_reference.hpp within its bound; N = 1 .. 9 and 64, odd
// vocabularies, blocks of larger matrices, bad modes and non-finite hidden values.
// SPDX-License-Identifier: MIT
#include "ember/logits_mode.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/embedding_view.hpp"
#include "ember/ggml/encode.hpp"
#include "ember/ggml_embedding.hpp"
#include "ember/quantized.hpp"
#include "ember/reduced.hpp"
#include "ember/reduced_view.hpp"
#include "ember/tied_logits.hpp"
#include "support/lm_head_reference.hpp"
#include "support/matrix_compare.hpp"
#include "support/threads.hpp"

namespace {

using ember::GgmlType;
using ember::Index;
using ember::LogitsMode;
using ember::RowMatrix;

RowMatrix<float> lm_normal(Index rows, Index cols, std::uint64_t seed) {
  ember::Random rng(seed);
  RowMatrix<float> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(rng.normal());
  return m;
}

/// The rows of `w` encoded as ggml type t, packed.
std::vector<std::uint8_t> lm_encoded(GgmlType t, const RowMatrix<float>& w) {
  const Index rb = ember::ggml_row_size(t, w.cols());
  std::vector<std::uint8_t> q(static_cast<std::size_t>(w.rows() * rb));
  for (Index r = 0; r < w.rows(); ++r) {
    ember::detail::ggml::quantize(t, w.row(r).data(), w.cols(), q.data() + r * rb);
  }
  return q;
}

/// Checks z[n, V] against `ref(row bytes, hidden row) -> QuantizedDot` for every logit.
template <class Ref>
void lm_check_reference(const RowMatrix<float>& z, const RowMatrix<float>& h, Ref ref) {
  for (Index j = 0; j < z.rows(); ++j) {
    for (Index r = 0; r < z.cols(); ++r) {
      const ember_test::QuantizedDot want = ref(r, h.row(j).data());
      const double err = std::fabs(static_cast<double>(z(j, r)) - static_cast<double>(want.value));
      if (err > want.bound()) {
        FAIL_CHECK("logit (" << j << ", " << r << ") = " << z(j, r) << ", reference "
                             << static_cast<double>(want.value) << ", bound " << want.bound());
      }
    }
  }
}

/// The float logits bound of the plain streaming kernel: (d / 32 + 6) · 2⁻²⁴ · Σ |h · w| (per
/// lane, the fused or rounded multiply-adds of one float sum, then the 5-level tree).
void lm_check_float(const RowMatrix<float>& z, const RowMatrix<float>& h,
                    const RowMatrix<float>& w) {
  const Eigen::MatrixXd exact = h.cast<double>() * w.cast<double>().transpose();
  const Eigen::MatrixXd magnitude =
      h.cast<double>().cwiseAbs() * w.cast<double>().cwiseAbs().transpose();
  const double eps = (static_cast<double>(w.cols() + 31) / 32 + 6) * 0x1p-24;
  for (Index i = 0; i < z.rows(); ++i) {
    for (Index r = 0; r < z.cols(); ++r) {
      const double err = std::fabs(static_cast<double>(z(i, r)) - exact(i, r));
      if (err > eps * magnitude(i, r)) {
        FAIL_CHECK("logit (" << i << ", " << r << ") = " << z(i, r) << ", exact " << exact(i, r));
      }
    }
  }
}

/// The exact logits of a plain float table holding the decoded rows of `table`.
template <class Tab>
RowMatrix<float> lm_plain(const Tab& table, const RowMatrix<float>& h) {
  const RowMatrix<float> decoded = table.dequantize();
  return ember::EmbeddingView<float>(decoded).logits(h);
}

/// h · wᵀ by Eigen's GEMM into a row-major matrix, as plain tables compute more than 8 rows.
template <class T>
RowMatrix<T> lm_gemm(const RowMatrix<T>& h, const RowMatrix<T>& w) {
  RowMatrix<T> out(h.rows(), w.rows());
  out.noalias() = h * w.transpose();
  return out;
}

constexpr GgmlType lm_block_types[] = {
    GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,
    GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::F16,  GgmlType::BF16};

}  // namespace

TEST_CASE("logits mode: ggml tables round the hidden rows as ggml does, for every N",
          "[logits_mode]") {
  const Index v = 37;  // odd
  const Index d = 512;
  const RowMatrix<float> w = lm_normal(v, d, 1);
  for (const GgmlType t : lm_block_types) {
    const auto bytes = lm_encoded(t, w);
    const ember::GgmlEmbeddingView view(ember::codec::Ggml(t), bytes.data(), v, d, -1);
    const Index rb = view.row_bytes();
    const auto ref = [&](Index r, const float* x) {
      return ember_test::quantized_dot_reference(t, bytes.data() + r * rb, x, d);
    };
    for (const Index n : {Index{1}, Index{2}, Index{3}, Index{4}, Index{5}, Index{6}, Index{7},
                          Index{8}, Index{9}, Index{64}}) {
      INFO(to_string(t) << " n = " << n);
      const RowMatrix<float> h = lm_normal(n, d, 10 + static_cast<std::uint64_t>(n));
      const RowMatrix<float> z = view.logits(h, LogitsMode::quantized_hidden);
      lm_check_reference(z, h, ref);
      // Into a block of a larger matrix, from a block of a larger matrix: the same bits, and
      // nothing outside the block written.
      RowMatrix<float> hb = RowMatrix<float>::Zero(n + 2, d + 5);
      hb.block(1, 3, n, d) = h;
      RowMatrix<float> out = RowMatrix<float>::Constant(n + 1, v + 4, -1.0f);
      view.logits(hb.block(1, 3, n, d), out.block(1, 2, n, v), LogitsMode::quantized_hidden);
      CHECK(ember_test::same_bits(out.block(1, 2, n, v), z));
      CHECK((out.row(0).array() == -1.0f).all());
      CHECK((out.col(0).array() == -1.0f).all());
      // A logit is the same whatever else is in the batch: the first row alone.
      const RowMatrix<float> first = view.logits(h.topRows(1), LogitsMode::quantized_hidden);
      CHECK(ember_test::same_bits(first, z.topRows(1)));
    }
  }
}

TEST_CASE("logits mode: quantized_hidden gives the same bits for any thread count",
          "[logits_mode]") {
  const Index v = 3001;
  const Index d = 256;
  const RowMatrix<float> w = lm_normal(v, d, 2);
  const RowMatrix<float> h = lm_normal(9, d, 3);
  for (const GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::F16}) {
    INFO(to_string(t));
    const auto bytes = lm_encoded(t, w);
    const ember::GgmlEmbeddingView view(ember::codec::Ggml(t), bytes.data(), v, d, -1);
    RowMatrix<float> one;
    {
      ember_test::ScopedThreads threads(1);
      one = view.logits(h, LogitsMode::quantized_hidden);
    }
    for (const int threads : {2, 3}) {
      ember_test::ScopedThreads scoped(threads);
      CHECK(ember_test::same_bits(view.logits(h, LogitsMode::quantized_hidden), one));
    }
  }
}

TEST_CASE("logits mode: exact is the default and f32 computes quantized_hidden as exact",
          "[logits_mode]") {
  const Index v = 29;
  const Index d = 256;
  const RowMatrix<float> w = lm_normal(v, d, 4);
  const RowMatrix<float> h = lm_normal(3, d, 5);
  for (const GgmlType t : {GgmlType::F32, GgmlType::Q4_0, GgmlType::Q6_K}) {
    const auto bytes = lm_encoded(t, w);
    const ember::GgmlEmbeddingView view(ember::codec::Ggml(t), bytes.data(), v, d, -1);
    CHECK(ember_test::same_bits(view.logits(h), view.logits(h, LogitsMode::exact)));
    if (t == GgmlType::F32) {
      CHECK(ember_test::same_bits(view.logits(h, LogitsMode::quantized_hidden), view.logits(h)));
    }
  }
}

TEMPLATE_TEST_CASE("logits mode: 16-bit tables round the hidden rows to their own type",
                   "[logits_mode]", Eigen::half, Eigen::bfloat16) {
  const Index v = 41;
  const Index d = 300;  // not a multiple of 32: the lanes' tail
  const RowMatrix<float> w = lm_normal(v, d, 6);
  const auto table = ember::ReducedEmbedding<TestType>::from_float(w);
  const ember::ReducedEmbeddingView<TestType> view(table);
  const GgmlType t = std::is_same_v<TestType, Eigen::half> ? GgmlType::F16 : GgmlType::BF16;
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(table.weight().data());
  const auto ref = [&](Index r, const float* x) {
    return ember_test::quantized_dot_reference(t, bytes + r * 2 * d, x, d);
  };
  for (const Index n : {Index{1}, Index{5}, Index{8}, Index{9}, Index{64}}) {
    INFO("n = " << n);
    const RowMatrix<float> h = lm_normal(n, d, 20 + static_cast<std::uint64_t>(n));
    const RowMatrix<float> z = table.logits(h, LogitsMode::quantized_hidden);
    lm_check_reference(z, h, ref);
    CHECK(ember_test::same_bits(view.logits(h, LogitsMode::quantized_hidden), z));
    // exact: the bits of a plain float table holding the decoded rows.
    CHECK(ember_test::same_bits(table.logits(h), lm_plain(table, h)));
  }
  // A float master makes both modes the master's (plain) logits.
  auto kept = ember::ReducedEmbedding<TestType>::from_float(w, /*keep_float_master=*/true);
  const RowMatrix<float> h = lm_normal(2, d, 7);
  CHECK(ember_test::same_bits(kept.logits(h, LogitsMode::quantized_hidden),
                              ember::Embedding<float>(w).logits(h)));
}

TEST_CASE("logits mode: int8 rows round the hidden rows in blocks of 32 as Q8_1", "[logits_mode]") {
  for (const Index d : {Index{256}, Index{100}}) {  // 100: a partial last block
    const Index v = 23;
    const RowMatrix<float> w = lm_normal(v, d, 8);
    const ember::QuantizedEmbedding table(w);
    const ember::QuantizedEmbeddingView view(table.bytes().data(), v, d);
    const auto ref = [&](Index r, const float* x) {
      return ember_test::int8_dot_reference(table.bytes().data() + r * (d + 8), x, d);
    };
    for (const Index n : {Index{1}, Index{3}, Index{8}, Index{9}, Index{64}}) {
      INFO("d = " << d << " n = " << n);
      const RowMatrix<float> h = lm_normal(n, d, 30 + static_cast<std::uint64_t>(n));
      const RowMatrix<float> z = table.logits(h, LogitsMode::quantized_hidden);
      lm_check_reference(z, h, ref);
      CHECK(ember_test::same_bits(view.logits(h, LogitsMode::quantized_hidden), z));
      CHECK(ember_test::same_bits(table.logits(h), lm_plain(table, h)));
    }
  }
}

TEST_CASE(
    "logits mode: plain float tables stream up to 8 hidden rows within float rounding of "
    "float64, the same bits for any thread count",
    "[logits_mode]") {
  const Index v = 1001;
  const Index d = 200;
  const RowMatrix<float> w = lm_normal(v, d, 9);
  const ember::Embedding<float> emb(w, ember::LookupScale::none());
  for (Index n = 1; n <= 9; ++n) {
    INFO("n = " << n);
    const RowMatrix<float> h = lm_normal(n, d, 40 + static_cast<std::uint64_t>(n));
    const RowMatrix<float> z = emb.logits(h);
    lm_check_float(z, h, w);
    CHECK(ember_test::same_bits(emb.logits(h, LogitsMode::quantized_hidden), z));
    CHECK(ember_test::same_bits(ember::logits(w, h), z));
    CHECK(ember_test::same_bits(ember::EmbeddingView<float>(w).logits(h), z));
    if (n <= 8) {
      // Each logit is alike whatever else is in the call.
      CHECK(ember_test::same_bits(emb.logits(h.bottomRows(1)), z.bottomRows(1)));
      for (const int threads : {2, 3}) {
        ember_test::ScopedThreads scoped(threads);
        CHECK(ember_test::same_bits(emb.logits(h), z));
      }
    }
  }
  // Double tables keep the GEMM and compute quantized_hidden as exact.
  const ember::Embedding<double> emb64(w.cast<double>(), ember::LookupScale::none());
  const RowMatrix<double> h64 = lm_normal(3, d, 50).cast<double>();
  CHECK(ember_test::same_bits(emb64.logits(h64, LogitsMode::quantized_hidden), emb64.logits(h64)));
  CHECK(ember_test::same_bits(emb64.logits(h64), lm_gemm(h64, w.cast<double>().eval())));
}

TEST_CASE("logits mode: a bad mode or a non-finite hidden value throws before anything is written",
          "[logits_mode]") {
  const Index v = 17;
  const Index d = 64;
  const RowMatrix<float> w = lm_normal(v, d, 11);
  const auto bytes = lm_encoded(GgmlType::Q8_0, w);
  const ember::GgmlEmbeddingView view(ember::codec::Ggml(GgmlType::Q8_0), bytes.data(), v, d, -1);
  const ember::Embedding<float> emb(w);
  const ember::QuantizedEmbedding q8(w);
  RowMatrix<float> h = lm_normal(2, d, 12);
  RowMatrix<float> out = RowMatrix<float>::Constant(2, v, 5.0f);
  const auto bad = static_cast<LogitsMode>(7);
  CHECK_THROWS_WITH(view.logits(h, out, bad),
                    Catch::Contains("GgmlEmbeddingView::logits: mode 7 is not a LogitsMode"));
  CHECK_THROWS_AS(emb.logits(h, out, bad), ember::ValueError);
  CHECK_THROWS_AS(q8.logits(h, bad), ember::ValueError);
  CHECK_THROWS_AS(ember::logits(w, h, out, bad), ember::ValueError);
  try {
    (void)view.logits(h, bad);
  } catch (const ember::ValueError& e) {
    CHECK(e.value() == 7.0);
  }
  CHECK(std::string(ember::to_string(bad)) == "unknown");
  CHECK(std::string(ember::to_string(LogitsMode::quantized_hidden)) == "quantized_hidden");

  h(1, 9) = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(view.logits(h, out, LogitsMode::quantized_hidden),
                    Catch::Contains("GgmlEmbeddingView::logits: hidden: value at row 1, column 9 "
                                    "is inf (not finite)"));
  CHECK_THROWS_AS(q8.logits(h, out, LogitsMode::quantized_hidden), ember::ValueError);
  CHECK((out.array() == 5.0f).all());
  // exact mode computes with it, as float arithmetic does.
  view.logits(h, out);
  CHECK((std::isinf(out(1, 0)) || std::isnan(out(1, 0))));
}
