// Tests of ember/tied_logits.hpp (and the Embedding members that forward to it): logits = H · Wᵀ,
// its backward, the absence of any scale, shape errors, and a tiny tied model trained one step.
// SPDX-License-Identifier: MIT
#include "ember/tied_logits.hpp"

#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/sparse_grad.hpp"
#include "ember/types.hpp"
#include "support/error_checks.hpp"
#include "support/gradcheck.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"
#include "support/tied_logits_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

namespace {

// Dot products of length d in a different order than the reference: allow d roundings.
template <class T>
double gemm_rel_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-13;
}
template <class T>
double gemm_abs_tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-13;
}

}  // namespace

// ---- forward -----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("logits equal the triple-loop reference", "[tied_logits]", float, double) {
  using T = TestType;
  const RowMatrix<T> table = ember_test::random_table<T>(23, 12, 1);
  const RowMatrix<T> hidden = ember_test::random_table<T>(7, 12, 2);
  const RowMatrix<T> expected = ember_test::logits_loops(table, hidden);
  const ember::Embedding<T> emb(table);

  SECTION("member, owning") {
    ember_test::check_close(emb.logits(hidden), expected, gemm_rel_tol<T>(), gemm_abs_tol<T>());
  }
  SECTION("member, into out") {
    RowMatrix<T> out(7, 23);
    emb.logits(hidden, out);
    ember_test::check_close(out, expected, gemm_rel_tol<T>(), gemm_abs_tol<T>());
  }
  SECTION("free function on a RowMatrix, owning and into out") {
    ember_test::check_close(ember::logits(table, hidden), expected, gemm_rel_tol<T>(),
                            gemm_abs_tol<T>());
    RowMatrix<T> out(7, 23);
    ember::logits(table, hidden, out);
    ember_test::check_close(out, expected, gemm_rel_tol<T>(), gemm_abs_tol<T>());
  }
  SECTION("free function on blocks: table, hidden and out all views of larger matrices") {
    RowMatrix<T> big_table = ember_test::random_table<T>(30, 20, 3);
    big_table.block(4, 5, 23, 12) = table;
    RowMatrix<T> big_hidden = ember_test::random_table<T>(10, 15, 4);
    big_hidden.block(2, 1, 7, 12) = hidden;
    RowMatrix<T> big_out = RowMatrix<T>::Constant(12, 30, T(7));

    ember_test::check_close(
        ember::logits(big_table.block(4, 5, 23, 12), big_hidden.block(2, 1, 7, 12)), expected,
        gemm_rel_tol<T>(), gemm_abs_tol<T>());
    ember::logits(big_table.block(4, 5, 23, 12), big_hidden.block(2, 1, 7, 12),
                  big_out.block(3, 6, 7, 23));
    ember_test::check_close(big_out.block(3, 6, 7, 23), expected, gemm_rel_tol<T>(),
                            gemm_abs_tol<T>());
    RowMatrix<T> outside = big_out;
    outside.block(3, 6, 7, 23).setConstant(T(7));
    CHECK(ember_test::all_equal_to(outside, T(7)));
  }
}

TEMPLATE_TEST_CASE("logits apply no scale: they use the weight itself, not weight times sqrt(d)",
                   "[tied_logits]", float, double) {
  using T = TestType;
  // d = 4, so the lookup scale is 2 and a scaled projection would be off by a factor 2.
  const ember::Embedding<T> emb(ember_test::hand_table<T>(5, 4));
  const RowMatrix<T> hidden = ember_test::random_table<T>(3, 4, 10);
  const RowMatrix<T> logits = emb.logits(hidden);
  const RowMatrix<T> unscaled = ember_test::logits_loops(emb.weight(), hidden);
  const RowMatrix<T> scaled_weight = emb.weight() * emb.scale();
  const RowMatrix<T> scaled = ember_test::logits_loops(scaled_weight, hidden);
  ember_test::check_close(logits, unscaled, gemm_rel_tol<T>(), gemm_abs_tol<T>());
  // And clearly not the scaled version (the two differ by a factor 2 everywhere).
  CHECK((logits - scaled).cwiseAbs().maxCoeff() > T(0.1));
  // The lookup does apply it: forward(ids) row = 2 * weight row.
  ember_test::check_close(emb.forward(std::vector<TokenId>{3}),
                          (emb.weight().row(3) * T(2)).eval());
}

