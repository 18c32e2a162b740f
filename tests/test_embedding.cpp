// Tests of ember/embedding.hpp: lookup, its scale, backward through the lookup, constructors and
// the errors of each entry point. SparseRowGrad's own behaviour is in test_sparse_grad.cpp and the
// tied logits in test_tied_logits.cpp.
// SPDX-License-Identifier: MIT
#include "ember/embedding.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/errors.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"
#include "support/embedding_reference.hpp"
#include "support/error_checks.hpp"
#include "support/gradcheck.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

namespace {

// The worked example of the issue: a 5 x 4 table (so the scale is sqrt(4) = 2).
RowMatrix<double> seed_table() {
  RowMatrix<double> w(5, 4);
  w << 0.02, -0.01, 0.03, 0.01,  //
      -0.04, 0.05, -0.02, 0.03,  //
      0.01, 0.06, -0.03, -0.05,  //
      0.03, -0.02, 0.04, 0.02,   //
      -0.01, 0.03, 0.01, -0.04;
  return w;
}

}  // namespace

// ---- lookup values ------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("lookup returns the rows of the worked example times sqrt(d_model)",
                   "[embedding]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(seed_table().cast<T>());
  REQUIRE(emb.vocab_size() == 5);
  REQUIRE(emb.d_model() == 4);
  CHECK_THAT(static_cast<double>(emb.scale()),
             Catch::Matchers::WithinRel(2.0, ember_test::rel_tol<T>()));

  const std::vector<TokenId> ids{2, 0, 3};
  const RowMatrix<T> out = emb.forward(ids);

  RowMatrix<double> expected(3, 4);
  expected << 0.02, 0.12, -0.06, -0.10,  //
      0.04, -0.02, 0.06, 0.02,           //
      0.06, -0.04, 0.08, 0.04;
  ember_test::check_close(out, expected);
}

TEST_CASE("the scale is sqrt(d_model), never sqrt(vocab_size)", "[embedding]") {
  CHECK_THAT(static_cast<double>(ember::Embedding<float>(7, 4).scale()),
             Catch::Matchers::WithinRel(2.0, 1e-7));
  CHECK_THAT(ember::Embedding<double>(3, 512).scale(),
             Catch::Matchers::WithinRel(std::sqrt(512.0), 1e-15));
  CHECK_THAT(static_cast<double>(ember::Embedding<float>(3, 512).scale()),
             Catch::Matchers::WithinRel(std::sqrt(512.0), 1e-7));
  // A tall table: vocab 512, width 3 -> sqrt(3), not sqrt(512).
  CHECK_THAT(ember::Embedding<double>(512, 3).scale(),
             Catch::Matchers::WithinRel(std::sqrt(3.0), 1e-15));
}

TEMPLATE_TEST_CASE("lookup of a hand-built table returns row i filled with i, times the scale",
                   "[embedding]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::hand_table<T>(10, 9));  // scale 3
  const std::vector<TokenId> ids{7, 0, 9, 7, 3};
  const RowMatrix<T> out = emb.forward(ids);
  REQUIRE(out.rows() == 5);
  REQUIRE(out.cols() == 9);
  for (Index i = 0; i < out.rows(); ++i) {
    for (Index c = 0; c < out.cols(); ++c) {
      const double expected = 3.0 * (static_cast<double>(ids[static_cast<std::size_t>(i)]) +
                                     static_cast<double>(c) / 1000.0);
      INFO("row " << i << " column " << c);
      CHECK_THAT(static_cast<double>(out(i, c)),
                 Catch::Matchers::WithinRel(expected, ember_test::rel_tol<T>()) ||
                     Catch::Matchers::WithinAbs(expected, ember_test::abs_tol<T>()));
    }
  }
}

TEMPLATE_TEST_CASE("lookup equals the one-hot matrix times the table, times the scale",
                   "[embedding]", float, double) {
  using T = TestType;
  const Index vocab = 37;
  const Index d = 16;
  const ember::Embedding<T> emb(ember_test::random_table<T>(vocab, d, 11));
  const auto ids = ember_test::random_ids(50, vocab, 12);
  const RowMatrix<T> out = emb.forward(ids);
  ember_test::check_close(out, ember_test::lookup_one_hot<T>(emb.weight(), ids, emb.scale()));
  ember_test::check_close(out, ember_test::lookup_loops<T>(emb.weight(), ids, emb.scale()));
}

