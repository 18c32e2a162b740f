// Tests of ember::InputStem: fused forward against the composition of the separate pieces,
// seeded dropout, backward against finite differences, bad input.
// SPDX-License-Identifier: MIT
#include <ember/input_stem.hpp>

#include <ember/input_embedding.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::InputStem;
using ember::InputStemOptions;
using ember::PositionKind;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::abs_tol_for;
using ember_test::check_close;
using ember_test::same_bits;

namespace {

// The unfused composition: token lookup (scaled), + position rows, + segment rows.
template <class T>
RowMatrix<T> compose(InputStem<T>& stem, const std::vector<TokenId>& ids,
                     const std::vector<TokenId>* segs, Index seq_len, Index offset) {
  RowMatrix<T> x = stem.tokens().forward(ids);
  const RowMatrix<T>& pos = stem.position_table();
  for (Index i = 0; i < x.rows(); ++i) {
    x.row(i) += pos.row(offset + i % seq_len);
    if (stem.has_segments()) {
      const Index s = segs ? static_cast<Index>((*segs)[static_cast<std::size_t>(i)]) : 0;
      x.row(i) += stem.segments().weight().row(s);
    }
  }
  return x;
}

const std::vector<TokenId> kIds{3, 1, 4, 1, 0, 2, 2, 4};  // B = 2, seq_len = 4
const std::vector<TokenId> kSegs{0, 0, 1, 1, 0, 1, 1, 1};

}  // namespace

TEMPLATE_TEST_CASE("the fused forward equals lookup x sqrt(d) + positions + segments",
                   "[input_stem]", float, double) {
  using T = TestType;
  for (const auto kind : {PositionKind::sinusoidal, PositionKind::learned}) {
    InputStem<T> stem(5, 6, {.max_len = 7, .positions = kind, .type_vocab_size = 2, .seed = 3});
    CHECK(stem.learned_positions() == (kind == PositionKind::learned));
    for (const Index offset : {Index{0}, Index{3}}) {
      const RowMatrix<T> with_segs = stem.forward(kIds, kSegs, 4, offset);
      const RowMatrix<T> composed = compose(stem, kIds, &kSegs, 4, offset);
      check_close(with_segs, composed, 0.0, abs_tol_for(composed, ember_test::scaled_tol<T>()));
      const RowMatrix<T> default_segs = stem.forward(kIds, 4, offset);
      const RowMatrix<T> composed_default = compose(stem, kIds, nullptr, 4, offset);
      check_close(default_segs, composed_default, 0.0,
                  abs_tol_for(composed_default, ember_test::scaled_tol<T>()));
    }
  }
  // Without segments, sinusoidal: equals embed_with_positions.
  InputStem<T> plain(5, 6, {.max_len = 8});
  CHECK_FALSE(plain.has_segments());
  const ember::SinusoidalEncoding<T> pe(8, 6);
  RowMatrix<T> fused(8, 6);
  ember::embed_with_positions(plain.tokens(), pe, kIds, fused, 4);
  check_close(plain.forward(kIds, 4), fused, 0.0, abs_tol_for(fused, ember_test::scaled_tol<T>()));
  // Into a block of a larger matrix.
  RowMatrix<T> big = RowMatrix<T>::Zero(10, 9);
  plain.forward(kIds, 4, big.block(1, 2, 8, 6));
  check_close(big.block(1, 2, 8, 6), fused, 0.0, abs_tol_for(fused, ember_test::scaled_tol<T>()));
  CHECK(big.row(0).isZero(0));
}

