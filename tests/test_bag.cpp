// Tests of ember/bag.hpp: EmbeddingBag pooling against a loop-of-lookups reference, the three bag
// layouts, padding, per-sample weights, gradients against finite differences, and bad input.
// SPDX-License-Identifier: MIT
#include "ember/bag.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <catch2/catch.hpp>

#include "ember/embedding_view.hpp"
#include "ember/quantized.hpp"
#include "ember/reduced.hpp"
#include "ember/reduced_view.hpp"

#include "support/bag_reference.hpp"
#include "support/error_checks.hpp"
#include "support/gradcheck.hpp"
#include "support/inputs.hpp"
#include "support/matrix_compare.hpp"
#include "support/threads.hpp"

using ember::BagMode;
using ember::BagOptions;
using ember::EmbeddingBag;
using ember::Index;
using ember::RowMatrix;
using ember::TokenId;

namespace {

// 7 bags over 20 ids, with two empty bags (1 and 4) and a bag of one id.
const std::vector<Index> kBounds{0, 3, 3, 8, 9, 9, 15, 20};
const std::vector<TokenId> kOffsets{0, 3, 3, 8, 9, 9, 15};
const std::vector<int> kLengths{3, 0, 5, 1, 0, 6, 5};

template <class T>
EmbeddingBag<T> make_bag(BagMode mode, Index v = 11, Index d = 6) {
  return EmbeddingBag<T>(ember::Embedding<T>(ember_test::random_table<T>(v, d, 3)), mode);
}

int mode_index(BagMode m) { return m == BagMode::sum ? 0 : m == BagMode::mean ? 1 : 2; }

}  // namespace

TEMPLATE_TEST_CASE("each pooling mode equals the loop-of-lookups reference", "[bag]", float,
                   double) {
  const auto mode = GENERATE(BagMode::sum, BagMode::mean, BagMode::max);
  const auto bag = make_bag<TestType>(mode);
  const auto ids = ember_test::random_ids(20, 11, 5);
  const RowMatrix<TestType> expected =
      ember_test::bag_reference<TestType>(bag.embedding().weight(), ids, kBounds, mode_index(mode));
  ember_test::check_close(bag.forward(ids, kOffsets), expected);
  // lengths (FBGEMM) and offsets with the last offset (CSR) give the same bags
  ember_test::check_close(bag.forward_lengths(ids, kLengths), expected);
  std::vector<TokenId> csr = kOffsets;
  csr.push_back(20);
  BagOptions<TestType> last;
  last.include_last_offset = true;
  ember_test::check_close(bag.forward(ids, csr, last), expected);
  // empty bags are zero rows
  CHECK(expected.row(1).isZero());
  CHECK(expected.row(4).isZero());
}

TEST_CASE("forward into a block writes only that block and int32 offsets work", "[bag]") {
  const auto bag = make_bag<float>(BagMode::sum);
  const auto ids = ember_test::random_ids<std::int32_t>(20, 11, 9);
  const std::vector<std::int32_t> offsets(kOffsets.begin(), kOffsets.end());
  RowMatrix<float> big = RowMatrix<float>::Constant(9, 10, 7.0f);
  bag.forward(ids, offsets, big.block(1, 2, 7, 6));
  ember_test::check_close(big.block(1, 2, 7, 6).eval(), bag.forward(ids, offsets));
  CHECK(big.row(0).isConstant(7.0f));
  CHECK(big.col(0).isConstant(7.0f));
}

TEMPLATE_TEST_CASE("per-sample weights scale each row of a sum bag", "[bag]", float, double) {
  const auto bag = make_bag<TestType>(BagMode::sum);
  const auto ids = ember_test::random_ids(20, 11, 6);
  std::vector<TestType> w(20);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<TestType>(0.25 * double(i) - 2);
  BagOptions<TestType> opt;
  opt.per_sample_weights = w;
  ember_test::check_close(
      bag.forward(ids, kOffsets, opt),
      ember_test::bag_reference<TestType>(bag.embedding().weight(), ids, kBounds, 0, w));
}