TEST_CASE("logits equal finite differences: d sum(logits .* G) / d hidden = G · W",
          "[tied_logits][gradcheck]") {
  const RowMatrix<double> table = ember_test::random_table<double>(6, 4, 20);
  const RowMatrix<double> hidden = ember_test::random_table<double>(3, 4, 21);
  const RowMatrix<double> g = ember_test::random_table<double>(3, 6, 22);
  // Each logit's derivative w.r.t. hidden(i, c) is W(v, c): the Jacobian of the projection.
  const RowMatrix<double> numeric = ember_test::numerical_gradient(
      [&](const RowMatrix<double>& h) { return ember::logits(table, h).cwiseProduct(g).sum(); },
      hidden);
  const RowMatrix<double> expected = g * table;
  ember_test::check_close(numeric, expected, 1e-7, 1e-7);
}

// ---- backward ----------------------------------------------------------------------------------

TEMPLATE_TEST_CASE(
    "logits_backward equals the loop reference, grad_hidden is assigned and "
    "grad_weight accumulated",
    "[tied_logits]", float, double) {
  using T = TestType;
  const RowMatrix<T> table = ember_test::random_table<T>(9, 5, 30);
  const RowMatrix<T> hidden = ember_test::random_table<T>(4, 5, 31);
  const RowMatrix<T> grad_logits = ember_test::random_table<T>(4, 9, 32);
  RowMatrix<T> ref_hidden;
  RowMatrix<T> ref_weight;
  ember_test::logits_backward_loops(table, hidden, grad_logits, ref_hidden, ref_weight);

  const RowMatrix<T> prior = ember_test::random_table<T>(9, 5, 33);
  RowMatrix<T> grad_hidden = RowMatrix<T>::Constant(4, 5, T(7));  // garbage: must be overwritten
  RowMatrix<T> grad_weight = prior;                               // must be added to

  SECTION("member function") {
    const ember::Embedding<T> emb(table);
    emb.logits_backward(hidden, grad_logits, grad_hidden, grad_weight);
  }
  SECTION("free function") {
    ember::logits_backward(table, hidden, grad_logits, grad_hidden, grad_weight);
  }
  ember_test::check_close(grad_hidden, ref_hidden, gemm_rel_tol<T>(), gemm_abs_tol<T>());
  ember_test::check_close(grad_weight, (prior + ref_weight).eval(), gemm_rel_tol<T>(),
                          gemm_abs_tol<T>());

  // A second call: grad_hidden is the same again (assigned), grad_weight has two contributions.
  ember::logits_backward(table, hidden, grad_logits, grad_hidden, grad_weight);
  ember_test::check_close(grad_hidden, ref_hidden, gemm_rel_tol<T>(), gemm_abs_tol<T>());
  ember_test::check_close(grad_weight, (prior + ref_weight + ref_weight).eval(), gemm_rel_tol<T>(),
                          gemm_abs_tol<T>());
}

TEMPLATE_TEST_CASE("logits_backward works on blocks of larger matrices", "[tied_logits]", float,
                   double) {
  using T = TestType;
  const RowMatrix<T> table = ember_test::random_table<T>(9, 5, 40);
  const RowMatrix<T> hidden = ember_test::random_table<T>(4, 5, 41);
  const RowMatrix<T> grad_logits = ember_test::random_table<T>(4, 9, 42);
  RowMatrix<T> ref_hidden;
  RowMatrix<T> ref_weight;
  ember_test::logits_backward_loops(table, hidden, grad_logits, ref_hidden, ref_weight);

  RowMatrix<T> big_table = ember_test::random_table<T>(12, 8, 43);
  big_table.block(1, 2, 9, 5) = table;
  RowMatrix<T> big_in = ember_test::random_table<T>(10, 20, 44);
  big_in.block(0, 0, 4, 5) = hidden;
  big_in.block(5, 10, 4, 9) = grad_logits;
  RowMatrix<T> big_out = RowMatrix<T>::Zero(20, 20);
  big_out.block(0, 0, 4, 5).setConstant(T(7));

  ember::logits_backward(big_table.block(1, 2, 9, 5), big_in.block(0, 0, 4, 5),
                         big_in.block(5, 10, 4, 9), big_out.block(0, 0, 4, 5),
                         big_out.block(8, 7, 9, 5));
  ember_test::check_close(big_out.block(0, 0, 4, 5), ref_hidden, gemm_rel_tol<T>(),
                          gemm_abs_tol<T>());
  ember_test::check_close(big_out.block(8, 7, 9, 5), ref_weight, gemm_rel_tol<T>(),
                          gemm_abs_tol<T>());
  RowMatrix<T> outside = big_out;
  outside.block(0, 0, 4, 5).setZero();
  outside.block(8, 7, 9, 5).setZero();
  CHECK((outside.array() == T(0)).all());
}