TEST_CASE("dropout draws its mask row-major from the seeded generator, inverted scaling",
          "[input_stem]") {
  const Index V = 7, d = 50;
  const double p = 0.3;
  InputStem<double> stem(V, d, {.max_len = 16, .dropout = p, .dropout_seed = 11});
  stem.eval();
  std::vector<TokenId> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(i % V);
  const RowMatrix<double> clean = stem.forward(ids, 8);
  stem.train();
  const RowMatrix<double> dropped = stem.forward(ids, 8);
  ember::Random rng(11);
  Index zeros = 0;
  for (Index i = 0; i < dropped.rows(); ++i) {
    for (Index c = 0; c < d; ++c) {
      const bool keep = rng.uniform() >= p;
      if (keep) {
        CHECK_THAT(dropped(i, c), Catch::Matchers::WithinRel(clean(i, c) / (1 - p), 1e-15));
      } else {
        CHECK(dropped(i, c) == 0.0);
        ++zeros;
      }
    }
  }
  const double frac = static_cast<double>(zeros) / static_cast<double>(dropped.size());
  CHECK(frac > 0.25);
  CHECK(frac < 0.35);
  // The next forward draws a new mask; reseeding repeats the first one.
  CHECK_FALSE(same_bits(stem.forward(ids, 8), dropped));
  stem.set_dropout_seed(11);
  CHECK(same_bits(stem.forward(ids, 8), dropped));
  // eval: identity; p = 0: identity.
  stem.eval();
  CHECK(same_bits(stem.forward(ids, 8), clean));
  stem.train();
  stem.set_dropout(0.0);
  CHECK(same_bits(stem.forward(ids, 8), clean));
}

TEST_CASE("backward matches finite differences for every table, through dropout", "[input_stem]") {
  const Index V = 5, d = 4, max_len = 6;
  InputStem<double> stem(V, d,
                         {.max_len = max_len,
                          .positions = PositionKind::learned,
                          .type_vocab_size = 2,
                          .dropout = 0.25,
                          .seed = 2,
                          .dropout_seed = 5});
  stem.tokens().set_padding_idx(0, /*zero_row=*/false);
  const RowMatrix<double> R = ember_test::random_table<double>(8, d, 9);
  const Index offset = 1;
  const auto loss = [&] {
    stem.set_dropout_seed(5);  // same mask every time
    return (stem.forward(kIds, kSegs, 4, offset).array() * R.array()).sum();
  };
  stem.set_dropout_seed(5);  // the mask loss() draws
  RowMatrix<double> x(8, d);
  const auto mask = stem.forward(kIds, kSegs, 4, x, offset);
  ember::InputStemGrads<double> grads;
  stem.backward(kIds, kSegs, 4, R, grads, mask, offset);
  CHECK(grads.tokens.vocab_size() == V);
  CHECK(grads.positions.vocab_size() == max_len);
  CHECK(grads.segments.vocab_size() == 2);
  const std::vector<std::pair<ember::Embedding<double>*, const ember::SparseRowGrad<double>*>>
      tables = {{&stem.tokens(), &grads.tokens},
                {&stem.positions(), &grads.positions},
                {&stem.segments(), &grads.segments}};
  for (const auto& [table, grad] : tables) {
    const RowMatrix<double> analytic = grad->to_dense();
    for (Index r = 0; r < table->vocab_size(); ++r) {
      for (Index c = 0; c < d; ++c) {
        double& w = table->weight()(r, c);
        const double saved = w;
        const double h = 1e-6;
        w = saved + h;
        const double up = loss();
        w = saved - h;
        const double down = loss();
        w = saved;
        double numeric = (up - down) / (2 * h);
        if (table == &stem.tokens() && r == 0) numeric = 0.0;  // padding row: no gradient
        INFO("row " << r << " col " << c);
        CHECK_THAT(analytic(r, c), Catch::Matchers::WithinAbs(numeric, 1e-7));
      }
    }
  }
  // Positions 1..4 (offset 1, seq_len 4) have gradient, 0 and 5 none.
  CHECK(grads.positions.size() == 4);
  CHECK(grads.tokens.size() == 4);  // ids 1..4; 0 is padding
}

TEST_CASE(
    "backward without dropout needs no matching forward, and position/segment grads use "
    "no scale",
    "[input_stem]") {
  InputStem<double> stem(ember::Embedding<double>(3, 4, 1),
                         {.max_len = 2, .positions = PositionKind::learned, .type_vocab_size = 1});
  ember::InputStemGrads<double> grads;
  const std::vector<int> ids{2, 2};
  stem.backward(ids, 2, RowMatrix<double>::Ones(2, 4), grads);
  CHECK(grads.tokens.to_dense().row(2).isApprox(RowMatrix<double>::Constant(1, 4, 4.0)));  // 2·√4
  CHECK(grads.positions.to_dense().isOnes(0));
  CHECK(grads.segments.to_dense().isApprox(RowMatrix<double>::Constant(1, 4, 2.0)));
  grads.clear();
  CHECK(grads.tokens.empty());
}