// ---- id containers and output views ------------------------------------------------------------

TEMPLATE_TEST_CASE("forward accepts int32 ids, std::array and a span from the middle of a buffer",
                   "[embedding]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(20, 6, 21));
  const std::vector<TokenId> ids64{4, 19, 0, 4, 11};
  const RowMatrix<T> expected = emb.forward(ids64);

  SECTION("std::vector<int32_t>") {
    const std::vector<std::int32_t> ids32{4, 19, 0, 4, 11};
    // Same rows, same multiplication: the bits must match the int64 lookup.
    CHECK(ember_test::same_bits(emb.forward(ids32), expected));
  }
  SECTION("std::vector<uint16_t>") {
    const std::vector<std::uint16_t> ids16{4, 19, 0, 4, 11};
    CHECK(ember_test::same_bits(emb.forward(ids16), expected));
  }
  SECTION("std::array<int, 5>") {
    const std::array<int, 5> arr{4, 19, 0, 4, 11};
    CHECK(ember_test::same_bits(emb.forward(arr), expected));
  }
  SECTION("std::span<const TokenId> into the middle of a larger buffer") {
    const std::vector<TokenId> buffer{99, 98, 4, 19, 0, 4, 11, 97};  // 99, 98, 97 out of range
    const std::span<const TokenId> middle(buffer.data() + 2, 5);
    CHECK(ember_test::same_bits(emb.forward(middle), expected));
  }
  SECTION("std::span<const int32_t> into the middle of a larger buffer") {
    const std::vector<std::int32_t> buffer{-1, 4, 19, 0, 4, 11, 20, 21};
    const std::span<const std::int32_t> middle(buffer.data() + 1, 5);
    CHECK(ember_test::same_bits(emb.forward(middle), expected));
  }
}

TEMPLATE_TEST_CASE("forward of no ids returns a 0 x d_model matrix", "[embedding]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(5, 8, 1);
  const std::vector<TokenId> none;
  const RowMatrix<T> out = emb.forward(none);
  CHECK(out.rows() == 0);
  CHECK(out.cols() == 8);

  const std::vector<std::int32_t> none32;
  const RowMatrix<T> out32 = emb.forward(none32);
  CHECK(out32.rows() == 0);
  CHECK(out32.cols() == 8);

  RowMatrix<T> empty_out(0, 8);
  REQUIRE_NOTHROW(emb.forward(none, empty_out));
}

TEMPLATE_TEST_CASE("forward into a block of a larger matrix writes that block and nothing else",
                   "[embedding]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(12, 5, 31));
  const std::vector<TokenId> ids{3, 11, 0, 3};
  const RowMatrix<T> expected = emb.forward(ids);

  const T sentinel = T(7);
  RowMatrix<T> big = RowMatrix<T>::Constant(8, 11, sentinel);  // outer stride 11, block stride 11
  const Index r0 = 2;
  const Index c0 = 3;

  SECTION("TokenId ids") { emb.forward(ids, big.block(r0, c0, 4, 5)); }
  SECTION("int32 ids") {
    const std::vector<std::int32_t> ids32{3, 11, 0, 3};
    emb.forward(ids32, big.block(r0, c0, 4, 5));
  }
  SECTION("ids viewed from a larger buffer") {
    const std::vector<TokenId> buffer{-5, 3, 11, 0, 3, 12};
    emb.forward(std::span<const TokenId>(buffer.data() + 1, 4), big.block(r0, c0, 4, 5));
  }

  // The block holds the lookup (same kernel as the owning forward: same bits).
  CHECK(ember_test::same_bits(big.block(r0, c0, 4, 5), expected));
  // Every element outside the block still holds the sentinel.
  for (Index r = 0; r < big.rows(); ++r) {
    for (Index c = 0; c < big.cols(); ++c) {
      const bool inside = r >= r0 && r < r0 + 4 && c >= c0 && c < c0 + 5;
      if (!inside) {
        INFO("element (" << r << ", " << c << ") outside the block");
        CHECK(big(r, c) == sentinel);
      }
    }
  }
}

// ---- the scale is a constant -------------------------------------------------------------------