TEST_CASE("padding ids are left out of the pooling and of the mean's count", "[bag]") {
  const auto mode = GENERATE(BagMode::sum, BagMode::mean, BagMode::max);
  auto bag = make_bag<double>(mode);
  bag.embedding().set_padding_idx(2, /*zero_row=*/false);  // a non-zero padding row must not leak
  const std::vector<TokenId> ids{2, 2, 1, 2, 5, 3, 2};
  const std::vector<TokenId> offsets{0, 2, 4};  // {2, 2}: only padding -> zeros
  const RowMatrix<double> out = bag.forward(ids, offsets);
  CHECK(out.row(0).isZero());
  ember_test::check_close(
      out, ember_test::bag_reference<double>(bag.embedding().weight(), ids, {0, 2, 4, 7},
                                             mode_index(mode), {}, 2));
  if (mode == BagMode::mean) {
    ember_test::check_close(out.row(1).eval(), bag.embedding().weight().row(1).eval());
  }
}

TEST_CASE("max mode records the id of each maximum; the first maximum wins ties", "[bag]") {
  RowMatrix<float> t(3, 2);
  t << 1, 5, 4, 5, 4, 0;
  const EmbeddingBag<float> bag(ember::Embedding<float>(t), BagMode::max);
  const std::vector<int> ids{0, 1, 2};
  const std::vector<int> offsets{0, 3};  // bags {0, 1, 2} and {} (offset 3 = n: empty last bag)
  RowMatrix<float> out(2, 2);
  ember::BagArgmax am;
  bag.forward(ids, offsets, out, {}, &am);
  CHECK(out(0, 0) == 4.0f);
  CHECK(out(0, 1) == 5.0f);
  CHECK(am(0, 0) == 1);  // rows 1 and 2 tie at 4: the first wins
  CHECK(am(0, 1) == 0);  // rows 0 and 1 tie at 5
  CHECK(am(1, 0) == -1);
  CHECK(out.row(1).isZero());
}

TEST_CASE("each mode's backward equals finite differences", "[bag]") {
  // Per-sample weights exist for sum bags only (PyTorch's rule).
  const auto mode_weighted = GENERATE(table<BagMode, bool>({{BagMode::sum, false},
                                                            {BagMode::sum, true},
                                                            {BagMode::mean, false},
                                                            {BagMode::max, false}}));
  const BagMode mode = std::get<0>(mode_weighted);
  const bool weighted = std::get<1>(mode_weighted);
  const auto bag0 = make_bag<double>(mode);
  const auto ids = ember_test::random_ids(20, 11, 7);
  const RowMatrix<double> g = ember_test::random_table<double>(7, 6, 8);
  std::vector<double> w(20);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.1 * double(i) - 0.7;
  BagOptions<double> opt;
  if (weighted) opt.per_sample_weights = w;

  auto loss = [&](const RowMatrix<double>& table) {
    const EmbeddingBag<double> b(ember::Embedding<double>(table), mode);
    return (b.forward(ids, kOffsets, opt).array() * g.array()).sum();
  };
  RowMatrix<double> out(7, 6);
  ember::BagArgmax am;
  bag0.forward(ids, kOffsets, out, opt, mode == BagMode::max ? &am : nullptr);
  ember::SparseRowGrad<double> grad;
  std::vector<double> gw(weighted ? 20 : 0);
  bag0.backward(ids, kOffsets, g, grad, opt, mode == BagMode::max ? &am : nullptr, gw);
  const RowMatrix<double> numeric = ember_test::numerical_gradient(loss, bag0.embedding().weight());
  CHECK(ember_test::max_rel_error(grad.to_dense(), numeric) < 1e-7);

  if (weighted) {  // dL/dw_i by finite differences on the weights
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double keep = w[i];
      w[i] = keep + 1e-6;
      const double plus = (bag0.forward(ids, kOffsets, opt).array() * g.array()).sum();
      w[i] = keep - 1e-6;
      const double minus = (bag0.forward(ids, kOffsets, opt).array() * g.array()).sum();
      w[i] = keep;
      CHECK_THAT(gw[i], Catch::Matchers::WithinAbs((plus - minus) / 2e-6, 1e-7));
    }
  }
}

