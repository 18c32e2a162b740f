// Tests of the sparse backward's kernels (detail/scatter.hpp and SparseRowGrad's accumulation)
// against the plain sort-based reference in support/sparse_grad_reference.hpp.
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <vector>

#include <ember/detail/scatter.hpp>
#include <ember/sparse_grad.hpp>

#include "support/inputs.hpp"
#include "support/sparse_grad_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
using ember_test::random_ids;
using ember_test::sorted_groups;

namespace {

void check_grouping(ember::detail::RowGrouper& grouper, const std::vector<TokenId>& ids,
                    Index vocab, TokenId skip_row) {
  grouper.group(std::span<const TokenId>(ids), vocab, skip_row);
  const auto expected = sorted_groups(ids, skip_row);
  REQUIRE(grouper.rows().size() == expected.size());
  for (std::size_t j = 0; j < expected.size(); ++j) {
    CHECK(grouper.rows()[j] == expected[j].first);
    const auto positions = grouper.positions(j);
    CHECK(std::vector<Index>(positions.begin(), positions.end()) == expected[j].second);
  }
}

template <class T>
void check_matches_reference(const ember::SparseRowGrad<T>& grad,
                             const ember_test::ReferenceSparseGrad<T>& ref) {
  REQUIRE(static_cast<std::size_t>(grad.size()) == ref.rows.size());
  std::size_t k = 0;
  for (const auto& [id, row] : ref.rows) {
    CHECK(grad.rows()[k] == id);
    for (Index c = 0; c < row.size(); ++c) {
      CHECK_THAT(grad.values()(static_cast<Index>(k), c),
                 Catch::Matchers::WithinRel(row(c), T(1e-6)) ||
                     Catch::Matchers::WithinAbs(row(c), T(1e-6)));
    }
    ++k;
  }
}

}  // namespace

TEST_CASE("RowGrouper groups positions by id like a sort of (id, position) pairs",
          "[sparse_grad][kernels]") {
  ember::detail::RowGrouper grouper;
  SECTION("random ids with repeats, reused scratch across calls") {
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
      check_grouping(grouper, random_ids(300, 1000, seed, 40), 1000, -1);
      check_grouping(grouper, random_ids(17, 1000, seed + 10), 1000, -1);
    }
  }
  SECTION("many distinct ids take the radix sort, 1 to 3 digit passes") {
    check_grouping(grouper, random_ids(3000, 2000, 7), 2000, 5);
    check_grouping(grouper, random_ids(3000, 100000, 8), 100000, -1);
    check_grouping(grouper, random_ids(2000, 5000000, 9), 5000000, -1);
  }
  SECTION("all ids the same") { check_grouping(grouper, std::vector<TokenId>(50, 7), 10, -1); }
  SECTION("skip_row excludes a row and its positions") {
    check_grouping(grouper, {3, 0, 3, 5, 0, 0, 9}, 10, 0);
    check_grouping(grouper, {0, 0, 0}, 10, 0);
  }
  SECTION("empty batch") {
    check_grouping(grouper, {}, 10, -1);
    CHECK(grouper.rows().empty());
  }
  SECTION("a new vocabulary size reallocates the slot map") {
    check_grouping(grouper, {1, 2, 1}, 3, -1);
    check_grouping(grouper, {99, 2, 99}, 100, -1);
  }
}

TEMPLATE_TEST_CASE("SparseRowGrad accumulation matches the plain sort-based reference",
                   "[sparse_grad][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 500;
  const Index d = 13;
  ember::SparseRowGrad<T> grad(vocab, d);
  ember_test::ReferenceSparseGrad<T> ref;
  const bool freq = GENERATE(false, true);
  const TokenId skip = GENERATE(TokenId{-1}, TokenId{3});
  typename ember::SparseRowGrad<T>::AccumulateOptions options;
  options.scale_grad_by_freq = freq;
  options.skip_row = skip;
  // Several calls: new rows interleave with stored ones, so the layout grows in the middle.
  for (std::uint64_t call = 0; call < 6; ++call) {
    const Index n = call == 2 ? 0 : 40 + static_cast<Index>(call) * 25;
    auto ids = random_ids(n, vocab, 100 + call, call % 2 == 0 ? 60 : 0);
    if (n > 0) ids[0] = 3;  // make the skipped row appear
    const RowMatrix<T> g = RowMatrix<T>::Random(n, d);
    const T scale = T(0.5) + static_cast<T>(call);
    grad.accumulate(ids, g, scale, vocab, options);
    ref.accumulate(ids, g, scale, freq, skip);
    check_matches_reference(grad, ref);
  }
}

TEMPLATE_TEST_CASE("SparseRowGrad accumulates repeated and all-same ids in position order",
                   "[sparse_grad][kernels]", float, double) {
  using T = TestType;
  ember::SparseRowGrad<T> grad(8, 3);
  const std::vector<TokenId> ids(100, 5);
  RowMatrix<T> g(100, 3);
  for (Index i = 0; i < 100; ++i) g.row(i).setConstant(static_cast<T>(i + 1));
  grad.accumulate(ids, g, T(2), 8);
  REQUIRE(grad.size() == 1);
  CHECK(grad.rows()[0] == 5);
  CHECK_THAT(grad.values()(0, 1), Catch::Matchers::WithinRel(T(2 * 5050), T(1e-6)));
  grad.accumulate(ids, g, T(1), 8, {.scale_grad_by_freq = true, .skip_row = -1});
  CHECK_THAT(grad.values()(0, 2), Catch::Matchers::WithinRel(T(2 * 5050 + 50.5), T(1e-6)));
}

TEST_CASE("SparseRowGrad merge still zero-fills rows it creates", "[sparse_grad][kernels]") {
  ember::SparseRowGrad<float> a(20, 4);
  ember::SparseRowGrad<float> b(20, 4);
  a.accumulate(std::vector<TokenId>{2, 10}, RowMatrix<float>::Ones(2, 4), 1.0f, 20);
  b.accumulate(std::vector<TokenId>{1, 10, 15}, RowMatrix<float>::Ones(3, 4), 2.0f, 20);
  a.merge(b);
  REQUIRE(a.size() == 4);
  const RowMatrix<float> dense = a.to_dense();
  CHECK(dense(1, 0) == 2.0f);
  CHECK(dense(2, 0) == 1.0f);
  CHECK(dense(10, 3) == 3.0f);
  CHECK(dense(15, 1) == 2.0f);
  CHECK(dense.sum() == 4 * (2.0f + 1.0f + 3.0f + 2.0f));
}

TEST_CASE("SparseRowGrad rejects bad input before touching the grouping scratch",
          "[sparse_grad][kernels]") {
  ember::SparseRowGrad<float> grad(10, 2);
  grad.accumulate(std::vector<TokenId>{4}, RowMatrix<float>::Ones(1, 2), 1.0f, 10);
  const std::vector<TokenId> bad{1, 2, 10};
  REQUIRE_THROWS_AS(grad.accumulate(bad, RowMatrix<float>::Ones(3, 2), 1.0f, 10),
                    ember::IndexError);
  REQUIRE(grad.size() == 1);
  // The slot map is clean: a later call groups correctly.
  grad.accumulate(std::vector<TokenId>{1, 4, 1}, RowMatrix<float>::Ones(3, 2), 1.0f, 10);
  REQUIRE(grad.size() == 2);
  CHECK(grad.values()(0, 0) == 2.0f);
  CHECK(grad.values()(1, 0) == 2.0f);
}