TEMPLATE_TEST_CASE("forward and backward never change the table or the scale", "[embedding]", float,
                   double) {
  using T = TestType;
  ember::Embedding<T> emb(9, 16, 5);
  const RowMatrix<T> before = emb.weight();
  const T scale_before = emb.scale();
  const auto ids = ember_test::random_ids(30, 9, 6);

  const RowMatrix<T> out = emb.forward(ids);
  ember::SparseRowGrad<T> grad;
  emb.backward(ids, ember_test::random_table<T>(30, 16, 7), grad);
  emb.backward(ids, out, grad);
  RowMatrix<T> gh(30, 16);
  RowMatrix<T> gw = RowMatrix<T>::Zero(9, 16);
  emb.logits_backward(out, emb.logits(out), gh, gw);

  CHECK(ember_test::same_bits(emb.weight(), before));
  CHECK(emb.scale() == scale_before);  // bit identity: a constant, not a learned value
  CHECK_THAT(static_cast<double>(emb.scale()),
             Catch::Matchers::WithinRel(4.0, ember_test::rel_tol<T>()));
}

TEST_CASE(
    "weight() changes the table's values but not its shape, so the scale stays the one fixed at "
    "construction",
    "[embedding]") {
  ember::Embedding<double> emb(6, 9, 0);
  CHECK_THAT(emb.scale(), Catch::Matchers::WithinRel(3.0, 1e-15));
  // A writable view of fixed shape: values can change, the shape cannot.
  STATIC_REQUIRE(std::is_same_v<decltype(emb.weight()), Eigen::Map<RowMatrix<double>>>);
  emb.weight() = ember_test::hand_table<double>(6, 9);
  CHECK(emb.vocab_size() == 6);
  CHECK(emb.d_model() == 9);
  CHECK_THAT(emb.scale(), Catch::Matchers::WithinRel(3.0, 1e-15));
  const std::vector<TokenId> ids{5};
  ember_test::check_close(emb.forward(ids),
                          (ember_test::hand_table<double>(6, 9).row(5) * 3.0).eval());
  // resize changes the vocabulary, never the width: the scale stays.
  emb.resize(8, ember::ResizeInit::zeros);
  CHECK(emb.vocab_size() == 8);
  CHECK_THAT(emb.scale(), Catch::Matchers::WithinRel(3.0, 1e-15));
}

// ---- constructors -------------------------------------------------------------------------------

TEST_CASE("the seeded constructor is deterministic and adopting a table keeps its values",
          "[embedding]") {
  const ember::Embedding<float> a(50, 8, 42);
  const ember::Embedding<float> b(50, 8, 42);
  const ember::Embedding<float> c(50, 8, 43);
  CHECK(ember_test::same_bits(a.weight(), b.weight()));
  CHECK_FALSE(ember_test::same_bits(a.weight(), c.weight()));

  const RowMatrix<double> table = ember_test::random_table<double>(6, 3, 1);
  const ember::Embedding<double> adopted(table);
  CHECK(ember_test::same_bits(adopted.weight(), table));

  RowMatrix<double> moved_from = table;
  const double* storage = moved_from.data();
  const ember::Embedding<double> moved(std::move(moved_from));
  CHECK(moved.weight().data() == storage);  // moved in, not copied
  CHECK(ember_test::same_bits(moved.weight(), table));
}

TEST_CASE("constructors reject non-positive sizes and empty tables with ShapeError",
          "[embedding][errors]") {
  CHECK_THROWS_AS(ember::Embedding<float>(0, 4), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<float>(5, 0), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<double>(-1, 4), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<double>(5, -3), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<double>(0, 4), std::invalid_argument);
  CHECK_THROWS_AS(ember::Embedding<double>(0, 4), ember::Error);
  CHECK_THROWS_WITH(ember::Embedding<double>(5, 0),
                    Catch::Contains("d_model") && Catch::Contains("0"));
  CHECK_THROWS_WITH(ember::Embedding<double>(-2, 4),
                    Catch::Contains("vocab_size") && Catch::Contains("-2"));

  CHECK_THROWS_AS(ember::Embedding<float>(RowMatrix<float>()), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<float>(RowMatrix<float>(0, 4)), ember::ShapeError);
  CHECK_THROWS_AS(ember::Embedding<float>(RowMatrix<float>(4, 0)), ember::ShapeError);
  const auto err = ember_test::catch_as<ember::ShapeError>(
      [] { ember::Embedding<double> e{RowMatrix<double>(0, 3)}; });
  REQUIRE(err);
  CHECK(err->dimension() == -1);
  CHECK(err->actual() == 0);
}

// ---- backward through the lookup ---------------------------------------------------------------

