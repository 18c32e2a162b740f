// Tests of ember/reduced.hpp: half and bfloat16 tables against the float reference with the error
// bound of each format, lookup/positions/logits in float, float backward, the float master,
// loading F16/BF16 safetensors without a float round trip, and nearest neighbours on word2vec.
// SPDX-License-Identifier: MIT
#include "ember/reduced.hpp"

#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/input_embedding.hpp"
#include "ember/io/word2vec.hpp"
#include "ember/positional.hpp"
#include "ember/query/similarity.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/io_files.hpp"
#include "support/matrix_compare.hpp"
#if defined(EMBER_TEST_HAVE_IO)
#include "ember/io/safetensors.hpp"
#endif

using ember::Index;
using ember::RowMatrix;

namespace {

/// The per-element bound of round-to-nearest storage: 2^-11 relative for half (normal range,
/// |x| >= 2^-14; 2^-25 absolute below), 2^-8 relative for bfloat16.
template <class S>
double storage_bound(double x) {
  if constexpr (std::is_same_v<S, Eigen::half>) {
    return std::abs(x) >= std::ldexp(1.0, -14) ? std::ldexp(std::abs(x), -11)
                                               : std::ldexp(1.0, -25);
  } else {
    return std::ldexp(std::abs(x), -8);
  }
}

}  // namespace

TEMPLATE_TEST_CASE("stored values are within the format's rounding bound of the float table",
                   "[reduced]", Eigen::half, Eigen::bfloat16) {
  RowMatrix<float> t = ember_test::random_table<float>(300, 24, 1);
  t.row(7) *= 1000.0f;  // large values (half's range ends at 65504)
  t.row(8) *= 1e-3f;    // small normal values
  const auto r = ember::ReducedEmbedding<TestType>::from_float(t);
  const RowMatrix<float> back = r.to_float();
  double worst = 0;
  for (Index i = 0; i < t.rows(); ++i) {
    for (Index c = 0; c < t.cols(); ++c) {
      const double err = std::abs(double(back(i, c)) - double(t(i, c)));
      worst = std::max(worst, err / storage_bound<TestType>(t(i, c)));
    }
  }
  INFO("worst error / bound = " << worst);
  CHECK(worst <= 1.0);
  CHECK(r.storage_bytes() == static_cast<std::size_t>(300 * 24 * 2));
}

TEMPLATE_TEST_CASE("forward is the stored row converted to float times sqrt(d), in float",
                   "[reduced]", Eigen::half, Eigen::bfloat16) {
  const RowMatrix<float> t = ember_test::random_table<float>(50, 16, 2);
  const auto r = ember::ReducedEmbedding<TestType>::from_float(t);
  const auto ids = ember_test::random_ids<int>(33, 50, 3);
  const RowMatrix<float> x = r.forward(ids);
  const RowMatrix<float> stored = r.to_float();
  RowMatrix<float> expected(33, 16);
  for (Index i = 0; i < 33; ++i) expected.row(i) = stored.row(ids[std::size_t(i)]) * 4.0f;
  CHECK(ember_test::same_bits(x, expected));
  // against the float layer: the storage bound, scaled
  const ember::Embedding<float> f(t);
  const RowMatrix<float> xf = f.forward(ids);
  for (Index i = 0; i < 33; ++i)
    for (Index c = 0; c < 16; ++c)
      CHECK(std::abs(x(i, c) - xf(i, c)) <= 4.0 * storage_bound<TestType>(xf(i, c) / 4.0) + 1e-7);

  // into a block of a larger float buffer, and into the storage type on request
  RowMatrix<float> big = RowMatrix<float>::Zero(40, 20);
  r.forward(ids, big.block(2, 3, 33, 16));
  CHECK(ember_test::same_bits(big.block(2, 3, 33, 16).eval(), x));
  RowMatrix<TestType> xs(33, 16);
  r.forward(ids, xs);
  CHECK(ember_test::same_bits(xs.template cast<float>().eval(),
                              x.cast<TestType>().template cast<float>().eval()));
}

TEMPLATE_TEST_CASE("backward accumulates in float exactly as the float layer's", "[reduced]",
                   Eigen::half, Eigen::bfloat16) {
  const RowMatrix<float> t = ember_test::random_table<float>(40, 8, 4);
  const auto r = ember::ReducedEmbedding<TestType>::from_float(t);
  const ember::Embedding<float> f(t);
  const auto ids = ember_test::random_ids(25, 40, 5);
  const RowMatrix<float> g = ember_test::random_table<float>(25, 8, 6);
  ember::SparseRowGrad<float> a, b;
  r.backward(ids, g, a);
  f.backward(ids, g, b);
  CHECK(ember_test::same_bits(a.to_dense(), b.to_dense()));
}