TEST_CASE("backward skips the padding row and follows the lengths layout", "[bag]") {
  auto bag = make_bag<double>(BagMode::mean);
  bag.embedding().set_padding_idx(4);
  const auto ids = ember_test::random_ids(20, 11, 11);
  const RowMatrix<double> g = ember_test::random_table<double>(7, 6, 12);
  ember::SparseRowGrad<double> a, b;
  bag.backward(ids, kOffsets, g, a);
  bag.backward_lengths(ids, kLengths, g, b);
  CHECK(ember_test::same_bits(a.values(), b.values()));
  for (const TokenId r : a.rows()) CHECK(r != 4);
}

TEST_CASE("bad offsets, lengths and weights throw PyTorch's errors and change nothing", "[bag]") {
  auto bag = make_bag<float>(BagMode::mean);
  const std::vector<int> ids{1, 2, 3, 4};
  RowMatrix<float> out = RowMatrix<float>::Constant(2, 6, 3.0f);
  const RowMatrix<float> before = out;
  const auto run = [&](const std::vector<int>& offsets) { bag.forward(ids, offsets, out); };

  CHECK_THROWS_WITH(run({1, 2}),
                    Catch::Contains("offsets[0] has to be 0") && Catch::Contains("However, got 1"));
  CHECK_THROWS_AS(run({0, 5}), ember::IndexError);
  CHECK_THROWS_WITH(run({0, 5}), Catch::Contains("offsets[1] = 5 can not be greater than input's "
                                                 "length (4)"));
  const std::vector<int> three{0, 3, 2};
  CHECK_THROWS_WITH(bag.forward(ids, three),
                    Catch::Contains("non-decreasing") && Catch::Contains("offsets[2] = 2"));
  BagOptions<float> last;
  last.include_last_offset = true;
  CHECK_THROWS_WITH(bag.forward(ids, std::vector<int>{0, 2}, last),
                    Catch::Contains("ids [2, 4) lie after the last offset"));
  CHECK_THROWS_AS(bag.forward(ids, std::vector<int>{}, last), ember::ShapeError);

  const std::vector<float> w{1, 1, 1, 1};
  BagOptions<float> weighted;
  weighted.per_sample_weights = w;
  CHECK_THROWS_WITH(bag.forward(ids, std::vector<int>{0, 2}, weighted),
                    Catch::Contains("per_sample_weights is only supported for mode='sum' (got "
                                    "mode='mean')"));
  auto sum_bag = make_bag<float>(BagMode::sum);
  BagOptions<float> short_w;
  const std::vector<float> w3{1, 1, 1};
  short_w.per_sample_weights = w3;
  CHECK_THROWS_AS(sum_bag.forward(ids, std::vector<int>{0, 2}, short_w), ember::ShapeError);

  CHECK_THROWS_WITH(bag.forward_lengths(ids, std::vector<int>{2, -1, 3}),
                    Catch::Contains("lengths[1] = -1 is negative"));
  const auto e = ember_test::catch_as<ember::ShapeError>([&] {
    (void)bag.forward_lengths(ids, std::vector<int>{2, 1});
  });
  REQUIRE(e);
  CHECK(e->expected() == 4);
  CHECK(e->actual() == 3);

  const std::vector<int> bad_ids{1, 11, 3, 4};
  const auto ie = ember_test::catch_as<ember::IndexError>([&] {
    bag.forward(bad_ids, std::vector<int>{0, 2}, out);
  });
  REQUIRE(ie);
  CHECK(ie->position() == 1);
  CHECK(ie->value() == 11);
  CHECK(ie->bound() == 11);
  CHECK(ember_test::same_bits(out, before));
}