TEST_CASE("backward equals finite differences of sum(forward(ids) .* G) w.r.t. the table",
          "[embedding][gradcheck]") {
  const Index vocab = 6;
  const Index d = 4;
  const RowMatrix<double> w0 = ember_test::random_table<double>(vocab, d, 101);
  const std::vector<TokenId> ids{1, 4, 1, 0, 5, 1, 4};  // repeats; rows 2 and 3 untouched
  const RowMatrix<double> g =
      ember_test::random_table<double>(static_cast<Index>(ids.size()), d, 102);

  const auto loss = [&](const RowMatrix<double>& w) {
    const ember::Embedding<double> e(w);
    return e.forward(ids).cwiseProduct(g).sum();
  };
  const RowMatrix<double> numeric = ember_test::numerical_gradient(loss, w0);

  const ember::Embedding<double> emb(w0);
  ember::SparseRowGrad<double> grad;
  emb.backward(ids, g, grad);
  const RowMatrix<double> analytic = grad.to_dense();

  // The loss is linear in W, so central differences are exact up to rounding (~1e-10).
  ember_test::check_close(analytic, numeric, 1e-7, 1e-7);
  CHECK(ember_test::max_rel_error(analytic, numeric) < 1e-7);
  // Untouched rows are exactly zero in the dense form.
  CHECK((analytic.row(2).array() == 0.0).all());
  CHECK((analytic.row(3).array() == 0.0).all());
}

TEMPLATE_TEST_CASE("backward accumulates repeated ids and stores only the touched rows",
                   "[embedding]", float, double) {
  using T = TestType;
  const Index vocab = 40;
  const Index d = 7;
  const ember::Embedding<T> emb(ember_test::random_table<T>(vocab, d, 201));
  const std::vector<TokenId> ids{30, 2, 17, 2, 2, 39, 0, 17};
  const RowMatrix<T> g = ember_test::random_table<T>(8, d, 202);

  ember::SparseRowGrad<T> grad;
  emb.backward(ids, g, grad);

  const std::vector<TokenId> expected_rows{0, 2, 17, 30, 39};  // sorted, unique
  REQUIRE(grad.size() == 5);
  CHECK(std::vector<TokenId>(grad.rows().begin(), grad.rows().end()) == expected_rows);
  CHECK(grad.vocab_size() == vocab);
  CHECK(grad.d_model() == d);
  REQUIRE(grad.values().rows() == 5);
  REQUIRE(grad.values().cols() == d);

  const RowMatrix<T> dense = ember_test::dense_grad<T>(ids, g, emb.scale(), vocab);
  ember_test::check_close(grad.to_dense(), dense);
  for (Index k = 0; k < grad.size(); ++k) {
    const TokenId row = grad.rows()[static_cast<std::size_t>(k)];
    INFO("stored row " << row);
    ember_test::check_close(grad.values().row(k), dense.row(row));
  }
}

TEMPLATE_TEST_CASE("backward twice accumulates both calls", "[embedding]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(10, 5, 301));
  const std::vector<TokenId> ids_a{1, 3, 3, 8};
  const std::vector<TokenId> ids_b{3, 9, 1};
  const RowMatrix<T> ga = ember_test::random_table<T>(4, 5, 302);
  const RowMatrix<T> gb = ember_test::random_table<T>(3, 5, 303);

  ember::SparseRowGrad<T> grad;
  emb.backward(ids_a, ga, grad);
  emb.backward(ids_b, gb, grad);

  const RowMatrix<T> expected = ember_test::dense_grad<T>(ids_a, ga, emb.scale(), 10) +
                                ember_test::dense_grad<T>(ids_b, gb, emb.scale(), 10);
  ember_test::check_close(grad.to_dense(), expected);
  CHECK(grad.size() == 4);  // rows 1, 3, 8, 9
}

TEMPLATE_TEST_CASE("backward with int32 ids gives the same bits as with int64 ids", "[embedding]",
                   float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(25, 6, 401));
  const auto ids64 = ember_test::random_ids(40, 25, 402);
  const auto ids32 = ember_test::random_ids<std::int32_t>(40, 25, 402);
  const RowMatrix<T> g = ember_test::random_table<T>(40, 6, 403);

  ember::SparseRowGrad<T> a;
  ember::SparseRowGrad<T> b;
  emb.backward(ids64, g, a);
  emb.backward(ids32, g, b);
  CHECK(std::vector<TokenId>(a.rows().begin(), a.rows().end()) ==
        std::vector<TokenId>(b.rows().begin(), b.rows().end()));
  CHECK(ember_test::same_bits(a.values(), b.values()));
  ember_test::check_close(a.to_dense(), ember_test::dense_grad<T>(ids64, g, emb.scale(), 25));
}