TEST_CASE("InputStem rejects bad input without writing or consuming dropout draws",
          "[input_stem]") {
  InputStemOptions o{.max_len = 4, .type_vocab_size = 2, .dropout = 0.5, .dropout_seed = 1};
  InputStem<float> stem(5, 3, o);
  InputStem<float> twin(5, 3, o);
  RowMatrix<float> out = RowMatrix<float>::Constant(4, 3, 7.0f);
  const std::vector<TokenId> ids{0, 1, 2, 3};
  REQUIRE_THROWS_AS(stem.forward(std::vector<TokenId>{0, 1, 5, 3}, 4, out), ember::IndexError);
  REQUIRE_THROWS_WITH(
      stem.forward(ids, std::vector<TokenId>{0, 1, 2, 0}, 4, out),
      Catch::Contains("InputStem::forward") && Catch::Contains("id 2 at position 2"));
  REQUIRE_THROWS_AS(stem.forward(ids, std::vector<TokenId>{0, 1}, 4, out), ember::ShapeError);
  REQUIRE_THROWS_AS(stem.forward(ids, 3, out), ember::ShapeError);     // 4 ids, seq_len 3
  REQUIRE_THROWS_AS(stem.forward(ids, 4, out, 1), ember::IndexError);  // positions 1..4 >= 4
  RowMatrix<float> narrow(4, 2);
  REQUIRE_THROWS_AS(stem.forward(ids, 4, narrow), ember::ShapeError);
  CHECK((out.array() == 7.0f).all());
  CHECK(same_bits(stem.forward(ids, 4), twin.forward(ids, 4)));  // no draw was consumed

  InputStem<float> no_segs(5, 3, {.max_len = 4});
  REQUIRE_THROWS_AS(no_segs.forward(ids, ids, 4, out), ember::StateError);
  REQUIRE_THROWS_AS(no_segs.segments(), ember::StateError);
  REQUIRE_THROWS_AS(no_segs.positions(), ember::StateError);

  // Backward: grad shape, mask of another batch size, grads bound elsewhere.
  ember::InputStemGrads<float> grads;
  REQUIRE_THROWS_AS(stem.backward(ids, 4, RowMatrix<float>::Ones(4, 2), grads), ember::ShapeError);
  const std::vector<TokenId> eight{0, 1, 2, 3, 0, 1, 2, 3};
  REQUIRE_THROWS_AS(stem.backward(eight, 4, RowMatrix<float>::Ones(8, 3), grads),
                    ember::StateError);
  grads.segments = ember::SparseRowGrad<float>(9, 3);
  grads.segments.accumulate(std::vector<TokenId>{8}, RowMatrix<float>::Ones(1, 3), 1.0f, 9);
  REQUIRE_THROWS_AS(stem.backward(ids, 4, RowMatrix<float>::Ones(4, 3), grads), ember::ShapeError);
  CHECK(grads.tokens.empty());

  REQUIRE_THROWS_AS(InputStem<float>(5, 3, {.dropout = 1.0}), ember::ValueError);
  REQUIRE_THROWS_WITH(stem.set_dropout(-0.1), Catch::Contains("dropout"));
  REQUIRE_THROWS_AS(InputStem<float>(5, 3, {.max_len = 0}), ember::ShapeError);
  REQUIRE_THROWS_AS(InputStem<float>(5, 3, {.init_std = -1}), ember::ValueError);
}

TEST_CASE("InputStem refuses a negative type_vocab_size and takes 0 as no segment table",
          "[input_stem]") {
  try {
    InputStem<float> stem(5, 4, {.type_vocab_size = -1});
    FAIL("no throw");
  } catch (const ember::ShapeError& e) {
    CHECK(std::string(e.what()) ==
          "InputStem: type_vocab_size must be >= 0 (0: no segment table), got -1");
    CHECK(e.dimension() == -1);
    CHECK(e.expected() == 0);
    CHECK(e.actual() == -1);
  }
  const InputStem<float> stem(5, 4, {.type_vocab_size = 0});
  CHECK_FALSE(stem.has_segments());
}
