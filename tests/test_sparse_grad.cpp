// Tests of ember/sparse_grad.hpp: layout, accumulation, determinism (call order, merge, thread
// count), add_to / to_dense, clear and the shape binding.
// SPDX-License-Identifier: MIT
#include "ember/sparse_grad.hpp"

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/config.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/types.hpp"
#include "support/embedding_reference.hpp"
#include "support/error_checks.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"
#include "support/sparse_grad_reference.hpp"
#include "support/threads.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::SparseRowGrad;
using ember::TokenId;

namespace {

template <class T>
std::vector<TokenId> rows_of(const SparseRowGrad<T>& g) {
  return {g.rows().begin(), g.rows().end()};
}

/// Same shape binding, same touched rows and the same bits in every value (bit identity is the
/// point: these are SparseRowGrad's determinism guarantees). Prints the largest difference.
template <class T>
void check_same_grad(const SparseRowGrad<T>& a, const SparseRowGrad<T>& b) {
  CHECK(a.vocab_size() == b.vocab_size());
  CHECK(a.d_model() == b.d_model());
  REQUIRE(rows_of(a) == rows_of(b));
  REQUIRE(a.values().rows() == b.values().rows());
  const double largest = a.values().size() == 0
                             ? 0.0
                             : static_cast<double>((a.values() - b.values()).cwiseAbs().maxCoeff());
  INFO("largest |difference| = " << largest);
  CHECK(ember_test::same_bits(a.values(), b.values()));
}

/// The rows of m selected by positions, in order.
template <class T>
RowMatrix<T> select_rows(const RowMatrix<T>& m, const std::vector<Index>& positions) {
  RowMatrix<T> out(static_cast<Index>(positions.size()), m.cols());
  for (std::size_t k = 0; k < positions.size(); ++k)
    out.row(static_cast<Index>(k)) = m.row(positions[k]);
  return out;
}

}  // namespace

// ---- construction and layout
// ---------------------------------------------------------------------

TEST_CASE("a default gradient is empty and unbound, the sized constructor binds it",
          "[sparse_grad]") {
  const SparseRowGrad<float> unbound;
  CHECK(unbound.empty());
  CHECK(unbound.size() == 0);
  CHECK(unbound.vocab_size() == 0);
  CHECK(unbound.d_model() == 0);
  CHECK(unbound.rows().empty());
  CHECK(unbound.to_dense().size() == 0);

  const SparseRowGrad<double> bound(10, 3);
  CHECK(bound.empty());
  CHECK(bound.vocab_size() == 10);
  CHECK(bound.d_model() == 3);
  CHECK(bound.values().rows() == 0);
  CHECK(bound.values().cols() == 3);
  const RowMatrix<double> dense = bound.to_dense();
  CHECK(dense.rows() == 10);
  CHECK(dense.cols() == 3);
  CHECK((dense.array() == 0.0).all());

  CHECK_THROWS_AS(SparseRowGrad<double>(0, 3), ember::ShapeError);
  CHECK_THROWS_AS(SparseRowGrad<double>(10, 0), ember::ShapeError);
  CHECK_THROWS_AS(SparseRowGrad<float>(-1, 3), std::invalid_argument);
}

TEMPLATE_TEST_CASE("accumulate adds scale times each row and keeps rows sorted and unique",
                   "[sparse_grad]", float, double) {
  using T = TestType;
  SparseRowGrad<T> grad;
  const std::vector<TokenId> ids{9, 4, 9, 1, 4, 9};
  const RowMatrix<T> g = ember_test::random_table<T>(6, 5, 1);
  grad.accumulate(ids, g, T(0.5), 12);
  CHECK(rows_of(grad) == std::vector<TokenId>{1, 4, 9});
  CHECK(grad.vocab_size() == 12);
  CHECK(grad.d_model() == 5);
  ember_test::check_close(grad.to_dense(), ember_test::dense_grad<T>(ids, g, T(0.5), 12));

  // A second call with new rows in between and before the existing ones.
  const std::vector<TokenId> more{0, 5, 9, 11};
  const RowMatrix<T> g2 = ember_test::random_table<T>(4, 5, 2);
  grad.accumulate(more, g2, T(2), 12);
  CHECK(rows_of(grad) == std::vector<TokenId>{0, 1, 4, 5, 9, 11});
  const RowMatrix<T> expected =
      ember_test::dense_grad<T>(ids, g, T(0.5), 12) + ember_test::dense_grad<T>(more, g2, T(2), 12);
  ember_test::check_close(grad.to_dense(), expected);
  for (Index k = 0; k < grad.size(); ++k) {
    ember_test::check_close(grad.values().row(k),
                            expected.row(grad.rows()[static_cast<std::size_t>(k)]));
  }
}