TEMPLATE_TEST_CASE("logits decode the table blockwise or use the float master", "[reduced]",
                   Eigen::half, Eigen::bfloat16) {
  // V > logits_block_rows, so several blocks and a partial last block are used.
  const Index v = ember::detail::logits_block_rows + 905;
  const RowMatrix<float> t = ember_test::random_table<float>(v, 8, 7);
  auto r = ember::ReducedEmbedding<TestType>::from_float(t);
  const RowMatrix<float> h = ember_test::random_table<float>(3, 8, 8);
  const RowMatrix<float> stored = r.to_float();
  ember_test::check_close(r.logits(h), (h * stored.transpose()).eval());
  RowMatrix<float> out(3, v);
  r.logits(h, out);
  ember_test::check_close(out, (h * stored.transpose()).eval());

  // backward through the decoded table
  const RowMatrix<float> gl = ember_test::random_table<float>(3, v, 9);
  RowMatrix<float> gh(3, 8), gw = RowMatrix<float>::Zero(v, 8);
  r.logits_backward(h, gl, gh, gw);
  ember_test::check_close(gh, (gl * stored).eval(), 1e-4, 1e-4);
  ember_test::check_close(gw, (gl.transpose() * h).eval(), 1e-4, 1e-4);

  // with the master kept, logits are the float layer's exactly
  r.set_float_master(t);
  REQUIRE(r.float_master() != nullptr);
  CHECK(ember_test::same_bits(r.logits(h), ember::Embedding<float>(t).logits(h)));
  const auto kept = ember::ReducedEmbedding<TestType>::from_float(t, /*keep_float_master=*/true);
  CHECK(ember_test::same_bits(kept.logits(h), r.logits(h)));
  r.clear_float_master();
  CHECK(r.float_master() == nullptr);
}

TEMPLATE_TEST_CASE("embed_with_positions over a reduced table equals forward plus positions",
                   "[reduced]", Eigen::half, Eigen::bfloat16) {
  const auto r = ember::ReducedEmbedding<TestType>(30, 8, /*seed=*/3);
  const ember::SinusoidalEncoding<float> pe(16, 8);
  const auto ids = ember_test::random_ids(12, 30, 4);  // 3 sequences of 4
  RowMatrix<float> out(12, 8);
  ember::embed_with_positions(r, pe.table(), ids, out, 4, 2);
  RowMatrix<float> expected = r.forward(ids);
  for (Index i = 0; i < 12; ++i) expected.row(i) += pe.table().row(2 + i % 4);
  ember_test::check_close(out, expected);
  RowMatrix<float> wrong(11, 8);
  CHECK_THROWS_AS(ember::embed_with_positions(r, pe.table(), ids, wrong, 4), ember::ShapeError);
  CHECK_THROWS_AS(ember::embed_with_positions(r, pe.table(), ids, out, 4, 13), ember::IndexError);
}

TEST_CASE("bad input to a reduced table throws and changes nothing", "[reduced]") {
  RowMatrix<float> t = RowMatrix<float>::Ones(4, 3);
  t(2, 1) = 70000.0f;
  const auto e =
      ember_test::catch_as<ember::ValueError>([&] { (void)ember::HalfEmbedding::from_float(t); });
  REQUIRE(e);
  CHECK_THAT(e->what(), Catch::Contains("row 2, column 1") && Catch::Contains("overflows half"));
  CHECK_NOTHROW(ember::BFloat16Embedding::from_float(t));  // bfloat16 has float's range
  t(2, 1) = std::nanf("");
  CHECK_THROWS_AS(ember::BFloat16Embedding::from_float(t), ember::ValueError);

  auto r = ember::HalfEmbedding(5, 4, 1);
  const std::vector<int> ids{0, 5};
  RowMatrix<float> out = RowMatrix<float>::Constant(2, 4, 9.0f);
  const auto ie = ember_test::catch_as<ember::IndexError>([&] { r.forward(ids, out); });
  REQUIRE(ie);
  CHECK(ie->position() == 1);
  CHECK_THAT(ie->what(), Catch::Contains("ReducedEmbedding::forward: id 5 at position 1"));
  CHECK(out.isConstant(9.0f));
  RowMatrix<float> narrow(2, 3);
  CHECK_THROWS_AS(r.forward(std::vector<int>{0, 1}, narrow), ember::ShapeError);
  CHECK_THROWS_AS(r.set_float_master(RowMatrix<float>::Zero(5, 3)), ember::ShapeError);
  CHECK(r.float_master() == nullptr);
  CHECK_THROWS_AS(r.logits(RowMatrix<float>::Zero(2, 3)), ember::ShapeError);
  ember::SparseRowGrad<float> g;
  CHECK_THROWS_AS(r.backward(ids, RowMatrix<float>::Zero(2, 4), g), ember::IndexError);
  CHECK(g.empty());
  CHECK_THROWS_AS(ember::HalfEmbedding(RowMatrix<Eigen::half>(0, 4)), ember::ShapeError);
}

