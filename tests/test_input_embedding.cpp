// Tests of ember/input_embedding.hpp: the fused lookup x sqrt(d) + positions, against forward
// followed by SinusoidalEncoding::add_to and against a loop reference, and its errors.
// SPDX-License-Identifier: MIT
#include "ember/input_embedding.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <catch2/catch.hpp>

#include "ember/config.hpp"
#include "ember/detail/gather.hpp"
#include "ember/embedding.hpp"
#include "ember/errors.hpp"
#include "ember/positional.hpp"
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

// The fused kernel computes w*s + p in one expression; the unfused path stores w*s, then adds p.
// Under ISO C++ modes GCC and Clang round the product before the sum in both, so the results are
// normally bit-equal. A build that contracts `w*s + p` into one fused multiply-add
// (-ffp-contract=fast, -march with FMA, MSVC /fp:contract, or a compiler whose default contracts,
// such as GCC on aarch64 in GNU mode) skips the product's rounding, which moves the result by at
// most one rounding of the product, i.e. half an ulp of |w*s|, plus at most an ulp of the sum. So
// compare within two ulps of the larger of |w*s| and |p| rather than with ==.
template <class A, class B, class C, class D>
void check_fma_close(const Eigen::MatrixBase<A>& actual, const Eigen::MatrixBase<B>& expected,
                     const Eigen::MatrixBase<C>& products, const Eigen::MatrixBase<D>& positions) {
  using T = typename A::Scalar;
  REQUIRE(actual.rows() == expected.rows());
  REQUIRE(actual.cols() == expected.cols());
  const double ulp = static_cast<double>(std::numeric_limits<T>::epsilon());
  for (Index r = 0; r < actual.rows(); ++r) {
    for (Index c = 0; c < actual.cols(); ++c) {
      const double magnitude = std::max(std::abs(static_cast<double>(products(r, c))),
                                        std::abs(static_cast<double>(positions(r, c))));
      INFO("element (" << r << ", " << c << ")");
      CHECK_THAT(
          static_cast<double>(actual(r, c)),
          Catch::Matchers::WithinAbs(static_cast<double>(expected(r, c)), 2.0 * ulp * magnitude));
    }
  }
}

/// The position rows each output row receives: pe.row(offset + i % seq_len).
template <class T>
RowMatrix<T> expand_positions(const RowMatrix<T>& pe, Index n, Index seq_len, Index offset) {
  RowMatrix<T> out(n, pe.cols());
  for (Index i = 0; i < n; ++i) out.row(i) = pe.row(offset + i % seq_len);
  return out;
}

}  // namespace

// ---- values ------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("embed_with_positions equals forward followed by SinusoidalEncoding::add_to",
                   "[input_embedding]", float, double) {
  using T = TestType;
  const Index vocab = 50;
  const Index d = 16;
  const ember::Embedding<T> emb(ember_test::random_table<T>(vocab, d, 1));
  const ember::SinusoidalEncoding<T> pe(64, d);

  const Index batch = GENERATE(Index{1}, Index{3});
  const Index seq_len = GENERATE(Index{1}, Index{5});
  const Index offset = GENERATE(Index{0}, Index{7});
  CAPTURE(batch, seq_len, offset);
  const Index n = batch * seq_len;
  const auto ids = ember_test::random_ids(n, vocab, 2);

  RowMatrix<T> unfused = emb.forward(ids);
  const RowMatrix<T> products = unfused;
  pe.add_to(unfused, seq_len, offset);

  RowMatrix<T> fused(n, d);
  ember::embed_with_positions(emb, pe, ids, fused, seq_len, offset);
  const RowMatrix<T> positions = expand_positions(pe.table(), n, seq_len, offset);
  check_fma_close(fused, unfused, products, positions);

  // And against the loop reference.
  ember_test::check_close(fused, ember_test::embed_positions_loops<T>(
                                     emb.weight(), ids, emb.scale(), pe.table(), seq_len, offset));
}