TEST_CASE("accumulating no ids binds the shape but touches no row", "[sparse_grad]") {
  SparseRowGrad<double> grad;
  const std::vector<TokenId> none;
  grad.accumulate(none, RowMatrix<double>(0, 4), 1.0, 7);
  CHECK(grad.empty());
  CHECK(grad.vocab_size() == 7);
  CHECK(grad.d_model() == 4);
}

TEMPLATE_TEST_CASE(
    "accumulate options: a skipped row gets no entry and frequency scaling "
    "divides each row's sum by its count in the call",
    "[sparse_grad]", float, double) {
  using T = TestType;
  using Options = typename SparseRowGrad<T>::AccumulateOptions;
  const std::vector<TokenId> ids{0, 3, 0, 2, 0, 3};  // counts: 0 -> 3, 2 -> 1, 3 -> 2
  const RowMatrix<T> g = ember_test::random_table<T>(6, 4, 5);
  const RowMatrix<T> plain = ember_test::dense_grad<T>(ids, g, T(2), 5);

  SECTION("skip_row: positions of the padding id contribute nothing and create no row") {
    SparseRowGrad<T> grad;
    Options options;
    options.skip_row = 0;
    grad.accumulate(ids, g, T(2), 5, options);
    CHECK(rows_of(grad) == std::vector<TokenId>{2, 3});
    RowMatrix<T> expected = plain;
    expected.row(0).setZero();
    ember_test::check_close(grad.to_dense(), expected);

    SparseRowGrad<T> only_padding;
    only_padding.accumulate(std::vector<TokenId>{0, 0}, g.topRows(2), T(1), 5, options);
    CHECK(only_padding.empty());
  }
  SECTION("scale_grad_by_freq") {
    SparseRowGrad<T> grad;
    Options options;
    options.scale_grad_by_freq = true;
    grad.accumulate(ids, g, T(2), 5, options);
    CHECK(rows_of(grad) == std::vector<TokenId>{0, 2, 3});
    RowMatrix<T> expected = plain;
    expected.row(0) /= T(3);
    expected.row(3) /= T(2);
    ember_test::check_close(grad.to_dense(), expected);
  }
}

// ---- determinism
// ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("two backward calls give the same bits in either order", "[sparse_grad]", float,
                   double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(30, 8, 10));
  const auto ids_a = ember_test::random_ids(40, 30, 11);
  const auto ids_b = ember_test::random_ids(25, 30, 12);
  const RowMatrix<T> ga = ember_test::random_table<T>(40, 8, 13);
  const RowMatrix<T> gb = ember_test::random_table<T>(25, 8, 14);

  SparseRowGrad<T> ab;
  emb.backward(ids_a, ga, ab);
  emb.backward(ids_b, gb, ab);
  SparseRowGrad<T> ba;
  emb.backward(ids_b, gb, ba);
  emb.backward(ids_a, ga, ba);
  check_same_grad(ab, ba);
}

