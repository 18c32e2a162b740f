// Tests of the gather kernels (detail/gather.hpp) against their plain reference loops.
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <vector>

#include <ember/detail/gather.hpp>

#include "support/kernel_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
namespace detail = ember::detail;

TEMPLATE_TEST_CASE("gather_scaled matches its plain reference", "[embedding][kernels]", float,
                   double) {
  using T = TestType;
  const Index vocab = 97;
  const Index d = GENERATE(1, 7, 64);
  const Index n = GENERATE(0, 1, 3, 600);
  const RowMatrix<T> table = RowMatrix<T>::Random(vocab, d);
  const auto ids = ember_test::random_ids(n, vocab, 11, n > 3 ? 10 : 0);
  RowMatrix<T> fast(n, d);
  RowMatrix<T> plain(n, d);
  const std::span<const TokenId> span(ids);
  detail::gather_scaled(detail::const_table(table), span, T(1.5), detail::mutable_table(fast));
  detail::gather_scaled_reference(detail::const_table(table), span, T(1.5),
                                  detail::mutable_table(plain));
  CHECK(fast == plain);  // one rounding per element in both
}

TEMPLATE_TEST_CASE("gather_scaled_add matches its plain reference, positions wrapping per sequence",
                   "[input_embedding][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 50;
  const Index d = 24;
  const Index seq_len = GENERATE(1, 5, 64);
  const Index offset = GENERATE(0, 3);
  const Index batches = GENERATE(0, 1, 13);
  const Index n = batches * seq_len;
  const RowMatrix<T> table = RowMatrix<T>::Random(vocab, d);
  const RowMatrix<T> pe = RowMatrix<T>::Random(offset + seq_len + 2, d);
  const auto ids = ember_test::random_ids(n, vocab, 5);
  RowMatrix<T> fast(n, d);
  RowMatrix<T> plain(n, d);
  const std::span<const TokenId> span(ids);
  detail::gather_scaled_add(detail::const_table(table), span, T(3), detail::const_table(pe),
                            seq_len, offset, detail::mutable_table(fast));
  detail::gather_scaled_add_reference(detail::const_table(table), span, T(3),
                                      detail::const_table(pe), seq_len, offset,
                                      detail::mutable_table(plain));
  for (Index i = 0; i < n; ++i) {
    for (Index c = 0; c < d; ++c) {
      // The fast kernel may fuse w·s + p into one FMA: equal up to one rounding.
      CHECK_THAT(fast(i, c),
                 Catch::Matchers::WithinAbs(plain(i, c), T(8) * Eigen::NumTraits<T>::epsilon()));
    }
  }
}

TEST_CASE("gather kernels state their preconditions", "[embedding][kernels]") {
  const RowMatrix<float> table = RowMatrix<float>::Ones(4, 2);
  RowMatrix<float> out(1, 2);
  const std::vector<TokenId> bad{4};
  CHECK_THROWS_AS(detail::gather_scaled(detail::const_table(table), std::span<const TokenId>(bad),
                                        1.0f, detail::mutable_table(out)),
                  std::logic_error);
  RowMatrix<float> wrong(2, 2);
  const std::vector<TokenId> ok{1};
  CHECK_THROWS_AS(detail::gather_scaled(detail::const_table(table), std::span<const TokenId>(ok),
                                        1.0f, detail::mutable_table(wrong)),
                  std::logic_error);
}