TEMPLATE_TEST_CASE(
    "embed_with_positions gives the bits of forward then add_to below and above the "
    "streaming-store threshold, into contiguous and strided outputs, at 1 and 2 threads",
    "[input_embedding]", float, double) {
  using T = TestType;
  const Index vocab = 300;
  const Index d = 131;  // odd: rows start on every alignment
  const Index seq_len = 16;
  const Index row_bytes = d * static_cast<Index>(sizeof(T));
  // The smallest batch whose output reaches detail::kStreamMinBytes (streamed in AVX builds).
  const Index above = (ember::detail::kStreamMinBytes / row_bytes / seq_len + 1) * seq_len;
  const int size = GENERATE(0, 1, 2);  // one sequence, just below, just above the threshold
  const Index n = size == 0 ? seq_len : size == 1 ? above - seq_len : above;
  const int threads = GENERATE(1, 2);
  const bool strided = GENERATE(false, true);
  CAPTURE(n, threads, strided, n * row_bytes >= ember::detail::kStreamMinBytes);
#if EMBER_HAS_OPENMP
  omp_set_num_threads(threads);
#endif
  const ember::Embedding<T> emb(ember_test::random_table<T>(vocab, d, 41));
  const ember::SinusoidalEncoding<T> pe(seq_len + 4, d);
  const auto ids = ember_test::random_ids(n, vocab, 42);

  RowMatrix<T> unfused = emb.forward(ids);
  pe.add_to(unfused, seq_len, 4);

  RowMatrix<T> result(n, d);
  if (strided) {
    RowMatrix<T> big = RowMatrix<T>::Constant(n + 1, d + 3, T(2));  // outer stride d + 3
    ember::embed_with_positions(emb, pe, ids, big.block(1, 1, n, d), seq_len, 4);
    result = big.block(1, 1, n, d);
    big.block(1, 1, n, d).setConstant(T(2));
    CHECK(ember_test::all_equal_to(big, T(2)));  // nothing written outside the block
  } else {
    ember::embed_with_positions(emb, pe, ids, result, seq_len, 4);
  }
#if EMBER_HAS_OPENMP
  omp_set_num_threads(1);
#endif
  // Exact on x86: FMA implies AVX there, and AVX builds round w·s before adding p by
  // construction (detail::AvxRows / AvxStreamRows); other targets may contract into an FMA.
#if defined(__x86_64__) || defined(__i386__)
  CHECK(ember_test::same_bits(result, unfused));
#else
  check_fma_close(result, unfused, emb.forward(ids), expand_positions(pe.table(), n, seq_len, 4));
#endif
}