TEMPLATE_TEST_CASE(
    "merge of per-part gradients equals one gradient fed the same calls, bit for bit",
    "[sparse_grad]", float, double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(50, 6, 20));
  const auto ids1 = ember_test::random_ids(30, 50, 21);
  const auto ids2 = ember_test::random_ids(30, 50, 22);
  const auto ids3 = ember_test::random_ids(30, 50, 23);
  const RowMatrix<T> g1 = ember_test::random_table<T>(30, 6, 24);
  const RowMatrix<T> g2 = ember_test::random_table<T>(30, 6, 25);
  const RowMatrix<T> g3 = ember_test::random_table<T>(30, 6, 26);

  SparseRowGrad<T> sequential;
  emb.backward(ids1, g1, sequential);
  emb.backward(ids2, g2, sequential);

  SECTION("one call per part (per-thread gradients)") {
    SparseRowGrad<T> part1;
    SparseRowGrad<T> part2;
    emb.backward(ids1, g1, part1);
    emb.backward(ids2, g2, part2);
    part1.merge(part2);
    check_same_grad(part1, sequential);
  }
  SECTION("merging into an unbound gradient adopts the part") {
    SparseRowGrad<T> part1;
    SparseRowGrad<T> part2;
    emb.backward(ids1, g1, part1);
    emb.backward(ids2, g2, part2);
    SparseRowGrad<T> total;
    total.merge(part1);
    total.merge(part2);
    check_same_grad(total, sequential);
  }
  SECTION("a part holding the first calls, then a part holding the last") {
    emb.backward(ids3, g3, sequential);
    SparseRowGrad<T> head;
    SparseRowGrad<T> tail;
    emb.backward(ids1, g1, head);
    emb.backward(ids2, g2, head);
    emb.backward(ids3, g3, tail);
    head.merge(tail);
    check_same_grad(head, sequential);
  }
  SECTION("merging an unbound gradient changes nothing") {
    SparseRowGrad<T> copy = sequential;
    copy.merge(SparseRowGrad<T>());
    check_same_grad(copy, sequential);
  }
}

TEMPLATE_TEST_CASE(
    "backward gives the same bits for any thread count and any row-partitioning "
    "of the calls",
    "[sparse_grad]", float, double) {
  using T = TestType;
  // Enough unique rows (>= 64) that an OpenMP build really splits the loop across threads.
  const Index vocab = 300;
  const Index d = 32;
  const Index n = 2000;
  const ember::Embedding<T> emb(ember_test::random_table<T>(vocab, d, 30));
  const auto ids = ember_test::random_ids(n, vocab, 31);
  const RowMatrix<T> g = ember_test::random_table<T>(n, d, 32);

  SparseRowGrad<T> reference;
  emb.backward(ids, g, reference);
  REQUIRE(reference.size() >= 64);
  ember_test::check_close(reference.to_dense(),
                          ember_test::dense_grad<T>(ids, g, emb.scale(), vocab),
                          ember_test::rel_tol<T>() * 10, ember_test::abs_tol<T>() * 10);

  SECTION("the same call again into a fresh gradient") {
    SparseRowGrad<T> again;
    emb.backward(ids, g, again);
    check_same_grad(again, reference);
  }
  SECTION("scratch reuse: a gradient cleared and fed the call again") {
    SparseRowGrad<T> reused;
    emb.backward(ember_test::random_ids(500, vocab, 33), ember_test::random_table<T>(500, d, 34),
                 reused);
    reused.clear();
    emb.backward(ids, g, reused);
    check_same_grad(reused, reference);
  }
  SECTION("the ids split by id parity into two calls (each row's positions stay in one call)") {
    std::vector<TokenId> even_ids;
    std::vector<TokenId> odd_ids;
    std::vector<Index> even_pos;
    std::vector<Index> odd_pos;
    for (Index i = 0; i < n; ++i) {
      const TokenId id = ids[static_cast<std::size_t>(i)];
      (id % 2 == 0 ? even_ids : odd_ids).push_back(id);
      (id % 2 == 0 ? even_pos : odd_pos).push_back(i);
    }
    SparseRowGrad<T> split;
    emb.backward(odd_ids, select_rows(g, odd_pos), split);
    emb.backward(even_ids, select_rows(g, even_pos), split);
    check_same_grad(split, reference);
  }
#if defined(_OPENMP)
  SECTION("1, 2 and 4 OpenMP threads") {
    const int saved = omp_get_max_threads();
    for (const int threads : {1, 2, 4}) {
      omp_set_num_threads(threads);
      SparseRowGrad<T> g_threads;
      emb.backward(ids, g, g_threads);
      INFO("threads = " << threads);
      check_same_grad(g_threads, reference);
      RowMatrix<T> out(n, d);
      emb.forward(ids, out);
      CHECK(ember_test::same_bits(out, emb.forward(ids)));
    }
    omp_set_num_threads(saved);
  }
#endif
}