TEST_CASE("backward validates ids, shapes and the argmax before touching the gradient", "[bag]") {
  auto bag = make_bag<float>(BagMode::sum);
  ember::SparseRowGrad<float> grad;
  const std::vector<int> ids{1, 2, 3, 4};
  const std::vector<int> offsets{0, 2};
  bag.backward(ids, offsets, RowMatrix<float>::Ones(2, 6), grad);
  const RowMatrix<float> before = grad.to_dense();

  // PyTorch checks ids only in the forward; ember checks them in the backward too.
  CHECK_THROWS_AS(
      bag.backward(std::vector<int>{1, -1, 3, 4}, offsets, RowMatrix<float>::Ones(2, 6), grad),
      ember::IndexError);
  CHECK_THROWS_AS(bag.backward(ids, offsets, RowMatrix<float>::Ones(3, 6), grad),
                  ember::ShapeError);
  auto max_bag = make_bag<float>(BagMode::max);
  CHECK_THROWS_AS(max_bag.backward(ids, offsets, RowMatrix<float>::Ones(2, 6), grad),
                  ember::StateError);
  ember::BagArgmax am = ember::BagArgmax::Constant(2, 6, 1);
  am(1, 3) = 11;
  CHECK_THROWS_WITH(max_bag.backward(ids, offsets, RowMatrix<float>::Ones(2, 6), grad, {}, &am),
                    Catch::Contains("argmax id 11 at position 9"));
  ember::BagArgmax wrong(1, 6);
  CHECK_THROWS_AS(max_bag.backward(ids, offsets, RowMatrix<float>::Ones(2, 6), grad, {}, &wrong),
                  ember::ShapeError);
  ember::BagArgmax unused;
  RowMatrix<float> out(2, 6);
  CHECK_THROWS_AS(bag.forward(ids, offsets, out, {}, &unused), ember::ValueError);
  CHECK(ember_test::same_bits(grad.to_dense(), before));
}

TEST_CASE("max pooling without an argmax gives the recorded path's bits, ties and zeros included",
          "[bag]") {
  // Without an argmax the kernel takes a branch-free select; it must keep the strict "first
  // maximum wins" rule of the recording path: equal values and -0 vs +0 keep the earlier row.
  RowMatrix<float> t(4, 3);
  t << 0.0f, -0.0f, 1.0f,  //
      -0.0f, 0.0f, 1.0f,   //
      2.0f, -5.0f, -1.0f,  //
      2.0f, 3.0f, -2.0f;
  const EmbeddingBag<float> bag(ember::Embedding<float>(t), BagMode::max);
  const std::vector<int> ids{0, 1, 1, 0, 2, 3, 3, 2, 0, 1};
  const std::vector<int> offsets{0, 2, 4, 6, 8};
  const RowMatrix<float> plain = bag.forward(ids, offsets);
  RowMatrix<float> recorded(5, 3);
  ember::BagArgmax am;
  bag.forward(ids, offsets, recorded, {}, &am);
  CHECK(ember_test::same_bits(plain, recorded));
  CHECK(std::signbit(plain(0, 0)) == false);  // +0 first, -0 second: +0 kept
  CHECK(std::signbit(plain(0, 1)) == true);   // -0 first, +0 second: -0 kept
  CHECK(std::signbit(plain(1, 0)) == true);
  const std::vector<TokenId> ids64(ids.begin(), ids.end());
  const std::vector<Index> bounds{0, 2, 4, 6, 8, 10};
  CHECK(ember_test::same_bits(plain, ember_test::bag_reference(t, ids64, bounds, 2)));
}