TEMPLATE_TEST_CASE(
    "embed_with_positions accepts int32 ids, learned position tables, blocks and "
    "the owning overload",
    "[input_embedding]", float, double) {
  using T = TestType;
  const Index vocab = 30;
  const Index d = 8;
  const Index seq_len = 4;
  const Index offset = 2;
  const ember::Embedding<T> emb(ember_test::random_table<T>(vocab, d, 10));
  const ember::SinusoidalEncoding<T> pe(16, d);
  const std::vector<TokenId> ids{3, 29, 0, 3, 12, 12, 7, 1};  // B = 2
  const std::vector<std::int32_t> ids32(ids.begin(), ids.end());
  const Index n = 8;

  RowMatrix<T> expected(n, d);
  ember::embed_with_positions(emb, pe, ids, expected, seq_len, offset);
  RowMatrix<T> unfused = emb.forward(ids);
  const RowMatrix<T> products = unfused;
  pe.add_to(unfused, seq_len, offset);
  check_fma_close(expected, unfused, products, expand_positions(pe.table(), n, seq_len, offset));

  SECTION("int32 ids: same bits as int64 ids") {
    RowMatrix<T> out(n, d);
    ember::embed_with_positions(emb, pe, ids32, out, seq_len, offset);
    CHECK(ember_test::same_bits(out, expected));
  }
  SECTION("the owning overload: same bits as the in-place one") {
    CHECK(ember_test::same_bits(ember::embed_with_positions(emb, pe, ids, seq_len, offset),
                                expected));
    CHECK(ember_test::same_bits(ember::embed_with_positions(emb, pe, ids32, seq_len, offset),
                                expected));
    const RowMatrix<T> no_offset = ember::embed_with_positions(emb, pe, ids, seq_len);
    RowMatrix<T> no_offset_ref(n, d);
    ember::embed_with_positions(emb, pe, ids, no_offset_ref, seq_len, 0);
    CHECK(ember_test::same_bits(no_offset, no_offset_ref));
  }
  SECTION("the sinusoidal table passed as a plain RowMatrix: same bits") {
    RowMatrix<T> out(n, d);
    ember::embed_with_positions(emb, pe.table(), ids, out, seq_len, offset);
    CHECK(ember_test::same_bits(out, expected));
  }
  SECTION("a learned position table (GPT-2 style): any max_len x d RowMatrix, unscaled") {
    const ember::Embedding<T> learned(ember_test::random_table<T>(10, d, 11));
    RowMatrix<T> out(n, d);
    ember::embed_with_positions(emb, learned.weight(), ids32, out, seq_len, offset);
    const RowMatrix<T> lookup = emb.forward(ids);
    const RowMatrix<T> positions = expand_positions(learned.weight(), n, seq_len, offset);
    const RowMatrix<T> reference = ember_test::embed_positions_loops<T>(
        emb.weight(), ids, emb.scale(), learned.weight(), seq_len, offset);
    check_fma_close(out, reference, lookup, positions);
  }
  SECTION("into a block of a larger matrix, the rest untouched") {
    RowMatrix<T> big = RowMatrix<T>::Constant(12, 13, T(7));
    ember::embed_with_positions(emb, pe, ids, big.block(3, 2, n, d), seq_len, offset);
    CHECK(ember_test::same_bits(big.block(3, 2, n, d), expected));
    RowMatrix<T> outside = big;
    outside.block(3, 2, n, d).setConstant(T(7));
    CHECK(ember_test::all_equal_to(outside, T(7)));
  }
  SECTION("positions and ids from views of larger buffers") {
    RowMatrix<T> big_pe = RowMatrix<T>::Constant(20, 11, T(-3));
    big_pe.block(1, 3, 16, d) = pe.table();
    const std::vector<TokenId> buffer{-1, 3, 29, 0, 3, 12, 12, 7, 1, 99};
    RowMatrix<T> out(n, d);
    ember::embed_with_positions(emb, big_pe.block(1, 3, 16, d),
                                std::span<const TokenId>(buffer.data() + 1, 8), out, seq_len,
                                offset);
    CHECK(ember_test::same_bits(out, expected));
  }
  SECTION("no ids: a 0 x d result") {
    const std::vector<TokenId> none;
    const RowMatrix<T> out = ember::embed_with_positions(emb, pe, none, seq_len, offset);
    CHECK(out.rows() == 0);
    CHECK(out.cols() == d);
  }
}

TEMPLATE_TEST_CASE(
    "the scale is applied to the token row before positions are added, never to "
    "the positions",
    "[input_embedding]", float, double) {
  using T = TestType;
  // d = 4: scale 2. Hand-built rows (row i = i + c/1000) and PE(0) = [0, 1, 0, 1].
  const ember::Embedding<T> emb(ember_test::hand_table<T>(5, 4));
  const ember::SinusoidalEncoding<T> pe(8, 4);
  const std::vector<TokenId> ids{3, 1, 4};
  const RowMatrix<T> out = ember::embed_with_positions(emb, pe, ids, 3);

  RowMatrix<T> right(3, 4);  // W[id] * s + PE
  RowMatrix<T> wrong(3, 4);  // (W[id] + PE) * s
  for (Index i = 0; i < 3; ++i) {
    const auto w = emb.weight().row(ids[static_cast<std::size_t>(i)]);
    right.row(i) = w * T(2) + pe.table().row(i);
    wrong.row(i) = (w + pe.table().row(i)) * T(2);
  }
  ember_test::check_close(out, right);
  // Position 0's cosine columns are exactly 1, so the wrong order is off by 1 there.
  CHECK_THAT(static_cast<double>(out(0, 1)),
             Catch::Matchers::WithinRel(2.0 * (3.0 + 0.001) + 1.0, ember_test::rel_tol<T>()));
  CHECK(std::abs(static_cast<double>(out(0, 1) - wrong(0, 1))) > 0.5);
  CHECK((out - wrong).cwiseAbs().maxCoeff() > T(0.5));
  // The table itself stays unscaled.
  CHECK(ember_test::same_bits(emb.weight(), ember_test::hand_table<T>(5, 4)));
}