// ---- add_to / to_dense / scale_by
// ----------------------------------------------------------------

TEMPLATE_TEST_CASE("add_to adds the touched rows into a dense matrix and to_dense fills zeros",
                   "[sparse_grad]", float, double) {
  using T = TestType;
  SparseRowGrad<T> grad;
  const std::vector<TokenId> ids{3, 0, 3};
  const RowMatrix<T> g = ember_test::random_table<T>(3, 4, 40);
  grad.accumulate(ids, g, T(1), 6);

  const RowMatrix<T> sparse_dense = ember_test::dense_grad<T>(ids, g, T(1), 6);
  const RowMatrix<T> dense = grad.to_dense();
  ember_test::check_close(dense, sparse_dense);
  for (const Index r : {1, 2, 4, 5}) CHECK((dense.row(r).array() == T(0)).all());

  RowMatrix<T> base = ember_test::random_table<T>(6, 4, 41);
  const RowMatrix<T> base_before = base;
  grad.add_to(base);
  ember_test::check_close(base, (base_before + sparse_dense).eval());
  for (const Index r : {1, 2, 4, 5}) CHECK(ember_test::same_bits(base.row(r), base_before.row(r)));

  SECTION("into a block of a larger matrix") {
    RowMatrix<T> big = RowMatrix<T>::Constant(10, 9, T(7));
    grad.add_to(big.block(2, 3, 6, 4));
    RowMatrix<T> expected_block = RowMatrix<T>::Constant(6, 4, T(7)) + sparse_dense;
    ember_test::check_close(big.block(2, 3, 6, 4), expected_block);
    RowMatrix<T> outside = big;
    outside.block(2, 3, 6, 4).setConstant(T(7));
    CHECK((outside.array() == T(7)).all());
  }
  SECTION("scale_by multiplies every stored row") {
    grad.scale_by(T(-2));
    ember_test::check_close(grad.to_dense(), (sparse_dense * T(-2)).eval());
  }
}

TEST_CASE("add_to rejects a dense matrix of the wrong shape and leaves it untouched",
          "[sparse_grad][errors]") {
  SparseRowGrad<double> grad;
  grad.accumulate(std::vector<TokenId>{1}, RowMatrix<double>::Ones(1, 4), 1.0, 6);

  RowMatrix<double> rows_wrong = RowMatrix<double>::Constant(5, 4, 7.0);
  const auto err = ember_test::catch_as<ember::ShapeError>([&] { grad.add_to(rows_wrong); });
  REQUIRE(err);
  CHECK(err->dimension() == 0);
  CHECK(err->expected() == 6);
  CHECK(err->actual() == 5);
  CHECK_THAT(std::string(err->what()),
             Catch::Contains("dense has 5 rows") && Catch::Contains("vocab_size = 6"));
  CHECK((rows_wrong.array() == 7.0).all());

  RowMatrix<double> cols_wrong = RowMatrix<double>::Constant(6, 3, 7.0);
  CHECK_THROWS_AS(grad.add_to(cols_wrong), ember::ShapeError);
  CHECK_THROWS_WITH(grad.add_to(cols_wrong),
                    Catch::Contains("dense has 3 columns") && Catch::Contains("d_model = 4"));
  CHECK((cols_wrong.array() == 7.0).all());

  // An unbound gradient is the zero gradient of any shape: add_to does nothing.
  RowMatrix<double> any = RowMatrix<double>::Constant(2, 2, 7.0);
  REQUIRE_NOTHROW(SparseRowGrad<double>().add_to(any));
  CHECK((any.array() == 7.0).all());
}

// ---- clear and the shape binding
// -----------------------------------------------------------------