TEMPLATE_TEST_CASE("backward reads grad_out from a block of a larger matrix", "[embedding]", float,
                   double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(8, 3, 501));
  const std::vector<TokenId> ids{7, 1, 7};
  const RowMatrix<T> big = ember_test::random_table<T>(6, 10, 502);
  const RowMatrix<T> g = big.block(1, 4, 3, 3);

  ember::SparseRowGrad<T> from_block;
  ember::SparseRowGrad<T> from_copy;
  emb.backward(ids, big.block(1, 4, 3, 3), from_block);
  emb.backward(ids, g, from_copy);
  CHECK(ember_test::same_bits(from_block.values(), from_copy.values()));
}

// ---- errors: ids -------------------------------------------------------------------------------

TEST_CASE("forward rejects an out-of-range id with IndexError naming position, value and bound",
          "[embedding][errors]") {
  const RowMatrix<double> table = ember_test::random_table<double>(5, 4, 601);
  const ember::Embedding<double> emb(table);
  const TokenId bad =
      GENERATE(TokenId{-1}, TokenId{5}, TokenId{6}, std::numeric_limits<TokenId>::max(),
               std::numeric_limits<TokenId>::min());
  const std::size_t position = GENERATE(std::size_t{0}, std::size_t{3}, std::size_t{5});
  std::vector<TokenId> ids{0, 1, 2, 3, 4, 4};
  ids[position] = bad;
  CAPTURE(bad, position);

  const std::string value_text = std::to_string(bad);
  const std::string position_text = "position " + std::to_string(position);

  SECTION("owning overload") {
    CHECK_THROWS_AS(emb.forward(ids), ember::IndexError);
    CHECK_THROWS_AS(emb.forward(ids), std::out_of_range);
    CHECK_THROWS_AS(emb.forward(ids), ember::Error);
    CHECK_THROWS_WITH(emb.forward(ids),
                      Catch::Contains(position_text) && Catch::Contains(value_text) &&
                          Catch::Contains("[0, 5)") && Catch::Contains("Embedding::forward"));
    const auto err = ember_test::catch_as<ember::IndexError>([&] { (void)emb.forward(ids); });
    REQUIRE(err);
    CHECK(err->position() == static_cast<Index>(position));
    CHECK(err->value() == bad);
    CHECK(err->bound() == 5);
    CHECK(std::string(err->message()) == err->what());
  }
  SECTION("overload writing into out; out untouched") {
    RowMatrix<double> out = RowMatrix<double>::Constant(6, 4, 7.0);
    CHECK_THROWS_AS(emb.forward(ids, out), ember::IndexError);
    CHECK_THROWS_WITH(emb.forward(ids, out), Catch::Contains(position_text) &&
                                                 Catch::Contains(value_text) &&
                                                 Catch::Contains("[0, 5)"));
    CHECK(ember_test::all_equal_to(out, 7.0));
  }
  CHECK(ember_test::same_bits(emb.weight(), table));
}

TEST_CASE("forward rejects out-of-range int32 and unsigned ids the same way",
          "[embedding][errors]") {
  const ember::Embedding<float> emb(5, 4, 3);
  const std::int32_t bad = GENERATE(-1, 5, 6, std::numeric_limits<std::int32_t>::max(),
                                    std::numeric_limits<std::int32_t>::min());
  std::vector<std::int32_t> ids{0, 1, 2, bad, 4};
  RowMatrix<float> out = RowMatrix<float>::Constant(5, 4, 7.0f);
  const auto err = ember_test::catch_as<ember::IndexError>([&] { emb.forward(ids, out); });
  REQUIRE(err);
  CHECK(err->position() == 3);
  CHECK(err->value() == bad);
  CHECK(err->bound() == 5);
  CHECK_THAT(std::string(err->what()), Catch::Contains("position 3") &&
                                           Catch::Contains(std::to_string(bad)) &&
                                           Catch::Contains("[0, 5)"));
  CHECK(ember_test::all_equal_to(out, 7.0f));
  CHECK_THROWS_AS(emb.forward(ids), ember::IndexError);

  const std::vector<std::uint32_t> uids{0, 1, 2, 4294967295u};
  const auto uerr = ember_test::catch_as<ember::IndexError>([&] { (void)emb.forward(uids); });
  REQUIRE(uerr);
  CHECK(uerr->position() == 3);
  CHECK(uerr->value() == 4294967295);
}