TEST_CASE("the table's gradient through embed_with_positions is backward through the lookup",
          "[input_embedding][gradcheck]") {
  const Index d = 4;
  const RowMatrix<double> w0 = ember_test::random_table<double>(6, d, 20);
  const ember::SinusoidalEncoding<double> pe(10, d);
  const std::vector<TokenId> ids{5, 0, 5, 2, 2, 1};  // B = 2, seq_len = 3
  const RowMatrix<double> g = ember_test::random_table<double>(6, d, 21);
  const auto loss = [&](const RowMatrix<double>& w) {
    const ember::Embedding<double> e(w);
    return ember::embed_with_positions(e, pe, ids, 3, 1).cwiseProduct(g).sum();
  };
  const ember::Embedding<double> emb(w0);
  ember::SparseRowGrad<double> grad;
  emb.backward(ids, g, grad);
  ember_test::check_close(grad.to_dense(), ember_test::numerical_gradient(loss, w0), 1e-7, 1e-7);
}

// ---- errors ------------------------------------------------------------------------------------

TEST_CASE("embed_with_positions rejects an out-of-range id with IndexError and writes nothing",
          "[input_embedding][errors]") {
  const RowMatrix<double> table = ember_test::random_table<double>(5, 4, 30);
  const ember::Embedding<double> emb(table);
  const ember::SinusoidalEncoding<double> pe(10, 4);
  const TokenId bad =
      GENERATE(TokenId{-1}, TokenId{5}, TokenId{6}, std::numeric_limits<TokenId>::max(),
               std::numeric_limits<TokenId>::min());
  CAPTURE(bad);
  std::vector<TokenId> ids{0, 1, 2, bad, 4, 0};  // B = 2, seq_len = 3
  RowMatrix<double> out = RowMatrix<double>::Constant(6, 4, 7.0);

  const auto err = ember_test::catch_as<ember::IndexError>(
      [&] { ember::embed_with_positions(emb, pe, ids, out, 3); });
  REQUIRE(err);
  CHECK(err->position() == 3);
  CHECK(err->value() == bad);
  CHECK(err->bound() == 5);
  CHECK_THAT(std::string(err->what()),
             Catch::Contains("position 3") && Catch::Contains(std::to_string(bad)) &&
                 Catch::Contains("[0, 5)") && Catch::Contains("embed_with_positions"));
  CHECK_THROWS_AS(ember::embed_with_positions(emb, pe, ids, out, 3), std::out_of_range);
  CHECK_THROWS_AS(ember::embed_with_positions(emb, pe, ids, out, 3), ember::Error);
  CHECK_THROWS_AS(ember::embed_with_positions(emb, pe.table(), ids, out, 3), ember::IndexError);
  CHECK_THROWS_AS((void)ember::embed_with_positions(emb, pe, ids, 3), ember::IndexError);
  CHECK(ember_test::all_equal_to(out, 7.0));
  CHECK(ember_test::same_bits(emb.weight(), table));

  const std::vector<std::int32_t> ids32{0, 1, 2, bad < 0 ? -1 : 5, 4, 0};
  CHECK_THROWS_AS(ember::embed_with_positions(emb, pe, ids32, out, 3), ember::IndexError);
  CHECK(ember_test::all_equal_to(out, 7.0));
}