TEMPLATE_TEST_CASE("clear forgets every row but keeps the shape binding", "[sparse_grad]", float,
                   double) {
  using T = TestType;
  const ember::Embedding<T> emb(ember_test::random_table<T>(8, 3, 50));
  const std::vector<TokenId> ids{2, 7, 2};
  const RowMatrix<T> g = ember_test::random_table<T>(3, 3, 51);

  SparseRowGrad<T> grad;
  emb.backward(ids, g, grad);
  REQUIRE_FALSE(grad.empty());
  grad.clear();
  CHECK(grad.empty());
  CHECK(grad.size() == 0);
  CHECK(grad.values().rows() == 0);
  CHECK(grad.vocab_size() == 8);
  CHECK(grad.d_model() == 3);
  CHECK((grad.to_dense().array() == T(0)).all());

  // Still bound: another table shape is rejected...
  const ember::Embedding<T> other(ember_test::random_table<T>(9, 3, 52));
  CHECK_THROWS_AS(other.backward(ids, g, grad), ember::ShapeError);
  // ...and the same shape gives exactly what a fresh gradient gets.
  emb.backward(ids, g, grad);
  SparseRowGrad<T> fresh;
  emb.backward(ids, g, fresh);
  check_same_grad(grad, fresh);
}

TEST_CASE("a gradient bound to one table shape rejects another and stays unchanged",
          "[sparse_grad][errors]") {
  const ember::Embedding<double> emb(ember_test::random_table<double>(6, 4, 60));
  const std::vector<TokenId> ids{1, 2};
  SparseRowGrad<double> grad;
  emb.backward(ids, ember_test::random_table<double>(2, 4, 61), grad);
  const std::vector<TokenId> rows_before = rows_of(grad);
  const RowMatrix<double> values_before = grad.values();

  SECTION("a taller table") {
    const ember::Embedding<double> taller(ember_test::random_table<double>(7, 4, 62));
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { taller.backward(ids, ember_test::random_table<double>(2, 4, 63), grad); });
    REQUIRE(err);
    CHECK(err->dimension() == 0);
    CHECK(err->expected() == 6);
    CHECK(err->actual() == 7);
    CHECK_THAT(std::string(err->what()), Catch::Contains("7") && Catch::Contains("6"));
  }
  SECTION("a wider table") {
    const ember::Embedding<double> wider(ember_test::random_table<double>(6, 5, 64));
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { wider.backward(ids, ember_test::random_table<double>(2, 5, 65), grad); });
    REQUIRE(err);
    CHECK(err->dimension() == 1);
    CHECK(err->expected() == 4);
    CHECK(err->actual() == 5);
  }
  SECTION("merging a gradient bound to another shape") {
    SparseRowGrad<double> other(6, 5);
    other.accumulate(ids, ember_test::random_table<double>(2, 5, 66), 1.0, 6);
    CHECK_THROWS_AS(grad.merge(other), ember::ShapeError);
  }
  SECTION("accumulate with another vocab_size") {
    CHECK_THROWS_AS(grad.accumulate(ids, ember_test::random_table<double>(2, 4, 67), 1.0, 5),
                    ember::ShapeError);
  }
  CHECK(rows_of(grad) == rows_before);
  CHECK(ember_test::same_bits(grad.values(), values_before));
  CHECK(grad.vocab_size() == 6);
  CHECK(grad.d_model() == 4);
}

TEST_CASE("accumulate rejects bad ids and grad_rows shapes and changes nothing",
          "[sparse_grad][errors]") {
  SparseRowGrad<float> grad;
  grad.accumulate(std::vector<TokenId>{0}, RowMatrix<float>::Ones(1, 3), 1.0f, 5);
  const RowMatrix<float> values_before = grad.values();

  const auto err = ember_test::catch_as<ember::IndexError>([&] {
    grad.accumulate(std::vector<TokenId>{1, 2, 3, 5}, RowMatrix<float>::Ones(4, 3), 1.0f, 5);
  });
  REQUIRE(err);
  CHECK(err->position() == 3);
  CHECK(err->value() == 5);
  CHECK(err->bound() == 5);
  CHECK_THAT(std::string(err->what()), Catch::Contains("SparseRowGrad::accumulate") &&
                                           Catch::Contains("position 3") &&
                                           Catch::Contains("[0, 5)"));
  CHECK_THROWS_AS(
      grad.accumulate(std::vector<TokenId>{1, 2}, RowMatrix<float>::Ones(3, 3), 1.0f, 5),
      ember::ShapeError);
  CHECK_THROWS_AS(grad.accumulate(std::vector<TokenId>{1}, RowMatrix<float>::Ones(1, 3), 1.0f, 0),
                  ember::ShapeError);
  CHECK(rows_of(grad) == std::vector<TokenId>{0});
  CHECK(ember_test::same_bits(grad.values(), values_before));
}