TEMPLATE_TEST_CASE("word2vec nearest-neighbour top-10 lists only reorder within the rounding",
                   "[reduced][word2vec]", Eigen::half, Eigen::bfloat16) {
  // Rounding each element by at most u (relative) moves a cosine by at most about 4u, so two
  // neighbours whose float cosines are closer than that may swap places; nothing else may change.
  const auto wv = ember::io::load_word2vec_binary<float>(ember_test::data_file("tiny_w2v.bin"));
  const auto r = ember::ReducedEmbedding<TestType>::from_float(wv.vectors);
  const ember::query::Neighbours<float> exact(wv.vectors);
  const ember::query::Neighbours<float> reduced(r.to_float());
  const double u =
      std::is_same_v<TestType, Eigen::half> ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double tau = 4 * u;
  Index unchanged = 0;
  for (Index id = 0; id < exact.vocab_size(); ++id) {
    const auto a = exact.nearest(ember::TokenId{id}, 10);
    const auto b = reduced.nearest(ember::TokenId{id}, 10);
    INFO("word " << wv.vocab.token(id));
    REQUIRE(a.size() == b.size());
    bool same = true;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (a[k].id == b[k].id) continue;
      same = false;
      // the neighbour returned at rank k is within tau of the true k-th cosine
      CHECK(double(exact.similarity(ember::TokenId{id}, b[k].id)) >= double(a[k].score) - tau);
    }
    unchanged += same ? 1 : 0;
  }
  WARN(ember::storage_name<TestType> << ": " << unchanged << " of " << exact.vocab_size()
                                     << " top-10 lists unchanged");
  // half keeps every list of the fixture unchanged; bfloat16 swaps near-ties in 10 of 74 (its
  // synthetic corpus gives many words of one class nearly equal cosines)
  if (std::is_same_v<TestType, Eigen::half>) CHECK(unchanged == exact.vocab_size());
}

#if defined(EMBER_TEST_HAVE_IO)
TEST_CASE("F16 and BF16 safetensors load into reduced tables byte for byte", "[reduced][io]") {
  ember_test::ScratchDir dir;
  const RowMatrix<float> t = ember_test::random_table<float>(9, 5, 10);
  ember::io::SafetensorsWriter w;
  w.add("h", t, ember::io::SafetensorsDtype::F16)
      .add("b", t, ember::io::SafetensorsDtype::BF16)
      .add("f", t);
  w.save(dir.file("t.safetensors"));
  const ember::io::SafetensorsFile f(dir.file("t.safetensors"));

  const ember::HalfEmbedding h(f.load_reduced<Eigen::half>("h"));
  const ember::BFloat16Embedding b(f.load_reduced<Eigen::bfloat16>("b"));
  const auto bytes = ember_test::read_bytes(dir.file("t.safetensors"));
  const auto& ti = f.info("h");
  CHECK(std::memcmp(h.weight().data(), bytes.data() + f.data_offset() + ti.begin, 9 * 5 * 2) == 0);
  CHECK(ember_test::same_bits(h.to_float(), ember::HalfEmbedding::from_float(t).to_float()));
  CHECK(ember_test::same_bits(b.to_float(), ember::BFloat16Embedding::from_float(t).to_float()));
  // an F32 tensor is rounded once, as from_float does
  CHECK(ember_test::same_bits(ember::HalfEmbedding(f.load_reduced<Eigen::half>("f")).to_float(),
                              h.to_float()));
  CHECK_THROWS_AS(f.load_reduced<Eigen::half>("nope"), ember::KeyError);
}
#endif

TEST_CASE("a reduced table checks grad_out's width and refuses doubles beyond float's range",
          "[reduced]") {
  const auto r = ember::BFloat16Embedding(5, 4, 1);
  ember::SparseRowGrad<float> g;
  ember_test::check_grad_out_width_refused(
      [&] {
        r.backward(std::vector<int>{0, 1}, RowMatrix<float>::Zero(2, 3), g);
      },
      "ReducedEmbedding::backward: grad_out has 3 columns, expected d_model = 4", 4, 3, g);

  // bfloat16 has float's range: a double beyond it overflows (checked before any double ->
  // float cast, which would be undefined there)
  RowMatrix<double> big = RowMatrix<double>::Ones(2, 2);
  big(1, 0) = -1e300;
  const auto v = ember_test::catch_as<ember::ValueError>(
      [&] { (void)ember::BFloat16Embedding::from_float(big); });
  REQUIRE(v);
  CHECK_THAT(v->what(), Catch::StartsWith("ReducedEmbedding::from_float: value -") &&
                            Catch::Contains("at row 1, column 0 overflows bfloat16"));
  CHECK(v->value() == -1e300);
}