TEMPLATE_TEST_CASE(
    "sum and mean backward give the bits of the materialised-rows reference at 1 and 2 threads",
    "[bag]", float, double) {
  using T = TestType;
  const auto mode_weighted = GENERATE(
      table<BagMode, bool>({{BagMode::sum, false}, {BagMode::sum, true}, {BagMode::mean, false}}));
  const BagMode mode = std::get<0>(mode_weighted);
  const bool weighted = std::get<1>(mode_weighted);
  const bool padded = GENERATE(false, true);
  const bool freq = GENERATE(false, true);
  const int threads = GENERATE(1, 2);
  const Index vocab = 60;  // ~1000 ids: rows repeat within and across bags
  const Index d = 40;      // n·d above the parallel threshold, so 2 threads do split
  auto bag = make_bag<T>(mode, vocab, d);
  const TokenId padding = padded ? 7 : -1;
  if (padded) bag.embedding().set_padding_idx(padding);
  bag.embedding().set_scale_grad_by_freq(freq);
  ember::SparseRowGrad<T> grad, grad_lengths, expected;
  // Three calls into the same gradients: rows created by a call and rows added to both occur.
  for (std::uint64_t call = 0; call < 3; ++call) {
    const auto c = ember_test::make_bag_grad_case<T>(64, 16, vocab, d, padding, 40 + call);
    BagOptions<T> opt;
    if (weighted) opt.per_sample_weights = c.weights;
    {
      const ember_test::ScopedThreads scoped(threads);
      bag.backward(c.ids, c.offsets, c.grad_out, grad, opt);
      bag.backward_lengths(c.ids, c.lengths, c.grad_out, grad_lengths, opt);
    }
    ember_test::bag_backward_reference<T>(bag, c.ids, c.bounds, c.grad_out, expected,
                                          opt.per_sample_weights);
  }
  REQUIRE(grad.size() > 0);
  ember_test::check_same_gradient(grad, expected);
  ember_test::check_same_gradient(grad_lengths, expected);
  for (const TokenId r : grad.rows()) CHECK(r != padding);
}

TEMPLATE_TEST_CASE(
    "sum and mean pooling give the reference's sums for widths around the register tile", "[bag]",
    float, double) {
  // The kernel keeps 256-byte tiles of columns in registers (64 floats, 32 doubles) and pools the
  // rest of a row through memory: every split of d must add the same terms in the same order.
  using T = TestType;
  const auto mode_weighted = GENERATE(
      table<BagMode, bool>({{BagMode::sum, false}, {BagMode::sum, true}, {BagMode::mean, false}}));
  const BagMode mode = std::get<0>(mode_weighted);
  const bool weighted = std::get<1>(mode_weighted);
  for (const Index d : {1, 15, 31, 32, 33, 63, 64, 65, 100, 128, 131, 200}) {
    INFO("d = " << d);
    auto bag = make_bag<T>(mode, 13, d);
    bag.embedding().set_padding_idx(2);
    const auto c =
        ember_test::make_bag_grad_case<T>(9, 6, 13, d, 2, 50 + static_cast<std::uint64_t>(d));
    BagOptions<T> opt;
    if (weighted) opt.per_sample_weights = c.weights;
    const RowMatrix<T> out = bag.forward(c.ids, c.offsets, opt);
    const RowMatrix<T> expected =
        ember_test::bag_reference<T>(bag.embedding().weight(), c.ids, c.bounds, mode_index(mode),
                                     weighted ? c.weights : std::vector<T>{}, 2);
    if (weighted) {
      ember_test::check_close(out, expected);
    } else {
      CHECK(ember_test::same_bits(out, expected));  // the same additions from zero, in order
    }
  }
}