// ---- accumulate_indirect
// -------------------------------------------------------------------------

TEMPLATE_TEST_CASE(
    "accumulate_indirect gives the bits of accumulate over the materialised coef · src rows",
    "[sparse_grad]", float, double) {
  using T = TestType;
  const Index vocab = 90;
  const Index d = 48;
  const Index m = 37;  // src rows: each gathered by many positions
  const bool with_coef = GENERATE(false, true);
  const bool freq = GENERATE(false, true);
  const TokenId skip = GENERATE(TokenId{-1}, TokenId{4});
  const int threads = GENERATE(1, 2);
  typename SparseRowGrad<T>::AccumulateOptions options;
  options.scale_grad_by_freq = freq;
  options.skip_row = skip;
  SparseRowGrad<T> gathered;
  SparseRowGrad<T> materialised;
  for (std::uint64_t call = 0; call < 3; ++call) {
    const Index n = call == 1 ? 0 : 900;  // n·d above the parallel threshold
    std::vector<TokenId> ids = ember_test::random_ids(n, vocab, 70 + call, 50);
    std::vector<std::int32_t> src_rows;
    for (const TokenId r : ember_test::random_ids(n, m, 80 + call))
      src_rows.push_back(static_cast<std::int32_t>(r));
    if (n > 0) ids[1] = 4;
    const RowMatrix<T> src = ember_test::random_table<T>(m, d, 90 + call);
    std::vector<T> coef;
    if (with_coef) {
      const RowMatrix<T> c = ember_test::random_table<T>(1, n, 95 + call);
      coef.assign(c.data(), c.data() + n);
    }
    RowMatrix<T> rows(n, d);
    for (Index i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      rows.row(i) =
          with_coef ? (coef[ui] * src.row(src_rows[ui])).eval() : src.row(src_rows[ui]).eval();
    }
    const T scale = T(0.75) + static_cast<T>(call);
    {
      const ember_test::ScopedThreads scoped(threads);
      gathered.accumulate_indirect(ids, src, src_rows, std::span<const T>(coef), scale, vocab,
                                   options);
    }
    materialised.accumulate(ids, rows, scale, vocab, options);
  }
  REQUIRE(gathered.size() > 0);
  check_same_grad(gathered, materialised);
}