TEST_CASE("logits_backward equals finite differences for grad_hidden and grad_weight",
          "[tied_logits][gradcheck]") {
  const RowMatrix<double> table = ember_test::random_table<double>(7, 4, 50);
  const RowMatrix<double> hidden = ember_test::random_table<double>(3, 4, 51);
  const std::vector<TokenId> targets{6, 0, 3};
  // A nonlinear scalar loss of the logits: mean softmax cross-entropy.
  const auto loss_of_hidden = [&](const RowMatrix<double>& h) {
    return ember_test::cross_entropy(ember::logits(table, h), targets);
  };
  const auto loss_of_weight = [&](const RowMatrix<double>& w) {
    return ember_test::cross_entropy(ember::logits(w, hidden), targets);
  };
  const RowMatrix<double> grad_logits =
      ember_test::cross_entropy_grad(ember::logits(table, hidden), targets);

  RowMatrix<double> grad_hidden(3, 4);
  RowMatrix<double> grad_weight = RowMatrix<double>::Zero(7, 4);
  ember::logits_backward(table, hidden, grad_logits, grad_hidden, grad_weight);

  const RowMatrix<double> num_hidden = ember_test::numerical_gradient(loss_of_hidden, hidden);
  const RowMatrix<double> num_weight = ember_test::numerical_gradient(loss_of_weight, table);
  ember_test::check_close(grad_hidden, num_hidden, 1e-6, 1e-8);
  ember_test::check_close(grad_weight, num_weight, 1e-6, 1e-8);
  CHECK(ember_test::max_rel_error(grad_hidden, num_hidden) < 1e-7);
  CHECK(ember_test::max_rel_error(grad_weight, num_weight) < 1e-7);
}

// ---- a tiny tied model
// ---------------------------------------------------------------------------

namespace {

/// Loss and gradient of the tiny tied model through ember: x = emb.forward(inputs),
/// logits = emb.logits(x), mean cross-entropy on targets. The gradient w.r.t. the shared table is
/// the dense output-side part (logits_backward) plus the sparse input-side part (backward through
/// the lookup), combined with SparseRowGrad::add_to.
template <class T>
double tied_loss_and_grad(const ember::Embedding<T>& emb, const std::vector<TokenId>& inputs,
                          const std::vector<TokenId>& targets, RowMatrix<T>& grad_weight) {
  const RowMatrix<T> x = emb.forward(inputs);
  const RowMatrix<T> logits = emb.logits(x);
  const double loss = ember_test::cross_entropy(logits, targets);
  const RowMatrix<T> grad_logits = ember_test::cross_entropy_grad(logits, targets);
  RowMatrix<T> grad_x(x.rows(), x.cols());
  grad_weight = RowMatrix<T>::Zero(emb.vocab_size(), emb.d_model());
  emb.logits_backward(x, grad_logits, grad_x, grad_weight);
  ember::SparseRowGrad<T> sparse;
  emb.backward(inputs, grad_x, sparse);
  sparse.add_to(grad_weight);
  return loss;
}

}  // namespace

TEST_CASE("the combined gradient of a tied model equals finite differences of its loss",
          "[tied_logits][gradcheck]") {
  // V = 5, d = 3: the sequence 0 1 2 3 4 1 predicts its next token.
  const std::vector<TokenId> sequence{0, 1, 2, 3, 4, 1};
  const std::vector<TokenId> inputs(sequence.begin(), sequence.end() - 1);
  const std::vector<TokenId> targets(sequence.begin() + 1, sequence.end());
  const RowMatrix<double> w0 = ember_test::random_table<double>(5, 3, 60) * 0.5;
  const ember::Embedding<double> emb(w0);

  RowMatrix<double> grad;
  const double loss = tied_loss_and_grad(emb, inputs, targets, grad);
  CHECK_THAT(loss, Catch::Matchers::WithinRel(ember_test::tied_loss_reference(w0, inputs, targets),
                                              1e-12));

  const RowMatrix<double> numeric = ember_test::numerical_gradient(
      [&](const RowMatrix<double>& w) {
        return ember_test::tied_loss_reference(w, inputs, targets);
      },
      w0);
  ember_test::check_close(grad, numeric, 1e-6, 1e-8);
  CHECK(ember_test::max_rel_error(grad, numeric) < 1e-7);

  // Both halves matter: the output side alone is not the gradient.
  RowMatrix<double> output_only = RowMatrix<double>::Zero(5, 3);
  {
    const RowMatrix<double> x = emb.forward(inputs);
    RowMatrix<double> gx(x.rows(), 3);
    emb.logits_backward(x, ember_test::cross_entropy_grad(emb.logits(x), targets), gx, output_only);
  }
  CHECK(ember_test::max_rel_error(output_only, numeric) > 1e-3);
}