TEST_CASE("backward rejects an out-of-range id and leaves the gradient unchanged",
          "[embedding][errors]") {
  const ember::Embedding<double> emb(ember_test::random_table<double>(5, 4, 701));
  const TokenId bad =
      GENERATE(TokenId{-1}, TokenId{5}, TokenId{6}, std::numeric_limits<TokenId>::max(),
               std::numeric_limits<TokenId>::min());
  CAPTURE(bad);
  const RowMatrix<double> g = ember_test::random_table<double>(5, 4, 702);

  SECTION("into a gradient that already holds rows") {
    ember::SparseRowGrad<double> grad;
    emb.backward(std::vector<TokenId>{4, 1}, g.topRows(2), grad);
    const std::vector<TokenId> rows_before(grad.rows().begin(), grad.rows().end());
    const RowMatrix<double> values_before = grad.values();

    const std::vector<TokenId> ids{2, 0, 3, bad, 1};
    const auto err = ember_test::catch_as<ember::IndexError>([&] { emb.backward(ids, g, grad); });
    REQUIRE(err);
    CHECK(err->position() == 3);
    CHECK(err->value() == bad);
    CHECK(err->bound() == 5);
    CHECK_THAT(std::string(err->what()),
               Catch::Contains("position 3") && Catch::Contains(std::to_string(bad)) &&
                   Catch::Contains("[0, 5)") && Catch::Contains("Embedding::backward"));
    CHECK(std::vector<TokenId>(grad.rows().begin(), grad.rows().end()) == rows_before);
    CHECK(ember_test::same_bits(grad.values(), values_before));
  }
  SECTION("into a fresh gradient, which stays unbound") {
    ember::SparseRowGrad<double> grad;
    const std::vector<std::int32_t> ids{2, 0, 3, bad < 0 ? -1 : 5, 1};
    CHECK_THROWS_AS(emb.backward(ids, g, grad), ember::IndexError);
    CHECK_THROWS_AS(emb.backward(ids, g, grad), std::out_of_range);
    CHECK_THROWS_AS(emb.backward(ids, g, grad), ember::Error);
    CHECK(grad.empty());
    CHECK(grad.vocab_size() == 0);
    CHECK(grad.d_model() == 0);
  }
}

// ---- errors: shapes ----------------------------------------------------------------------------

TEST_CASE("forward into an out of the wrong shape throws ShapeError naming out and both sizes",
          "[embedding][errors]") {
  const RowMatrix<float> table = ember_test::random_table<float>(5, 4, 801);
  const ember::Embedding<float> emb(table);
  const std::vector<TokenId> ids{0, 1, 2};

  SECTION("too few rows") {
    RowMatrix<float> out = RowMatrix<float>::Constant(2, 4, 7.0f);
    const auto err = ember_test::catch_as<ember::ShapeError>([&] { emb.forward(ids, out); });
    REQUIRE(err);
    CHECK(err->dimension() == 0);
    CHECK(err->expected() == 3);
    CHECK(err->actual() == 2);
    CHECK_THAT(std::string(err->what()), Catch::Contains("out has 2 rows") && Catch::Contains("3"));
    CHECK(ember_test::all_equal_to(out, 7.0f));
  }
  SECTION("too many columns") {
    RowMatrix<float> out = RowMatrix<float>::Constant(3, 5, 7.0f);
    CHECK_THROWS_AS(emb.forward(ids, out), ember::ShapeError);
    CHECK_THROWS_AS(emb.forward(ids, out), std::invalid_argument);
    const auto err = ember_test::catch_as<ember::ShapeError>([&] { emb.forward(ids, out); });
    REQUIRE(err);
    CHECK(err->dimension() == 1);
    CHECK(err->expected() == 4);
    CHECK(err->actual() == 5);
    CHECK_THAT(std::string(err->what()),
               Catch::Contains("out has 5 columns") && Catch::Contains("d_model = 4"));
    CHECK(ember_test::all_equal_to(out, 7.0f));
  }
  SECTION("wrong shape and a bad id: nothing written either way") {
    RowMatrix<float> out = RowMatrix<float>::Constant(4, 4, 7.0f);
    const std::vector<std::int32_t> bad_ids{0, 9, 1};
    CHECK_THROWS_AS(emb.forward(bad_ids, out), ember::Error);
    CHECK(ember_test::all_equal_to(out, 7.0f));
  }
  CHECK(ember_test::same_bits(emb.weight(), table));
}