TEST_CASE("accumulate_indirect rejects bad ids, src rows and shapes and changes nothing",
          "[sparse_grad][errors]") {
  SparseRowGrad<float> grad;
  const RowMatrix<float> src = RowMatrix<float>::Ones(3, 4);
  const std::vector<Index> from{0, 2, 1};
  grad.accumulate_indirect(std::vector<TokenId>{0, 5, 0}, src, from, {}, 1.0f, 6);
  const std::vector<TokenId> rows_before = rows_of(grad);
  const RowMatrix<float> values_before = grad.values();
  const std::vector<TokenId> ids{1, 2, 3};
  const std::vector<float> coef{1, 2, 3};

  const auto bad_id = ember_test::catch_as<ember::IndexError>([&] {
    grad.accumulate_indirect(std::vector<TokenId>{1, 6, 3}, src, from, coef, 1.0f, 6);
  });
  REQUIRE(bad_id);
  CHECK(bad_id->position() == 1);
  CHECK(bad_id->value() == 6);
  CHECK_THAT(std::string(bad_id->what()), Catch::Contains("SparseRowGrad::accumulate_indirect") &&
                                              Catch::Contains("position 1"));

  const auto bad_src = ember_test::catch_as<ember::IndexError>([&] {
    grad.accumulate_indirect(ids, src, std::vector<Index>{0, 1, 3}, coef, 1.0f, 6);
  });
  REQUIRE(bad_src);
  CHECK(bad_src->position() == 2);
  CHECK(bad_src->value() == 3);
  CHECK(bad_src->bound() == 3);
  CHECK_THAT(std::string(bad_src->what()), Catch::Contains("src_rows[2] = 3 is outside [0, 3)"));
  CHECK_THROWS_AS(grad.accumulate_indirect(ids, src, std::vector<int>{0, -1, 0}, coef, 1.0f, 6),
                  ember::IndexError);

  const auto short_from = ember_test::catch_as<ember::ShapeError>([&] {
    grad.accumulate_indirect(ids, src, std::vector<Index>{0, 1}, coef, 1.0f, 6);
  });
  REQUIRE(short_from);
  CHECK(short_from->expected() == 3);
  CHECK(short_from->actual() == 2);
  CHECK_THAT(std::string(short_from->what()), Catch::Contains("src_rows has 2 rows"));
  CHECK_THROWS_WITH(grad.accumulate_indirect(ids, src, from, std::vector<float>{1, 2}, 1.0f, 6),
                    Catch::Contains("coef has 2 rows, expected the number of ids = 3"));
  CHECK_THROWS_AS(grad.accumulate_indirect(ids, RowMatrix<float>::Ones(3, 5), from, coef, 1.0f, 6),
                  ember::ShapeError);
  CHECK_THROWS_AS(grad.accumulate_indirect(ids, src, from, coef, 1.0f, 7), ember::ShapeError);

  CHECK(rows_of(grad) == rows_before);
  CHECK(ember_test::same_bits(grad.values(), values_before));
}

TEMPLATE_TEST_CASE("the row-policy accumulation gives accumulate's bits and checks first",
                   "[sparse_grad]", float, double) {
  using T = TestType;
  const RowMatrix<T> rows = ember_test::random_table<T>(7, 5, 11);
  const std::vector<TokenId> ids{4, 1, 4, 0, 1, 4, 2};
  SparseRowGrad<T> direct, expected;
  for (int call = 0; call < 2; ++call) {  // a created row, then rows added to
    ember_test::accumulate_rows_of(direct, std::span<const TokenId>(ids),
                                   ember::detail::DirectRows<T>{ember::detail::const_table(rows)},
                                   5, T(0.5), 9, {}, "SparseRowGrad::accumulate_rows_of");
    expected.accumulate(ids, rows, T(0.5), 9);
  }
  CHECK(rows_of(direct) == rows_of(expected));
  CHECK(ember_test::same_bits(direct.values(), expected.values()));

  const RowMatrix<T> before = direct.values();
  const std::vector<TokenId> bad{1, 9};
  const auto e = ember_test::catch_as<ember::IndexError>([&] {
    ember_test::accumulate_rows_of(direct, std::span<const TokenId>(bad),
                                   ember::detail::DirectRows<T>{ember::detail::const_table(rows)},
                                   5, T(1), 9, {}, "Caller::backward");
  });
  REQUIRE(e);
  CHECK(std::string(e->what()) == "Caller::backward: id 9 at position 1 is outside [0, 9)");
  const auto s = ember_test::catch_as<ember::ShapeError>([&] {
    ember_test::accumulate_rows_of(direct, std::span<const TokenId>(ids),
                                   ember::detail::DirectRows<T>{ember::detail::const_table(rows)},
                                   4, T(1), 9, {}, "Caller::backward");
  });
  REQUIRE(s);
  CHECK_THAT(s->what(), Catch::Matchers::StartsWith("Caller::backward:") &&
                            Catch::Matchers::Contains("d_model"));
  CHECK(s->dimension() == 1);
  CHECK(s->expected() == 5);
  CHECK(s->actual() == 4);
  CHECK(rows_of(direct) == rows_of(expected));
  CHECK(ember_test::same_bits(direct.values(), before));
}