TEMPLATE_TEST_CASE("one SGD step on a tiny tied model lowers the loss", "[tied_logits]", float,
                   double) {
  using T = TestType;
  const std::vector<TokenId> sequence{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0};
  const std::vector<TokenId> inputs(sequence.begin(), sequence.end() - 1);
  const std::vector<TokenId> targets(sequence.begin() + 1, sequence.end());
  ember::Embedding<T> emb(5, 3, /*seed=*/7);

  RowMatrix<T> grad;
  const double loss_before = tied_loss_and_grad(emb, inputs, targets, grad);
  REQUIRE(grad.allFinite());
  REQUIRE(grad.norm() > T(0));
  emb.weight() -= T(0.1) * grad;
  RowMatrix<T> grad_after;
  const double loss_after = tied_loss_and_grad(emb, inputs, targets, grad_after);
  CAPTURE(loss_before, loss_after);
  CHECK(loss_after < loss_before);

  // A few more steps keep lowering it (a sanity check that the gradient has the right sign).
  double loss = loss_after;
  for (int step = 0; step < 20; ++step) {
    emb.weight() -= T(0.1) * grad_after;
    const double next = tied_loss_and_grad(emb, inputs, targets, grad_after);
    CHECK(next < loss);
    loss = next;
  }
}

// ---- errors ------------------------------------------------------------------------------------

TEST_CASE("logits reject a hidden with the wrong width or an out of the wrong shape",
          "[tied_logits][errors]") {
  const RowMatrix<float> table = ember_test::random_table<float>(6, 4, 70);
  const ember::Embedding<float> emb(table);
  const RowMatrix<float> hidden = ember_test::random_table<float>(3, 4, 71);

  SECTION("hidden has the wrong number of columns") {
    const RowMatrix<float> wide = ember_test::random_table<float>(3, 5, 72);
    CHECK_THROWS_AS(emb.logits(wide), ember::ShapeError);
    CHECK_THROWS_AS(ember::logits(table, wide), std::invalid_argument);
    CHECK_THROWS_WITH(ember::logits(table, wide),
                      Catch::Contains("hidden has 5 columns") && Catch::Contains("d_model = 4"));
    const auto err = ember_test::catch_as<ember::ShapeError>([&] { (void)emb.logits(wide); });
    REQUIRE(err);
    CHECK(err->dimension() == 1);
    CHECK(err->expected() == 4);
    CHECK(err->actual() == 5);
    RowMatrix<float> out = RowMatrix<float>::Constant(3, 6, 7.0f);
    CHECK_THROWS_AS(emb.logits(wide, out), ember::ShapeError);
    CHECK(ember_test::all_equal_to(out, 7.0f));
  }
  SECTION("out has the wrong number of rows") {
    RowMatrix<float> out = RowMatrix<float>::Constant(4, 6, 7.0f);
    CHECK_THROWS_AS(emb.logits(hidden, out), ember::ShapeError);
    CHECK_THROWS_WITH(ember::logits(table, hidden, out),
                      Catch::Contains("out has 4 rows") && Catch::Contains("3"));
    CHECK(ember_test::all_equal_to(out, 7.0f));
  }
  SECTION("out has the wrong number of columns") {
    RowMatrix<float> out = RowMatrix<float>::Constant(3, 5, 7.0f);
    CHECK_THROWS_WITH(emb.logits(hidden, out),
                      Catch::Contains("out has 5 columns") && Catch::Contains("vocab_size = 6"));
    const auto err =
        ember_test::catch_as<ember::ShapeError>([&] { ember::logits(table, hidden, out); });
    REQUIRE(err);
    CHECK(err->dimension() == 1);
    CHECK(err->expected() == 6);
    CHECK(err->actual() == 5);
    CHECK(ember_test::all_equal_to(out, 7.0f));
  }
  CHECK(ember_test::same_bits(emb.weight(), table));
}