TEMPLATE_TEST_CASE(
    "max backward gives the bits of the materialised-rows reference at 1 and 2 threads", "[bag]",
    float, double) {
  using T = TestType;
  const bool padded = GENERATE(false, true);
  const int threads = GENERATE(1, 2);
  const Index vocab = 60;
  const Index d = 64;  // (bag, winner) pairs x d above the parallel threshold: 2 threads split
  // Table entries in {-3 .. 3}: ties in almost every column (the first maximum wins), and the
  // winners of a bag spread over several of its ids.
  RowMatrix<T> table(vocab, d);
  for (Index k = 0; k < table.size(); ++k) table.data()[k] = T((k * 7919 + k / 13) % 7 - 3);
  EmbeddingBag<T> bag(ember::Embedding<T>(table), BagMode::max);
  const TokenId padding = padded ? 7 : -1;
  if (padded) bag.embedding().set_padding_idx(padding);
  ember::SparseRowGrad<T> grad, grad_lengths, expected;
  Index pairs = 0;
  // Three calls into the same gradients: rows created by a call and rows added to both occur.
  for (std::uint64_t call = 0; call < 3; ++call) {
    auto c = ember_test::make_bag_grad_case<T>(96, 16, vocab, d, padding, 70 + call);
    for (Index k = 0; k < c.grad_out.size(); ++k) {  // signed and unsigned zeros
      if (k % 11 == 0) c.grad_out.data()[k] = -T(0);
      if (k % 17 == 0) c.grad_out.data()[k] = T(0);
    }
    const auto bags = static_cast<Index>(c.offsets.size());
    RowMatrix<T> out(bags, d);
    ember::BagArgmax argmax, argmax_lengths;
    bag.forward(c.ids, c.offsets, out, {}, &argmax);
    bag.forward_lengths(c.ids, c.lengths, out, {}, &argmax_lengths);
    REQUIRE(argmax == argmax_lengths);
    CHECK((argmax.row(3).array() == -1).all());              // an empty bag (every 7th from 3)
    if (padded) CHECK((argmax.row(5).array() == -1).all());  // bag 5 holds only padding
    {
      const ember_test::ScopedThreads scoped(threads);
      bag.backward(c.ids, c.offsets, c.grad_out, grad, {}, &argmax);
      bag.backward_lengths(c.ids, c.lengths, c.grad_out, grad_lengths, {}, &argmax);
    }
    ember_test::bag_max_backward_reference<T>(bag, argmax, c.grad_out, expected);
    std::vector<TokenId> rows;
    RowMatrix<T> values;
    ember_test::bag_max_grad_rows_reference(argmax, c.grad_out, rows, values);
    pairs = std::max(pairs, static_cast<Index>(rows.size()));
  }
  CHECK(pairs * d >= ember::detail::kParallelMinWork);
  REQUIRE(grad.size() > 0);
  ember_test::check_same_gradient(grad, expected);
  ember_test::check_same_gradient(grad_lengths, expected);
  for (const TokenId r : grad.rows()) CHECK(r != padding);
}

TEST_CASE("max backward with more winners per bag than the linear search keeps gives the same bits",
          "[bag]") {
  // Bags of up to 400 ids over a table of random values: most bags have far more than
  // kMaxWinnersLinear distinct winners (the sorting fallback), the short ones fewer (the linear
  // search), and every 7th is empty.
  const Index vocab = 500;
  const Index d = 160;
  RowMatrix<double> table(vocab, d);
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  for (Index k = 0; k < table.size(); ++k) table.data()[k] = value(rng);
  EmbeddingBag<double> bag(ember::Embedding<double>(table), BagMode::max);
  auto c = ember_test::make_bag_grad_case<double>(12, 200, vocab, d, -1, 5);
  RowMatrix<double> out(12, d);
  ember::BagArgmax argmax;
  bag.forward(c.ids, c.offsets, out, {}, &argmax);
  std::vector<TokenId> winners;
  std::vector<Index> bag_of;
  ember::detail::bag_max_winners(argmax.data(), argmax.rows(), d, winners, bag_of);
  std::size_t most = 0;
  std::size_t fewest = winners.size();
  for (Index b = 0; b < argmax.rows(); ++b) {
    if (b % 7 == 3) continue;  // empty
    const auto k = static_cast<std::size_t>(std::count(bag_of.begin(), bag_of.end(), b));
    most = std::max(most, k);
    fewest = std::min(fewest, k);
  }
  CHECK(most > ember::detail::kMaxWinnersLinear);
  CHECK(fewest <= ember::detail::kMaxWinnersLinear);
  ember::SparseRowGrad<double> grad, expected;
  bag.backward(c.ids, c.offsets, c.grad_out, grad, {}, &argmax);
  ember_test::bag_max_backward_reference<double>(bag, argmax, c.grad_out, expected);
  ember_test::check_same_gradient(grad, expected);
}

