// Tests of the gather kernels (detail/gather.hpp) against their plain reference loops.
// SPDX-License-Identifier: MIT
#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <vector>

#include <ember/config.hpp>
#include <ember/detail/gather.hpp>

#include "support/kernel_reference.hpp"
#include "support/stream_reference.hpp"

using ember::Index;
using ember::RowMatrix;
using ember::TokenId;
namespace detail = ember::detail;

namespace {

// Whether this machine can run the AVX row kernels (compiled with target("avx") on x86 whatever
// the build's -m flags; the public entry points only use them when the build targets AVX).
bool avx_rows_runnable() {
#if EMBER_DETAIL_HAVE_AVX_ROWS
  return __builtin_cpu_supports("avx") != 0;
#else
  return false;
#endif
}

bool avx512_rows_runnable() {
#if EMBER_DETAIL_HAVE_AVX_ROWS
  return __builtin_cpu_supports("avx512f") != 0;
#else
  return false;
#endif
}

}  // namespace

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

TEMPLATE_TEST_CASE(
    "every row path of gather_scaled_add (plain, AVX and AVX-512, cached and streaming) gives the "
    "bits of the "
    "unfused two-pass computation, into strided and misaligned outputs",
    "[input_embedding][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 61;
  const Index d = GENERATE(1, 3, 8, 13, 33, 64, 101);
  const Index offset = GENERATE(0, 2);
  const Index n = GENERATE(4, 36, 1024);  // 1024 x 64 is above kParallelMinWork: threads split it
  const Index col0 = GENERATE(0, 1, 3);   // first column of the output block: rows off alignment
  const int threads = GENERATE(1, 2);
  CAPTURE(d, offset, n, col0, threads);
  const Index seq_len = 4;
  const T scale = std::sqrt(T(d) + T(0.5));  // inexact, so w·s has a rounding to lose
  const RowMatrix<T> table = ember_test::random_matrix<T>(vocab, d, 21);
  const RowMatrix<T> pe = ember_test::random_matrix<T>(offset + seq_len + 1, d, 22);
  const auto ids = ember_test::random_ids(n, vocab, 23);
  const std::span<const TokenId> span(ids);
  const RowMatrix<T> expected =
      ember_test::unfused_reference(table, span, scale, pe, seq_len, offset);
  ember_test::set_threads(threads);

  const auto run = [&](auto rows, bool exact) {
    // Outer stride d + 5 and a first column of col0: row starts fall on every alignment.
    RowMatrix<T> big = RowMatrix<T>::Constant(n + 2, d + 5, T(-9));
    auto block = big.block(1, col0, n, d);
    detail::gather_scaled_add_rows(rows, detail::const_table(table), span, scale,
                                   detail::const_table(pe), seq_len, offset,
                                   detail::mutable_table(block));
    if (exact) {
      CHECK(ember_test::same_block_bits(block, expected));
    } else {
      CHECK(block.isApprox(expected, T(8) * Eigen::NumTraits<T>::epsilon()));
    }
    block.setConstant(T(-9));
    CHECK((big.array() == T(-9)).all());  // nothing written outside the block
  };
  // The plain Eigen path is exact wherever the compiler does not contract w·s + p into an FMA:
  // on x86 FMA implies AVX, and AVX builds dispatch to the AVX rows instead.
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__FMA__)
  constexpr bool plain_exact = true;
#else
  constexpr bool plain_exact = false;
#endif
  run(detail::PlainRows{}, plain_exact);
#if EMBER_DETAIL_HAVE_AVX_ROWS
  if (avx_rows_runnable()) {
    run(detail::AvxRows{}, true);
    run(detail::AvxStreamRows{}, true);
  } else {
    WARN("this CPU has no AVX: the AVX row paths were not run");
  }
  if (avx512_rows_runnable()) {
    run(detail::Avx512Rows{}, true);
    run(detail::Avx512StreamRows{}, true);
  } else {
    WARN("this CPU has no AVX-512F: the AVX-512 row paths were not run");
  }
#endif
  ember_test::set_threads(1);
}

TEMPLATE_TEST_CASE(
    "gather_scaled_add gives the same bits below and above the streaming threshold, at 1 and 2 "
    "threads",
    "[input_embedding][kernels]", float, double) {
  using T = TestType;
  const Index vocab = 200;
  const Index d = 129;  // odd: every other row starts off a 32-byte boundary
  const Index seq_len = 8;
  const auto bytes_per_row = d * static_cast<Index>(sizeof(T));
  const Index above = (detail::kStreamMinBytes / bytes_per_row / seq_len + 1) * seq_len;
  const int size = GENERATE(0, 1, 2);  // one sequence, just below, just above the threshold
  const Index n = size == 0 ? seq_len : size == 1 ? above - seq_len : above;
  const int threads = GENERATE(1, 2);
  CAPTURE(n, threads, n * bytes_per_row >= detail::kStreamMinBytes);
  const T scale = std::sqrt(T(d));
  const RowMatrix<T> table = ember_test::random_matrix<T>(vocab, d, 31);
  const RowMatrix<T> pe = ember_test::random_matrix<T>(seq_len + 3, d, 32);
  const auto ids = ember_test::random_ids(n, vocab, 33);
  const std::span<const TokenId> span(ids);
  ember_test::set_threads(threads);
  RowMatrix<T> big = RowMatrix<T>::Constant(n, d + 1, T(5));  // outer stride d + 1
  auto out = big.leftCols(d);
  detail::gather_scaled_add(detail::const_table(table), span, scale, detail::const_table(pe),
                            seq_len, 3, detail::mutable_table(out));
  ember_test::set_threads(1);
  const RowMatrix<T> expected = ember_test::unfused_reference(table, span, scale, pe, seq_len, 3);
#if defined(__x86_64__) || defined(__i386__)
  CHECK(ember_test::same_block_bits(out, expected));
#else
  CHECK(out.isApprox(expected, T(8) * Eigen::NumTraits<T>::epsilon()));
#endif
  CHECK((big.col(d).array() == T(5)).all());
}