TEST_CASE("logits_backward rejects each argument of the wrong shape and writes nothing",
          "[tied_logits][errors]") {
  // table 6 x 4, n = 3.
  const RowMatrix<double> table = ember_test::random_table<double>(6, 4, 80);
  RowMatrix<double> hidden = ember_test::random_table<double>(3, 4, 81);
  RowMatrix<double> grad_logits = ember_test::random_table<double>(3, 6, 82);
  RowMatrix<double> grad_hidden = RowMatrix<double>::Constant(3, 4, 7.0);
  RowMatrix<double> grad_weight = RowMatrix<double>::Constant(6, 4, 7.0);

  struct Case {
    const char* name;
    int dimension;
    Index expected;
    Index actual;
    const char* text;
  };
  const Case c = GENERATE(Case{"hidden", 1, 4, 5, "hidden has 5 columns"},
                          Case{"grad_logits", 0, 3, 2, "grad_logits has 2 rows"},
                          Case{"grad_logits", 1, 6, 7, "grad_logits has 7 columns"},
                          Case{"grad_hidden", 0, 3, 4, "grad_hidden has 4 rows"},
                          Case{"grad_hidden", 1, 4, 3, "grad_hidden has 3 columns"},
                          Case{"grad_weight", 0, 6, 5, "grad_weight has 5 rows"},
                          Case{"grad_weight", 1, 4, 2, "grad_weight has 2 columns"});
  CAPTURE(c.text);
  const std::string name = c.name;
  const Index rows = c.dimension == 0 ? c.actual : -1;
  const Index cols = c.dimension == 1 ? c.actual : -1;
  const auto reshape = [&](RowMatrix<double>& m, double fill) {
    m = RowMatrix<double>::Constant(rows >= 0 ? rows : m.rows(), cols >= 0 ? cols : m.cols(), fill);
  };
  if (name == "hidden") reshape(hidden, 0.5);
  if (name == "grad_logits") reshape(grad_logits, 0.5);
  if (name == "grad_hidden") reshape(grad_hidden, 7.0);
  if (name == "grad_weight") reshape(grad_weight, 7.0);

  const auto err = ember_test::catch_as<ember::ShapeError>(
      [&] { ember::logits_backward(table, hidden, grad_logits, grad_hidden, grad_weight); });
  REQUIRE(err);
  CHECK(err->dimension() == c.dimension);
  CHECK(err->expected() == c.expected);
  CHECK(err->actual() == c.actual);
  CHECK_THAT(std::string(err->what()), Catch::Contains(c.text) &&
                                           Catch::Contains(std::to_string(c.expected)) &&
                                           Catch::Contains("ember::logits_backward"));
  CHECK(ember_test::all_equal_to(grad_hidden, 7.0));
  CHECK(ember_test::all_equal_to(grad_weight, 7.0));

  const ember::Embedding<double> emb(table);
  CHECK_THROWS_AS(emb.logits_backward(hidden, grad_logits, grad_hidden, grad_weight),
                  ember::ShapeError);
  CHECK(ember_test::all_equal_to(grad_hidden, 7.0));
  CHECK(ember_test::all_equal_to(grad_weight, 7.0));
}

TEST_CASE("logits refuse an out that overlaps hidden or the table, and write nothing",
          "[tied_logits][errors]") {
  // table[6, 4], hidden[2, 4] -> out[2, 6].
  RowMatrix<float> table = ember_test::random_table<float>(6, 4, 73);
  const RowMatrix<float> table_before = table;
  RowMatrix<float> buf = ember_test::random_table<float>(2, 6, 74);
  const RowMatrix<float> buf_before = buf;

  const auto on_hidden = ember_test::catch_as<ember::OverlapError>(
      [&] { ember::logits(table, buf.leftCols(4), buf.leftCols(6)); });
  REQUIRE(on_hidden);
  CHECK(std::string(on_hidden->what()) ==
        "ember::logits: out overlaps hidden in memory (out needs its own buffer)");
  CHECK(on_hidden->output() == "out");
  CHECK(on_hidden->input() == "hidden");
  CHECK(ember_test::same_bits(buf, buf_before));

  const RowMatrix<float> hidden = ember_test::random_table<float>(2, 4, 75);
  Eigen::Map<RowMatrix<float>> inside(table.data() + 8, 2, 6);  // rows 2..4 of the table
  const auto on_table =
      ember_test::catch_as<ember::OverlapError>([&] { ember::logits(table, hidden, inside); });
  REQUIRE(on_table);
  CHECK(std::string(on_table->what()) ==
        "ember::logits: out overlaps table in memory (out needs its own buffer)");
  CHECK(on_table->input() == "table");
  CHECK(ember_test::same_bits(table, table_before));
  // Caught as the standard exception of a bad argument too.
  CHECK_THROWS_AS(ember::logits(table, hidden, inside), std::invalid_argument);
}