TEST_CASE("max backward gives the padding row nothing even when a stale argmax names it", "[bag]") {
  // The argmax is recorded before set_padding_idx, so it still names the row that becomes the
  // padding row; backward must leave that row out, as its documentation says.
  RowMatrix<double> table(6, 4);
  for (Index k = 0; k < table.size(); ++k) table.data()[k] = double((k * 5) % 11);
  EmbeddingBag<double> bag(ember::Embedding<double>(table), BagMode::max);
  const std::vector<TokenId> ids{0, 2, 3, 5, 1};
  const std::vector<TokenId> offsets{0, 3};
  RowMatrix<double> out(2, 4);
  ember::BagArgmax argmax;
  bag.forward(ids, offsets, out, {}, &argmax);
  const TokenId stale = argmax(0, 0);
  REQUIRE(stale >= 0);
  bag.embedding().set_padding_idx(stale);
  const RowMatrix<double> g = RowMatrix<double>::Constant(2, 4, 1.0);
  ember::SparseRowGrad<double> grad;
  bag.backward(ids, offsets, g, grad, {}, &argmax);
  const std::vector<TokenId> rows(grad.rows().begin(), grad.rows().end());
  CHECK(std::find(rows.begin(), rows.end(), stale) == rows.end());
  // Every other winner still receives its columns.
  for (Index b = 0; b < argmax.rows(); ++b) {
    for (Index c = 0; c < argmax.cols(); ++c) {
      const TokenId w = argmax(b, c);
      if (w >= 0 && w != stale) CHECK(std::find(rows.begin(), rows.end(), w) != rows.end());
    }
  }
}

TEST_CASE("max backward adds +0 where a winner lost a column, as the materialised rows do",
          "[bag]") {
  // Row 2 wins column 0 of bag 0 with a gradient of -0 and only column 1 of bag 1: its column 0
  // is -0 + (+0) = +0, the sum of its two materialised rows [-0, 0] and [0, 2].
  auto bag = make_bag<float>(BagMode::max, 5, 2);
  RowMatrix<float> grad_out(2, 2);
  grad_out << -0.0f, 1.0f, 5.0f, 2.0f;
  ember::BagArgmax argmax(2, 2);
  argmax << 2, 3, 3, 2;
  const std::vector<int> ids{2, 3, 2, 3};
  const std::vector<int> offsets{0, 2};
  ember::SparseRowGrad<float> grad, expected;
  bag.backward(ids, offsets, grad_out, grad, {}, &argmax);
  ember_test::bag_max_backward_reference<float>(bag, argmax, grad_out, expected);
  REQUIRE(grad.size() == 2);
  CHECK(ember_test::same_bits(grad.values(), expected.values()));
  CHECK_FALSE(std::signbit(grad.values()(0, 0)));
  CHECK(grad.values()(0, 1) == 2.0f);
  CHECK(grad.values()(1, 0) == 5.0f);
  CHECK(grad.values()(1, 1) == 1.0f);

  // A gradient bound to another table is refused before anything changes.
  ember::SparseRowGrad<float> other(6, 2);
  other.accumulate(std::vector<int>{1}, RowMatrix<float>::Ones(1, 2), 1.0f, 6);
  const auto e = ember_test::catch_as<ember::ShapeError>(
      [&] { bag.backward(ids, offsets, grad_out, other, {}, &argmax); });
  REQUIRE(e);
  CHECK(std::string(e->what()) ==
        "EmbeddingBag::backward: the table has 5 rows, expected the gradient's bound vocab_size "
        "= 6");
  CHECK(other.size() == 1);
  CHECK(other.values().isOnes());
}