TEST_CASE("embed_with_positions rejects bad seq_len, offset and shapes with the right exception",
          "[input_embedding][errors]") {
  const RowMatrix<float> table = ember_test::random_table<float>(5, 4, 40);
  const ember::Embedding<float> emb(table);
  const ember::SinusoidalEncoding<float> pe(8, 4);  // max_len 8
  const std::vector<TokenId> ids{0, 1, 2, 3, 4, 0};
  RowMatrix<float> out = RowMatrix<float>::Constant(6, 4, 7.0f);

  SECTION("seq_len <= 0 is a ShapeError") {
    const Index seq_len = GENERATE(Index{0}, Index{-3});
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { ember::embed_with_positions(emb, pe, ids, out, seq_len); });
    REQUIRE(err);
    CHECK(err->dimension() == -1);
    CHECK(err->actual() == seq_len);
    CHECK_THAT(std::string(err->what()), Catch::Contains("seq_len"));
    CHECK_THROWS_AS(ember::embed_with_positions(emb, pe, ids, out, seq_len), std::invalid_argument);
  }
  SECTION("a negative offset is an IndexError") {
    const auto err = ember_test::catch_as<ember::IndexError>(
        [&] { ember::embed_with_positions(emb, pe, ids, out, 3, -1); });
    REQUIRE(err);
    CHECK(err->value() == -1);
    CHECK(err->bound() == 8);
    CHECK_THAT(std::string(err->what()), Catch::Contains("offset -1") && Catch::Contains("[0, 8)"));
  }
  SECTION("offset + seq_len > max_len is an IndexError") {
    const auto err = ember_test::catch_as<ember::IndexError>(
        [&] { ember::embed_with_positions(emb, pe, ids, out, 3, 6); });
    REQUIRE(err);
    CHECK(err->value() == 8);  // the last position needed, 6 + 3 - 1
    CHECK(err->bound() == 8);
    CHECK_THAT(std::string(err->what()),
               Catch::Contains("position 8") && Catch::Contains("[0, 8)"));
    CHECK_THROWS_AS(ember::embed_with_positions(emb, pe, ids, out, 3, 6), std::out_of_range);
    // seq_len alone longer than the table.
    RowMatrix<float> long_out = RowMatrix<float>::Constant(9, 4, 7.0f);
    const std::vector<TokenId> nine(9, 1);
    CHECK_THROWS_AS(ember::embed_with_positions(emb, pe, nine, long_out, 9), ember::IndexError);
    CHECK(ember_test::all_equal_to(long_out, 7.0f));
    // The largest offset that fits is fine.
    REQUIRE_NOTHROW(ember::embed_with_positions(emb, pe, ids, out, 3, 5));
    out.setConstant(7.0f);
  }
  SECTION("ids that are not a multiple of seq_len are a ShapeError") {
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { ember::embed_with_positions(emb, pe, ids, out, 4); });
    REQUIRE(err);
    CHECK(err->dimension() == 0);
    CHECK(err->actual() == 6);
    CHECK(err->expected() == 8);
    CHECK_THAT(std::string(err->what()),
               Catch::Contains("6 ids") && Catch::Contains("seq_len = 4"));
    CHECK_THROWS_AS((void)ember::embed_with_positions(emb, pe, ids, 4), ember::ShapeError);
  }
  SECTION("out with the wrong number of rows") {
    RowMatrix<float> short_out = RowMatrix<float>::Constant(5, 4, 7.0f);
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { ember::embed_with_positions(emb, pe, ids, short_out, 3); });
    REQUIRE(err);
    CHECK(err->dimension() == 0);
    CHECK(err->expected() == 6);
    CHECK(err->actual() == 5);
    CHECK_THAT(std::string(err->what()), Catch::Contains("out has 5 rows") && Catch::Contains("6"));
    CHECK(ember_test::all_equal_to(short_out, 7.0f));
  }
  SECTION("out with the wrong number of columns") {
    RowMatrix<float> wide_out = RowMatrix<float>::Constant(6, 5, 7.0f);
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { ember::embed_with_positions(emb, pe, ids, wide_out, 3); });
    REQUIRE(err);
    CHECK(err->dimension() == 1);
    CHECK(err->expected() == 4);
    CHECK(err->actual() == 5);
    CHECK_THAT(std::string(err->what()),
               Catch::Contains("out has 5 columns") && Catch::Contains("d_model = 4"));
    CHECK(ember_test::all_equal_to(wide_out, 7.0f));
  }
  SECTION("a position table of the wrong width") {
    const RowMatrix<float> narrow = RowMatrix<float>::Zero(8, 3);
    const auto err = ember_test::catch_as<ember::ShapeError>(
        [&] { ember::embed_with_positions(emb, narrow, ids, out, 3); });
    REQUIRE(err);
    CHECK(err->dimension() == 1);
    CHECK(err->expected() == 4);
    CHECK(err->actual() == 3);
    CHECK_THAT(std::string(err->what()), Catch::Contains("positions has 3 columns"));
    const ember::SinusoidalEncoding<float> pe6(8, 6);
    CHECK_THROWS_AS(ember::embed_with_positions(emb, pe6, ids, out, 3), ember::ShapeError);
  }
  CHECK(ember_test::all_equal_to(out, 7.0f));
  CHECK(ember_test::same_bits(emb.weight(), table));
}