TEST_CASE("backward with grad_out of the wrong row count throws ShapeError, gradient unchanged",
          "[embedding][errors]") {
  const ember::Embedding<double> emb(ember_test::random_table<double>(5, 4, 901));
  const std::vector<TokenId> ids{0, 1, 2};
  ember::SparseRowGrad<double> grad;
  emb.backward(std::vector<TokenId>{3}, ember_test::random_table<double>(1, 4, 902), grad);
  const RowMatrix<double> values_before = grad.values();

  const RowMatrix<double> g = ember_test::random_table<double>(2, 4, 903);
  const auto err = ember_test::catch_as<ember::ShapeError>([&] { emb.backward(ids, g, grad); });
  REQUIRE(err);
  CHECK(err->dimension() == 0);
  CHECK(err->expected() == 3);
  CHECK(err->actual() == 2);
  CHECK_THAT(std::string(err->what()), Catch::Contains("has 2 rows") && Catch::Contains("3"));
  REQUIRE(grad.size() == 1);
  CHECK(grad.rows()[0] == 3);
  CHECK(ember_test::same_bits(grad.values(), values_before));
}

TEST_CASE("backward with grad_out of the wrong column count throws ShapeError, gradient unchanged",
          "[embedding][errors]") {
  const ember::Embedding<double> emb(ember_test::random_table<double>(5, 4, 1001));
  const std::vector<TokenId> ids{0, 1, 2};
  const RowMatrix<double> g = ember_test::random_table<double>(3, 5, 1002);  // 5 columns, d_model 4

  ember::SparseRowGrad<double> grad;
  emb.backward(std::vector<TokenId>{3}, ember_test::random_table<double>(1, 4, 1003), grad);
  const RowMatrix<double> values_before = grad.values();

  const auto err = ember_test::catch_as<ember::ShapeError>([&] { emb.backward(ids, g, grad); });
  REQUIRE(err);
  CHECK(err->dimension() == 1);
  CHECK(err->expected() == 4);
  CHECK(err->actual() == 5);
  REQUIRE(grad.size() == 1);
  CHECK(ember_test::same_bits(grad.values(), values_before));
}

// Embedding::backward documents "ShapeError if grad_out is not n x d". A fresh (unbound) gradient
// must not change that: the layer knows its own d_model.
TEST_CASE("backward into a fresh gradient rejects grad_out with the wrong column count",
          "[embedding][errors]") {
  const ember::Embedding<double> emb(ember_test::random_table<double>(5, 4, 1101));
  const std::vector<TokenId> ids{0, 1, 2};
  const RowMatrix<double> g = ember_test::random_table<double>(3, 5, 1102);
  ember::SparseRowGrad<double> grad;
  CHECK_THROWS_AS(emb.backward(ids, g, grad), ember::ShapeError);
  CHECK(grad.empty());
  CHECK(grad.vocab_size() == 0);  // still unbound: nothing changed
  CHECK(grad.d_model() == 0);
}

// The message of a grad_out shape error should name the argument the caller passed (grad_out),
// not an internal parameter name or "the table".
TEST_CASE("backward's shape errors name grad_out and both sizes", "[embedding][errors]") {
  const ember::Embedding<double> emb(ember_test::random_table<double>(5, 4, 1201));
  const std::vector<TokenId> ids{0, 1, 2};
  ember::SparseRowGrad<double> grad(5, 4);
  const RowMatrix<double> rows_wrong = ember_test::random_table<double>(2, 4, 1202);
  const RowMatrix<double> cols_wrong = ember_test::random_table<double>(3, 5, 1203);
  CHECK_THROWS_WITH(emb.backward(ids, rows_wrong, grad),
                    Catch::Contains("grad_out has 2 rows") && Catch::Contains("3"));
  CHECK_THROWS_WITH(emb.backward(ids, cols_wrong, grad),
                    Catch::Contains("grad_out has 5 columns") && Catch::Contains("4"));
}