namespace {

// A bag over `table` against a float bag over a float table holding its decoded rows: every mode
// (weighted sum included) pools the same bits, and backward accumulates the same gradient.
template <class Tab>
void check_bag_over(const Tab& table) {
  const RowMatrix<float> decoded = table.dequantize();
  const auto c =
      ember_test::make_bag_grad_case<float>(30, 6, table.vocab_size(), table.d_model(), -1, 41);
  for (const auto mode : {ember::BagMode::sum, ember::BagMode::mean, ember::BagMode::max}) {
    const ember::EmbeddingBag<Tab> bag(table, mode);
    const ember::EmbeddingBag<float> plain(ember::Embedding<float>(decoded), mode);
    CAPTURE(ember::to_string(mode), table.codec_name());
    ember::BagArgmax argmax, plain_argmax;
    RowMatrix<float> out(30, table.d_model()), expected(30, table.d_model());
    bag.forward(c.ids, c.offsets, out, {}, mode == ember::BagMode::max ? &argmax : nullptr);
    plain.forward(c.ids, c.offsets, expected, {},
                  mode == ember::BagMode::max ? &plain_argmax : nullptr);
    CHECK(ember_test::same_bits(out, expected));
    CHECK(argmax == plain_argmax);
    ember::SparseRowGrad<float> grad, plain_grad;
    const ember::BagArgmax* am = mode == ember::BagMode::max ? &argmax : nullptr;
    bag.backward(c.ids, c.offsets, c.grad_out, grad, {}, am);
    plain.backward(c.ids, c.offsets, c.grad_out, plain_grad, {}, am);
    CHECK(grad == plain_grad);
  }
  ember::BagOptions<float> weighted;
  weighted.per_sample_weights = c.weights;
  const ember::EmbeddingBag<Tab> bag(table, ember::BagMode::sum);
  const ember::EmbeddingBag<float> plain(ember::Embedding<float>(decoded), ember::BagMode::sum);
  CHECK(ember_test::same_bits(bag.forward_lengths(c.ids, c.lengths, weighted),
                              plain.forward_lengths(c.ids, c.lengths, weighted)));
  std::vector<float> dw(c.ids.size()), plain_dw(c.ids.size());
  ember::SparseRowGrad<float> grad, plain_grad;
  bag.backward(c.ids, c.offsets, c.grad_out, grad, weighted, nullptr, dw);
  plain.backward(c.ids, c.offsets, c.grad_out, plain_grad, weighted, nullptr, plain_dw);
  CHECK(grad == plain_grad);
  CHECK(dw == plain_dw);
}

}  // namespace

TEST_CASE("bags pool half, bfloat16 and int8 tables and views as a float table of their rows",
          "[bag]") {
  const Index d = GENERATE(8, 67);
  const RowMatrix<float> w = ember_test::random_table<float>(50, d, 43);
  const auto half = ember::HalfEmbedding::from_float(w);
  check_bag_over(half);
  check_bag_over(ember::HalfEmbeddingView(half));
  check_bag_over(ember::BFloat16Embedding::from_float(w));
  const ember::QuantizedEmbedding int8(w);
  check_bag_over(int8);
  check_bag_over(ember::QuantizedEmbeddingView(int8));
  check_bag_over(ember::EmbeddingView<float>(w));
  // the seeded constructor exists for owning tables of every kind
  const ember::EmbeddingBag<ember::HalfEmbedding> seeded(10, 4, ember::BagMode::mean, 3);
  CHECK(seeded.embedding().vocab_size() == 10);
}