TEST_CASE("logits_backward refuses outputs that overlap each other or an input, and writes nothing",
          "[tied_logits][errors]") {
  // table[6, 4], hidden[2, 4], grad_logits[2, 6] -> grad_hidden[2, 4], grad_weight[6, 4].
  RowMatrix<float> table = ember_test::random_table<float>(6, 4, 76);
  const RowMatrix<float> table_before = table;
  RowMatrix<float> hidden = ember_test::random_table<float>(2, 4, 77);
  const RowMatrix<float> hidden_before = hidden;
  const RowMatrix<float> grad_logits = ember_test::random_table<float>(2, 6, 78);
  RowMatrix<float> grad_hidden = RowMatrix<float>::Constant(2, 4, 7.0f);
  RowMatrix<float> grad_weight = RowMatrix<float>::Constant(6, 4, 7.0f);

  const auto on_hidden = ember_test::catch_as<ember::OverlapError>(
      [&] { ember::logits_backward(table, hidden, grad_logits, hidden, grad_weight); });
  REQUIRE(on_hidden);
  CHECK(std::string(on_hidden->what()) ==
        "ember::logits_backward: grad_hidden overlaps hidden in memory (grad_hidden needs its "
        "own buffer)");
  CHECK(on_hidden->output() == "grad_hidden");
  CHECK(on_hidden->input() == "hidden");
  CHECK(ember_test::same_bits(hidden, hidden_before));
  CHECK(ember_test::all_equal_to(grad_weight, 7.0f));

  const auto on_table = ember_test::catch_as<ember::OverlapError>(
      [&] { ember::logits_backward(table, hidden, grad_logits, grad_hidden, table); });
  REQUIRE(on_table);
  CHECK(on_table->output() == "grad_weight");
  CHECK(on_table->input() == "table");
  CHECK(ember_test::same_bits(table, table_before));
  CHECK(ember_test::all_equal_to(grad_hidden, 7.0f));

  // grad_hidden as rows 1..2 of grad_weight: the two outputs share memory.
  Eigen::Map<RowMatrix<float>> inside(grad_weight.data() + 4, 2, 4);
  const auto outputs = ember_test::catch_as<ember::OverlapError>(
      [&] { ember::logits_backward(table, hidden, grad_logits, inside, grad_weight); });
  REQUIRE(outputs);
  CHECK(outputs->output() == "grad_hidden");
  CHECK(outputs->input() == "grad_weight");
  CHECK(ember_test::all_equal_to(grad_weight, 7.0f));

  // The table's own door: grad_weight written over the stored rows.
  ember::Embedding<float> emb(table);
  auto stored = emb.weight();
  const auto on_rows = ember_test::catch_as<ember::OverlapError>(
      [&] { emb.logits_backward(hidden, grad_logits, grad_hidden, stored); });
  REQUIRE(on_rows);
  CHECK(std::string(on_rows->what()) ==
        "Embedding::logits_backward: grad_weight overlaps the table in memory (grad_weight "
        "needs its own buffer)");
  CHECK(ember_test::same_bits(RowMatrix<float>(emb.weight()), table_before));
  CHECK(ember_test::all_equal_to(grad_hidden, 7.0f));
  // Separate buffers, two column blocks of one matrix included, are accepted.
  RowMatrix<float> both = RowMatrix<float>::Zero(6, 8);
  ember::logits_backward(table, hidden, grad_logits, grad_hidden, both.leftCols(4));
  emb.logits_backward(hidden, grad_logits, grad_hidden, both.rightCols(4));
  CHECK(ember_test::same_bits(RowMatrix<float>(both.leftCols(4)),
                              RowMatrix<float>(both.rightCols(4))));
}
